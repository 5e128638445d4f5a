"""Fixed costs of opening, reading and committing: work done once, not per call."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import h5vc
from h5vc import hashing


@pytest.mark.parametrize(
    ("dtype", "fill"),
    [("f8", 0.0), ("f8", np.nan), ("f8", -0.0), ("i4", 7), ("S3", b"ab"), ("i2,f8", (1, 2.5))],
)
def test_the_hash_of_a_fill_chunk_is_that_of_the_chunk_and_computed_once(
    dtype: str, fill: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hashing, "_FILL_HASHES", {})
    dt = np.dtype(dtype)
    real = hashing.chunk_hash
    calls: list[tuple[int, ...]] = []

    def counted(chunk: np.ndarray) -> bytes:
        calls.append(chunk.shape)
        return real(chunk)

    for shape in [(4,), (2, 3)]:
        chunk = np.empty(shape, dtype=dt)
        chunk[...] = fill
        expected = real(chunk)
        calls.clear()
        monkeypatch.setattr(hashing, "chunk_hash", counted)
        assert hashing.fill_chunk_hash(shape, dt, fill) == expected
        assert hashing.fill_chunk_hash(shape, dt, fill) == expected
        assert calls == [shape]  # hashed once, then remembered
        monkeypatch.setattr(hashing, "chunk_hash", real)


def test_fill_hashes_of_other_fill_values_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hashing, "_FILL_HASHES", {})
    dt = np.dtype("f8")
    zero = hashing.fill_chunk_hash((8,), dt, 0.0)
    assert hashing.fill_chunk_hash((8,), dt, -0.0) != zero
    assert hashing.fill_chunk_hash((8,), dt, 1.0) != zero
    assert hashing.fill_chunk_hash((8,), dt, 0.0) == zero


def test_many_tiny_datasets_over_many_commits_make_a_small_file(tmp_path: Path) -> None:
    """100 datasets of 3 int64, 20 commits each changing one: every store's hash table
    and the time index take small chunks (the file was 2.27 MB with 256-row hash-table
    and 4096-row index chunks; 1.19 MB now)."""
    path = tmp_path / "tiny.h5"
    names = [f"a{index:03d}" for index in range(100)]
    with h5vc.open(str(path), "w") as vf:
        for number in range(20):
            with vf.stage_version(f"v{number}") as group:
                if number == 0:
                    for name in names:
                        group.create_dataset(name, data=np.arange(3, dtype=np.int64))
                else:
                    group[names[number]][0] = number
    assert os.path.getsize(path) < 1_400_000
    with h5vc.open(str(path)) as vf:
        assert vf["v19"][names[19]][()].tolist() == [19, 1, 2]
        assert vf["v18"][names[19]][()].tolist() == [0, 1, 2]


def _commit_in_another_process(path: Path, name: str, value: int) -> None:
    code = (
        "import sys, h5vc\n"
        "with h5vc.open(sys.argv[1], 'a') as vf, vf.stage_version(sys.argv[2]) as g:\n"
        "    g['x'][0] = int(sys.argv[3])\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(path), name, str(value)], check=True, timeout=120
    )


@pytest.mark.parametrize("first_use", ["dtype", "shape", "read"])
def test_a_dataset_opened_before_the_file_changed_is_read_after_it(
    tmp_path: Path, first_use: str
) -> None:
    """Opening a committed dataset finds its chunk map on first use: a use after another
    process committed (the read-only handle is then opened anew) reads the same data."""
    path = tmp_path / "data.h5"
    with h5vc.open(str(path), "w") as vf, vf.stage_version("v1") as group:
        group.create_dataset("x", data=np.arange(10, dtype=np.int64), chunks=(4,))
    with h5vc.open(str(path), "r") as vf:
        dataset = vf["v1"]["x"]
        _commit_in_another_process(path, "v2", 5)
        if first_use == "dtype":
            assert dataset.dtype == np.int64
        elif first_use == "shape":
            assert dataset.shape == (10,)
        assert dataset[:].tolist() == list(range(10))
        assert vf["v2"]["x"][:].tolist() == [5, *range(1, 10)]
