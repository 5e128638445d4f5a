"""Bisect: the first version on the path from good to bad where a property appears."""

from __future__ import annotations

import pytest

from h5vc.errors import BisectError, RefNotFoundError


def _line(vf, names, branch=None):
    for name in names:
        with vf.stage_version(name, branch=branch) as g:
            g["x"][int(name[1:])] = -1


def test_bisect_on_the_first_parent_chain(vf):
    _line(vf, [f"v{i}" for i in range(2, 20)])
    vf.create_tag("good", "v1")
    result = vf.bisect(lambda g: (g["x"][:20] < 0).sum() >= 7, "good", "v19")
    assert result.version == "v8" and result.path[0] == "v2" and result.path[-1] == "v19"
    assert len(result.tested) <= 5  # ceil(log2(18)): bad itself is not tested


def test_bisect_through_a_merge_follows_a_path_to_good(vf):
    vf.create_branch("main")
    vf.create_branch("side")
    vf.switch_branch("side")
    _line(vf, ["s2", "s3", "s4"], branch="side")
    vf.switch_branch("main")
    _line(vf, ["m5", "m6"], branch="main")
    vf.merge("side", name="merged")
    result = vf.bisect(lambda g: g["x"][3] < 0, "s2", "main")
    assert result.path == ("s3", "s4", "merged") and result.version == "s3"


def test_bisect_bad_input(vf):
    _line(vf, ["v2", "v3"])
    with vf.stage_version("lone", prev_version="", make_current=False) as g:
        g.create_dataset("x", data=[1])
    for good, bad in (("v3", "v2"), ("v2", "v2"), ("lone", "v3")):
        with pytest.raises(BisectError):
            vf.bisect(lambda g: True, good, bad)
    with pytest.raises(RefNotFoundError):
        vf.bisect(lambda g: True, "v1", "nope")
