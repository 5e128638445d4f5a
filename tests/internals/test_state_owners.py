"""The file state composes its owners without holding itself alive, and drops every
cache in one place."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import h5py
import numpy as np

import h5vc
from h5vc.versions import resolve_state


def _versioned(path: Path) -> None:
    with h5vc.open(str(path), "w") as vf, vf.stage_version("v1") as g:
        g.create_dataset("x", data=np.arange(10), chunks=(5,))


def test_an_unused_state_is_freed_at_once(tmp_path: Path) -> None:
    """No reference cycle keeps a state alive until the garbage collector runs: the
    next handle on the root reads the file anew (a caller's h5py writes included)."""
    path = tmp_path / "data.h5"
    _versioned(path)
    gc.disable()
    try:
        with h5py.File(path, "r+") as f:
            vf = h5vc.VersionedHDF5File(f)
            owner = resolve_state(vf)
            owner.stores.require("x", "v1")  # the owners are in use
            state = weakref.ref(owner)
            del vf, owner
            assert state() is None
    finally:
        gc.enable()


def test_drop_caches_empties_both_owners_and_bumps_the_generation(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    _versioned(path)
    with h5vc.open(str(path)) as vf:
        state = resolve_state(vf)
        with state.reading():
            dataset = state.version_group("v1")["x"]
            chunk_map = state.chunk_maps.get("v1", "x", dataset)
            store = state.stores.require("x", "v1", dataset)
            assert state.chunk_maps.get("v1", "x", dataset) is chunk_map  # cached
            assert state.stores.get("x") is store
            generation = state.generation
            state.drop_caches()
            assert state.generation == generation + 1
            assert state.chunk_maps.get("v1", "x", dataset) is not chunk_map
            assert state.stores.get("x") is not store
