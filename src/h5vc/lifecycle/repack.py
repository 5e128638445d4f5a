"""Writing a compact copy of a versioned file.

HDF5 keeps the space of freed objects and chunks inside the file, so a file
does not shrink after :func:`~h5vc.lifecycle.delete_versions`.  ``repack``
copies every top-level object into a new file with HDF5's object copy, which
streams chunk by chunk, writes only allocated chunks and keeps hard links
inside each copied tree: every version keeps its name, parent, timestamp,
attributes and data, the versions group keeps ``current_version`` and
``data_version``, and objects shared between versions stay shared.  A chunk store
with free slots (chunks released by ``delete_versions``, kept for reuse) has only
its slots in use copied, raw chunk by raw chunk, so the copy holds no byte of them.

The copy is written to ``<dst>.h5vc-repack`` through h5vc's journaled writer (its
writer lock keeps a second ``repack`` to the same target out), synced to the disk,
and only then linked to ``dst``: ``dst`` is either absent or a complete file, also
after a crash or a failed write, and the source is only read.
"""

from __future__ import annotations

import contextlib
import os

import h5py
import numpy as np

from h5vc.durable.files import ReadLock, close_file, open_file, recover_abandoned
from h5vc.durable.journal import journal_path
from h5vc.errors import NotVersionedError
from h5vc.store import layout
from h5vc.store.compact import slot_windows
from h5vc.store.rawdata import slots_in_use
from h5vc.store.space import FILE_SPACE_OPTIONS
from h5vc.store.tree import copy_attrs, store_paths

__all__ = ["PARTIAL_SUFFIX", "repack"]

#: The copy is written under this name next to ``dst`` until it is complete.
PARTIAL_SUFFIX = ".h5vc-repack"


def repack(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Write a compact copy of the versioned file ``src`` to the new file ``dst``.

    ``dst`` must not exist.  Raises :class:`~h5vc.errors.NotVersionedError` if
    ``src`` has no versioned data at its root.  If the copy fails (or the process is
    killed), ``dst`` does not exist and the call can simply be repeated.
    """
    target = os.fspath(dst)
    if os.path.exists(target):
        raise FileExistsError(
            f"Expected a path where a new file can be written. Got {target!r}, "
            f"which already exists."
        )
    recover_abandoned(os.fspath(src))  # a crashed writer's journal is rolled back first
    # The copy is one read of the source: a writer at work waits until it is done, so
    # it copies one committed state.
    lock = ReadLock(src)
    with contextlib.closing(lock), lock, h5py.File(src, "r") as source:
        if layout.VERSION_DATA not in source:
            raise NotVersionedError(
                f"Expected a versioned file with a {layout.VERSION_DATA!r} group at its "
                f"root. Got {os.fspath(src)!r}, which has none."
            )
        # Copying decodes every object header: the chunk stores' are checked first.
        store_paths(source[layout.VERSION_DATA])
        partial = target + PARTIAL_SUFFIX
        # A copy left by a crashed repack is started afresh (a live one holds the lock).
        copy = open_file(partial, "w", durable=True, **FILE_SPACE_OPTIONS)
        try:
            try:
                copy_attrs(source.attrs, copy.attrs)
                for name in source:
                    if name == layout.VERSION_DATA:
                        _copy_version_data(source[name], copy, name)
                    else:
                        source.copy(source[name], copy, name=name)
            finally:
                close_file(copy)  # the last commit point: raises if a write failed
            os.link(partial, target)  # never replaces a file that appeared meanwhile
        except BaseException:
            _remove(partial)
            raise
        _remove(partial)


def _remove(path: str) -> None:
    for name in (path, journal_path(path)):
        with contextlib.suppress(FileNotFoundError):
            os.remove(name)


def _copy_version_data(group: h5py.Group, target: h5py.Group, name: str) -> None:
    """Copy ``group`` as ``target/name``: the versions group (and any object that is not
    a chunk store's raw_data) with HDF5's object copy, raw_data without its free slots."""
    copied = target.create_group(name)
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
