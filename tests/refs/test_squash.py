"""Squash: a linear run of versions replaced by one holding the last one's data."""

from __future__ import annotations

import numpy as np
import pytest
from refs_helpers import contents, file_bytes

from h5vc.errors import InvalidVersionNameError, NotLinearHistoryError, RefInUseError


def _line(vf, names, branch=None):
    for name in names:
        with vf.stage_version(name, message=f"edit {name}", branch=branch) as g:
            g["x"][int(name[1:])] = -1


def test_squash_keeps_the_data_and_moves_children_and_branches(vf):
    _line(vf, ["v2", "v3", "v4"])
    vf.create_branch("main")  # at v4
    _line(vf, ["v5"])
    vf.create_branch("later")  # at v5, the child of the run
    vf.create_tag("start", "v1")
    stamp = vf.version_info("v4").timestamp
    expected = vf["v4"]["x"][:]
    name = vf.squash("v2", "main", name="s")
    assert name == "s" and vf.versions == ["v1", "s", "v5"]
    info = vf.version_info("s")
    assert info.prev_version == "v1" and info.timestamp == stamp
    assert info.message.splitlines() == [
        "Squash of v2..v4 (3 versions)",
        "v2: edit v2",
        "v3: edit v3",
        "v4: edit v4",
    ]
    assert vf.version_info("v5").prev_version == "s"
    assert vf.branches == {"later": "v5", "main": "s"} and vf.current_version == "v5"
    assert np.array_equal(vf["s"]["x"][:], expected)
    assert [i.name for i in vf.log()] == ["v5", "s", "v1"]
    assert vf[stamp].version_name == "s"


def test_squash_of_the_current_head_from_the_root(vf):
    _line(vf, ["v2", "v3"])
    expected = {"x": vf["v3"]["x"][:], "y": vf["v3"]["g"]["y"][:]}
    name = vf.squash("v1", "v3")
    assert vf.versions == [name] and vf.current_version == name
    assert vf.version_info(name).prev_version is None
    assert np.array_equal(vf[name]["x"][:], expected["x"])
    assert np.array_equal(vf[name]["g"]["y"][:], expected["y"])
    assert vf[name]["x"].attrs["unit"] == "m"


def test_squash_of_a_merge_result_keeps_the_merge_parents(vf):
    vf.create_branch("main")
    vf.create_branch("side")
    _line(vf, ["v7"], branch="side")
    vf.switch_branch("main")
    _line(vf, ["v2", "v3"], branch="main")
    vf.merge("side", name="m")
    vf.squash("v2", "v3", name="s")
    info = vf.version_info("m")
    assert info.prev_version == "s" and info.merge_parents == ("v7",)
    assert vf.merge_base("m", "side") == "v7"


def test_bad_squashes_change_nothing(path, vf):
    _line(vf, ["v2", "v3", "v4"])
    with vf.stage_version("off", prev_version="v2", make_current=False) as g:
        g["x"][0] = 9
    _line(vf, ["v5", "v6"])
    vf.create_branch("mid", at="v5")
    vf.create_tag("t", "v6")
    vf.create_branch("side", at="v1")
    with vf.stage_version("s1", branch="side", make_current=False) as g:
        g["x"][1] = 9
    vf.f.file.flush()
    before, before_bytes = contents(path), file_bytes(path)
    for first, last, error in (
        ("v4", "v2", NotLinearHistoryError),  # not an ancestor
        ("s1", "v4", NotLinearHistoryError),  # another line
        ("v2", "v4", NotLinearHistoryError),  # v2 has another child, "off"
        ("v4", "v6", RefInUseError),  # tag t on v6, branch mid inside
        ("v3", "v4", InvalidVersionNameError),  # name taken by a branch
    ):
        with pytest.raises(error):
            vf.squash(first, last, name="side" if error is InvalidVersionNameError else None)
    vf.f.file.flush()
    assert contents(path) == before and file_bytes(path) == before_bytes
