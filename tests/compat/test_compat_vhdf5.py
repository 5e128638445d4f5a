"""Files move both ways between h5vc and versioned-hdf5 2.6.0.

* Every file versioned-hdf5 wrote opens in h5vc and every version reads as expected.
* h5vc commits new versions on top of such a file in its compat layout
  (data_version 4, one mapping per chunk), and versioned-hdf5 still reads every
  old and new version and can keep committing on top.
* Files in h5vc's own layout are refused by versioned-hdf5 with its clear error,
  never misread.
"""

from __future__ import annotations

import copy
import datetime
import hashlib
from pathlib import Path

import h5py
import make_vhdf5_files as ref
import numpy as np
import pytest
import versioned_hdf5

import h5vc

FILES = sorted(ref.FILE_NAMES)
UTC = datetime.timezone.utc
NEW_TIMESTAMP = datetime.datetime(2025, 1, 1, tzinfo=UTC)


def as_text(values) -> list:
    return [v.decode() if isinstance(v, bytes) else v for v in np.asarray(values).ravel()]


def assert_dataset_equal(got, want: np.ndarray, where) -> None:
    got = np.asarray(got)
    assert got.shape == want.shape, where
    if want.dtype == object:
        assert as_text(got) == list(want.ravel()), where
    else:
        assert got.dtype == want.dtype, where
        np.testing.assert_array_equal(got, want, err_msg=str(where))


def dataset_paths(group) -> list[str]:
    found: list[str] = []
    group.visititems(lambda name, obj: found.append(name) if hasattr(obj, "dtype") else None)
    return sorted(found)


def check_with_h5vc(path: str, expected: dict) -> None:
    """Every version of ``path`` read through h5vc equals ``expected``."""
    with h5vc.open(path) as vf:
        assert vf.current_version == expected["@file"]["current_version"]
        assert sorted(vf.versions) == sorted(ref.versions_of(expected))
        for name in ref.versions_of(expected):
            want = expected[name]
            version = vf[name]
            datasets = ref.datasets_of(want)
            assert dataset_paths(version) == sorted(datasets), name
            for dpath, array in datasets.items():
                assert_dataset_equal(version[dpath][()], array, (path, name, dpath))
            for opath, attrs in want["@attrs"].items():
                obj = version[opath] if opath else version
                version_attrs = {"prev_version", "committed", "timestamp"} if not opath else set()
                assert set(obj.attrs) == set(attrs) | version_attrs, (name, opath)
                for key, value in attrs.items():
                    assert obj.attrs[key] == value, (name, opath, key)
            info = vf.version_info(name)
            assert (info.prev_version or "__first_version__") == want["@meta"]["prev_version"]
            if want["@meta"]["timestamp"] is not None:
                stored = datetime.datetime.strptime(
                    want["@meta"]["timestamp"], ref.TIMESTAMP_FORMAT
                )
                assert info.timestamp == np.datetime64(stored.replace(tzinfo=None), "us")


def check_with_versioned_hdf5(path: str, expected: dict) -> None:
    """Every version of ``path`` read through versioned-hdf5 equals ``expected``."""
    with h5py.File(path, "r") as f:
        vf = versioned_hdf5.VersionedHDF5File(f)
        assert vf.current_version == expected["@file"]["current_version"]
        for name in ref.versions_of(expected):
            version = vf[name]
            for dpath, array in ref.datasets_of(expected[name]).items():
                assert_dataset_equal(
                    version[dpath][()], array, ("versioned-hdf5", path, name, dpath)
                )


@pytest.mark.parametrize("name", FILES)
def test_h5vc_reads_every_version(reference, name: str) -> None:
    directory, expected = reference
    check_with_h5vc(str(directory / name), expected[name])


@pytest.mark.parametrize("name", sorted(ref.EXPECTED_LAYOUT))
def test_h5vc_reports_dataset_metadata(reference, name: str) -> None:
    directory, _ = reference
    with h5vc.open(str(directory / name)) as vf:
        assert vf.data_version == 4
        for dpath, facts in ref.EXPECTED_LAYOUT[name].items():
            dataset = vf[None][dpath]
            for key, value in facts.items():
                got = dataset.dtype.str if key == "dtype" else getattr(dataset, key)
                assert got == value, (name, dpath, key)


def edit_value(dtype: np.dtype):
    if dtype.kind == "O":
        return "h5vc \u2713"
    if dtype.kind == "S":
        return b"h5vc"
    if dtype.kind == "b":
        return True
    return np.asarray(42).astype(dtype)[()]


def expected_fill(dataset) -> object:
    if dataset.dtype.kind == "O":
        return ""
    return dataset.fillvalue


def stage_on_top(path: str, expected: dict) -> dict:
    """With h5vc, commit ``h5vc_new`` on top of the current version: every dataset grows
    by two rows along axis 0 and gets a new first element; a dataset and attributes are
    added.  Returns ``expected`` extended with the new version."""
    expected = copy.deepcopy(expected)
    current = expected["@file"]["current_version"]
    state = copy.deepcopy(expected[current])
    state["@attrs"] = {"": {"written_by": "h5vc"}}
    with h5vc.open(path, "r+") as vf:
        assert vf.data_version == 4
        with vf.stage_version("h5vc_new", timestamp=NEW_TIMESTAMP) as g:
            g.attrs["written_by"] = "h5vc"
            for dpath, array in ref.datasets_of(expected[current]).items():
                dataset = g[dpath]
                grown = (array.shape[0] + 2, *array.shape[1:])
                dataset.resize(grown)
                new = np.full(grown, expected_fill(dataset), dtype=array.dtype)
                new[: array.shape[0]] = array
                if new.size:
                    value = edit_value(array.dtype)
                    dataset[(0,) * new.ndim] = value
                    new[(0,) * new.ndim] = value
                state[dpath] = new
            first = sorted(ref.datasets_of(expected[current]))[0]
            g[first].attrs["touched"] = "yes"
            state["@attrs"].setdefault(first, {})["touched"] = "yes"
            g.create_dataset("h5vc/added", data=np.arange(7, dtype="i8"), chunks=(3,))
            state["h5vc/added"] = np.arange(7, dtype="i8")
    for opath, attrs in expected[current]["@attrs"].items():
        if opath:
            state["@attrs"].setdefault(opath, {}).update(attrs)
            if opath == first:
                state["@attrs"][opath]["touched"] = "yes"
    state["@meta"] = {
        "prev_version": current,
        "timestamp": NEW_TIMESTAMP.strftime(ref.TIMESTAMP_FORMAT),
    }
    expected["h5vc_new"] = state
    expected["@file"] = {
        "current_version": "h5vc_new",
        "versions": [*expected["@file"]["versions"], "h5vc_new"],
    }
    return expected


@pytest.mark.parametrize("name", FILES)
def test_h5vc_commits_on_top_and_versioned_hdf5_reads_it(copy_reference, name: str) -> None:
    path, expected = copy_reference(name)
    expected = stage_on_top(path, expected)
    with h5py.File(path, "r") as f:
        versions = f["_version_data/versions"]
        assert versions.attrs["data_version"] == 4
        for dpath in ref.datasets_of(expected["h5vc_new"]):
            dataset = versions["h5vc_new"][dpath]
            # compat layout: one mapping per stored chunk, each at most one chunk big
            chunks = tuple(dataset.attrs["chunks"])
            for source in dataset.virtual_sources():
                block = source.vspace.get_select_bounds()
                extent = np.subtract(block[1], block[0]) + 1
                assert all(extent <= chunks), (dpath, extent, chunks)
    check_with_h5vc(path, expected)
    ref.check_files(Path(path).parent, {name: expected})
    check_with_versioned_hdf5(path, expected)


@pytest.mark.parametrize("name", ["basic.h5", "groups.h5", "strings.h5"])
def test_versioned_hdf5_keeps_committing_after_h5vc(copy_reference, name: str) -> None:
    path, expected = copy_reference(name)
    expected = stage_on_top(path, expected)
    with h5py.File(path, "r+") as f:
        vf = versioned_hdf5.VersionedHDF5File(f)
        with vf.stage_version("vhdf5_after") as g:
            g["h5vc/added"][1] = -1
            g["h5vc/added"].resize((9,))
    after = copy.deepcopy(expected["h5vc_new"])
    after["h5vc/added"] = np.r_[0, -1, np.arange(2, 7), 0, 0].astype("i8")
    after["@attrs"][""] = {}
    after["@meta"] = {"prev_version": "h5vc_new", "timestamp": None}
    expected["vhdf5_after"] = after
    expected["@file"] = {
        "current_version": "vhdf5_after",
        "versions": [*expected["@file"]["versions"], "vhdf5_after"],
    }
    check_with_versioned_hdf5(path, expected)
    check_with_h5vc(path, expected)


def digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture
def h5vc_native(tmp_path: Path) -> str:
    path = str(tmp_path / "native.h5")
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(100, dtype="f8"), chunks=(10,))
        with vf.stage_version("v2") as g:
            g["x"][5] = -5.0
        assert vf.data_version == 1001
    # The file persists its free-space records; HDF5 rewrites their address in the
    # superblock on the first writable open, changing bytes that say nothing about
    # the data.  Settle them so the tests below see only what a library writes.
    with h5py.File(path, "r+"):
        pass
    return path


@pytest.mark.parametrize("mode", ["r", "r+"])
def test_versioned_hdf5_refuses_h5vc_layout(h5vc_native: str, mode: str) -> None:
    before = digest(h5vc_native)
    with (
        h5py.File(h5vc_native, mode) as f,
        pytest.raises(ValueError, match="later version of versioned-hdf5"),
    ):
        versioned_hdf5.VersionedHDF5File(f)
    assert digest(h5vc_native) == before


def test_versioned_hdf5_delete_versions_refuses_h5vc_layout(h5vc_native: str) -> None:
    before = digest(h5vc_native)
    with (
        h5py.File(h5vc_native, "r+") as f,
        pytest.raises(ValueError, match="later version of versioned-hdf5"),
    ):
        versioned_hdf5.delete_versions(f, ["v1"])
    assert digest(h5vc_native) == before
    with h5vc.open(h5vc_native) as vf:
        assert vf.versions == ["v1", "v2"]
        assert vf["v2"]["x"][5] == -5.0
