"""Whole chunks of unfiltered data are written to raw_data as their bytes; every other
kind of chunk store still goes through HDF5's selections, and both read back the same."""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import h5vc
from h5vc.hdf5 import codecs
from h5vc.store import rawdata
from h5vc.wrappers import group as staged_group

T = TypeVar("T")
R = TypeVar("R")


def _commit(path: Path, data: np.ndarray, chunks: tuple[int, ...], **options: object) -> None:
    with h5vc.open(path, "w") as vf, vf.stage_version("v0") as group:
        group.create_dataset("x", data=data, chunks=chunks, **options)


def _refuse_selection_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: h5py.Dataset, index: object, value: object) -> None:
        if self.name.endswith("/raw_data"):
            raise AssertionError(f"raw_data written through a selection: {index!r}")
        original(self, index, value)

    original = h5py.Dataset.__setitem__
    monkeypatch.setattr(h5py.Dataset, "__setitem__", refuse)


def test_unfiltered_whole_chunks_skip_hdf5_selections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = np.arange(64 * 48, dtype=np.float64).reshape(64, 48)
    _refuse_selection_writes(monkeypatch)
    _commit(tmp_path / "f.h5", data, (16, 16))
    monkeypatch.undo()
    with h5vc.open(tmp_path / "f.h5", "r") as vf:
        np.testing.assert_array_equal(vf["v0"]["x"][()], data)


@pytest.mark.parametrize(
    ("dtype", "options"),
    [
        ("<f8", {"compression": "lzf"}),  # a filter HDF5 runs itself
        ("<i4", {"fletcher32": True}),
        ("S3", {}),
    ],
)
def test_other_stores_still_write_through_hdf5(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dtype: str, options: dict[str, object]
) -> None:
    data = np.arange(32 * 32).reshape(32, 32).astype(dtype)
    _refuse_selection_writes(monkeypatch)
    with pytest.raises(AssertionError, match="raw_data written through a selection"):
        _commit(tmp_path / "refused.h5", data, (16, 16), **options)
    monkeypatch.undo()
    _commit(tmp_path / "f.h5", data, (16, 16), **options)
    with h5vc.open(tmp_path / "f.h5", "r") as vf:
        got = vf["v0"]["x"][()]
    assert got.dtype.newbyteorder("=") == np.dtype(dtype).newbyteorder("=")
    np.testing.assert_array_equal(got, data)


@st.composite
def _arrays(draw: st.DrawFn) -> tuple[np.ndarray, tuple[int, ...]]:
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=ndim, max_size=ndim)))
    chunks = tuple(draw(st.integers(1, n)) for n in shape)
    dtype = draw(st.sampled_from(["<f8", "<i2", "u1", "?", "<c8", ">i4"]))
    seed = draw(st.integers(0, 2**16))
    values = np.random.default_rng(seed).integers(0, 3, shape)  # repeats: shared chunks
    return values.astype(dtype), chunks


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(first=_arrays(), second_seed=st.integers(0, 2**16), through=st.booleans())
def test_written_chunks_read_back_after_slots_are_reused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    first: tuple[np.ndarray, tuple[int, ...]],
    second_seed: int,
    through: bool,
) -> None:
    """Chunks written over the free slots a deleted version left read back as numpy
    has them, through h5vc and through h5py; arrays given to create_dataset stored at
    once (in batches of a chunk or two, gathered into reused buffers) or at commit."""
    monkeypatch.setattr(staged_group, "WRITE_THROUGH_BYTES", 0 if through else 1 << 62)
    monkeypatch.setattr(rawdata, "HASH_BATCH_BYTES", 16)
    data, chunks = first
    path = tmp_path / "reuse.h5"
    other = np.random.default_rng(second_seed).integers(0, 3, data.shape).astype(data.dtype)
    _commit(path, data, chunks)
    with h5vc.open(path, "r+") as vf:
        np.testing.assert_array_equal(vf["v0"]["x"][()], data)  # in HDF5's chunk cache
        np.testing.assert_array_equal(vf["v0"]["x"][:1], data[:1])
        with vf.stage_version("v1", "") as group:
            group.create_dataset("x", data=other, chunks=chunks)
        h5vc.delete_versions(vf, ["v0"])
        with vf.stage_version("v2", "v1") as group:
            group["x"][...] = data
    with h5vc.open(path, "r") as vf:
        np.testing.assert_array_equal(vf["v1"]["x"][()], other)
        np.testing.assert_array_equal(vf["v2"]["x"][()], data)
    with h5py.File(path, "r") as f:
        vf = h5vc.VersionedHDF5File(f)
        np.testing.assert_array_equal(vf["v2"]["x"][()], data)


def test_batches_still_to_be_encoded_keep_their_buffers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of compressed chunks is encoded while the next ones are gathered: the
    buffer it was gathered into is not gathered into again before it is encoded (here
    encoding waits until the batch is written, one batch later, and the batches after
    it are gathered first)."""
    real = codecs.encode_chunks

    def encode_when_written(*args: object, **kwargs: object) -> Iterator[bytes]:
        yield from real(*args, **kwargs)  # type: ignore[arg-type]

    def gather_in_order(
        func: Callable[[T], R], items: Iterable[T], threads: int, limit: int
    ) -> Iterator[R]:
        pending: collections.deque[R] = collections.deque()
        for item in items:  # `limit` batches gathered before one is yielded
            pending.append(func(item))
            if len(pending) >= limit:
                yield pending.popleft()
        yield from pending

    monkeypatch.setattr(codecs, "encode_chunks", encode_when_written)
    monkeypatch.setattr(rawdata, "run_ahead", gather_in_order)
    monkeypatch.setattr(staged_group, "WRITE_THROUGH_BYTES", 0)  # stored at create_dataset
    monkeypatch.setattr(codecs, "workers", lambda: 2)
    monkeypatch.setattr(rawdata, "HASH_BATCH_BYTES", 16 * 16 * 8)  # a chunk per batch
    data = np.random.default_rng(5).random((64, 64))
    _commit(tmp_path / "f.h5", data, (16, 16), compression="gzip")
    with h5vc.open(tmp_path / "f.h5", "r") as vf:
        np.testing.assert_array_equal(vf["v0"]["x"][()], data)
