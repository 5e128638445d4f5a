"""Helpers of the lifecycle tests (imported by name: each test folder's conftest is
called ``conftest``, so helpers live in a module of their own)."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

import h5vc
from h5vc.hashing import chunk_hash
from h5vc.store import layout


def new_versioned(path: str | Path, layout_name: str) -> tuple[h5py.File, h5vc.VersionedHDF5File]:
    """A new writable versioned file in h5vc's layout or the compat (data_version 4) one."""
    f = h5py.File(path, "w")
    vf = h5vc.VersionedHDF5File(f)
    if layout_name == "compat":
        vf.f[f"{layout.VERSION_DATA}/{layout.VERSIONS}"].attrs[layout.ATTR_DATA_VERSION] = np.int64(
            layout.DATA_VERSION_COMPAT
        )
        vf = h5vc.VersionedHDF5File(f)
    return f, vf


def check_store(f: h5py.Group, dataset_path: str) -> int:
    """Assert raw_data and hash_table of ``dataset_path`` agree; return the slot count
    (the slots in use: raw_data may hold free slots past them)."""
    group = f[f"{layout.VERSION_DATA}/{dataset_path}"]
    raw_data, table = group[layout.RAW_DATA], group[layout.HASH_TABLE]
    chunks = tuple(int(c) for c in raw_data.attrs[layout.ATTR_CHUNKS])
    n = int(table.attrs[layout.ATTR_LARGEST_INDEX])
    assert raw_data.shape[0] >= n * chunks[0]
    rows = table[:n]
    assert sorted(rows["shape"][:, 0] // chunks[0]) == list(range(n))
    return n


def stored_digests(f: h5py.Group, dataset_path: str) -> dict[int, bytes]:
    group = f[f"{layout.VERSION_DATA}/{dataset_path}"]
    table = group[layout.HASH_TABLE]
    n = int(table.attrs[layout.ATTR_LARGEST_INDEX])
    c0 = int(group[layout.RAW_DATA].attrs[layout.ATTR_CHUNKS][0])
    return {int(r["shape"][0]) // c0: bytes(r["hash"]) for r in table[:n]}


def verify_hashes(vf: h5vc.VersionedHDF5File, dataset_path: str) -> None:
    """Every chunk every version maps hashes to the digest stored for its slot."""
    digests = stored_digests(vf.f, dataset_path)
    state = vf._state
    assert state is not None
    for name in vf.versions:
        group = vf.f[f"{layout.VERSION_DATA}/{layout.VERSIONS}/{name}"]
        if dataset_path not in group:
            continue
        dataset = group[dataset_path]
        chunk_map = state.chunk_maps.get(name, dataset_path, dataset)
        data = vf[name][dataset_path][()]
        for coords in np.argwhere(chunk_map.slots >= 0).tolist():
            region = tuple(
                slice(i * c, min((i + 1) * c, n))
                for i, c, n in zip(coords, chunk_map.chunks, chunk_map.shape)
            )
            slot = int(chunk_map.slots[tuple(coords)])
            assert chunk_hash(np.ascontiguousarray(data[region])) == digests[slot]
