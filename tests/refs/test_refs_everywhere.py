"""Refs wherever a version is accepted, commits on the current branch, generated names."""

from __future__ import annotations

import re

import numpy as np
import pytest
import xarray as xr

import h5vc
import h5vc.xarray
from h5vc.errors import RefNotFoundError, VersionNotFoundError


def _refs(vf):
    with vf.stage_version("v2") as g:
        g["x"][0] = -1
    vf.create_tag("release", "v1")
    vf.create_branch("feature/a", at="v2")


def test_every_version_argument_takes_refs(vf):
    _refs(vf)
    assert vf.version_info("release").name == "v1"
    assert vf.version_info("feature/a").prev_version == "v1"
    assert [i.name for i in vf.log("feature/a")] == ["v2", "v1"]
    change = vf.diff("release", "feature/a").dataset("x")
    assert [(r.raw[0].start, r.raw[0].stop) for r in change.regions] == [(0, 10)]
    [(_, (old, new))] = vf.get_diff("x", "release", "feature/a").items()
    assert old[0] == 0 and new[0] == -1
    with vf.stage_version("v3", prev_version="release", make_current=False) as g:
        assert g["x"][0] == 0
    assert vf.version_info("v3").prev_version == "v1"
    assert vf.merge_base("v3", "feature/a") == "v1"
    for call in (
        lambda: vf.version_info("nope"),
        lambda: vf.diff("nope", "v1"),
        lambda: vf.log("nope"),
        lambda: vf.get_diff("x", "v1", "nope"),
    ):
        with pytest.raises(RefNotFoundError):
            call()
    with (
        pytest.raises(VersionNotFoundError, match="Previous version 'nope'"),
        vf.stage_version("v4", prev_version="nope"),
    ):
        pass


def test_a_plain_commit_after_switch_branch_moves_that_branch(vf):
    vf.create_branch("main")
    vf.create_branch("dev")
    vf.switch_branch("dev")
    with vf.stage_version("d1") as g:
        g["x"][0] = 1
    assert vf.branches == {"dev": "d1", "main": "v1"} and vf.current_branch == "dev"
    with vf.stage_version("side", make_current=False) as g:  # not current: no branch moves
        g["x"][0] = 2
    with vf.stage_version("d2", prev_version="v1") as g:  # an explicit start: neither
        g["x"][0] = 3
    assert vf.branches == {"dev": "d1", "main": "v1"} and vf.current_branch is None
    vf.switch_branch("main")
    with vf.stage_version("m1") as g:
        g["x"][0] = 4
    assert vf.branches["main"] == "m1" and vf.version_info("m1").prev_version == "v1"


def test_without_branches_commits_are_as_before(vf):
    with vf.stage_version("v2") as g:
        g["x"][0] = 1
    assert vf.branches == {} and vf.current_version == "v2"
    assert vf.version_info("v2").prev_version == "v1"


def test_generated_version_names_are_unique_and_sortable(vf):
    names = []
    for i in range(3):
        with vf.stage_version() as g:
            g["x"][0] = i
        names.append(vf.current_version)
    assert names == sorted(names) and len(set(names)) == 3
    assert all(re.fullmatch(r"\d{8}T\d{6}\.\d{6}Z(-\d+)?", name) for name in names)
    assert [i.name for i in vf.log()][:3] == names[::-1]


def test_xarray_to_version_takes_refs_and_branches(path, vf):
    ds = xr.Dataset({"t": ("time", np.arange(4.0))}, attrs={"title": "days"})
    vf.create_branch("daily")
    h5vc.xarray.to_version(ds, vf, "d1", group="days", branch="daily")
    assert vf.branches["daily"] == "d1"
    h5vc.xarray.to_version(ds * 2, vf, "d2", group="days", prev_version="daily")
    assert vf.version_info("d2").prev_version == "d1"
    again = xr.open_dataset(str(path), engine="h5vc", version="daily", group="days")
    assert list(again["t"].values) == [0, 1, 2, 3]
    again.close()
