"""A read-only file opened again unchanged is not read again: what a handle read of its
bytes (the view of them, the versions found committed, the refs, ``data_version``) is
kept by the file's stamp and taken by the next handle, both ways of opening. Any
change of the file (a commit, a deletion, a ref, a write by plain h5py) is a new
stamp, and nothing kept for the old one is used."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest
from stamps import opened, settle

import h5vc
from h5vc.durable.files import ReadLock
from h5vc.store import refattrs
from h5vc.versions import reading
from h5vc.wrappers import dataset as dataset_views


def _make(path: Path, versions: int = 3) -> None:
    with h5vc.open(path, "w") as vf:
        for n in range(versions):
            with vf.stage_version(f"v{n}") as g:
                if n == 0:
                    g.create_dataset("x", data=np.arange(10.0), chunks=(4,))
                else:
                    g["x"][n] = -n
    settle()


def _count_ref_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = refattrs.read_refs

    def counting(group: h5py.Group) -> object:
        calls.append(1)
        return real(group)

    monkeypatch.setattr(refattrs, "read_refs", counting)
    return calls


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    reading.forget_generations()
    yield
    reading.forget_generations()


@pytest.mark.parametrize("way", ["open", "h5py"])
def test_an_unchanged_file_is_read_once_for_all_its_handles(
    tmp_path: Path, way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f.h5"
    _make(path)
    ref_reads = _count_ref_reads(monkeypatch)
    maps = []
    for _ in range(3):
        with opened(path, way) as vf:
            state = vf.file_state
            assert state.guard is not None and state.guard.kept is not None
            assert vf["v2"]["x"][:3].tolist() == [0.0, -1.0, -2.0]
            assert vf["v1"]["x"][1] == -1.0
            view = dataset_views.known_view(state)
            assert view is not None
            maps.append(view[0].bytes)
    assert len(ref_reads) == 1  # read by the first handle only
    assert maps[0] is maps[1] is maps[2]  # one map of the file for all three


@pytest.mark.parametrize("way", ["open", "h5py"])
def test_every_change_between_opens_is_seen(tmp_path: Path, way: str) -> None:
    path = tmp_path / "f.h5"
    _make(path)
    with opened(path, way) as vf:
        assert vf["v2"]["x"][:3].tolist() == [0.0, -1.0, -2.0]
        assert "v3" not in vf
    with h5vc.open(path, "a") as writer:
        with writer.stage_version("v3") as g:
            g["x"][0] = 30
        writer.create_tag("t", "v1")
    settle()
    with opened(path, way) as vf:
        assert vf["v3"]["x"][:3].tolist() == [30.0, -1.0, -2.0]
        assert vf["t"]["x"][:3].tolist() == [0.0, -1.0, 2.0]
        assert vf.tags == {"t": "v1"}
    with h5vc.open(path, "a") as writer:
        writer.delete_tag("t")
        h5vc.delete_versions(writer, ["v2"])
    settle()
    with opened(path, way) as vf:
        assert "v2" not in vf
        with pytest.raises(h5vc.VersionNotFoundError):
            vf["v2"]
        with pytest.raises(KeyError):
            vf["t"]
        assert vf["v3"]["x"][:3].tolist() == [30.0, -1.0, -2.0]


def test_a_write_by_plain_h5py_between_opens_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "f.h5"
    _make(path)
    with h5vc.open(path) as vf:
        assert vf["v2"]["x"][:4].tolist() == [0.0, -1.0, -2.0, 3.0]
    with h5py.File(path, "r+") as f:  # the same size: only the bytes of a chunk change
        raw = f["_version_data/x/raw_data"]
        raw[: raw.shape[0]] = raw[:] + 100
    settle()
    with h5vc.open(path) as vf:
        assert vf["v2"]["x"][:4].tolist() == [100.0, 99.0, 98.0, 103.0]


def test_no_stamp_names_the_bytes_right_after_a_write(tmp_path: Path) -> None:
    path = tmp_path / "f.h5"
    _make(path)
    lock = ReadLock(path)
    try:
        assert lock.content_key is None  # outside a block
        with lock:
            settled = lock.content_key
        assert settled is not None
        with lock:
            assert lock.content_key == settled
        os.utime(path)  # a write now: within the tick, a stamp could hide the next one
        with lock:
            assert lock.content_key is None
        settle()
        with lock:
            assert lock.content_key not in (None, settled)
    finally:
        lock.close()


def test_no_stamp_names_the_bytes_of_a_file_of_coarse_times(tmp_path: Path) -> None:
    """A modification time of whole milliseconds (what a filesystem of coarse times
    gives, where a write later in the same second leaves it as it is) names nothing:
    neither the key of what is kept across handles nor the reads without the lock."""
    path = tmp_path / "f.h5"
    _make(path)
    second = (time.time_ns() // 1_000_000_000 - 10) * 1_000_000_000
    os.utime(path, ns=(second, second))
    settle()
    lock = ReadLock(path)
    try:
        with lock:
            assert lock.content_key is None
            assert lock.quiet is None
        os.utime(path, ns=(second + 123_457, second + 123_457))
        settle()
        with lock:
            assert lock.content_key is not None
            assert lock.quiet is not None
    finally:
        lock.close()


def test_a_fresh_file_is_read_anew_by_each_handle(tmp_path: Path) -> None:
    path = tmp_path / "f.h5"
    with h5vc.open(path, "w") as vf, vf.stage_version("v0") as g:
        g["x"] = np.arange(3)
    os.utime(path)
    with h5vc.open(path) as vf:
        assert vf.file_state.guard.kept is None
        assert vf["v0"]["x"][:].tolist() == [0, 1, 2]


@pytest.mark.filterwarnings("ignore::h5vc.errors.UnjournaledFileWarning")  # group roots
@pytest.mark.parametrize("way", ["open", "h5py"])
def test_versioned_roots_of_one_file_are_kept_apart(tmp_path: Path, way: str) -> None:
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        for name, versions in (("a", ["a0", "a1"]), ("b", ["b0"])):
            vf = h5vc.VersionedHDF5File(f.create_group(name))
            for n, version in enumerate(versions):
                with vf.stage_version(version) as g:
                    g["x"] = np.full(3, n)
            vf.create_tag(f"tag_{name}", versions[0])
            vf.close()
    settle()
    for _ in range(2):
        with h5py.File(path, "r") as f:
            a = h5vc.VersionedHDF5File(f["a"])
            b = h5vc.VersionedHDF5File(f["b"])
            assert "a1" in a and "a1" not in b
            assert a.tags == {"tag_a": "a0"} and b.tags == {"tag_b": "b0"}
            assert a.data_version == b.data_version
            assert a["a1"]["x"][:].tolist() == [1, 1, 1]
            with pytest.raises(h5vc.VersionNotFoundError):
                b.get_version_by_name("a1")
            assert b["b0"]["x"][:].tolist() == [0, 0, 0]
            a.close()
            b.close()


@pytest.mark.parametrize("way", ["open", "h5py"])
def test_a_version_found_in_kept_bytes_opens_its_group_when_used(tmp_path: Path, way: str) -> None:
    path = tmp_path / "f.h5"
    with h5vc.open(path, "w") as vf:
        for n in range(3):
            with vf.stage_version(f"v{n}") as g:
                g.attrs["n"] = n
                g.require_group("s")["y"] = np.full(4, n)
                g["x"] = np.arange(3) + n
    settle()
    with opened(path, way) as vf:
        assert [vf[f"v{n}"]["x"][0] for n in range(3)] == [0, 1, 2]
    with opened(path, way) as vf:
        group = vf["v2"]
        assert group._group_obj is None  # found committed in the kept bytes
        assert group.attrs["n"] == 2
        assert sorted(group) == ["s", "x"]
        assert group["s"]["y"][:].tolist() == [2, 2, 2, 2]
        assert vf["v1"]["x"][:].tolist() == [1, 2, 3]
        assert vf["v1"]["x"].shape == (3,)
        assert vf["v0"].attrs["n"] == 0
    with opened(path, way) as vf:
        group, dataset = vf["v1"], vf["v0"]["x"]
        with h5vc.open(path, "a") as writer:
            h5vc.delete_versions(writer, ["v0", "v1"])
        with pytest.raises(h5vc.VersionNotFoundError):
            group.attrs["n"]
        with pytest.raises(h5vc.VersionNotFoundError):
            dataset[:]
        assert vf["v2"]["x"][:].tolist() == [2, 3, 4]


def test_a_handle_of_another_file_than_the_locked_one_takes_nothing(tmp_path: Path) -> None:
    """A file put in place of the one a guard's lock was made for (renamed over it) is
    read through a handle opened by name: what was kept of the locked file is not its."""
    from h5vc.remote import open_private

    first, second = tmp_path / "a.h5", tmp_path / "b.h5"
    _make(first)
    _make(second)
    lock = ReadLock(first)
    with h5py.File(first, "r") as anchor:
        guard = reading.ReadGuard(str(first), "/", anchor, lock)
        try:
            with lock:
                for path, kept in ((second, False), (first, True)):
                    file, close = open_private(str(path))
                    try:
                        guard._know(file)
                        assert (guard.kept is not None) is kept
                        assert (guard.known is not None) is kept
                    finally:
                        close()
        finally:
            guard.close()
