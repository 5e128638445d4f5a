"""Each hand-written scenario gives the same results on versioned-hdf5 and on h5vc."""

from __future__ import annotations

import datetime

import h5py
import numpy as np
import pytest
from differential import Pair
from scenarios import ALLOW, INIT, SCENARIOS

import h5vc


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario(tmp_path, name: str) -> None:
    Pair(tmp_path, init=INIT.get(name, "own"), allow=ALLOW.get(name, ())).run_all(SCENARIOS[name])


def test_time_index_moves_out_of_version_data(tmp_path) -> None:
    """A file written before the index moved: read there, moved on the next write."""
    path = tmp_path / "old.h5"
    utc = datetime.timezone.utc
    first = datetime.datetime(2024, 1, 1, tzinfo=utc)
    with h5vc.open(str(path), "w") as vf, vf.stage_version("v1", timestamp=first) as g:
        g.create_dataset("x", data=np.arange(3), chunks=(2,))
    with h5py.File(path, "r+") as f:  # where earlier files keep it
        f.move("_h5vc_version_index", "_version_data/__version_index__")
    with h5vc.open(str(path), "r") as vf:
        assert (
            vf[datetime.datetime(2024, 1, 2, tzinfo=utc)].attrs["prev_version"]
            == "__first_version__"
        )
    with h5vc.open(str(path), "r+") as vf:
        stamp = datetime.datetime(2024, 1, 3, tzinfo=utc)
        with vf.stage_version("v2", timestamp=stamp) as g:
            g["x"][0] = 5
        assert vf[datetime.datetime(2024, 1, 2, tzinfo=utc)]["x"][0] == 0
    with h5py.File(path, "r") as f:
        assert sorted(f["_version_data"]) == ["versions", "x"]
        assert list(f["_h5vc_version_index/names"].asstr()[()]) == ["v1", "v2"]
