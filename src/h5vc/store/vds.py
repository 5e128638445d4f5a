"""Build and parse the virtual datasets that make up a committed version.

Each run of a :class:`~h5vc.store.chunkmap.ChunkMap` becomes one virtual mapping
``vds[r0*c0 : r1*c0, cols...] -> raw_data[s*c0 : s*c0 + (r1-r0)*c0, 0:w...]``
(clipped at the dataset's edge).  Mappings are created through h5py's low-level
API: the high-level ``VirtualLayout`` costs tens of microseconds per mapping,
which would dominate a commit on a dataset with a long history.
"""

from __future__ import annotations

import h5py
import numpy as np
from h5py import h5d, h5p, h5s

from h5vc.errors import UnsupportedFormatError
from h5vc.store.chunkmap import ChunkMap, Runs

__all__ = ["create_virtual_dataset", "read_chunk_map", "mapping_count"]


def _fill_array(dtype: np.dtype, fillvalue: object) -> np.ndarray | None:
    if fillvalue is None or dtype.kind == "O":
        return None
    return np.array(fillvalue, dtype=dtype)


def create_virtual_dataset(
    group: h5py.Group,
    name: str,
    raw_data: h5py.Dataset,
    chunk_map: ChunkMap,
    *,
    fillvalue: object = None,
    maxshape: tuple[int | None, ...] | None = None,
    merge: bool = True,
) -> h5py.Dataset:
    """Create ``group[name]`` as a virtual dataset over ``raw_data`` per ``chunk_map``.

    ``merge=True`` maps each run of consecutive chunks with one mapping;
    ``merge=False`` maps every chunk on its own (the versioned-hdf5 layout).
    """
    shape = chunk_map.shape
    chunks = chunk_map.chunks
    dcpl = h5p.create(h5p.DATASET_CREATE)
    dcpl.set_layout(h5d.VIRTUAL)
    fill = _fill_array(raw_data.dtype, fillvalue)
    if fill is not None:
        dcpl.set_fill_value(fill)
    hdf5_maxshape = None
    if maxshape is not None:
        hdf5_maxshape = tuple(h5s.UNLIMITED if m is None else m for m in maxshape)
    vspace = h5s.create_simple(shape, hdf5_maxshape)
    sspace = h5s.create_simple(raw_data.shape, (h5s.UNLIMITED, *raw_data.shape[1:]))
    raw_name = raw_data.name.encode()
    runs = chunk_map.runs() if merge else chunk_map.single_chunk_runs()
    if len(runs):
        _add_mappings(dcpl, vspace, sspace, raw_name, runs, shape, chunks)
    vspace.select_all()
    dsid = h5d.create(group.id, name.encode(), raw_data.id.get_type(), vspace, dcpl=dcpl)
    return h5py.Dataset(dsid)


def _add_mappings(
    dcpl: h5p.PropDCID,
    vspace: h5s.SpaceID,
    sspace: h5s.SpaceID,
    raw_name: bytes,
    runs: Runs,
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
) -> None:
    chunk_arr = np.asarray(chunks, dtype=np.int64)
    vstart = runs.coords * chunk_arr
    vstop = np.minimum(vstart + chunk_arr, np.asarray(shape, dtype=np.int64))
    # Along axis 0 a run spans `length` chunks, clipped at the edge.
    vstop[:, 0] = np.minimum(vstart[:, 0] + runs.length * chunks[0], shape[0])
    block = vstop - vstart
    sstart = np.zeros_like(vstart)
    sstart[:, 0] = runs.slot * chunks[0]
    ones = (1,) * len(shape)
    select_v = vspace.select_hyperslab
    select_s = sspace.select_hyperslab
    set_virtual = dcpl.set_virtual
    for vs, ss, blk in zip(vstart.tolist(), sstart.tolist(), block.tolist()):
        select_v(tuple(vs), ones, block=tuple(blk))
        select_s(tuple(ss), ones, block=tuple(blk))
        set_virtual(vspace, b".", raw_name, sspace)


def mapping_count(dataset: h5py.Dataset) -> int:
    """Number of virtual mappings of ``dataset`` (0 for a non-virtual dataset)."""
    dcpl = dataset.id.get_create_plist()  # one copy: it holds every mapping
    return dcpl.get_virtual_count() if dcpl.get_layout() == h5d.VIRTUAL else 0


def read_chunk_map(dataset: h5py.Dataset, chunks: tuple[int, ...]) -> ChunkMap:
    """Recover the chunk map of a committed virtual dataset from its mappings.

    Works for one mapping per chunk and for run-merged mappings alike.  Raises
    :class:`UnsupportedFormatError` if a mapping is not chunk-aligned.
    """
    shape = tuple(dataset.shape)
    dcpl = dataset.id.get_create_plist()  # one copy: it holds every mapping
    if dcpl.get_layout() != h5d.VIRTUAL:
        raise UnsupportedFormatError(
            f"Expected {dataset.name!r} to be a virtual dataset over raw_data. "
            f"Got a dataset with another storage layout instead."
        )
    count = dcpl.get_virtual_count()
    ndim = len(shape)
    vstart = np.empty((count, ndim), dtype=np.int64)
    vend = np.empty((count, ndim), dtype=np.int64)
    sstart = np.empty((count, ndim), dtype=np.int64)
    for i in range(count):
        vbounds = dcpl.get_virtual_vspace(i).get_select_bounds()
        sbounds = dcpl.get_virtual_srcspace(i).get_select_bounds()
        if vbounds is None or sbounds is None:  # an empty selection maps nothing
            vstart[i] = -1
            continue
        vstart[i], vend[i] = vbounds
        sstart[i] = sbounds[0]
    keep = vstart[:, 0] >= 0 if count else np.zeros(0, dtype=bool)
    vstart, vend, sstart = vstart[keep], vend[keep], sstart[keep]
    chunk_arr = np.asarray(chunks, dtype=np.int64)
    aligned = (
        np.all(vstart % chunk_arr == 0)
        and np.all(sstart[:, 0] % chunks[0] == 0)
        and np.all(sstart[:, 1:] == 0)
    )
    if not aligned:
        raise UnsupportedFormatError(
            f"Expected the virtual mappings of {dataset.name!r} to be aligned to its "
            f"chunks {chunks}. Got unaligned mappings instead."
        )
    length = -(-(vend[:, 0] + 1 - vstart[:, 0]) // chunks[0])
    runs = Runs(vstart // chunk_arr, length.astype(np.int64), sstart[:, 0] // chunks[0])
    return ChunkMap.from_runs(shape, chunks, runs)
