"""Deleting versions and releasing the chunks only they referenced.

Design
------
``delete_versions`` validates every name first, then

1. re-points each surviving version whose parent is deleted to its nearest
   surviving ancestor (``__first_version__`` if none) and moves
   ``current_version`` the same way;
2. unlinks the deleted version groups;
3. *compacts* every dataset store: the slots still referenced by a surviving
   version are copied down, in order, over the released ones; ``raw_data`` is
   shrunk, ``hash_table`` keeps exactly the surviving rows (same digests, new
   ``start``/``stop``) and ``largest_index`` is written last.  Each surviving
   virtual dataset that points past the first released slot is rebuilt once
   with its slots renumbered by a numpy lookup (``new = remap[old]``) and
   relinked at every place that named it (hard links in h5vc's layout).

Compaction was chosen over a free-slot list because it keeps the on-disk format
unchanged (versioned-hdf5 writes the same compact tables, so compat files stay
readable by it), the hash index can never name a released slot, and a later
commit appends right after the survivors, into the space the released chunks
occupied.  HDF5 deallocates the shrunk chunks of ``raw_data``, so their stale
bytes are unreachable through any version; :func:`~h5vc.lifecycle.repack`
returns the space to the file system.

Memory stays bounded: slots are moved in windows of at most
``COPY_BUDGET_BYTES`` of raw data, and only chunk maps (one integer per chunk)
of one dataset path are held at a time, never a version's data.

A dataset that no surviving version contains loses its ``raw_data`` and
``hash_table`` (and their group once empty).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import h5py
import numpy as np

from h5vc.api import VersionedHDF5File
from h5vc.errors import CorruptDataError, VersionNotFoundError
from h5vc.lifecycle._tree import (
    DatasetObject,
    as_versioned,
    collect_datasets,
    rebuild_virtual_dataset,
    store_paths,
)
from h5vc.store import layout, timeindex
from h5vc.store.chunkmap import ChunkMap
from h5vc.versions import FileState

__all__ = ["delete_version", "delete_versions", "COPY_BUDGET_BYTES"]

#: Upper bound on raw data held in memory while slots are moved.
COPY_BUDGET_BYTES = 4 * 2**20


def delete_version(f: VersionedHDF5File | h5py.Group, version: str) -> None:
    """Delete one version; see :func:`delete_versions`."""
    delete_versions(f, [version])


def delete_versions(f: VersionedHDF5File | h5py.Group, versions: str | Iterable[str]) -> None:
    """Delete ``versions`` (a name or names) from the versioned file ``f``.

    ``f`` is a :class:`~h5vc.VersionedHDF5File` or the h5py file/group holding
    the versioned data.  Surviving versions whose parent is deleted point to
    their nearest surviving ancestor; ``current_version`` moves the same way if
    it is deleted.  Chunks that no surviving version references are released
    and their slots reused by later commits.  Deleting every version leaves an
    empty versioned file.

    Raises :class:`~h5vc.errors.VersionNotFoundError` for an unknown name and
    ``ValueError`` for ``__first_version__``; nothing changes in either case.
    """
    vf = as_versioned(f)
    state = vf._open_state
    state.check_writable("delete versions")
    doomed = _parse_names(state, versions)
    if not doomed:
        return
    survivors = [name for name in state.log.names() if name not in doomed]
    state.upgrade_layout()
    try:
        _repoint(state, doomed, survivors)
        for name in doomed:
            del state.versions[name]
        timeindex.remove_entries(state.version_data, doomed)
        state.root.file.flush()
        _release_chunks(state, survivors)
    finally:
        state.forget()  # chunks moved: cached hash indexes and chunk maps are stale
    state.root.file.flush()


def _parse_names(state: FileState, versions: str | Iterable[str]) -> set[str]:
    names = [versions] if isinstance(versions, str) else list(versions)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"Expected version names as str. Got {name!r} instead.")
        if name == layout.FIRST_VERSION:
            raise ValueError(
                f"Cannot delete {layout.FIRST_VERSION!r}: it is the empty root of every "
                f"versioned file. Expected names of committed versions."
            )
        if name not in state.log:
            raise VersionNotFoundError(
                f"Cannot delete version {name!r}: expected a committed version. Got a "
                f"name that is not in {state.root.file.filename!r}."
            )
    return set(names)


def _nearest_survivor(state: FileState, name: str | None, doomed: set[str]) -> str:
    while name is not None and name in doomed:
        name = state.log.info(name).prev_version
    return layout.FIRST_VERSION if name is None else name


def _repoint(state: FileState, doomed: set[str], survivors: list[str]) -> None:
    for name in survivors:
        prev = state.log.info(name).prev_version
        if prev in doomed:
            new_prev = _nearest_survivor(state, prev, doomed)
            state.versions[name].attrs[layout.ATTR_PREV_VERSION] = new_prev
    current = state.current_version
    if current in doomed:
        new_current = _nearest_survivor(state, current, doomed)
        state.versions.attrs[layout.ATTR_CURRENT_VERSION] = new_current


def _release_chunks(state: FileState, survivors: list[str]) -> None:
    datasets = collect_datasets(state, survivors)
    # Deepest paths first, so that a store group emptied here can be removed.
    for path in sorted(store_paths(state.version_data), key=lambda p: -p.count("/")):
        objects = datasets.get(path)
        if objects:
            compact_store(state, path, list(objects.values()))
        else:
            _drop_store(state.version_data, path)


def _drop_store(version_data: h5py.Group, path: str) -> None:
    group = version_data[path]
    del group[layout.RAW_DATA]
    del group[layout.HASH_TABLE]
    while len(group) == 0 and group.name != version_data.name:
        parent = group.parent
        del parent[group.name.rsplit("/", 1)[1]]
        group = parent


def compact_store(state: FileState, path: str, objects: list[DatasetObject]) -> None:
    """Keep only the slots of ``path`` that ``objects`` reference.

    With ``n`` slots kept, every kept slot at or past ``n`` moves into a released
    slot below ``n`` (lowest first).  Only the datasets that use a moved slot are
    rebuilt, so deleting a few versions rebuilds a few virtual datasets.
    """
    group = state.version_data[path]
    raw_data = group[layout.RAW_DATA]
    hash_table = group[layout.HASH_TABLE]
    n_rows = int(hash_table.attrs.get(layout.ATTR_LARGEST_INDEX, 0))
    maps = [obj.chunk_map() for obj in objects]
    used = _used_slots(maps)
    n_kept = len(used)
    c0 = maps[0].chunks[0]
    # A write interrupted before its hash-table rows leaves slots without rows at
    # the end of raw_data; they are released like unused ones.
    n_slots = max(raw_data.shape[0] // c0, n_rows)
    if n_kept == n_slots:
        return
    kept_rows = _rows_of_slots(hash_table, used, c0, n_rows, n_slots)
    sources = used[used >= n_kept]  # kept slots past the end: they move down
    is_used = np.zeros(n_kept, dtype=bool)
    is_used[used[used < n_kept]] = True
    targets = np.flatnonzero(~is_used)  # released slots below the end: they are refilled
    move_slots(raw_data, sources, targets, c0)
    raw_data.resize(n_kept * c0, axis=0)
    remap = np.arange(max(n_slots, 1), dtype=np.int64)
    remap[sources] = targets
    _rewrite_hash_table(hash_table, kept_rows, remap[used], c0)
    if not len(sources):
        return
    for obj, chunk_map in zip(objects, maps):
        if not np.any(chunk_map.slots >= n_kept):
            continue
        slots = np.where(chunk_map.slots >= 0, remap[np.maximum(chunk_map.slots, 0)], -1)
        new_map = ChunkMap(chunk_map.shape, chunk_map.chunks, slots)
        rebuild_virtual_dataset(obj, raw_data, new_map, merge=state.h5vc_layout)


def _used_slots(maps: list[ChunkMap]) -> np.ndarray:
    if not maps:
        return np.zeros(0, dtype=np.int64)
    stored = [m.slots[m.slots >= 0] for m in maps]
    return np.unique(np.concatenate(stored)).astype(np.int64)


def _slot_bytes(raw_data: h5py.Dataset, c0: int) -> int:
    per_element = raw_data.dtype.itemsize if raw_data.dtype.kind != "O" else 64
    return max(1, c0 * int(np.prod(raw_data.shape[1:], dtype=np.int64)) * per_element)


def move_slots(raw_data: h5py.Dataset, sources: np.ndarray, targets: np.ndarray, c0: int) -> None:
    """Copy slot ``sources[k]`` to slot ``targets[k]``, in bounded windows.

    Every target is below every source, so no slot is written before it is read.
    Sources are read in windows of consecutive slots of at most
    ``COPY_BUDGET_BYTES``; consecutive targets are written in one call.
    """
    budget_slots = max(1, COPY_BUDGET_BYTES // _slot_bytes(raw_data, c0))
    k = 0
    while k < len(sources):
        first = int(sources[k])
        end = max(int(np.searchsorted(sources, first + budget_slots)), k + 1)
        window = raw_data[first * c0 : (int(sources[end - 1]) + 1) * c0]
        by_slot = window.reshape((-1, c0, *window.shape[1:]))
        for start, stop in _consecutive(targets[k:end]):
            chunk_rows = by_slot[sources[k + start : k + stop] - first]
            target = int(targets[k + start])
            raw_data[target * c0 : (target + stop - start) * c0] = chunk_rows.reshape(
                (-1, *window.shape[1:])
            )
        k = end


def _consecutive(values: np.ndarray) -> list[tuple[int, int]]:
    """``[start, stop)`` index ranges of runs of consecutive integers in ``values``."""
    if not len(values):
        return []
    breaks = np.flatnonzero(np.diff(values) != 1) + 1
    bounds = [0, *breaks.tolist(), len(values)]
    return list(itertools.pairwise(bounds))


def _rows_of_slots(
    hash_table: h5py.Dataset, slots: np.ndarray, c0: int, n_rows: int, n_slots: int
) -> np.ndarray:
    """The hash-table rows of ``slots``, in that order."""
    rows = hash_table[:n_rows]
    row_of_slot = np.full(n_slots, -1, dtype=np.int64)
    row_of_slot[rows["shape"][:, 0] // c0] = np.arange(n_rows, dtype=np.int64)
    missing = slots[row_of_slot[slots] < 0]
    if len(missing):
        raise CorruptDataError(
            f"Expected a row in {hash_table.name!r} for every chunk a version uses. "
            f"Got none for slots {missing.tolist()[:10]}; its chunks were not compacted."
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
