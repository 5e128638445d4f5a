"""current_version read at a writable open: one stored as h5vc writes it is written
over directly by the next ref change; one stored otherwise is replaced as before."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

import h5vc
from h5vc.store import tree


def _file(path):
    with h5vc.open(path, "w") as vf, vf.stage_version("base") as group:
        group.create_dataset("x", data=np.arange(10.0))
    with h5vc.open(path, "r+") as vf:
        vf.create_branch("b", at="base")
        vf.create_branch("feature", at="base")
        with vf.stage_version("f1", branch="feature", make_current=False) as group:
            group["x"][0] = 5.0
        assert vf.current_version == "base"


@pytest.mark.parametrize(
    ("stored", "plain"),
    [
        (None, True),
        (np.bytes_(b"base"), False),  # a fixed-length string
        # An ASCII variable-length string is the same type to HDF5: written over.
        (np.array("base", dtype=h5py.string_dtype("ascii")), True),
    ],
)
def test_fast_forward_moves_current_version_however_stored(tmp_path, stored, plain):
    path = tmp_path / "f.h5"
    _file(path)
    if stored is not None:
        with h5py.File(path, "r+") as f:
            f["_version_data/versions"].attrs["current_version"] = stored
    with h5vc.open(path, "r+") as vf:
        assert vf.current_version == "base"
        assert tree.plain_current_version(vf._open_state.versions) == ("base" if plain else None)
        assert vf.merge("feature", into="b").kind == "fast-forward"
        assert vf.current_version == "f1"
    with h5py.File(path, "r") as f:
        attr = f["_version_data/versions"].attrs.get_id("current_version")
        assert attr.get_type().is_variable_str()
        assert attr.get_space().get_simple_extent_type() == h5py.h5s.SCALAR
        assert f["_version_data/versions"].attrs["current_version"] == "f1"
    with h5vc.open(path, "r") as vf:
        assert vf.current_version == "f1"
        assert vf.branches["b"] == "f1"
        assert vf["f1"]["x"][0] == 5.0
