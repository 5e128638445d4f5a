"""Opening and looking up versions read the layout's attributes with HDF5's own calls:
they must agree with h5py whatever kind of value a file holds."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

import h5vc
from h5vc.versions.log import _committed_marker
from h5vc.versions.state import _data_version


@pytest.fixture
def versions(tmp_path):
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        yield f.create_group("versions")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (np.bool_(True), True),
        (np.bool_(False), False),
        (np.int64(1), True),
        (np.int64(0), False),
        (np.uint8(2), True),
        (np.int32(256), True),
        (np.dtype(">i4").type(1).astype(">i4"), True),
    ],
)
def test_commit_marker_values(versions, value, expected):
    versions.create_group("v").attrs["committed"] = value
    assert _committed_marker(versions.id, b"v")[0] is expected


def test_commit_marker_other_kinds(versions):
    versions.create_group("none")
    assert _committed_marker(versions.id, b"none")[0] is False
    versions.create_group("array").attrs["committed"] = np.array([1, 1])
    assert _committed_marker(versions.id, b"array")[0] is None
    versions.create_group("text").attrs["committed"] = "yes"
    assert _committed_marker(versions.id, b"text")[0] is None
    versions.create_dataset("data", data=1)
    assert _committed_marker(versions.id, b"data")[0] is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [(np.int64(1001), 1001), (np.int32(4), 4), (np.uint16(1000), 1000), (4.0, 4), ("4", 4)],
)
def test_data_version_values(versions, value, expected):
    versions.attrs["data_version"] = value
    assert _data_version(versions) == expected


def test_data_version_missing(versions):
    assert _data_version(versions) == 1


@pytest.mark.parametrize("opener", ["open", "h5py"])
def test_fresh_open_reads_newest(tmp_path, opener):
    path = tmp_path / "f.h5"
    with h5vc.open(path, "w") as vf:
        for n in range(3):
            with vf.stage_version(f"v{n}") as g:
                g["x"] = np.full(5, n)
    for n in range(3):
        if opener == "open":
            with h5vc.open(path) as vf:
                assert vf[f"v{n}"]["x"][-2:].tolist() == [n, n]
                assert vf.data_version == 1001
        else:
            with h5py.File(path, "r") as f:
                vf = h5vc.VersionedHDF5File(f)
                assert vf[f"v{n}"]["x"][-2:].tolist() == [n, n]
                assert vf.current_version == "v2"
                vf.close()


def test_version_group_after_lookup_is_that_version(tmp_path):
    path = tmp_path / "f.h5"
    with h5vc.open(path, "w") as vf:
        for n in range(3):
            with vf.stage_version(f"v{n}") as g:
                g["x"] = np.full(4, n)
    with h5vc.open(path) as vf:
        log = vf.file_state.log
        assert "v1" in log and "v2" in log
        # the group opened for v2's marker is not handed out for v1
        assert log.group("v1").name.endswith("/v1")
        assert "v2" in log
        assert log.group("v2").name.endswith("/v2")
        assert log.group("v0").name.endswith("/v0")
        assert [vf[f"v{n}"]["x"][0] for n in range(3)] == [0, 1, 2]


def _read_locks_held() -> int:
    from h5vc.durable import files

    return sum(len(held) for threads in files._READING.values() for held in threads.values())


def test_open_holds_no_read_lock_between_reads(tmp_path):
    path = tmp_path / "f.h5"
    with h5vc.open(path, "w") as vf, vf.stage_version("v0") as g:
        g["x"] = np.arange(3)
    with h5vc.open(path) as vf:
        assert _read_locks_held() == 0
        # a writer in another handle commits while the reader is open: noticed
        with h5vc.open(path, "a") as writer, writer.stage_version("v1") as g:
            g["x"][0] = 7
        assert _read_locks_held() == 0
        assert vf["v1"]["x"][:].tolist() == [7, 1, 2]
        assert vf["v0"]["x"][:].tolist() == [0, 1, 2]
    assert _read_locks_held() == 0


def test_open_of_unversioned_file_releases_its_lock(tmp_path):
    path = tmp_path / "plain.h5"
    with h5py.File(path, "w") as f:
        f["x"] = 1
    with pytest.raises(h5vc.NotVersionedError), h5vc.open(path):
        pass
    assert _read_locks_held() == 0
    with h5vc.open(path, "a") as vf, vf.stage_version("v0") as g:  # a writer gets in
        g["y"] = np.arange(2)
    with h5vc.open(path) as vf:
        assert vf["v0"]["y"][:].tolist() == [0, 1]


def test_h5py_handle_holds_no_read_lock_between_reads(tmp_path):
    path = tmp_path / "f.h5"
    with h5vc.open(path, "w") as vf, vf.stage_version("v0") as g:
        g["x"] = np.arange(3)
    with h5py.File(path, "r") as f:
        vf = h5vc.VersionedHDF5File(f)
        assert _read_locks_held() == 0
        with h5vc.open(path, "a") as writer, writer.stage_version("v1") as g:
            g["x"][1] = 9
        assert vf["v1"]["x"][:].tolist() == [0, 9, 2]
        assert vf.current_version == "v1"
        assert _read_locks_held() == 0
        vf.close()
