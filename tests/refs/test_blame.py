"""Blame: the version that last changed each chunk region, from chunk maps alone."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from h5vc.errors import DatasetNotFoundError, RefNotFoundError


def _owners(result):
    return [(r.region[0].start, r.version) for r in result.regions]


def test_blame_follows_the_last_change_of_each_chunk(vf):
    with vf.stage_version("v2") as g:
        g["x"][5] = -5
    with vf.stage_version("v3") as g:
        g["x"][55] = -55
        g["x"][6] = 6  # the value it had: the chunk's content does not change
    with vf.stage_version("v4") as g:
        g["x"][55] = 55  # back to v1's content: still a change made by v4
    owners = dict(_owners(vf.blame("x")))
    assert owners == {0: "v2", 50: "v4", **{i: "v1" for i in range(10, 100, 10) if i != 50}}
    assert vf.blame("x").version_of(55) == "v4"
    assert dict(_owners(vf.blame("x", ref="v3")))[50] == "v3"
    assert _owners(vf.blame("x", np.s_[48:52])) == [(40, "v1"), (50, "v4")]
    assert _owners(vf.blame("x", [3, 97])) == [(0, "v2"), (90, "v1")]


def test_blame_stops_once_every_chunk_is_placed(vf):
    for i in range(2, 12):
        with vf.stage_version(f"v{i}") as g:
            g["x"][:] = i
    result = vf.blame("x")
    assert {r.version for r in result.regions} == {"v11"}
    assert result.versions_visited == 1


def test_blame_of_resized_and_recreated_datasets(vf):
    with vf.stage_version("v2") as g:
        g["x"].resize((105,))  # chunk 100:110 appears; chunk 90:100 keeps its extent
    with vf.stage_version("v3") as g:
        g["x"].resize((95,))  # chunk 90:100 now ends at 95
    with vf.stage_version("v4") as g:
        g["x"].resize((100,))
    owners = dict(_owners(vf.blame("x")))
    assert owners[90] == "v4" and owners[80] == "v1"
    assert dict(_owners(vf.blame("x", ref="v2")))[100] == "v2"
    with vf.stage_version("v5") as g:
        del g["x"]
        g.create_dataset("x", data=np.arange(100.0), chunks=(10,))  # another store
    assert {r.version for r in vf.blame("x").regions} == {"v5"}


def test_blame_in_two_dimensions_and_subgroups(vf):
    with vf.stage_version("v2") as g:
        g["g"]["y"][5, 3] = 1
    result = vf.blame("/g/y")
    assert result.version_of(5, 3) == "v2" and result.version_of(0, 0) == "v1"
    assert [r.describe() for r in result.regions][-1] == "[4:6, 2:4]"


def test_blame_reads_no_array_data(vf, monkeypatch):
    with vf.stage_version("v2") as g:
        g["x"][5] = -5
    getitem = h5py.Dataset.__getitem__

    def refuse_raw(self, *args, **kwargs):
        if str(self.name).endswith("raw_data"):
            raise AssertionError(f"blame read {self.name}")
        return getitem(self, *args, **kwargs)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", refuse_raw)
    monkeypatch.setattr(h5py.Dataset, "read_direct", refuse_raw)
    assert vf.blame("x").version_of(5) == "v2"


def test_blame_bad_input(vf):
    with pytest.raises(DatasetNotFoundError):
        vf.blame("nope")
    with pytest.raises(DatasetNotFoundError):
        vf.blame("g")
    with pytest.raises(RefNotFoundError):
        vf.blame("x", ref="nope")
    with pytest.raises(IndexError):
        vf.blame("x", 200)
