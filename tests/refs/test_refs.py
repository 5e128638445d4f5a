"""Branches, tags, name resolution, and commits on a branch."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from refs_helpers import contents, file_bytes

import h5vc
from h5vc.errors import (
    AmbiguousRefError,
    InvalidRefNameError,
    InvalidVersionNameError,
    RefExistsError,
    RefInUseError,
    RefNotFoundError,
    TagImmutableError,
)


def test_branches_and_tags_point_at_versions(vf):
    assert vf.branches == {} and vf.tags == {}
    assert vf.create_branch("main") == "v1"
    vf.create_tag("release-1", "v1")
    assert vf.branches == {"main": "v1"} and vf.tags == {"release-1": "v1"}
    assert vf["main"].version_name == "v1" and vf["release-1"].version_name == "v1"
    assert vf["main"]["x"][3] == 3


def test_stage_version_on_a_branch_moves_only_that_branch(vf):
    vf.create_branch("main")
    vf.create_branch("dev")
    with vf.stage_version("d1", branch="dev") as g:
        g["x"][0] = -1
    assert vf.branches == {"dev": "d1", "main": "v1"}
    assert vf.current_version == "d1" and vf.current_branch == "dev"
    with vf.stage_version("m1", branch="main", make_current=False) as g:
        g["x"][1] = -2
    assert vf.branches == {"dev": "d1", "main": "m1"}
    assert vf.version_info("m1").prev_version == "v1"
    assert vf.current_version == "d1"
    assert vf["m1"]["x"][0] == 0 and vf["d1"]["x"][1] == 1


def test_stage_version_without_a_branch_is_unchanged(vf):
    vf.create_branch("main")
    with vf.stage_version("v2") as g:
        g["x"][0] = 5
    assert vf.branches == {"main": "v1"}
    assert vf.current_version == "v2" and vf.version_info("v2").prev_version == "v1"


def test_reset_and_delete_branch(vf):
    with vf.stage_version("v2") as g:
        g["x"][0] = 5
    vf.create_branch("b", at="v1")
    vf.reset_branch("b", "v2")
    assert vf.branches["b"] == "v2"
    vf.reset_branch("b", "v1")
    assert vf.branches["b"] == "v1"
    vf.delete_branch("b")
    assert vf.branches == {}


def test_switch_branch_sets_the_current_version(vf):
    with vf.stage_version("v2") as g:
        g["x"][0] = 5
    vf.create_branch("old", at="v1")
    vf.switch_branch("old")
    assert vf.current_version == "v1" and vf.current_branch == "old"


def test_refs_survive_reopening(path, vf):
    vf.create_branch("main")
    vf.create_tag("t1", "v1")
    vf.close()
    vf.f.file.close()
    with h5vc.open(str(path)) as again:
        assert again.branches == {"main": "v1"} and again.tags == {"t1": "v1"}


def test_refs_are_stored_as_h5py_stores_a_str(path, vf):
    """Each ref (and the current branch) is a scalar variable-length UTF-8 string
    attribute, exactly what h5py's ``attrs[key] = "..."`` writes."""
    with vf.stage_version("v2") as g:
        g["x"][0] = 5
    vf.create_branch("main", at="v1")
    vf.create_tag("t\u00e9", "v1")
    vf.reset_branch("main", "v2")
    vf.switch_branch("main")
    vf.close()
    vf.f.file.close()
    with h5py.File(path, "r+") as f:
        versions = f["_version_data/versions"]
        versions.attrs["by_h5py"] = "v2"
        expected = versions.attrs.get_id("by_h5py")
        for key, value in (
            ("h5vc_branch:main", "v2"),
            ("h5vc_tag:t\u00e9", "v1"),
            ("h5vc_current_branch", "main"),
        ):
            attr = versions.attrs.get_id(key)
            assert attr.get_type() == expected.get_type()
            assert attr.shape == expected.shape == ()
            assert versions.attrs[key] == value


def test_versioned_hdf5_opens_a_file_with_refs_and_a_merge(tmp_path):
    from versioned_hdf5 import VersionedHDF5File as OtherFile

    path = tmp_path / "compat.h5"
    with h5py.File(path, "w") as f:  # versioned-hdf5's own layout (data_version 4)
        OtherFile(f)
    with h5vc.open(str(path), "r+") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(100), chunks=(10,))
        vf.create_branch("main")
        vf.create_branch("dev")
        vf.create_tag("t1", "v1")
        with vf.stage_version("d1", branch="dev", make_current=False) as g:
            g["x"][55] = -55
        with vf.stage_version("m1", branch="main") as g:
            g["x"][5] = -5
        vf.merge("dev", name="merged")
    with h5py.File(path, "r+") as f:
        other = OtherFile(f)
        assert other.current_version == "merged"
        x = other["merged"]["x"][:]
        assert x[5] == -5 and x[55] == -55
        with other.stage_version("after") as g:
            g["x"][0] = 1
    with h5vc.open(str(path)) as vf:
        assert vf.branches == {"dev": "d1", "main": "merged"} and vf.tags == {"t1": "v1"}
        assert vf["after"]["x"][0] == 1


def test_version_names_taken_by_refs_are_refused(path, vf):
    vf.create_branch("b")
    vf.create_tag("t", "v1")
    vf.f.file.flush()
    before = contents(path)
    for name, kind in (("b", "branch"), ("t", "tag")):
        with (
            pytest.raises(InvalidVersionNameError, match=f"already a {kind}"),
            vf.stage_version(name) as g,
        ):
            g["x"][0] = 9
    vf.f.file.flush()
    assert contents(path) == before and vf.versions == ["v1"]
    with pytest.raises(RefNotFoundError):
        vf["nothing"]
    with pytest.raises(KeyError):  # still a KeyError, like versioned-hdf5
        vf["nothing"]
    vf.create_branch("dev")
    vf.create_tag("t1")
    with pytest.raises(RefNotFoundError, match=r"No branch named 'x' \(the branches: b, dev\)"):
        vf.switch_branch("x")
    with pytest.raises(RefNotFoundError, match=r"No tag named 'x' \(the tags: t, t1\)"):
        vf.delete_tag("x")


def test_ambiguous_names_of_older_files_are_reported(path, vf):
    """A file written before names were checked may have a version named like a ref."""
    with vf.stage_version("v2") as g:
        g["x"][0] = 9
    vf.file_state.versions.attrs["h5vc_branch:v2"] = "v1"
    vf.file_state.refs.reload()
    with pytest.raises(AmbiguousRefError, match=r"'v2'.*version.*branch"):
        vf["v2"]
    vf.f.file.flush()
    before, before_bytes = contents(path), file_bytes(path)
    for call in (
        lambda: vf.log("v2"),
        lambda: vf.cherry_pick("v2"),
        lambda: vf.revert("v2"),
        lambda: vf.merge("v2"),
        lambda: vf.squash("v2", "v2"),
        lambda: vf.blame("x", ref="v2"),
        lambda: vf.bisect(bool, "v1", "v2"),
        lambda: vf.create_tag("t2", "v2"),
    ):
        with pytest.raises(AmbiguousRefError):
            call()
    vf.f.file.flush()
    assert contents(path) == before and file_bytes(path) == before_bytes
    assert vf.branches["v2"] == "v1"


def test_ref_names_follow_git(vf):
    for name in ("feature/x", "release-1.0", "a.b/c_d", "ÄÖ", "x@y"):
        vf.create_branch(name)
        vf.create_tag(f"t/{name}", "v1")
    assert vf["feature/x"].version_name == "v1" and vf.log("t/feature/x")[0].name == "v1"


@pytest.mark.parametrize(
    "name, error",
    [
        ("", InvalidRefNameError),
        *[
            (bad, InvalidRefNameError)
            for bad in (
                "a..b",
                "-x",
                "a.lock",
                "a/b.lock/c",
                "x\n",
                "x\x7f",
                "a@{1}",
                "@",
                "a b",
                "a~1",
                "a^",
                "a:b",
                "a?",
                "a*",
                "a[",
                "a\\b",
                "/a",
                "a/",
                "a//b",
                ".a",
                "a/.b",
                "a.",
                "__x",
            )
        ],
        ("v1", InvalidRefNameError),  # a version's name
        ("main", RefExistsError),
        ("t", InvalidRefNameError),  # already a tag
        (3, InvalidRefNameError),
    ],
)
def test_bad_branch_names(path, vf, name, error):
    vf.create_branch("main")
    vf.create_tag("t", "v1")
    vf.f.file.flush()
    before = contents(path)
    with pytest.raises(error):
        vf.create_branch(name)
    vf.f.file.flush()
    assert contents(path) == before


def test_bad_ref_operations_change_nothing(path, vf):
    with vf.stage_version("v2") as g:
        g["x"][0] = 5
    vf.create_tag("t", "v1")
    vf.create_branch("main", at="v2")
    vf.switch_branch("main")
    vf.f.file.flush()
    before = contents(path)
    with pytest.raises(TagImmutableError, match="never move"):
        vf.create_tag("t", "v2")
    with pytest.raises(RefNotFoundError):
        vf.reset_branch("t", "v2")  # a tag is not a branch
    with pytest.raises(RefNotFoundError):
        vf.create_branch("x", at="nope")
    with pytest.raises(RefNotFoundError):
        vf.delete_tag("nope")
    with pytest.raises(RefInUseError, match="current branch"):
        vf.delete_branch("main")
    with pytest.raises(RefNotFoundError), vf.stage_version("v3", branch="nope"):
        pass
    vf.f.file.flush()
    assert contents(path) == before
    assert "v3" not in vf


def test_delete_versions_refuses_refs_unless_forced(path, vf):
    with vf.stage_version("v2") as g:
        g["x"][0] = 5
    with vf.stage_version("v3") as g:
        g["x"][1] = 6
    vf.create_branch("b", at="v2")
    vf.create_tag("t", "v1")
    vf.f.file.flush()
    before = contents(path)
    with pytest.raises(RefInUseError, match=r"branch 'b'.*tag 't'|tag 't'.*branch 'b'"):
        h5vc.delete_versions(vf, ["v1", "v2"])
    vf.f.file.flush()
    assert contents(path) == before
    h5vc.delete_versions(vf, ["v2"], force=True)
    assert vf.branches == {"b": "v1"}  # moved to the nearest surviving ancestor
    h5vc.delete_versions(vf, ["v1"], force=True)
    assert vf.tags == {} and vf.branches == {}
    assert vf["v3"]["x"][1] == 6


@pytest.mark.parametrize(
    "error, builtin",
    [
        (h5vc.RefNotFoundError, KeyError),
        (h5vc.RefExistsError, ValueError),
        (h5vc.InvalidRefNameError, ValueError),
        (h5vc.AmbiguousRefError, ValueError),
        (h5vc.TagImmutableError, ValueError),
        (h5vc.RefInUseError, ValueError),
        (h5vc.NothingToMergeError, ValueError),
        (h5vc.UnrelatedHistoriesError, ValueError),
        (h5vc.MergeConflictError, ValueError),
    ],
)
def test_ref_and_merge_errors_are_h5vc_errors(error, builtin):
    assert issubclass(error, h5vc.H5vcError) and issubclass(error, builtin)
