"""The memory map of a file opened read-only is read-only and unmapped (on a thread of
its own) once the file's readers are gone: after the file is closed, no part of the
process maps it any more."""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path

import numpy as np
import pytest

import h5vc
from h5vc.store import fastread, planner


@pytest.fixture(autouse=True)
def positioned_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planner, "HDF5_READ_BYTES", 0)  # every read by positioned reads
    monkeypatch.setattr(planner, "FAST_READ_MIN_BYTES", 0)
    monkeypatch.setattr(fastread, "MAP_READS", True)


def mapped_at(address: int) -> bool:
    """Whether a region of this process starts at ``address`` (Linux: /proc/self/maps)."""
    with open("/proc/self/maps", "rb") as maps:
        return any(int(line.split(b"-", 1)[0], 16) == address for line in maps)


def write(path: Path) -> np.ndarray:
    data = np.arange(60 * 70, dtype=np.float64).reshape(60, 70)
    with h5vc.open(path, "w") as vf, vf.stage_version("v0") as group:
        group.create_dataset("x", data=data, chunks=(8, 10))
    return data


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="Linux only")
def test_a_map_is_unmapped_once_its_file_is_closed(tmp_path: Path) -> None:
    path = tmp_path / "f.h5"
    data = write(path)
    for _ in range(3):  # every open maps the file anew and lets go of it
        with h5vc.open(path, "r") as vf:
            np.testing.assert_array_equal(vf["v0"]["x"][()], data)
            np.testing.assert_array_equal(vf["v0"]["x"][3:57, 5:66], data[3:57, 5:66])
            maps = {
                id(reader._map): reader._map
                for reader in fastread._READERS.values()
                if reader is not None and reader._map is not None
            }
            assert len(maps) == 1
            (mapped,) = maps.values()
            assert not mapped.flags.writeable
            address = mapped.ctypes.data
            assert mapped_at(address)
            del maps, mapped
        gc.collect()
        deadline = time.monotonic() + 10
        while mapped_at(address) and time.monotonic() < deadline:
            time.sleep(0.01)  # the unmapping thread's turn
        assert not mapped_at(address)


def test_a_view_of_the_map_keeps_it(tmp_path: Path) -> None:
    """Bytes of the map held past the file's close stay readable (the map goes with its
    last view)."""
    path = tmp_path / "f.h5"
    write(path)
    with h5vc.open(path, "r") as vf:
        vf["v0"]["x"][()]
        (reader,) = [r for r in fastread._READERS.values() if r is not None and r._map is not None]
        view = reader._map[:64]
        expected = bytes(view)
        del reader
    gc.collect()
    time.sleep(0.05)
    assert bytes(view) == expected
    with open(path, "rb") as f:
        assert f.read(64) == expected
