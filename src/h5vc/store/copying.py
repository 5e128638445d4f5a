"""A compact copy of a versioned file (:func:`h5vc.repack` writes it).

Every object is copied with HDF5's object copy, except the chunk stores' raw_data,
which is copied without the free slots past the rows its hash table lists (the chunks
of deleted versions).  Hard links shared by several version groups stay shared: the
``versions`` group is copied as one object.
"""

from __future__ import annotations

import h5py
import numpy as np

from h5vc.store import layout
from h5vc.store.compact import slot_windows
from h5vc.store.groups import new_group
from h5vc.store.rawdata import slots_in_use
from h5vc.store.tree import copy_attrs

__all__ = ["copy_compacted"]


def copy_compacted(source: h5py.File, target: h5py.File) -> None:
    """Copy every object and attribute of the versioned file ``source`` into the new,
    empty file ``target``, the chunk stores without their free slots."""
    copy_attrs(source.attrs, target.attrs)
    for name in source:
        if name == layout.VERSION_DATA:
            _copy_version_data(source[name], target, name)
        else:
            source.copy(source[name], target, name=name)


def _copy_version_data(group: h5py.Group, target: h5py.Group, name: str) -> None:
    """Copy ``group`` as ``target/name``: the versions group (and any object that is not
    a chunk store's raw_data) with HDF5's object copy, raw_data without its free slots."""
    copied = new_group(target, name)
    copy_attrs(group.attrs, copied.attrs)
    for member in group:
        link = group.get(member, getlink=True)
        if not isinstance(link, h5py.HardLink):
            copied[member] = link  # a soft or external link, as it is
            continue
        obj = group[member]
        if isinstance(obj, h5py.Group) and not (
            group.name == f"/{layout.VERSION_DATA}" and member == layout.VERSIONS
        ):
            _copy_version_data(obj, copied, member)
        elif member == layout.RAW_DATA and isinstance(group.get(layout.HASH_TABLE), h5py.Dataset):
            _copy_raw_data(obj, group[layout.HASH_TABLE], copied)
        else:
            group.copy(obj, copied, name=member)


def _copy_raw_data(raw_data: h5py.Dataset, hash_table: h5py.Dataset, target: h5py.Group) -> None:
    """Copy ``raw_data`` into ``target`` with only the slots its hash table has rows for
    (the slots past them are free: their chunks belong to no version)."""
    c0 = int(raw_data.chunks[0]) if raw_data.chunks else 0
    in_use = slots_in_use(hash_table, c0) if c0 else 0
    if not c0 or in_use * c0 >= raw_data.shape[0]:
        raw_data.parent.copy(raw_data, target, name=layout.RAW_DATA)
        return
    space = h5py.h5s.create_simple(
        (in_use * c0, *raw_data.shape[1:]),
        tuple(h5py.h5s.UNLIMITED if m is None else m for m in raw_data.maxshape),
    )
    dataset_id = h5py.h5d.create(
        target.id,
        layout.RAW_DATA.encode(),
        raw_data.id.get_type(),
        space,
        dcpl=raw_data.id.get_create_plist(),
    )
    copied = h5py.Dataset(dataset_id)
    copy_attrs(raw_data.attrs, copied.attrs)
    if raw_data.dtype.kind == "O":
        # Variable-length data points into the file's heap: copied as values.
        for window in slot_windows(raw_data, np.arange(in_use), c0):
            rows = slice(int(window[0]) * c0, (int(window[-1]) + 1) * c0)
            copied[rows] = raw_data[rows]
        return
    found: list[tuple[int, ...]] = []
    raw_data.id.chunk_iter(lambda info: found.append(info.chunk_offset))
    for offset in found:
        if offset[0] < in_use * c0:
            mask, chunk = raw_data.id.read_direct_chunk(offset)
            dataset_id.write_direct_chunk(offset, chunk, mask)
