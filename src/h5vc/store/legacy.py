"""Repair of files in versioned-hdf5's older layouts before they are written to.

Files written by versioned-hdf5 before its ``data_version`` 4 carry ``data_version``
1 (or no such attribute), 2 or 3.  Their layout is the one of 4, but their hash tables
cannot be trusted: object-dtype (string) chunks were hashed over the identities of
the Python objects (1 and 2) or over their concatenated bytes, so that ``["ab", "c"]``
and ``["a", "bc"]`` collided (3).  A table whose digests do not match the stored bytes
makes later commits store equal chunks again, and a digest shared by different chunks
could make them share a slot.

:func:`rebuild_hash_tables` rewrites every hash table from the stored chunks: each
slot of ``raw_data`` gets one row whose digest is computed the way chunks are hashed
when they are committed (:func:`h5vc.hashing.chunk_hash`), over the chunk trimmed
to the extent the versions read it with (the edge chunks of a dataset are shorter).
Nothing but the hash tables is written; no version's data changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import h5py
import numpy as np

import h5vc.config as config
from h5vc.errors import CorruptDataError
from h5vc.hashing import chunk_hash
from h5vc.hdf5.header import trust_dataset_header
from h5vc.store import layout, tree
from h5vc.store.chunkmap import ChunkMap

__all__ = ["LEGACY_DATA_VERSIONS", "RebuiltTables", "rebuild_hash_tables"]

#: data_version values of versioned-hdf5's layouts before 4 (1 also stands for a file
#: without the attribute): read as they are, repaired before the first write.
LEGACY_DATA_VERSIONS = frozenset({1, 2, 3})

#: Bytes of raw_data read and hashed at a time.
WINDOW_BYTES = config.LEGACY_WINDOW_BYTES


@dataclass
class RebuiltTables:
    """What :func:`rebuild_hash_tables` rewrote."""

    #: Dataset paths whose hash table was rebuilt.
    stores: list[str]
    #: Rows written (one per stored chunk).
    chunks: int
    #: Rows of the old tables whose digest differed from the stored chunk's.
    wrong_rows: int


def rebuild_hash_tables(
    version_data: h5py.Group,
    versions: h5py.Group,
    version_names: Iterable[str],
    *,
    dtype_kinds: str | None = None,
) -> RebuiltTables:
    """Rewrite the hash table of every chunk store under ``version_data`` (only those
    whose ``raw_data`` dtype kind is in ``dtype_kinds``, if given: ``"O"`` for strings).

    ``version_names`` are the committed versions in ``versions``: the extents they
    read each stored chunk with decide the shape it is hashed with.
    """
    names = list(version_names)
    order = {name: i for i, name in enumerate(names)}
    datasets = tree.collect_datasets(versions, names)
    result = RebuiltTables([], 0, 0)
    for path in _store_groups(version_data):
        group = version_data[path]
        raw_data = group[layout.RAW_DATA]
        if dtype_kinds is not None and raw_data.dtype.kind not in dtype_kinds:
            continue
        chunks = _store_chunks(raw_data)
        objects = sorted(
            datasets.get(path, {}).values(),
            key=lambda obj: max((order.get(v, -1) for v in obj.versions), default=-1),
        )
        extents = _slot_extents(raw_data, chunks, objects)
        old = _old_rows(group)
        _fill_unused(extents, chunks, old)
        rows = _hash_slots(raw_data, chunks, extents)
        result.wrong_rows += _count_wrong(old, rows)
        _write_table(group, rows)
        result.stores.append(path)
        result.chunks += len(rows)
    return result


def _store_groups(version_data: h5py.Group) -> list[str]:
    """Paths of every group under ``version_data`` holding a ``raw_data`` dataset."""
    return tree.store_paths(version_data, with_hash_table=False)


def _store_chunks(raw_data: h5py.Dataset) -> tuple[int, ...]:
    attr = raw_data.attrs.get(layout.ATTR_CHUNKS)
    chunks = tuple(int(c) for c in attr) if attr is not None else raw_data.chunks
    if not chunks or len(chunks) != raw_data.ndim or min(chunks) < 1:
        raise CorruptDataError(
            f"Expected a chunk shape of {raw_data.ndim} positive sizes for "
            f"{raw_data.name!r} in {raw_data.file.filename!r}. Got {chunks!r}."
        )
    return tuple(chunks)


def _slot_extents(
    raw_data: h5py.Dataset, chunks: tuple[int, ...], objects: Iterable[tree.DatasetObject]
) -> np.ndarray:
    """``(n_slots, ndim)``: the extent each slot's chunk is read with (``-1``: no
    version reads it).  ``objects`` come oldest first: a slot read with several
    extents keeps the one of the object committed last, the likeliest to be
    committed again."""
    n_slots = -(-raw_data.shape[0] // chunks[0])
    extents = np.full((n_slots, len(chunks)), -1, dtype=np.int64)
    for obj in objects:
        chunk_map = obj.chunk_map()
        if tuple(chunk_map.chunks) != chunks:
            continue  # verify reports it; the slots keep the extents found elsewhere
        _record(extents, chunk_map)
    return extents


def _record(extents: np.ndarray, chunk_map: ChunkMap) -> None:
    slots = chunk_map.slots
    used = slots >= 0
    if not used.any():
        return
    if int(slots.max()) >= len(extents):
        raise CorruptDataError(
            f"Expected mappings inside raw_data ({len(extents)} slots). Got slot "
            f"{int(slots.max())}."
        )
    grid = np.nonzero(used)
    shape = np.asarray(chunk_map.shape, dtype=np.int64)
    chunks = np.asarray(chunk_map.chunks, dtype=np.int64)
    starts = np.stack(grid, axis=1) * chunks
    extents[slots[used]] = np.minimum(chunks, shape - starts)


def _old_rows(group: h5py.Group) -> dict[int, tuple[bytes, int]]:
    """Slot -> (digest, rows used) of the old hash table's valid rows."""
    table = group.get(layout.HASH_TABLE)
    if not isinstance(table, h5py.Dataset) or table.dtype != layout.HASH_TABLE_DTYPE:
        return {}
    n_rows = min(int(table.attrs.get(layout.ATTR_LARGEST_INDEX, 0)), table.shape[0])
    rows = table[:n_rows]
    c0 = _store_chunks(group[layout.RAW_DATA])[0]
    old: dict[int, tuple[bytes, int]] = {}
    for digest, (start, stop) in zip(rows["hash"], rows["shape"]):
        if start >= 0 and start % c0 == 0 and 0 < stop - start <= c0:
            old[int(start) // c0] = (bytes(digest), int(stop - start))
    return old


def _fill_unused(
    extents: np.ndarray, chunks: tuple[int, ...], old: dict[int, tuple[bytes, int]]
) -> None:
    """Slots no version reads: the rows its old row recorded, else the whole chunk."""
    for slot in np.flatnonzero(extents[:, 0] < 0).tolist():
        extents[slot] = chunks
        if slot in old:
            extents[slot, 0] = old[slot][1]


def _hash_slots(raw_data: h5py.Dataset, chunks: tuple[int, ...], extents: np.ndarray) -> np.ndarray:
    """One hash-table row per slot: the digest of its chunk trimmed to its extent."""
    c0 = chunks[0]
    n_slots = len(extents)
    rows = np.zeros(n_slots, dtype=layout.HASH_TABLE_DTYPE)
    per_slot = max(1, int(np.prod(chunks)) * max(1, raw_data.dtype.itemsize))
    step = max(1, WINDOW_BYTES // per_slot)
    for first in range(0, n_slots, step):
        last = min(n_slots, first + step)
        window = raw_data[first * c0 : last * c0]
        for slot in range(first, last):
            extent = extents[slot]
            offset = (slot - first) * c0
            region: tuple[slice, ...] = (slice(offset, offset + int(extent[0])),)
            region += tuple(slice(0, int(n)) for n in extent[1:])
            chunk = window[region]
            rows["hash"][slot] = np.frombuffer(chunk_hash(chunk), dtype=np.uint8)
            rows["shape"][slot] = (slot * c0, slot * c0 + chunk.shape[0])
    return rows


def _count_wrong(old: dict[int, tuple[bytes, int]], rows: np.ndarray) -> int:
    wrong = 0
    for slot in range(len(rows)):
        found = old.get(slot)
        if found is None or found[0] != rows["hash"][slot].tobytes():
            wrong += 1
    return wrong


def _write_table(group: h5py.Group, rows: np.ndarray) -> None:
    """Replace the group's hash table by ``rows`` (count written last, as always)."""
    if layout.HASH_TABLE in group:
        del group[layout.HASH_TABLE]
    table = group.create_dataset(
        layout.HASH_TABLE,
        shape=(max(1, len(rows)),),
        dtype=layout.HASH_TABLE_DTYPE,
        chunks=layout.HASH_TABLE_CHUNKS,
        maxshape=(None,),
    )
    trust_dataset_header(group, layout.HASH_TABLE)  # maybe not in the file yet
    if len(rows):
        table[: len(rows)] = rows
    table.attrs[layout.ATTR_LARGEST_INDEX] = np.int64(len(rows))
