"""The commit: plain data describing a new version, and its writer.

A commit is described by plain data built by the wrappers (:class:`GroupCommit`,
:class:`DatasetCommit`, :class:`Link`) and written by :func:`commit_version`.
Unchanged objects are hard-linked from the previous version, so a commit costs
O(what changed).  The version group is marked ``committed`` last; if anything
fails before, the partial group is removed and every earlier version is intact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import h5py
import numpy as np

from h5vc.durable import files as durable
from h5vc.errors import (
    CorruptDataError,
    InvalidVersionNameError,
    TimestampOrderError,
    VersionExistsError,
)
from h5vc.hashing import HASH_BATCH_BYTES, Base, PendingDigests, bytes_to_hash, hash_soon
from h5vc.staging import StagedChangesArray
from h5vc.store import (
    ChunkMap,
    RawDataStore,
    create_subgroup,
    create_version_group,
    create_virtual_dataset,
    delete_version_group,
    layout,
    read_attributes,
    remove_group,
    tree,
)
from h5vc.versions.log import VersionInfo, log_entry
from h5vc.versions.state import FileState
from h5vc.versions.timestamps import format_timestamp, now

__all__ = [
    "DatasetCommit",
    "GroupCommit",
    "Link",
    "check_new_version_name",
    "check_timestamp_order",
    "commit_version",
    "staged_chunk_map",
]


@dataclass
class Link:
    """Reuse the committed object ``parent[name]`` unchanged (a hard link in h5vc's layout)."""

    parent: h5py.Group
    name: str


@dataclass
class DatasetCommit:
    """A dataset whose data or attributes changed, to be written."""

    path: str  # from the version root, e.g. "group/data"
    array: StagedChangesArray
    dtype: np.dtype  # the declared dtype (h5py string dtypes keep their metadata)
    chunks: tuple[int, ...]
    fillvalue: Any
    attrs: dict[str, Any]
    filters: dict[str, Any] = field(default_factory=dict)
    #: The raw_data the staged chunks already sit on (None: a new dataset).
    raw_data: h5py.Dataset | None = None
    #: The slots in raw_data of the chunks of the version the dataset was staged
    #: from, and its shape: large staged chunks are hashed on from the chunks they
    #: were made from (:meth:`RawDataStore.bases_of`).
    base_slots: np.ndarray | None = None
    base_shape: tuple[int, ...] | None = None


@dataclass
class GroupCommit:
    """A group (or the version root) with its attributes and children."""

    attrs: dict[str, Any]
    children: dict[str, GroupCommit | DatasetCommit | Link] = field(default_factory=dict)


# -- the commit ------------------------------------------------------------------------


def check_new_version_name(state: FileState, name: Any) -> str:
    """``name`` if a new version may take it; a leftover uncommitted group is removed."""
    if not isinstance(name, str) or not name:
        raise InvalidVersionNameError(
            f"Expected a non-empty str as version name. Got {name!r} instead."
        )
    if "/" in name or name in (".", "..", layout.FIRST_VERSION):
        raise InvalidVersionNameError(
            f"Expected a version name without '/' that is not {layout.FIRST_VERSION!r}. "
            f"Got {name!r} instead."
        )
    if name in state.log:
        raise VersionExistsError(f"There is already a version with the name {name!r}.")
    if name in state.versions:
        # Left behind by a commit that was interrupted before its marker was written.
        delete_version_group(state.versions, name)
    return name


def check_timestamp_order(
    state: FileState, name: str, prev_version: str | None, timestamp: np.datetime64
) -> None:
    """Raise :class:`TimestampOrderError` unless ``timestamp`` is after the parent's."""
    if prev_version is None or prev_version == layout.FIRST_VERSION:
        return
    parent = state.log.info(prev_version).timestamp
    if timestamp <= parent:
        raise TimestampOrderError(
            f"Expected the timestamp of version {name!r} to be later than that of its "
            f"parent version {prev_version!r} ({format_timestamp(parent)}). Got "
            f"{format_timestamp(timestamp)} instead."
        )


def commit_timestamp(
    state: FileState, name: str, prev_version: str | None, timestamp: np.datetime64 | None
) -> np.datetime64:
    """The timestamp of a new version on ``prev_version``: later than the parent's.

    An explicit ``timestamp`` not after the parent's raises (lookups by time would
    find the wrong version); the current time is moved one microsecond past the
    parent's if the clock has not got there (two commits in one microsecond, or a
    parent stamped in the future).
    """
    if timestamp is not None:
        check_timestamp_order(state, name, prev_version, timestamp)
        return timestamp
    ts = now()
    if prev_version is None or prev_version == layout.FIRST_VERSION:
        return ts
    parent = state.log.info(prev_version).timestamp
    return ts if ts > parent else parent + np.timedelta64(1, "us")


def commit_version(
    state: FileState,
    name: str,
    prev_version: str | None,
    root: GroupCommit,
    *,
    timestamp: np.datetime64 | None = None,
    make_current: bool = True,
    message: str | None = None,
    author: str | None = None,
    merge_parents: tuple[str, ...] = (),
) -> VersionInfo:
    """Write ``root`` as the new version ``name``; all or nothing.

    Runs inside ``state.operation()``, which brings the layout up to date first and
    ends in a commit point (or takes everything back if this raises).
    ``merge_parents`` are the parents of a merge after ``prev_version``.

    A few large staged chunks are hashed on background threads from the start, while
    the version is written with the slots they would take as new chunks; they are
    placed (and their virtual datasets made again if a slot differs) before the
    version is marked committed (see :class:`_VersionWriter`)."""
    ts = commit_timestamp(state, name, prev_version, timestamp)
    writer = _VersionWriter(state, name, root)
    try:
        group = create_version_group(state.versions, name)
    except BaseException:
        writer.cancel()
        raise
    try:
        writer.write_group(group, root)
        metadata = {
            layout.ATTR_PREV_VERSION: prev_version or layout.FIRST_VERSION,
            layout.ATTR_TIMESTAMP: format_timestamp(ts),
            layout.ATTR_MESSAGE: message,
            layout.ATTR_AUTHOR: author,
            layout.ATTR_MERGE_PARENTS: (
                np.array(merge_parents, dtype=h5py.string_dtype()) if merge_parents else None
            ),
        }
        # The group has none of these attributes unless the root has one of the names.
        new = not (root.attrs.keys() & {*metadata, layout.ATTR_COMMITTED})
        # Written while the chunks hashed early may still be hashing; the marker goes
        # last, once every chunk is placed.
        tree.write_attrs(group, {k: v for k, v in metadata.items() if v is not None}, new=new)
        writer.place_all()
        tree.mark_committed(group, new=new)
    except BaseException:
        writer.cancel()
        delete_version_group(state.versions, name)  # the operation takes back the chunks written
        raise
    state.stores.end_writes(used=_dataset_paths(root))
    info = VersionInfo(name, prev_version, ts, message, author, tuple(merge_parents))
    if state.h5vc_layout:
        state.time_index.append(ts, name, log_entry(info))
    state.log.add(info)
    if make_current:
        state.write_current_version(name)
    return info  # the caller's ``state.operation()`` flushes at its commit point


def _dataset_paths(spec: GroupCommit) -> set[str]:
    """The paths of the datasets ``spec`` writes (not the linked ones)."""
    paths: set[str] = set()
    for child in spec.children.values():
        if isinstance(child, GroupCommit):
            paths |= _dataset_paths(child)
        elif isinstance(child, DatasetCommit):
            paths.add(child.path.strip("/"))
    return paths


def _copy_object(
    state: FileState, version: str, group: h5py.Group, name: str, obj: h5py.HLObject
) -> None:
    """The versioned-hdf5 layout keeps objects per version: recreate instead of linking."""
    if isinstance(obj, h5py.Group):
        sub = tree.copy_group(obj, group, name)
        for child_name, child in obj.items():
            _copy_object(state, version, sub, child_name, child)
        return
    source_version, path = _version_and_path(state, obj)
    store = state.stores.require(path, source_version)
    chunk_map = state.chunk_maps.get(source_version, path, obj)
    dset = create_virtual_dataset(
        group, name, store.raw_data, chunk_map, fillvalue=obj.fillvalue, merge=False
    )
    tree.write_attrs(dset, read_attributes(obj.attrs, frozenset()), new=True)
    state.chunk_maps.remember(version, path, dset, chunk_map)


def _version_and_path(state: FileState, obj: h5py.HLObject) -> tuple[str, str]:
    """(version, path inside the version) of an object opened from a version group."""
    prefix = state.versions.name.rstrip("/") + "/"
    name = obj.name or ""
    if not name.startswith(prefix) or "/" not in name[len(prefix) :]:
        raise CorruptDataError(
            f"Expected the object linked into the new version to lie in a version group "
            f"under {prefix!r} of {state.filename!r}. Got {name!r}."
        )
    version, path = name[len(prefix) :].split("/", 1)
    return version, path


#: Staged chunks are hashed on background threads while the version is written when
#: they hold at least this many bytes in all ...
EARLY_HASH_MIN_BYTES = 256 * 1024
#: ... each of at least this many (smaller ones are hashed faster than a thread is
#: handed one) ...
EARLY_HASH_MIN_CHUNK_BYTES = 64 * 1024
#: ... and at most this many in all (more are hashed in batches as they are written:
#: see :meth:`~h5vc.store.rawdata.RawDataStore.store_chunks`).
EARLY_HASH_MAX_BYTES = HASH_BATCH_BYTES


@dataclass
class _Changes:
    """The staged chunks of a dataset to commit, and their digests if being hashed."""

    coords: list[tuple[int, ...]]
    chunks: list[np.ndarray]
    digests: PendingDigests | None = None


@dataclass
class _Deferred:
    """A dataset written with the slots its new chunks were predicted to take."""

    group: h5py.Group
    name: str
    spec: DatasetCommit
    store: RawDataStore
    changes: _Changes
    predicted: np.ndarray  # the predicted slots of the staged chunks
    chunk_map: ChunkMap
    dataset: h5py.Dataset  # made with the predicted slots


class _VersionWriter:
    """Writes the groups and datasets of one new version.

    When the staged chunks are a few large ones (:func:`_hash_early`), hashing them
    (about 5 ms per MiB on a core without SHA instructions) would hold up the
    commit: they are hashed on background threads instead while each dataset is
    made with the slots its new chunks take when none is stored already, equal to
    another or all fill value (the next free slots of its store, in order).
    :meth:`place_all` then stores the chunks as :meth:`RawDataStore.store_chunks`
    does and makes a dataset again where a slot differs, so the version is the same
    as one written in order.  A chunk store's chunks are placed in the order of the
    datasets: a dataset stored at once first places those deferred on its store.
    """

    def __init__(self, state: FileState, version: str, root: GroupCommit):
        self.state = state
        self.version = version
        #: The staged chunks of each dataset, by ``id`` of its DatasetCommit.
        self.changes = _hash_early(state, root)
        self.deferred: list[_Deferred] = []
        #: New chunks predicted on each chunk store (by ``id``) by deferred datasets.
        self.predicted: dict[int, int] = {}

    def cancel(self) -> None:
        """Drop the hashes not started (the commit failed)."""
        for changes in self.changes.values():
            if changes.digests is not None:
                changes.digests.cancel()

    def write_group(self, group: h5py.Group, spec: GroupCommit) -> None:
        """Write the attributes and members of ``spec`` into ``group``, just created."""
        state = self.state
        if spec.attrs:
            tree.write_attrs(group, spec.attrs, new=True)
        link = tree.linker(group)
        for child_name, child in spec.children.items():
            if isinstance(child, Link):
                if state.h5vc_layout:  # a hard link: no copy, one call
                    link(child_name, child.parent, child.name)
                else:
                    _copy_object(state, self.version, group, child_name, child.parent[child.name])
            elif isinstance(child, GroupCommit):
                self.write_group(create_subgroup(group, child_name), child)
            else:
                self.write_dataset(group, child_name, child)

    def write_dataset(self, group: h5py.Group, name: str, spec: DatasetCommit) -> None:
        store = self.state.stores.writable(
            spec.path,
            dtype=spec.dtype,
            chunks=spec.chunks,
            fillvalue=spec.fillvalue,
            filters=spec.filters,
            raw_data=spec.raw_data,
        )
        changes = self.changes.get(id(spec))
        if changes is None or changes.digests is None:
            self.place(store)  # this store's deferred chunks go first
            chunk_map = _staged_chunk_map(
                spec.array, store, spec.fillvalue, changes, spec, self.state
            )
            self._create(group, name, spec, store, chunk_map)
            return
        after = self.predicted.get(id(store), 0)
        predicted = store.predicted_slots(len(changes.chunks), after)
        self.predicted[id(store)] = after + len(predicted)
        # Mappings past raw_data's end are fine: HDF5 stores a mapping's selections,
        # not the extent of its source (the chunks are written before the commit ends).
        chunk_map = _chunk_map(spec.array, changes.coords, predicted)
        dset = self._create(group, name, spec, store, chunk_map, remember=False)
        self.deferred.append(
            _Deferred(group, name, spec, store, changes, predicted, chunk_map, dset)
        )

    def _create(
        self,
        group: h5py.Group,
        name: str,
        spec: DatasetCommit,
        store: RawDataStore,
        chunk_map: ChunkMap,
        *,
        remember: bool = True,
    ) -> h5py.Dataset:
        """Make ``group[name]``, the virtual dataset of ``chunk_map``, and its attributes."""
        dset = create_virtual_dataset(
            group,
            name,
            store.raw_data,
            chunk_map,
            fillvalue=spec.fillvalue,
            merge=self.state.h5vc_layout,
            source=store,
        )
        bookkeeping = {
            layout.ATTR_CHUNKS: np.asarray(spec.chunks, dtype=np.int64),
            layout.ATTR_RAW_DATA: store.name,
        }
        tree.write_attrs(dset, {**bookkeeping, **spec.attrs}, new=True)
        if remember:
            self.state.chunk_maps.remember(
                self.version, spec.path, dset, chunk_map, plain=not spec.attrs
            )
        return dset

    def place(self, store: RawDataStore | None = None) -> None:
        """Store the chunks of the deferred datasets (those on ``store`` only, if
        given), in order."""
        if not self.deferred:
            return
        kept: list[_Deferred] = []
        for entry in self.deferred:
            if store is None or entry.store is store:
                self._place(entry)
            else:
                kept.append(entry)
        self.deferred = kept
        if store is not None:
            self.predicted.pop(id(store), None)

    def place_all(self) -> None:
        self.place()
        self.predicted.clear()

    def _place(self, entry: _Deferred) -> None:
        store, changes, spec = entry.store, entry.changes, entry.spec
        assert changes.digests is not None
        digests = changes.digests.result()
        # The chunks were copied where they were hashed: the store keeps those copies
        # for the next commit instead of copying the chunks again here.
        copies = changes.digests.copies()
        chunks = changes.chunks if copies is None else copies
        slots = store.place_chunks(
            chunks, digests, fillvalue=spec.fillvalue, owned=copies is not None
        )
        if np.array_equal(slots, entry.predicted):
            self.state.chunk_maps.remember(
                self.version, spec.path, entry.dataset, entry.chunk_map, plain=not spec.attrs
            )
            return
        # A chunk was stored already, equal to another or all fill value: the dataset
        # maps other slots than predicted.
        remove_group(entry.group, entry.name)
        chunk_map = _chunk_map(spec.array, changes.coords, slots)
        self._create(entry.group, entry.name, spec, store, chunk_map)


def _hash_early(state: FileState, root: GroupCommit) -> dict[int, _Changes]:
    """The staged chunks of every dataset ``root`` writes, by ``id`` of its
    DatasetCommit; those of datasets of large chunks are being hashed when they hold
    from :data:`EARLY_HASH_MIN_BYTES` to :data:`EARLY_HASH_MAX_BYTES` in all (copied
    first where the store keeps them for the next commit: see
    :meth:`~h5vc.store.rawdata.RawDataStore.place_chunks`)."""
    found: dict[int, _Changes] = {}
    eligible: list[tuple[DatasetCommit, _Changes]] = []
    total = 0
    for spec in _dataset_commits(root):
        changes = _staged_changes(spec.array)
        found[id(spec)] = changes
        if not changes.chunks or np.dtype(spec.dtype).kind == "O":
            continue
        chunk_bytes = math.prod(spec.chunks) * np.dtype(spec.dtype).itemsize
        nbytes = sum(chunk.nbytes for chunk in changes.chunks)
        if chunk_bytes >= EARLY_HASH_MIN_CHUNK_BYTES:
            eligible.append((spec, changes))
            total += nbytes
    if EARLY_HASH_MIN_BYTES <= total <= EARLY_HASH_MAX_BYTES:
        planned = []
        for spec, changes in eligible:
            store = (
                None if spec.raw_data is None else state.stores.holding(spec.path, spec.raw_data)
            )
            planned.append(
                (changes, None if store is None else _bases(state, spec, store, changes))
            )
        # Chunks grown by appended rows are hashed over those rows only: maybe too few.
        if sum(bytes_to_hash(c.chunks, bases) for c, bases in planned) >= EARLY_HASH_MIN_BYTES:
            for changes, bases in planned:
                nbytes = sum(chunk.nbytes for chunk in changes.chunks)
                changes.digests = hash_soon(
                    changes.chunks, copy=RawDataStore.keeps_written(nbytes), bases=bases
                )
    return found


def _dataset_commits(spec: GroupCommit) -> list[DatasetCommit]:
    """The datasets ``spec`` writes, in the order they are written."""
    found: list[DatasetCommit] = []
    for child in spec.children.values():
        if isinstance(child, GroupCommit):
            found += _dataset_commits(child)
        elif isinstance(child, DatasetCommit):
            found.append(child)
    return found


def _staged_changes(array: StagedChangesArray) -> _Changes:
    """The chunks staged on ``array`` (see :meth:`StagedChangesArray.changes`)."""
    if array.n_base_slabs > 1:
        raise ValueError(
            f"Expected a staged array with at most one base slab (raw_data). "
            f"Got {array.n_base_slabs}."
        )
    coords: list[tuple[int, ...]] = []
    chunks: list[np.ndarray] = []
    for chunk_coords, data in array.changes():
        coords.append(chunk_coords)
        chunks.append(data)
    return _Changes(coords, chunks)


def _chunk_map(
    array: StagedChangesArray, coords: list[tuple[int, ...]], new_slots: np.ndarray
) -> ChunkMap:
    """The chunk map of ``array`` whose staged chunks at ``coords`` take ``new_slots``.

    Chunks still on the base slab (raw_data) keep their slot; chunks on the fill
    slab are not stored (slot -1): the virtual dataset reads them as its fill value.
    """
    c0 = array.chunk_size[0]
    slab_indices = np.asarray(array.slab_indices)
    slots = np.where(slab_indices == 1, np.asarray(array.slab_offsets) // c0, -1)
    if coords:
        slots[tuple(np.asarray(coords, dtype=np.int64).T)] = new_slots
    return ChunkMap(tuple(array.shape), tuple(array.chunk_size), slots.astype(np.int64))


def _staged_chunk_map(
    array: StagedChangesArray,
    store: RawDataStore,
    fillvalue: Any,
    changes: _Changes | None,
    spec: DatasetCommit | None = None,
    state: FileState | None = None,
) -> ChunkMap:
    if changes is None:
        changes = _staged_changes(array)
    bases = None if spec is None or state is None else _bases(state, spec, store, changes)
    new_slots = store.store_chunks(changes.chunks, fillvalue=fillvalue, bases=bases)
    return _chunk_map(array, changes.coords, new_slots)


def _bases(
    state: FileState, spec: DatasetCommit, store: RawDataStore, changes: _Changes
) -> list[Base] | None:
    """The chunks the staged chunks of ``spec`` were made from, to hash on from."""
    if spec.base_slots is None or spec.base_shape is None or not changes.chunks:
        return None
    if np.dtype(spec.dtype).kind == "O":
        return None
    fd = durable.descriptor_of(state.root)
    return store.bases_of(changes.coords, changes.chunks, spec.base_slots, spec.base_shape, fd)


def staged_chunk_map(array: StagedChangesArray, store: RawDataStore, fillvalue: Any) -> ChunkMap:
    """Store the staged chunks of ``array`` and return the chunk map of the result.

    Chunks still on the base slab (raw_data) keep their slot; chunks on the fill
    slab and staged chunks equal to the fill value are not stored (slot -1): the
    virtual dataset reads them as its fill value.
    """
    return _staged_chunk_map(array, store, fillvalue, None)
