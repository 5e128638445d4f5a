"""Chunk tables of files opened read-only are kept for the next handle of the same file,
and used only while the file is as it was: a commit in between, even one whose
modification time is set back afterwards, makes the next handle look its chunks up
again and read the new data; a file whose times are too recent to tell keeps nothing."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

import h5vc
from h5vc.hdf5 import chunktable
from h5vc.store import fastread, planner


@pytest.fixture(autouse=True)
def positioned_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planner, "HDF5_READ_BYTES", 0)  # every read by positioned reads
    monkeypatch.setattr(planner, "FAST_READ_MIN_BYTES", 0)
    monkeypatch.setattr(fastread, "_KEPT_TABLES", {})


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per chunk table looked up in the file."""
    made: list[int] = []
    real = chunktable.ChunkTable.__init__

    def init(self: chunktable.ChunkTable, *args: object) -> None:
        made.append(1)
        real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(fastread.ChunkTable, "__init__", init)
    return made


def commit(path: Path, name: str, data: np.ndarray, mode: str = "a") -> None:
    with h5vc.open(path, mode) as vf, vf.stage_version(name) as group:
        if name == "v0":
            group.create_dataset("x", data=data, chunks=(16,), maxshape=(None,))
        else:
            group["x"][:] = data
    time.sleep(2 * fastread.QUIET_NS / 1e9)  # the file's times old enough to tell


def read(path: Path, version: str) -> np.ndarray:
    with h5vc.open(path, "r") as vf:
        return vf[version]["x"][()]


def test_the_next_handle_uses_the_kept_table(tmp_path: Path, lookups: list[int]) -> None:
    path = tmp_path / "f.h5"
    data = np.arange(1000.0)
    commit(path, "v0", data, "w")
    for _ in range(3):
        np.testing.assert_array_equal(read(path, "v0"), data)
    assert len(lookups) == 1


def test_a_commit_in_between_is_seen(tmp_path: Path, lookups: list[int]) -> None:
    path = tmp_path / "f.h5"
    first, second = np.arange(1000.0), -np.arange(1000.0)
    commit(path, "v0", first, "w")
    np.testing.assert_array_equal(read(path, "v0"), first)
    before = os.stat(path)
    commit(path, "v1", second)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # the old time set back
    time.sleep(2 * fastread.QUIET_NS / 1e9)
    np.testing.assert_array_equal(read(path, "v1"), second)
    np.testing.assert_array_equal(read(path, "v0"), first)
    assert len(lookups) == 2  # looked up again after the commit, then kept


def test_a_file_written_just_now_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lookups: list[int]
) -> None:
    path = tmp_path / "f.h5"
    data = np.arange(1000.0)
    commit(path, "v0", data, "w")
    monkeypatch.setattr(fastread, "QUIET_NS", 1 << 62)  # every time too recent to tell
    for _ in range(2):
        np.testing.assert_array_equal(read(path, "v0"), data)
    assert len(lookups) == 2 and not fastread._KEPT_TABLES
