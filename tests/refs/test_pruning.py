"""Pruning history keeps merges working: the merge base of live branches stays."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import h5vc
from h5vc.errors import MergeBaseInUseError, RefInUseError


def _edit(vf: h5vc.VersionedHDF5File, name: str, branch: str, start: int, value: float) -> None:
    with vf.stage_version(name, branch=branch, make_current=False) as g:
        g["x"][start : start + 10] = value


def _history(path: Path) -> None:
    """main: v0, m1, m2, m3, m4; alice and bob fork at m2 and commit four times each,
    each side in chunks of its own."""
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=np.zeros(1000), chunks=(100,))
        vf.create_branch("main", "v0")
        for number in (1, 2):
            _edit(vf, f"m{number}", "main", number * 10, number)
        vf.create_branch("alice", "m2")
        vf.create_branch("bob", "m2")
        for number in (3, 4):
            _edit(vf, f"m{number}", "main", 900 + number * 10, number)
        for number in range(1, 5):
            _edit(vf, f"a{number}", "alice", 300 + number * 10, 100 + number)
            _edit(vf, f"b{number}", "bob", 500 + number * 10, 200 + number)


def test_pruning_half_the_history_then_merging(tmp_path: Path) -> None:
    path = tmp_path / "pruned.h5"
    _history(path)
    reference = tmp_path / "reference.h5"
    shutil.copy(path, reference)
    with h5vc.open(str(reference), "r+") as vf:
        vf.merge("alice", into="bob", name="merged")
        vf.merge("main", into="bob", name="merged2")
        expected = vf["merged2"]["x"][:]
    with h5vc.open(str(path), "r+") as vf:
        assert vf.merge_base("alice", "bob") == "m2"
        with pytest.raises(MergeBaseInUseError, match=r"'m2' \(of 'alice' and 'bob'"):
            h5vc.delete_versions(vf, ["m2", "m1"])
        assert "m2" in vf and "m1" in vf  # nothing deleted
        h5vc.delete_versions(vf, ["m1", "m3", "a1", "a2", "b1", "b2"])  # half of 12
        assert vf.merge_base("alice", "bob") == "m2"
        vf.merge("alice", into="bob", name="merged")
        vf.merge("main", into="bob", name="merged2")
        np.testing.assert_array_equal(vf["merged2"]["x"][:], expected)
        assert h5vc.verify(vf).ok


def test_force_deletes_a_merge_base(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    _history(path)
    with h5vc.open(str(path), "r+") as vf:
        with pytest.raises(RefInUseError):  # a MergeBaseInUseError is a RefInUseError
            h5vc.delete_versions(vf, ["m2"])
        h5vc.delete_versions(vf, ["m2"], force=True)
        assert "m2" not in vf
        assert vf.merge_base("alice", "bob") == "m1"


def test_files_without_branches_delete_as_before(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    with h5vc.open(str(path), "w") as vf:
        for number in range(4):
            with vf.stage_version(f"v{number}") as g:
                if number == 0:
                    g.create_dataset("x", data=np.arange(10))
                else:
                    g["x"][number] = -number
        h5vc.delete_versions(vf, ["v1", "v2"])
        assert vf.versions == ["v0", "v3"]
