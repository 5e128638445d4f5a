"""Reads and writes touch only the chunks they select; h5py reads are coalesced."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from h5vc.staging import GetItemPlan, SetItemPlan, StagedChangesArray


class CountingSlab:
    """A read-only 1-D base slab whose every element is its own row number.

    It records every region read, and never materialises more than was asked.
    """

    def __init__(self, n_rows: int) -> None:
        self.shape = (n_rows,)
        self.dtype = np.dtype(np.int64)
        self.reads: list[tuple[int, int]] = []

    def __getitem__(self, selection: tuple[slice, ...]) -> np.ndarray:
        (rows,) = selection
        start, stop, step = rows.indices(self.shape[0])
        self.reads.append((start, stop))
        return np.arange(start, stop, step, dtype=np.int64)


def test_five_chunk_write_on_five_million_chunks_reads_only_those_chunks() -> None:
    n_chunks, chunk = 5_000_000, 2
    base = CountingSlab(n_chunks * chunk)
    staged = StagedChangesArray(
        (n_chunks * chunk,),
        (chunk,),
        np.int64,
        base_slabs=[base],
        slab_indices=np.ones(n_chunks, dtype=np.intp),
        slab_offsets=np.arange(n_chunks, dtype=np.intp) * chunk,
    )
    start = 3_000_001  # partially covers the first and last of 5 chunks
    staged[start : start + 8] = -1
    assert sum(stop - first for first, stop in base.reads) <= 5 * chunk
    assert all(first >= 3_000_000 and stop <= 3_000_010 for first, stop in base.reads)
    base.reads.clear()
    np.testing.assert_array_equal(
        staged[2_999_999:3_000_011], [2_999_999, 3_000_000, *[-1] * 8, 3_000_009, 3_000_010]
    )
    assert (
        base.reads == [(2_999_998, 3_000_000), (3_000_010, 3_000_012)]
        or sum(stop - first for first, stop in base.reads) <= 2 * chunk
    )
    assert len(staged.slabs) == 3 and staged.slabs[2].shape == (5 * chunk,)


def test_block_write_touches_one_chunk_of_a_2d_array() -> None:
    staged = StagedChangesArray((4000, 4000), (100, 100), np.float64)
    staged[210:220, 3050:3060] = 1.0
    (coords, data), *rest = list(staged.changes())
    assert rest == [] and coords == (2, 30)
    assert data.shape == (100, 100) and data[10:20, 50:60].sum() == 100


def test_plan_prints_its_transfers() -> None:
    base = np.arange(32 * 2).reshape(32, 2)
    staged = StagedChangesArray(
        (8, 8),
        (2, 2),
        base.dtype,
        base_slabs=[base],
        slab_indices=np.ones((4, 4), dtype=np.intp),
        slab_offsets=np.arange(16).reshape(4, 4) * 2,
    )
    plan = staged._setitem_plan((slice(2, 5), slice(3, 6)))
    assert isinstance(plan, SetItemPlan)
    text = repr(plan)
    assert text.splitlines()[0] == "SetItemPlan"
    assert "slabs.append(np.empty((8, 2)))  # slabs[2]" in text
    # partly covered chunks are copied first; slots 9 and 10 are read as one run
    assert "# 2 transfers from slabs[1] to slabs[2]" in text
    assert "slabs[2][0:2, 0:2] = slabs[1][10:12, 0:2]" in text
    assert "slabs[2][4:8, 0:2] = slabs[1][18:22, 0:2]" in text
    assert "# chunk (2, 2) -> slabs[2][6:8]" in text
    assert "# 4 transfers from value to slabs[2]" in text
    assert "slabs[2][6:7, 0:2] = value[2:3, 1:3]" in text
    assert staged.slab_indices.max() == 1  # building a plan changes nothing
    read = staged._getitem_plan(np.s_[:, 1])
    assert isinstance(read, GetItemPlan)
    assert repr(read).splitlines()[:2] == ["GetItemPlan", "out = np.empty((8, 1))"]
    assert "out = out[(slice(None, None, None), 0)]" in repr(read)
    staged[0, 0] = 5
    assert "chunk (0, 0) = slabs[2][0:2, 0:2]" in repr(staged._changes_plan())
    assert "slabs[3] = None" not in repr(staged._resize_plan((8, 9)))
    assert "slabs[2] = None" in repr(staged._resize_plan((0, 8)))
    load = repr(staged._load_plan())
    assert "# 1 transfer from slabs[1] to slabs[3]" in load
    assert "slabs[3][0:30, 0:2] = slabs[1][2:32, 0:2]" in load
    assert load.endswith("slabs[1] = None")


class CallCounter:
    """Wraps an h5py dataset and counts the calls that read from it."""

    def __init__(self, dataset: h5py.Dataset) -> None:
        self.dataset = dataset
        self.calls = 0
        self.shape, self.dtype = dataset.shape, dataset.dtype

    def read_direct(self, *args: Any) -> None:
        self.calls += 1
        self.dataset.read_direct(*args)

    def __getitem__(self, selection: Any) -> np.ndarray:
        self.calls += 1
        return self.dataset[selection]


@pytest.fixture
def raw_data(tmp_path: Path) -> h5py.Dataset:
    h5file = h5py.File(tmp_path / "raw.h5", "w")
    yield h5file.create_dataset("raw_data", data=np.arange(1000.0), chunks=(10,))
    h5file.close()


def test_full_read_in_slot_order_is_one_h5py_call(raw_data) -> None:
    counter = CallCounter(raw_data)
    staged = StagedChangesArray(
        (995,),
        (10,),
        raw_data.dtype,
        base_slabs=[counter],
        slab_indices=np.ones(100, dtype=np.intp),
        slab_offsets=np.arange(100) * 10,
    )
    np.testing.assert_array_equal(np.asarray(staged), np.arange(995.0))
    assert counter.calls == 1
    counter.calls = 0
    np.testing.assert_array_equal(staged[3:700:7], np.arange(3.0, 700, 7))
    assert counter.calls == 1
    counter.calls = 0
    staged.load()
    assert counter.calls == 1 and staged.slabs[1] is None
    np.testing.assert_array_equal(staged[::-3], np.arange(995.0)[::-3])


def test_runs_break_where_slots_are_not_consecutive(raw_data) -> None:
    counter = CallCounter(raw_data)
    offsets = np.arange(100) * 10
    offsets[[40, 41]] = offsets[[41, 40]]
    staged = StagedChangesArray(
        (1000,),
        (10,),
        raw_data.dtype,
        base_slabs=[counter],
        slab_indices=np.ones(100, dtype=np.intp),
        slab_offsets=offsets,
    )
    expected = np.concatenate([np.arange(1000.0).reshape(100, 10)[o // 10] for o in offsets])
    np.testing.assert_array_equal(staged[:], expected)
    assert counter.calls == 4  # 0..39, 41, 40, 42..99
    staged[405] = -1.0
    assert staged[405] == -1.0 and staged[404] == expected[404]


def test_2d_h5py_base_reads_one_call_per_column_of_chunks(tmp_path: Path) -> None:
    data = np.arange(60 * 40, dtype=np.float64).reshape(60, 40)
    with h5py.File(tmp_path / "raw.h5", "w") as h5file:
        # raw_data stacks chunks with axis 0 varying fastest
        raw = np.concatenate([data[:, j * 10 : (j + 1) * 10] for j in range(4)])
        counter = CallCounter(h5file.create_dataset("raw_data", data=raw, chunks=(20, 10)))
        offsets = np.arange(3)[:, None] * 20 + np.arange(4)[None, :] * 60
        staged = StagedChangesArray(
            (60, 40),
            (20, 10),
            np.float64,
            base_slabs=[counter],
            slab_indices=np.ones((3, 4), dtype=np.intp),
            slab_offsets=offsets,
        )
        np.testing.assert_array_equal(np.asarray(staged), data)
        assert counter.calls == 4


def test_object_dtype_over_h5py_strings(tmp_path: Path) -> None:
    with h5py.File(tmp_path / "raw.h5", "w") as h5file:
        raw = h5file.create_dataset(
            "raw_data",
            data=np.array([b"a", b"bb", b"c", b"", b"dd", b"e"], dtype=object),
            dtype=h5py.string_dtype(),
            chunks=(3,),
        )
        staged = StagedChangesArray(
            (5,),
            (3,),
            object,
            b"",
            base_slabs=[raw],
            slab_indices=[1, 1],
            slab_offsets=[3, 0],
        )
        assert list(staged[:]) == [b"", b"dd", b"e", b"a", b"bb"]
        staged[1] = b"zz"
        staged.resize((7,))
        assert list(np.asarray(staged)) == [b"", b"zz", b"e", b"a", b"bb", b"", b""]


def test_staging_never_imports_h5py() -> None:
    package = Path(__file__).parents[2] / "src" / "h5vc"
    code = f"""
import importlib.util, sys, types
sys.modules["h5py"] = None  # any import of h5py now fails
parent = types.ModuleType("h5vc")
parent.__path__ = [{str(package)!r}]
sys.modules["h5vc"] = parent
staging = importlib.import_module("h5vc.staging")
array = staging.StagedChangesArray((5,), (2,), "i4")
array[1:3] = 7
assert array[:].tolist() == [0, 7, 7, 0, 0]
assert sys.modules["h5py"] is None
print("ok")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
