"""A ref the refs read do not know is created without a lookup; one whose attribute
exists after all is written over, not duplicated."""

from __future__ import annotations

import h5py
import numpy as np

import h5vc
from h5vc.store import refattrs


def test_new_ref_over_an_existing_attribute(tmp_path):
    with h5py.File(tmp_path / "refs.h5", "w") as f:
        group = f.create_group("versions")
        refattrs.write_ref(group, "branch", "a", "v1", new=True)
        refattrs.write_ref(group, "branch", "a", "v2", new=True)
        group.attrs["h5vc_branch:b"] = np.int64(3)  # not a string: replaced
        refattrs.write_ref(group, "branch", "b", "v3", new=True)
        assert refattrs.read_refs(group) == ({"branch": {"a": "v2", "b": "v3"}, "tag": {}}, None)
        assert group.attrs["h5vc_branch:b"] == "v3"
        assert len(group.attrs) == 2


def test_created_branches_read_back(tmp_path):
    path = tmp_path / "f.h5"
    with h5vc.open(path, "w") as vf, vf.stage_version("base") as group:
        group.create_dataset("x", data=np.arange(10.0))
    with h5vc.open(path, "r+") as vf:
        for n in range(12):
            vf.create_branch(f"b{n}", at="base")
        vf.create_tag("t", "base")
    with h5py.File(path, "r") as f:
        assert f["_version_data/versions"].attrs["h5vc_branch:b11"] == "base"
    with h5vc.open(path, "r") as vf:
        assert vf.branches == {f"b{n}": "base" for n in range(12)}
        assert vf.tags == {"t": "base"}
