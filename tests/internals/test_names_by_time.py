"""VersionLog.names_by_time: the names of names(), from the index's names column alone."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

import h5vc
from h5vc.store import timeindex
from h5vc.versions import VersionLog


def _write(path: Path) -> None:
    """v1, b1 off v1 (not current), v2, v3: a history whose time order is not the
    order of its names."""
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(20), chunks=(5,))
        with vf.stage_version("b1", prev_version="v1", make_current=False) as g:
            g["x"][0] = 7
        with vf.stage_version("v2") as g:
            g["x"][5] = 1
        with vf.stage_version("a3") as g:
            g["x"][10] = 2


def _names(path: Path) -> tuple[list[str], list[str]]:
    """(names_by_time(), names()) of fresh handles on ``path``."""
    with h5vc.open(str(path)) as vf:
        fast = vf.file_state.log.names_by_time()
    with h5vc.open(str(path)) as vf:
        return fast, vf.file_state.log.names()


def test_names_by_time_reads_no_log_entry(tmp_path, monkeypatch):
    path = tmp_path / "f.h5"
    _write(path)
    expected = _names(path)[1]
    assert expected == ["v1", "b1", "v2", "a3"]

    def fail(*args: object) -> None:
        raise AssertionError("read the log column")

    monkeypatch.setattr(timeindex, "read_log", fail)
    monkeypatch.setattr(VersionLog, "_read", fail)
    with h5vc.open(str(path)) as vf:
        assert vf.file_state.log.names_by_time() == expected


def test_names_by_time_after_a_listing_is_the_listing(tmp_path):
    path = tmp_path / "f.h5"
    _write(path)
    with h5vc.open(str(path)) as vf:
        log = vf.file_state.log
        listed = log.names()
        assert log.names_by_time() == listed


@pytest.mark.parametrize("change", ["no log column", "index one short", "no index"])
def test_names_by_time_without_a_usable_index_scans_as_names(tmp_path, change):
    path = tmp_path / "f.h5"
    _write(path)
    with h5py.File(path, "r+") as f:
        index = f[timeindex.INDEX_NAME]
        if change == "no log column":
            del index[timeindex.LOG]
        elif change == "index one short":
            for column in (timeindex.TIMESTAMPS, timeindex.NAMES, timeindex.LOG):
                index[column].resize((3,))
        else:
            del f[timeindex.INDEX_NAME]
    fast, listed = _names(path)
    assert fast == listed == ["v1", "b1", "v2", "a3"]


def test_read_names_is_the_names_of_read_log(tmp_path):
    path = tmp_path / "f.h5"
    _write(path)
    with h5py.File(path, "r") as f:
        version_data = f["_version_data"]
        logged = timeindex.read_log(version_data)
        assert logged is not None
        assert timeindex.read_names(version_data) == [name for _, name, _ in logged]


def test_read_names_of_columns_of_different_lengths_is_none(tmp_path):
    path = tmp_path / "f.h5"
    _write(path)
    with h5py.File(path, "r+") as f:
        f[timeindex.INDEX_NAME][timeindex.LOG].resize((2,))
    with h5py.File(path, "r") as f:
        assert timeindex.read_log(f["_version_data"]) is None
        assert timeindex.read_names(f["_version_data"]) is None


def test_names_by_time_of_counted_links_does_not_count_them_again(tmp_path, monkeypatch):
    path = tmp_path / "f.h5"
    _write(path)
    with h5vc.open(str(path)) as vf:
        log = vf.file_state.log
        links = len(vf.file_state.versions)  # the versions and __first_version__

        def fail(self: h5py.Group) -> int:
            raise AssertionError("counted the links")

        monkeypatch.setattr(h5py.Group, "__len__", fail)
        assert log.names_by_time(links) == ["v1", "b1", "v2", "a3"]
        monkeypatch.undo()
        # A count that disagrees with the index: the versions are scanned.
        assert log.names_by_time(links + 1) == ["v1", "b1", "v2", "a3"]


def test_read_names_from_the_file_bytes(tmp_path, monkeypatch):
    """Read from the file's bytes (the column's stored references and the global heap),
    the names are those HDF5 reads; without a plainly stored column, HDF5 reads them."""
    from h5vc.hdf5.filebytes import FileBytes

    path = tmp_path / "f.h5"
    _write(path)
    with h5py.File(path, "r") as f:
        expected = timeindex.read_names(f["_version_data"])
        file_bytes = FileBytes.of(f)
        assert file_bytes is not None
        with file_bytes:
            assert timeindex._names_from_bytes(f[timeindex.INDEX_NAME]["names"], file_bytes) == (
                expected
            )
            assert timeindex.read_names(f["_version_data"], file_bytes) == expected
    # A column whose chunks are filtered: read through HDF5.
    with h5py.File(path, "r+") as f:
        index = f[timeindex.INDEX_NAME]
        names = index["names"][()]
        del index["names"]
        index.create_dataset(
            "names", data=names, dtype=h5py.string_dtype(), chunks=(2,), compression="gzip"
        )
    with h5py.File(path, "r") as f:
        file_bytes = FileBytes.of(f)
        assert file_bytes is not None
        with file_bytes:
            column = f[timeindex.INDEX_NAME]["names"]
            assert timeindex._names_from_bytes(column, file_bytes) is None
            assert timeindex.read_names(f["_version_data"], file_bytes) == expected
    assert expected == ["v1", "b1", "v2", "a3"]
