"""Compaction of a chunk store: keep only the slots surviving versions use.

The slots still referenced are copied down, in order, over the released ones;
``hash_table`` keeps exactly the surviving rows (same digests, new
``start``/``stop``) and ``largest_index`` is written last.  ``raw_data`` keeps its
extent: the slots past the survivors are free, and later commits write their new
chunks there (see :mod:`h5vc.store.rawdata`) before raw_data grows.  Each
virtual dataset that points past the first released slot is rebuilt once with its
slots renumbered by a numpy lookup (``new = remap[old]``) and relinked at every
place that named it.

Memory stays bounded: slots are moved in windows of at most
:data:`COPY_BUDGET_BYTES` of raw data.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import h5py
import numpy as np

import h5vc.config as config
from h5vc.errors import CorruptDataError
from h5vc.store import fastread, layout
from h5vc.store.chunkmap import ChunkMap
from h5vc.store.rawdata import RawDataStore
from h5vc.store.tree import DatasetObject, rebuild_virtual_dataset

__all__ = [
    "COPY_BUDGET_BYTES",
    "compact_store",
    "erase_slots",
    "move_slots",
    "slot_windows",
    "used_slots",
]

#: Upper bound on raw data held in memory while slots are moved or converted.
COPY_BUDGET_BYTES = config.COPY_BUDGET_BYTES


def used_slots(maps: list[ChunkMap]) -> np.ndarray:
    """Sorted unique slots referenced by any of ``maps``."""
    if not maps:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.concatenate([m.slots[m.slots >= 0] for m in maps])).astype(np.int64)


def compact_store(
    store: RawDataStore, objects: list[DatasetObject], *, merge: bool, erase: bool = False
) -> None:
    """Keep only the slots of ``store`` that ``objects`` reference.

    With ``n`` slots kept, every kept slot at or past ``n`` moves into a released
    slot below ``n`` (lowest first).  Only the datasets that use a moved slot are
    rebuilt, so deleting a few versions rebuilds a few virtual datasets.  The slots
    from ``n`` on are then free.  With ``erase``, every slot no version uses is
    overwritten with zero bytes in place first (see :func:`erase_slots`); zero bytes
    are no valid chunk for a filter (a compressed one, or a checksum), so a store
    with filters then drops its free slots (any HDF5 tool can still read all of
    raw_data) and their space is HDF5's free space.
    """
    raw_data = store.raw_data
    maps = [obj.chunk_map() for obj in objects]
    used = used_slots(maps)
    n_kept = len(used)
    c0 = store.chunks[0]
    # The slots in use end at the first free one (a version mapping a free slot is
    # damage, reported by _rows_of_slots).
    n_slots = max(store.first_free_slot, int(used.max(initial=-1)) + 1)
    if erase:
        # Every slot no version uses, the free ones past n_slots included (chunks
        # released by an earlier delete, or written by an interrupted commit).
        released = np.ones(max(n_slots, store.n_slots), dtype=bool)
        released[used] = False
        erase_slots(raw_data, np.flatnonzero(released), c0)
    if n_kept < n_slots:
        _move_down(store, objects, maps, used, n_slots, merge=merge)
    if erase and raw_data.id.get_create_plist().get_nfilters():
        raw_data.resize(n_kept * c0, axis=0)
        fastread.forget(raw_data)
        store.reload()


def _move_down(
    store: RawDataStore,
    objects: list[DatasetObject],
    maps: list[ChunkMap],
    used: np.ndarray,
    n_slots: int,
    *,
    merge: bool,
) -> None:
    """Move the ``used`` slots past ``len(used)`` into the released ones below it."""
    raw_data, c0, n_kept = store.raw_data, store.chunks[0], len(used)
    kept_rows = _rows_of_slots(store, used, n_slots)
    sources = used[used >= n_kept]  # kept slots past the end: they move down
    is_used = np.zeros(n_kept, dtype=bool)
    is_used[used[used < n_kept]] = True
    targets = np.flatnonzero(~is_used)  # released slots below the end: they are refilled
    move_slots(raw_data, sources, targets, c0)
    remap = np.arange(max(n_slots, 1), dtype=np.int64)
    remap[sources] = targets
    _rewrite_hash_table(store.hash_table, kept_rows, remap[used], c0)
    store.reload()
    if not len(sources):
        return
    for obj, chunk_map in zip(objects, maps):
        if not np.any(chunk_map.slots >= n_kept):
            continue
        slots = np.where(chunk_map.slots >= 0, remap[np.maximum(chunk_map.slots, 0)], -1)
        new_map = ChunkMap(chunk_map.shape, chunk_map.chunks, slots)
        rebuild_virtual_dataset(obj, raw_data, new_map, merge=merge)


def erase_slots(raw_data: h5py.Dataset, slots: np.ndarray, c0: int) -> None:
    """Overwrite the stored bytes of ``slots`` with zeros, at their place in the file.

    Each chunk is rewritten as raw bytes of its stored size (filters skipped), so
    HDF5 keeps it at the same address, compressed or not: the bytes it held are
    gone from the file, not only released.
    """
    tail = (0,) * (raw_data.ndim - 1)
    for slot in slots.tolist():
        offset = (slot * c0, *tail)
        if slot * c0 >= raw_data.shape[0]:
            continue
        info = raw_data.id.get_chunk_info_by_coord(offset)
        if info.byte_offset is None or not info.size:
            continue  # never written
        raw_data.id.write_direct_chunk(offset, bytes(info.size), info.filter_mask)


def _slot_bytes(raw_data: h5py.Dataset, c0: int) -> int:
    per_element = raw_data.dtype.itemsize if raw_data.dtype.kind != "O" else 64
    return max(1, c0 * int(np.prod(raw_data.shape[1:], dtype=np.int64)) * per_element)


def slot_windows(raw_data: h5py.Dataset, slots: np.ndarray, c0: int) -> Iterator[np.ndarray]:
    """Split sorted ``slots`` into groups whose row span fits :data:`COPY_BUDGET_BYTES`."""
    budget = max(1, COPY_BUDGET_BYTES // _slot_bytes(raw_data, c0))
    k = 0
    while k < len(slots):
        end = max(int(np.searchsorted(slots, slots[k] + budget)), k + 1)
        yield slots[k:end]
        k = end


def move_slots(raw_data: h5py.Dataset, sources: np.ndarray, targets: np.ndarray, c0: int) -> None:
    """Copy slot ``sources[k]`` to slot ``targets[k]``, in bounded windows.

    Every target is below every source, so no slot is written before it is read.
    Sources are read in windows of consecutive slots of at most
    ``COPY_BUDGET_BYTES``; consecutive targets are written in one call.
    """
    k = 0
    for window_slots in slot_windows(raw_data, sources, c0):
        first, end = int(window_slots[0]), k + len(window_slots)
        window = raw_data[first * c0 : (int(window_slots[-1]) + 1) * c0]
        by_slot = window.reshape((-1, c0, *window.shape[1:]))
        for start, stop in _consecutive(targets[k:end]):
            chunk_rows = by_slot[sources[k + start : k + stop] - first]
            target = int(targets[k + start])
            raw_data[target * c0 : (target + stop - start) * c0] = chunk_rows.reshape(
                (-1, *window.shape[1:])
            )
        k = end
    fastread.forget(raw_data)


def _consecutive(values: np.ndarray) -> list[tuple[int, int]]:
    """``[start, stop)`` index ranges of runs of consecutive integers in ``values``."""
    if not len(values):
        return []
    breaks = np.flatnonzero(np.diff(values) != 1) + 1
    bounds = [0, *breaks.tolist(), len(values)]
    return list(itertools.pairwise(bounds))


def _rows_of_slots(store: RawDataStore, slots: np.ndarray, n_slots: int) -> np.ndarray:
    """The hash-table rows of ``slots``, in that order."""
    rows = store.rows()
    row_of_slot = np.full(n_slots, -1, dtype=np.int64)
    row_of_slot[rows["shape"][:, 0] // store.chunks[0]] = np.arange(len(rows), dtype=np.int64)
    missing = slots[row_of_slot[slots] < 0]
    if len(missing):
        raise CorruptDataError(
            f"Expected a row in {store.hash_table.name!r} of {store.filename!r} for every "
            f"chunk a version uses. Got none for slots {missing.tolist()[:10]}; its chunks "
            f"were not compacted."
        )
    return rows[row_of_slot[slots]]


def _rewrite_hash_table(
    hash_table: h5py.Dataset, rows: np.ndarray, new_slots: np.ndarray, c0: int
) -> None:
    """Keep ``rows``, moved to ``new_slots``, sorted by slot.

    At least one (zeroed) row stays, as in a new table; largest_index is last.
    """
    order = np.argsort(new_slots)
    kept = rows[order]
    extent = kept["shape"][:, 1] - kept["shape"][:, 0]
    starts = new_slots[order] * c0
    kept["shape"][:, 0] = starts
    kept["shape"][:, 1] = starts + extent
    n_kept = max(len(rows), 1)
    hash_table.resize((n_kept,))
    if len(rows):
        hash_table[: len(rows)] = kept
    else:
        hash_table[:n_kept] = np.zeros(n_kept, dtype=hash_table.dtype)
    hash_table.attrs[layout.ATTR_LARGEST_INDEX] = np.int64(len(rows))
