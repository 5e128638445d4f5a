"""The commit: plain data describing a new version, and its writer.

A commit is described by plain data built by the wrappers (:class:`GroupCommit`,
:class:`DatasetCommit`, :class:`Link`) and written by :func:`commit_version`.
Unchanged objects are hard-linked from the previous version, so a commit costs
O(what changed).  The version group is marked ``committed`` last; if anything
fails before, the partial group is removed and every earlier version is intact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import h5py
import numpy as np

from h5vc.errors import (
    CorruptDataError,
    InvalidVersionNameError,
    TimestampOrderError,
    VersionExistsError,
)
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
    ``merge_parents`` are the parents of a merge after ``prev_version``."""
    ts = commit_timestamp(state, name, prev_version, timestamp)
    group = create_version_group(state.versions, name)
    try:
        _write_group(state, name, group, root)
        metadata = {
            layout.ATTR_PREV_VERSION: prev_version or layout.FIRST_VERSION,
            layout.ATTR_TIMESTAMP: format_timestamp(ts),
            layout.ATTR_MESSAGE: message,
            layout.ATTR_AUTHOR: author,
            layout.ATTR_MERGE_PARENTS: (
                np.array(merge_parents, dtype=h5py.string_dtype()) if merge_parents else None
            ),
        }
        tree.mark_committed(group, {k: v for k, v in metadata.items() if v is not None})
    except BaseException:
        delete_version_group(state.versions, name)  # the operation takes back the chunks written
        raise
    state.stores.end_writes(used=_dataset_paths(root))
    info = VersionInfo(name, prev_version, ts, message, author, tuple(merge_parents))
    if state.h5vc_layout:
        state.time_index.append(ts, name, log_entry(info))
    state.log.add(info)
    if make_current:
        tree.set_current_version(state.versions, name)
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


def _write_group(state: FileState, version: str, group: h5py.Group, spec: GroupCommit) -> None:
    if spec.attrs:
        tree.write_attrs(group, spec.attrs)
    link = tree.linker(group)
    for child_name, child in spec.children.items():
        if isinstance(child, Link):
            if state.h5vc_layout:  # a hard link: no copy, one call
                link(child_name, child.parent, child.name)
            else:
                _copy_object(state, version, group, child_name, child.parent[child.name])
        elif isinstance(child, GroupCommit):
            _write_group(state, version, create_subgroup(group, child_name), child)
        else:
            _write_dataset(state, version, group, child_name, child)


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
    tree.write_attrs(dset, read_attributes(obj.attrs, frozenset()))
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


def _write_dataset(
    state: FileState, version: str, group: h5py.Group, name: str, spec: DatasetCommit
) -> None:
    store = state.stores.writable(
        spec.path,
        dtype=spec.dtype,
        chunks=spec.chunks,
        fillvalue=spec.fillvalue,
        filters=spec.filters,
        raw_data=spec.raw_data,
    )
    chunk_map = staged_chunk_map(spec.array, store, spec.fillvalue)
    dset = create_virtual_dataset(
        group,
        name,
        store.raw_data,
        chunk_map,
        fillvalue=spec.fillvalue,
        merge=state.h5vc_layout,
    )
    bookkeeping = {
        layout.ATTR_CHUNKS: np.asarray(spec.chunks, dtype=np.int64),
        layout.ATTR_RAW_DATA: store.raw_data.name,
    }
    tree.write_attrs(dset, {**bookkeeping, **spec.attrs})
    state.chunk_maps.remember(version, spec.path, dset, chunk_map)


def staged_chunk_map(array: StagedChangesArray, store: RawDataStore, fillvalue: Any) -> ChunkMap:
    """Store the staged chunks of ``array`` and return the chunk map of the result.

    Chunks still on the base slab (raw_data) keep their slot; chunks on the fill
    slab and staged chunks equal to the fill value are not stored (slot -1): the
    virtual dataset reads them as its fill value.
    """
    if array.n_base_slabs > 1:
        raise ValueError(
            f"Expected a staged array with at most one base slab (raw_data). "
            f"Got {array.n_base_slabs}."
        )
    c0 = array.chunk_size[0]
    slab_indices = np.asarray(array.slab_indices)
    slots = np.where(slab_indices == 1, np.asarray(array.slab_offsets) // c0, -1)
    coords: list[tuple[int, ...]] = []
    chunks: list[np.ndarray] = []
    for chunk_coords, data in array.changes():
        coords.append(chunk_coords)
        chunks.append(data)
    new_slots = store.store_chunks(chunks, fillvalue=fillvalue)
    if coords:
        slots[tuple(np.asarray(coords, dtype=np.int64).T)] = new_slots
    return ChunkMap(tuple(array.shape), tuple(array.chunk_size), slots.astype(np.int64))
