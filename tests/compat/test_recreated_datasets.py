"""A dataset deleted in one version and created again later with another dtype or
chunk shape.

versioned-hdf5 2.6.0 refuses (``ValueError``: its one store per name keeps the first
dtype and chunks).  In h5vc's layout the name is free after a delete: the new dataset
gets a chunk store of its own, older versions keep reading theirs.  Files in
versioned-hdf5's layout (data_version 4) keep versioned-hdf5's rule, so that
versioned-hdf5 reads them correctly.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import versioned_hdf5

import h5vc
from h5vc.errors import MergeConflictError, MetadataMismatchError

OLD = np.arange(12)
NEW = np.arange(10, dtype="f4") * 2


def recreate(lib, path: Path, *, chunks=(4,), dtype="f4", data_version=None) -> None:
    """v1: x (int64, chunks 5) and y; v2: x deleted; v3: x created again."""
    with h5py.File(path, "w") as f:
        vf = (
            lib.VersionedHDF5File(f)
            if data_version is None
            else h5vc.VersionedHDF5File(f, data_version=data_version)
        )
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=OLD, chunks=(5,))
            g.create_dataset("y", data=np.arange(3), chunks=(2,))
        with vf.stage_version("v2") as g:
            del g["x"]
        with vf.stage_version("v3") as g:
            g.create_dataset("x", data=NEW.astype(dtype), chunks=chunks)


@pytest.mark.parametrize(
    ("chunks", "dtype"), [((4,), "i8"), ((5,), "f4"), ((4,), "f4")], ids=["chunks", "dtype", "both"]
)
def test_versioned_hdf5_layout_keeps_its_rule(tmp_path, chunks, dtype) -> None:
    """Both libraries refuse in versioned-hdf5's layout, with a ValueError."""
    with pytest.raises(ValueError, match=r"(?i)chunk|dtype"):
        recreate(versioned_hdf5, tmp_path / "vh.h5", chunks=chunks, dtype=dtype)
    with pytest.raises(MetadataMismatchError) as info:
        recreate(h5vc, tmp_path / "h5vc.h5", chunks=chunks, dtype=dtype, data_version=4)
    assert isinstance(info.value, ValueError)
    with h5py.File(tmp_path / "h5vc.h5", "r") as f:  # the failed commit left nothing
        vf = versioned_hdf5.VersionedHDF5File(f)
        assert sorted(f["_version_data/versions"]) == ["__first_version__", "v1", "v2"]
        assert "x" not in vf["v2"] and "__h5vc_stores__" not in f["_version_data"]
        np.testing.assert_array_equal(vf["v1"]["x"][()], OLD)


@pytest.fixture
def recreated(tmp_path: Path) -> Path:
    path = tmp_path / "recreated.h5"
    recreate(h5vc, path)
    return path


def read_all(path: Path) -> dict[str, dict[str, tuple]]:
    with h5vc.open(path) as vf:
        return {
            v: {
                name: (vf[v][name][()], vf[v][name].dtype.str, vf[v][name].chunks) for name in vf[v]
            }
            for v in vf.versions
        }


def assert_reads(path: Path, expected: dict[str, dict[str, tuple]]) -> None:
    got = read_all(path)
    assert sorted(got) == sorted(expected)
    for version, datasets in expected.items():
        assert sorted(got[version]) == sorted(datasets), version
        for name, (data, dtype, chunks) in datasets.items():
            values, got_dtype, got_chunks = got[version][name]
            np.testing.assert_array_equal(values, data, err_msg=f"{version}/{name}")
            assert (got_dtype, got_chunks) == (np.dtype(dtype).str, chunks), (version, name)


Y = (np.arange(3), "i8", (2,))
BASE = {
    "v1": {"x": (OLD, "i8", (5,)), "y": Y},
    "v2": {"y": Y},
    "v3": {"x": (NEW, "f4", (4,)), "y": Y},
}


def test_old_and_new_versions_read_their_own_data(recreated: Path) -> None:
    assert_reads(recreated, BASE)
    with h5vc.open(recreated, "r+") as vf:
        with vf.stage_version("v4") as g:  # an edit stays in the new dataset's store
            g["x"][0] = 7
            g["x"].resize((12,))
        with vf.stage_version("v5", "v1") as g:  # the old one's lineage goes on too
            g["x"][1] = -1
        stores = sorted(
            name for name, obj in vf.f["_version_data"].items() if isinstance(obj, h5py.Group)
        )
        assert stores == ["__h5vc_stores__", "versions", "x", "y"]
        assert list(vf.f["_version_data/__h5vc_stores__/x"]) == ["@1"]
        assert vf.f["_version_data/x/raw_data"].shape[0] == 4 * 5  # 3 slots + 1 edited
        report = h5vc.verify(vf)
        assert report.ok, str(report)
    edited = NEW.copy()
    edited[0] = 7
    old_edit = OLD.copy()
    old_edit[1] = -1
    assert_reads(
        recreated,
        {
            **BASE,
            "v4": {"x": (np.concatenate([edited, [0, 0]]), "f4", (4,)), "y": Y},
            "v5": {"x": (old_edit, "i8", (5,)), "y": Y},
        },
    )


def test_created_again_with_the_first_settings_shares_the_first_store(recreated: Path) -> None:
    with h5vc.open(recreated, "r+") as vf:
        rows = vf.f["_version_data/x/raw_data"].shape[0]
        with vf.stage_version("v4") as g:
            del g["x"]
            g.create_dataset("x", data=OLD, chunks=(5,))
        assert vf.f["_version_data/x/raw_data"].shape[0] == rows  # every chunk shared
        with vf.stage_version("v5") as g:  # and a third dtype: a second store of its own
            del g["x"]
            g.create_dataset("x", data=np.arange(4, dtype="u1"), chunks=(3,))
        assert list(vf.f["_version_data/__h5vc_stores__/x"]) == ["@1", "@2"]
    assert_reads(
        recreated,
        {
            **BASE,
            "v4": {"x": (OLD, "i8", (5,)), "y": Y},
            "v5": {"x": (np.arange(4), "u1", (3,)), "y": Y},
        },
    )


def test_large_array_written_through_and_abandoned_stage(recreated: Path) -> None:
    big = np.arange(600_000, dtype="f8")  # written to the file at once (>= 4 MiB)
    with h5vc.open(recreated, "r+") as vf:
        with pytest.raises(RuntimeError, match="abandon"), vf.stage_version("v4") as g:
            del g["x"]
            g.create_dataset("x", data=np.arange(5, dtype="u2"), chunks=(2,))
            raise RuntimeError("abandon")
        assert list(vf.f["_version_data/__h5vc_stores__/x"]) == ["@1"]  # @2 taken back
        with vf.stage_version("v4") as g:
            del g["x"]
            g.create_dataset("x", data=big, chunks=(100_000,))
            g["x"][0] = -5
    big[0] = -5
    assert_reads(recreated, {**BASE, "v4": {"x": (big, "f8", (100_000,)), "y": Y}})


def test_delete_versions_of_either_dataset(recreated: Path, tmp_path: Path) -> None:
    with h5vc.open(recreated, "r+") as vf:
        h5vc.delete_versions(vf, ["v3"])  # the new dataset's store goes
        assert "__h5vc_stores__" not in vf.f["_version_data"]
        with vf.stage_version("v3b") as g:
            g.create_dataset("x", data=NEW, chunks=(4,))
        h5vc.delete_versions(vf, ["v1"])  # the first dataset's store goes
        assert "raw_data" not in vf.f["_version_data"].get("x", {})
        with vf.stage_version("v4") as g:  # the first store's name is free again
            del g["x"]
            g.create_dataset("x", data=OLD, chunks=(6,))
        assert h5vc.verify(vf).ok
    expected = {
        "v2": {"y": Y},
        "v3b": {"x": (NEW, "f4", (4,)), "y": Y},
        "v4": {"x": (OLD, "i8", (6,)), "y": Y},
    }
    assert_reads(recreated, expected)
    packed = tmp_path / "packed.h5"
    h5vc.repack(recreated, packed)
    assert_reads(packed, expected)
    with h5vc.open(packed) as vf:
        assert h5vc.verify(vf).ok


def test_modify_metadata_diff_and_get_diff(recreated: Path) -> None:
    with h5vc.open(recreated, "r+") as vf:
        change = vf.diff("v1", "v3").dataset("x")
        assert change is not None and (change.shape1, change.shape2) == ((12,), (10,))
        assert [r.raw for r in change.regions] == [(slice(0, 12, None),)]
        pieces = vf.get_diff("x", "v1", "v3")
        assert pieces, "get_diff found no difference"
        h5vc.modify_metadata(vf, "x", chunks=(3,), compression="gzip")
        assert h5vc.verify(vf).ok
    expected = {
        **BASE,
        "v1": {"x": (OLD, "i8", (3,)), "y": Y},
        "v3": {"x": (NEW, "f4", (3,)), "y": Y},
    }
    assert_reads(recreated, expected)
    with h5vc.open(recreated) as vf:
        assert vf["v1"]["x"].compression == vf["v3"]["x"].compression == "gzip"


def test_merge_of_two_different_datasets_is_a_conflict(recreated: Path) -> None:
    with h5vc.open(recreated, "r+") as vf:
        vf.create_branch("old", "v1")
        vf.create_branch("new", "v3")
        with vf.stage_version("o1", branch="old") as g:
            g["x"][0] = 1
        with pytest.raises(MergeConflictError, match="x"):
            vf.merge("new", into="old")
        vf.merge("new", into="old", on_conflict="theirs")
        np.testing.assert_array_equal(vf["old"]["x"][()], NEW)
        assert h5vc.verify(vf).ok
