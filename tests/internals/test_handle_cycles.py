"""A handle dropped after lookups and reads leaves nothing for the cycle collector (its
h5py objects are freed at once), however the file was opened; a group kept after its
handle is gone still reads."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import h5vc


def make(path: Path) -> None:
    with h5vc.open(str(path), "w") as vf, vf.stage_version("v1") as group:
        group.create_dataset("x", data=np.arange(10))
        group.create_group("sub").create_dataset("y", data=np.arange(3))
        group.attrs["a"] = 1
        group["x"].attrs["b"] = 2


def use(vf: Any) -> None:
    version = vf["v1"]
    assert list(version["x"][:]) == list(range(10))
    assert list(version["sub"]["y"][:]) == [0, 1, 2]
    assert dict(version.attrs)["a"] == 1
    assert dict(version["x"].attrs) == {"b": 2}
    assert list(version["sub"].attrs.keys()) == []


@pytest.mark.parametrize("how", ["open", "h5py_file"])
def test_a_dropped_handle_leaves_no_reference_cycles(tmp_path: Path, how: str) -> None:
    path = tmp_path / "f.h5"
    make(path)
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        if how == "open":
            with h5vc.open(str(path)) as vf:
                use(vf)
            del vf
        else:
            f = h5py.File(path, "r")
            vf = h5vc.VersionedHDF5File(f)
            use(vf)
            del vf
            f.close()
            del f
        found = gc.collect()
    finally:
        if enabled:
            gc.enable()
    assert found == 0


def test_a_group_outlives_its_handle(tmp_path: Path) -> None:
    path = tmp_path / "f.h5"
    make(path)
    f = h5py.File(path, "r")
    vf = h5vc.VersionedHDF5File(f)
    version = vf["v1"]
    sub = version["sub"]
    del vf
    gc.collect()
    assert list(version["x"][:]) == list(range(10))
    assert version["sub"] is version["sub"]  # still cached, in the group's own views
    assert list(sub["y"][:]) == [0, 1, 2]
    assert dict(version["x"].attrs) == {"b": 2}
    f.close()
