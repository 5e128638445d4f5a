"""diff / get_diff from chunk maps, the version log, and repack."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import h5py
import ndindex
import numpy as np
import pytest
from lifecycle_helpers import check_store, new_versioned

import h5vc
from h5vc.errors import NotVersionedError, VersionNotFoundError
from h5vc.lifecycle import (
    DatasetNotFoundError,
    delete_versions,
    diff,
    format_log,
    get_diff,
    log,
    repack,
)
from h5vc.lifecycle._tree import address
from h5vc.store import layout


def two_versions(vf) -> None:
    with vf.stage_version("v0") as group:
        group.create_dataset("a/x", data=np.arange(100), chunks=(10,))
        group.create_dataset("y", data=np.arange(10), chunks=(5,))
        group.create_dataset("m", data=np.zeros((6, 6)), chunks=(3, 3))
        group.create_group("old")
        group["a"].attrs["kept"] = 1
        group["a"].attrs["edited"] = 1
        group["a"].attrs["dropped"] = 1
    with vf.stage_version("v1") as group:
        group["a/x"][15] = 0
        group["a/x"][31] = 31  # the same value again: not a change
        group["m"][4, 4] = 1
        group.create_dataset("z", data=[1, 2], chunks=(2,))
        group.create_group("new")
        del group["y"]
        del group["old"]
        group["a"].attrs["edited"] = 2
        del group["a"].attrs["dropped"]
        group["a"].attrs["added"] = "yes"


def test_diff_reports_every_kind_of_change(vfile) -> None:
    two_versions(vfile)
    result = diff(vfile, "v0", "v1")
    assert result.datasets_added == ("z",)
    assert result.datasets_removed == ("y",)
    assert result.groups_added == ("new",)
    assert result.groups_removed == ("old",)
    assert result.attrs_added == (("a", "added"),)
    assert result.attrs_removed == (("a", "dropped"),)
    assert result.attrs_changed == (("a", "edited"),)
    x = result.dataset("a/x")
    assert x is not None
    assert x.regions == (ndindex.Tuple(slice(10, 20)),)
    m = result.dataset("m")
    assert m is not None
    assert m.regions == (ndindex.Tuple(slice(3, 6), slice(3, 6)),)
    assert result
    assert not diff(vfile, "v1", "v1")


def test_diff_sees_group_attributes_named_like_dataset_bookkeeping(vfile) -> None:
    # "chunks" and "raw_data" are reserved on datasets only; on a group they are user data.
    with vfile.stage_version("a") as g:
        g.create_group("grp").attrs["chunks"] = 1
        g.create_dataset("x", data=np.arange(4), chunks=(2,))
    with vfile.stage_version("b") as g:
        g["grp"].attrs["chunks"] = 2
    changes = vfile.diff("a", "b")
    assert changes.attrs_changed == (("grp", "chunks"),)
    assert not changes.datasets_changed


def test_diff_reports_shape_changes(vfile) -> None:
    with vfile.stage_version("v0") as group:
        group.create_dataset("x", data=np.arange(25), chunks=(10,))
    with vfile.stage_version("v1") as group:
        group["x"].resize((32,))
    change = diff(vfile, "v0", "v1").dataset("x")
    assert change is not None
    assert (change.shape1, change.shape2) == ((25,), (32,))
    assert change.regions == (ndindex.Tuple(slice(20, 30)), ndindex.Tuple(slice(30, 32)))


def test_get_diff_returns_the_differing_data(vfile) -> None:
    two_versions(vfile)
    result = get_diff(vfile, "a/x", "v0", "v1")
    assert list(result) == [ndindex.Tuple(slice(10, 20))]
    before, after = result[ndindex.Tuple(slice(10, 20))]
    np.testing.assert_array_equal(before, np.arange(10, 20))
    expected = np.arange(10, 20)
    expected[5] = 0
    np.testing.assert_array_equal(after, expected)
    added = get_diff(vfile.f, "z", "v0", "v1")
    assert [(a.tolist(), b.tolist()) for a, b in added.values()] == [([], [1, 2])]
    assert get_diff(vfile, "a/x", "v1", "v1") == {}


def test_diff_bad_names(vfile) -> None:
    two_versions(vfile)
    with pytest.raises(VersionNotFoundError, match="nope"):
        diff(vfile, "v0", "nope")
    with pytest.raises(DatasetNotFoundError, match="missing"):
        get_diff(vfile, "missing", "v0", "v1")


def test_log_follows_the_dag_newest_first(vfile) -> None:
    stamp = datetime(2024, 3, 1, 12, 0, tzinfo=timezone.utc)
    with vfile.stage_version("v0", timestamp=stamp, message="start") as group:
        group.create_dataset("x", data=np.arange(4), chunks=(4,))
    with vfile.stage_version("side", message="a branch", make_current=False) as group:
        group["x"][0] = 1
    with vfile.stage_version("v1", prev_version="v0", message="two\nlines", author="ada") as group:
        group["x"][1] = 1
    entries = log(vfile)
    assert [e.name for e in entries] == ["v1", "v0"]
    assert [e.prev_version for e in entries] == ["v0", None]
    assert entries[0].message == "two\nlines" and entries[0].author == "ada"
    assert [e.name for e in log(vfile.f, "side")] == ["side", "v0"]
    text = format_log(entries)
    assert "version v1\nParent: v0\nAuthor: ada\n" in text
    assert "    two\n    lines" in text
    assert "Date:   2024-03-01 12:00:00.000000+0000" in text
    with pytest.raises(VersionNotFoundError, match="nope"):
        log(vfile, "nope")


def test_log_of_an_empty_file(vfile) -> None:
    assert log(vfile) == []
    assert format_log([]) == ""


def test_repack_shrinks_and_keeps_every_version(tmp_path: Path, layout_name: str) -> None:
    source, target = tmp_path / "big.h5", tmp_path / "small.h5"
    rng = np.random.default_rng(3)
    states = {}
    f, vf = new_versioned(source, layout_name)
    with f:
        for number in range(10):  # each version rewrites everything
            states[f"v{number}"] = rng.random(50_000)
            with vf.stage_version(f"v{number}", message=f"m{number}") as group:
                if number == 0:
                    group.create_dataset("x", data=states["v0"], chunks=(1000,))
                else:
                    group["x"][:] = states[f"v{number}"]
        vf.f["/"].attrs["owner"] = "lab"
        delete_versions(vf, [f"v{n}" for n in range(1, 9)])
        infos = {name: vf.version_info(name) for name in vf.versions}
        current = vf.current_version
    repack(source, target)
    assert os.path.getsize(target) < os.path.getsize(source) / 3
    with h5vc.open(str(target), "r") as packed:
        assert packed.current_version == current
        assert {name: packed.version_info(name) for name in packed.versions} == infos
        for name in ("v0", "v9"):
            np.testing.assert_array_equal(packed[name]["x"][:], states[name])
        assert packed.f.attrs["owner"] == "lab"
        assert packed.data_version == (1001 if layout_name == "h5vc" else 4)
        assert check_store(packed.f, "x") == 100


def test_repack_keeps_shared_objects_shared(tmp_path: Path) -> None:
    source, target = tmp_path / "a.h5", tmp_path / "b.h5"
    f, vf = new_versioned(source, "h5vc")
    with f:
        with vf.stage_version("v0") as group:
            group.create_dataset("g/x", data=np.arange(10), chunks=(5,))
            group.create_dataset("y", data=np.arange(3), chunks=(3,))
        with vf.stage_version("v1") as group:
            group["y"][0] = 9
    repack(source, target)
    with h5py.File(target, "r") as packed:
        versions = packed[f"{layout.VERSION_DATA}/{layout.VERSIONS}"]
        assert address(versions["v0"]["g"]) == address(versions["v1"]["g"])
        np.testing.assert_array_equal(versions["v1"]["y"][:], [9, 1, 2])


def test_repack_refuses_bad_paths(tmp_path: Path) -> None:
    plain = tmp_path / "plain.h5"
    with h5py.File(plain, "w") as f:
        f["x"] = 1
    with pytest.raises(NotVersionedError, match=r"plain\.h5"):
        repack(plain, tmp_path / "out.h5")
    assert not (tmp_path / "out.h5").exists()
    with pytest.raises(FileExistsError, match=r"plain\.h5"):
        repack(plain, plain)
