"""The version DAG: metadata of committed versions, lookups and the commit itself.

:class:`FileState` is everything an open versioned root keeps between calls: the
HDF5 groups, one :class:`~h5vc.store.rawdata.RawDataStore` per dataset path
(its hash index loaded once), a cache of chunk maps, and the :class:`VersionLog`.

A commit is described by plain data built by the wrappers (:class:`GroupCommit`,
:class:`DatasetCommit`, :class:`Link`) and written by :func:`commit_version`.
Unchanged objects are hard-linked from the previous version, so a commit costs
O(what changed).  The version group is marked ``committed`` last; if anything
fails before, the partial group is removed and every earlier version is intact.
"""

from __future__ import annotations

import bisect
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TypeVar

import h5py
import numpy as np

from h5vc.errors import (
    InvalidTimestampError,
    NotVersionedError,
    ReadOnlyError,
    UnsupportedFormatError,
    VersionExistsError,
    VersionNotFoundError,
)
from h5vc.staging import StagedChangesArray
from h5vc.store import layout, timeindex
from h5vc.store.attributes import read_attributes
from h5vc.store.chunkmap import ChunkMap
from h5vc.store.rawdata import RawDataStore
from h5vc.store.vds import create_virtual_dataset, read_chunk_map

__all__ = [
    "VersionInfo",
    "VersionLog",
    "FileState",
    "GroupCommit",
    "DatasetCommit",
    "Link",
    "commit_version",
    "parse_timestamp",
    "format_timestamp",
    "object_address",
]


# -- timestamps ---------------------------------------------------------------------


def parse_timestamp(value: Any) -> np.datetime64:
    """A user timestamp as ``datetime64[us]`` in UTC; naive or non-UTC is an error."""
    if isinstance(value, np.datetime64):
        if np.isnat(value):
            raise InvalidTimestampError("Expected a valid timestamp. Got NaT instead.")
        return value.astype("datetime64[us]")
    if isinstance(value, datetime):
        offset = value.utcoffset()
        if offset is None:
            raise InvalidTimestampError(
                f"Expected a timezone-aware datetime in UTC. Got the naive datetime "
                f"{value.isoformat()} instead; pass tzinfo=datetime.timezone.utc."
            )
        if offset.total_seconds() != 0:
            raise InvalidTimestampError(
                f"Expected a datetime in UTC. Got {value.isoformat()} (UTC offset "
                f"{offset}) instead; convert it with .astimezone(datetime.timezone.utc)."
            )
        return np.datetime64(value.replace(tzinfo=None), "us")
    raise InvalidTimestampError(
        f"Expected a datetime.datetime or numpy.datetime64 timestamp. "
        f"Got {type(value).__name__} instead."
    )


def format_timestamp(ts: np.datetime64) -> str:
    """The stored form: ``'%Y-%m-%d %H:%M:%S.%f+0000'``."""
    text = str(ts.astype("datetime64[us]"))
    return text.replace("T", " ") + "+0000"


def _read_timestamp(text: str | bytes) -> np.datetime64:
    if isinstance(text, bytes):
        text = text.decode()
    if text.endswith("+0000"):
        return np.datetime64(text[:-5].replace(" ", "T"), "us")
    parsed = datetime.strptime(text, layout.TIMESTAMP_FORMAT)
    return parse_timestamp(parsed.astimezone(timezone.utc))


def _attr_str(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.ndarray) and value.shape == ():
        return _attr_str(value[()])
    return str(value)


# -- the version log -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VersionInfo:
    """Metadata of one committed version."""

    name: str
    prev_version: str | None
    timestamp: np.datetime64
    message: str | None = None
    author: str | None = None


class VersionLog:
    """Committed versions of one versioned root.

    Looking up one version reads only that version's group; listing versions or
    looking them up by time reads every version's metadata once and then keeps a
    sorted timestamp index up to date, so later lookups are a bisection.
    """

    def __init__(self, versions_group: h5py.Group, version_data: h5py.Group | None = None):
        self._group = versions_group
        self._version_data = version_data
        self._infos: dict[str, VersionInfo] = {}
        self._by_time: list[tuple[np.datetime64, str]] | None = None

    def reload(self) -> None:
        """Forget what was read; the next listing reads the file again."""
        self._infos = {}
        self._by_time = None

    def _load_all(self) -> list[tuple[np.datetime64, str]]:
        if self._by_time is None:
            infos: dict[str, VersionInfo] = {}
            for name in self._group:
                info = self._read(name)
                if info is not None:
                    infos[name] = info
            self._infos = infos
            self._by_time = sorted((info.timestamp, name) for name, info in infos.items())
        return self._by_time

    def _read(self, name: str) -> VersionInfo | None:
        """The metadata of ``name`` from the file, or None if it is not committed."""
        if name == layout.FIRST_VERSION or name not in self._group:
            return None
        attrs = self._group[name].attrs
        if not attrs.get(layout.ATTR_COMMITTED, False):
            return None  # left behind by an interrupted commit
        return _info_from_attrs(name, attrs)

    def add(self, info: VersionInfo) -> None:
        self._infos[info.name] = info
        if self._by_time is not None:
            bisect.insort(self._by_time, (info.timestamp, info.name))

    def remove(self, name: str) -> None:
        info = self._infos.pop(name, None)
        if info is not None and self._by_time is not None:
            self._by_time.remove((info.timestamp, name))

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if name in self._infos:
            return True
        if self._by_time is not None:
            return False
        info = self._read(name)
        if info is None:
            return False
        self._infos[name] = info
        return True

    def __len__(self) -> int:
        return len(self._load_all())

    def names(self) -> list[str]:
        """Committed version names, oldest first."""
        return [name for _, name in self._load_all()]

    def info(self, name: str) -> VersionInfo:
        if name not in self:
            raise VersionNotFoundError(f"Version {name!r} not found.")
        return self._infos[name]

    def ancestors(self, name: str) -> Iterator[str]:
        """``name``, its parent, grandparent, ... up to the first version."""
        current: str | None = name
        while current is not None:
            yield current
            current = self.info(current).prev_version

    def _index_usable(self) -> bool:
        """Whether the persisted time index lists exactly the committed versions."""
        vd = self._version_data
        if vd is None or not timeindex.has_index(vd):
            return False
        # An index entry is appended right after a commit's marker: a process
        # stopped in between leaves one entry short, and the scan is used instead.
        return timeindex.entry_count(vd) == len(self._group) - 1

    def at_time(self, ts: np.datetime64, exact: bool = False) -> str:
        """The version committed at ``ts``, or the latest one before it."""
        if self._by_time is None and self._index_usable():
            assert self._version_data is not None
            found = timeindex.lookup(self._version_data, ts, exact=exact)
            if found is None:
                what = "at" if exact else "at or before"
                raise VersionNotFoundError(f"No version was committed {what} {ts}.")
            return found
        by_time = self._load_all()
        key = (ts, chr(0x10FFFF))
        i = bisect.bisect_right(by_time, key)
        if i == 0 or (exact and by_time[i - 1][0] != ts):
            what = "at" if exact else "at or before"
            raise VersionNotFoundError(f"No version was committed {what} {ts}.")
        return by_time[i - 1][1]


def _info_from_attrs(name: str, attrs: h5py.AttributeManager) -> VersionInfo:
    prev = _attr_str(attrs.get(layout.ATTR_PREV_VERSION, layout.FIRST_VERSION))
    message = attrs.get(layout.ATTR_MESSAGE)
    author = attrs.get(layout.ATTR_AUTHOR)
    return VersionInfo(
        name=name,
        prev_version=None if prev in ("", layout.FIRST_VERSION) else prev,
        timestamp=_read_timestamp(attrs[layout.ATTR_TIMESTAMP]),
        message=None if message is None else _attr_str(message),
        author=None if author is None else _attr_str(author),
    )


# -- per-file state ------------------------------------------------------------------


K = TypeVar("K")


class LRUCache(dict[K, Any]):
    """A dict that forgets its least recently used entries beyond ``maxsize``."""

    def __init__(self, maxsize: int):
        super().__init__()
        self.maxsize = maxsize

    def get(self, key: K, default: Any = None) -> Any:
        if key not in self:
            return default
        value = self.pop(key)
        super().__setitem__(key, value)  # now the most recent
        return value

    def __setitem__(self, key: K, value: Any) -> None:
        self.pop(key, None)
        super().__setitem__(key, value)
        while len(self) > self.maxsize:
            del self[next(iter(self))]


#: Chunk maps (and committed views holding them) kept per open file.
CACHED_CHUNK_MAPS = 256


class FileState:
    """The open state of one versioned root (a file or any group).

    Get it with :meth:`shared`: every :class:`~h5vc.VersionedHDF5File` over the same
    root of the same open file shares one state, so what one of them changes (a
    deletion moves chunks to other slots) is never hidden from another by its caches.
    """

    @classmethod
    def shared(cls, root: h5py.Group) -> FileState:
        """The state of ``root``, shared with every other user of it in this process."""
        key = (root.file.id.fileno, root.name or "/", root.file.mode)
        state = _SHARED_STATES.get(key)
        if state is None or not state.root.id.valid:
            state = _SHARED_STATES[key] = cls(root)
        return state

    def __init__(self, root: h5py.Group):
        self.root = root
        self.writable = root.file.mode == "r+"
        if layout.VERSION_DATA not in root:
            if not self.writable:
                raise NotVersionedError(
                    f"Expected a versioned HDF5 file or group with a "
                    f"{layout.VERSION_DATA!r} group. {root.file.filename!r} (group "
                    f"{root.name!r}) has none and is open read-only, so it cannot be "
                    f"initialized."
                )
            _initialize(root)
        self.version_data: h5py.Group = root[layout.VERSION_DATA]
        if layout.VERSIONS not in self.version_data:
            raise NotVersionedError(
                f"Expected a {layout.VERSIONS!r} group in {self.version_data.name!r} of "
                f"{root.file.filename!r}. Got none: this is not a versioned file."
            )
        self.versions: h5py.Group = self.version_data[layout.VERSIONS]
        self.data_version = int(self.versions.attrs.get(layout.ATTR_DATA_VERSION, 1))
        if self.data_version not in layout.READABLE_DATA_VERSIONS:
            newer = self.data_version > layout.DATA_VERSION_H5VC
            raise UnsupportedFormatError(
                f"{root.file.filename!r} has data_version {self.data_version}; this "
                f"version of h5vc reads data_version "
                f"{sorted(layout.READABLE_DATA_VERSIONS)}."
                + (" It was written by a newer h5vc: upgrade h5vc." if newer else "")
            )
        self.log = VersionLog(self.versions, self.version_data)
        self._stores: dict[str, RawDataStore] = {}
        #: Stores written since the last commit (or abort), with what undoes the writes:
        #: a checkpoint, or for a store created meanwhile the topmost group created.
        self._written: dict[str, tuple[RawDataStore, tuple[int, int, int] | str]] = {}
        #: The version being staged, if any: one at a time per root, because an
        #: abandoned stage takes back every chunk written since the last commit.
        self.staging: str | None = None
        self._chunk_maps: LRUCache[tuple[str, str]] = LRUCache(CACHED_CHUNK_MAPS)
        # Object addresses are reused once an object is freed: this cache is dropped
        # whenever objects are deleted (drop_caches, after a failed commit or deletion).
        self._chunk_maps_by_address: LRUCache[int] = LRUCache(CACHED_CHUNK_MAPS)
        #: Read-only views of committed objects, keyed by (version, path); they
        #: never change until versions are deleted or rewritten (see forget()).
        self.committed_objects: LRUCache[tuple[str, str]] = LRUCache(CACHED_CHUNK_MAPS)

    @property
    def h5vc_layout(self) -> bool:
        """True for h5vc's own layout (merged runs, hard links, unmapped fill)."""
        return self.data_version in layout.H5VC_DATA_VERSIONS

    def check_writable(self, action: str) -> None:
        """Raise unless ``action`` may change the file."""
        filename = self.root.file.filename
        if not self.writable:
            raise ReadOnlyError(
                f"Cannot {action}: {filename!r} is open read-only. Open it with mode 'r+' or 'a'."
            )
        if self.data_version not in layout.WRITABLE_DATA_VERSIONS:
            raise UnsupportedFormatError(
                f"Cannot {action}: {filename!r} uses the old layout data_version "
                f"{self.data_version}, which is read-only here."
            )

    def upgrade_layout(self) -> None:
        """Bring an older h5vc layout up to date before writing: what is written next
        may use features of the current one."""
        if self.data_version == layout.DATA_VERSION_H5VC_RUNS:
            self.versions.attrs[layout.ATTR_DATA_VERSION] = np.int64(layout.DATA_VERSION_H5VC)
            self.data_version = layout.DATA_VERSION_H5VC

    @property
    def current_version(self) -> str:
        return _attr_str(self.versions.attrs[layout.ATTR_CURRENT_VERSION])

    def set_current_version(self, name: str) -> None:
        if name != layout.FIRST_VERSION and name not in self.log:
            raise VersionNotFoundError(f"Version {name!r} not found.")
        self.versions.attrs[layout.ATTR_CURRENT_VERSION] = name

    def version_group(self, name: str) -> h5py.Group:
        if name == layout.FIRST_VERSION:
            return self.versions[layout.FIRST_VERSION]
        if name not in self.log:
            raise VersionNotFoundError(f"Version {name!r} not found.")
        return self.versions[name]

    def store(self, path: str) -> RawDataStore | None:
        """The chunk store of dataset ``path`` (relative to the version root), if any."""
        path = path.strip("/")
        cached = self._stores.get(path)
        if cached is not None:
            return cached
        if f"{path}/{layout.RAW_DATA}" not in self.version_data:
            return None
        store = RawDataStore(self.version_data[path])
        self._stores[path] = store
        return store

    def writable_store(
        self,
        path: str,
        *,
        dtype: np.dtype,
        chunks: tuple[int, ...],
        fillvalue: Any,
        filters: dict[str, Any],
    ) -> RawDataStore:
        """The store of dataset ``path`` to write chunks to, created if there is none.

        Raises if an existing store has another dtype or chunk shape. Every store
        returned is remembered until :meth:`end_writes`, so :meth:`undo_writes` can
        take back what was written to it.
        """
        path = path.strip("/")
        store = self.store(path)
        if store is not None:
            store.check_compatible(path, dtype, chunks)
            if path not in self._written:
                self._written[path] = (store, store.checkpoint())
            return store
        parts = path.split("/")
        depth = next(
            i for i in range(1, len(parts) + 1) if "/".join(parts[:i]) not in self.version_data
        )
        store = RawDataStore.create(
            self.version_data,
            path,
            dtype=dtype,
            chunks=chunks,
            fillvalue=fillvalue,
            filters=filters,
        )
        self._stores[path] = store
        self._written[path] = (store, "/".join(parts[:depth]))
        return store

    def end_writes(self, used: set[str] | None = None) -> None:
        """The writes since the last call are committed: nothing to undo any more.

        Stores created meanwhile for a dataset that is not committed after all (it
        was deleted again before the commit) are removed; ``used`` lists the dataset
        paths the commit wrote.
        """
        written, self._written = self._written, {}
        if used is None:
            return
        for path, (_, undo) in written.items():
            if isinstance(undo, str) and path not in used:
                self._stores.pop(path, None)
                del self.version_data[path]
                _remove_empty_parents(self.version_data, path, stop=undo)

    def undo_writes(self) -> None:
        """Take back every chunk stored since the last commit (a stage was abandoned or
        its commit failed): stores created meanwhile are removed, the others cut back."""
        written, self._written = self._written, {}
        for store, undo in reversed(written.values()):
            if isinstance(undo, str):
                if undo in self.version_data:
                    del self.version_data[undo]
            else:
                store.rollback(undo)
        self.drop_caches()

    def chunk_map(self, version: str, path: str, dataset: h5py.Dataset) -> ChunkMap:
        """The chunk map of ``dataset`` (``path`` in ``version``), parsed once.

        A dataset hard-linked into later versions is one object: its map is also found
        by object address, so a dataset edited every n-th commit is not parsed again.
        """
        key = (version, path.strip("/"))
        cached = self._chunk_maps.get(key)
        if cached is None:
            address = object_address(dataset)
            cached = self._chunk_maps_by_address.get(address)
            if cached is None:
                cached = read_chunk_map(dataset, dataset_chunks(dataset))
                self._chunk_maps_by_address[address] = cached
            self._chunk_maps[key] = cached
        return cached

    def remember_chunk_map(
        self, version: str, path: str, dataset: h5py.Dataset, chunk_map: ChunkMap
    ) -> None:
        """Cache the chunk map of ``dataset``, just written as ``path`` of ``version``."""
        self._chunk_maps[(version, path.strip("/"))] = chunk_map
        self._chunk_maps_by_address[object_address(dataset)] = chunk_map

    def drop_caches(self) -> None:
        """Release every cached object (they hold HDF5 objects open)."""
        self._stores.clear()
        self._chunk_maps.clear()
        self._chunk_maps_by_address.clear()
        self.committed_objects.clear()

    def forget(self) -> None:
        """Drop every cache (after the file was rewritten underneath)."""
        self.drop_caches()
        self.log.reload()


#: The state of every versioned root in use, by (file number, root name, file mode).
_SHARED_STATES: weakref.WeakValueDictionary[tuple[int, str, str], FileState] = (
    weakref.WeakValueDictionary()
)


def _remove_empty_parents(root: h5py.Group, path: str, stop: str) -> None:
    """Remove the empty groups above ``path`` up to and including ``stop``."""
    parent = path.rpartition("/")[0]
    while parent and len(parent) >= len(stop) and parent in root and not len(root[parent]):
        del root[parent]
        parent = parent.rpartition("/")[0]


def dataset_chunks(dataset: h5py.Dataset) -> tuple[int, ...]:
    """The versioned chunk shape of a committed dataset (its ``chunks`` attribute)."""
    chunks = dataset.attrs.get(layout.ATTR_CHUNKS)
    if chunks is None:
        raise UnsupportedFormatError(
            f"Expected a {layout.ATTR_CHUNKS!r} attribute on the committed dataset "
            f"{dataset.name!r}. Got none: it was not written by a versioned store."
        )
    return tuple(int(c) for c in np.atleast_1d(chunks))


def _initialize(root: h5py.Group) -> None:
    versions = root.create_group(f"{layout.VERSION_DATA}/{layout.VERSIONS}")
    first = versions.create_group(layout.FIRST_VERSION)
    first.attrs[layout.ATTR_TIMESTAMP] = format_timestamp(_now())
    versions.attrs[layout.ATTR_CURRENT_VERSION] = layout.FIRST_VERSION
    versions.attrs[layout.ATTR_DATA_VERSION] = np.int64(layout.DATA_VERSION_H5VC)
    timeindex.write_index(root[layout.VERSION_DATA], [])


def _now() -> np.datetime64:
    return np.datetime64(datetime.now(timezone.utc).replace(tzinfo=None), "us")


# -- commit description ---------------------------------------------------------------


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
    base_map: ChunkMap | None = None  # chunk map of the dataset in the previous version
    filters: dict[str, Any] = field(default_factory=dict)


@dataclass
class GroupCommit:
    """A group (or the version root) with its attributes and children."""

    attrs: dict[str, Any]
    children: dict[str, GroupCommit | DatasetCommit | Link] = field(default_factory=dict)


# -- the commit ------------------------------------------------------------------------


def check_new_version_name(state: FileState, name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"Expected a non-empty str as version name. Got {name!r} instead.")
    if "/" in name or name in (".", "..", layout.FIRST_VERSION):
        raise ValueError(
            f"Expected a version name without '/' that is not {layout.FIRST_VERSION!r}. "
            f"Got {name!r} instead."
        )
    if name in state.log:
        raise VersionExistsError(f"There is already a version with the name {name!r}.")
    if name in state.versions:
        # Left behind by a commit that was interrupted before its marker was written.
        del state.versions[name]
    return name


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
) -> VersionInfo:
    """Write ``root`` as the new version ``name``; all or nothing."""
    ts = _now() if timestamp is None else timestamp
    state.upgrade_layout()
    group = state.versions.create_group(name)
    try:
        _write_group(state, name, group, root)
        attrs = group.attrs
        attrs[layout.ATTR_PREV_VERSION] = prev_version or layout.FIRST_VERSION
        attrs[layout.ATTR_TIMESTAMP] = format_timestamp(ts)
        if message is not None:
            attrs[layout.ATTR_MESSAGE] = message
        if author is not None:
            attrs[layout.ATTR_AUTHOR] = author
        attrs[layout.ATTR_COMMITTED] = np.bool_(True)  # the commit marker, written last
    except BaseException:
        del state.versions[name]
        state.undo_writes()  # also drops the caches: addresses of deleted objects get reused
        raise
    state.end_writes(used=_dataset_paths(root))
    if state.h5vc_layout:
        timeindex.append_entry(state.version_data, ts, name)
    info = VersionInfo(name, prev_version, ts, message, author)
    state.log.add(info)
    if make_current:
        state.versions.attrs[layout.ATTR_CURRENT_VERSION] = name
    state.root.file.flush()
    return info


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
    for key, value in spec.attrs.items():
        group.attrs[key] = value
    links = group.id.links
    for child_name, child in spec.children.items():
        if isinstance(child, Link):
            if state.h5vc_layout:  # a hard link: no copy, one call
                links.create_hard(child_name.encode(), child.parent.id, child.name.encode())
            else:
                _copy_object(state, version, group, child_name, child.parent[child.name])
        elif isinstance(child, GroupCommit):
            _write_group(state, version, group.create_group(child_name), child)
        else:
            _write_dataset(state, version, group, child_name, child)


def _copy_object(
    state: FileState, version: str, group: h5py.Group, name: str, obj: h5py.HLObject
) -> None:
    """The versioned-hdf5 layout keeps objects per version: recreate instead of linking."""
    if isinstance(obj, h5py.Group):
        sub = group.create_group(name)
        for key, value in read_attributes(obj.attrs, frozenset()).items():
            sub.attrs[key] = value
        for child_name, child in obj.items():
            _copy_object(state, version, sub, child_name, child)
        return
    source_version, path = _version_and_path(state, obj)
    store = state.store(path)
    assert store is not None, f"no raw_data for {path}"
    chunk_map = state.chunk_map(source_version, path, obj)
    dset = create_virtual_dataset(
        group, name, store.raw_data, chunk_map, fillvalue=obj.fillvalue, merge=False
    )
    for key, value in read_attributes(obj.attrs, frozenset()).items():
        dset.attrs[key] = value
    state.remember_chunk_map(version, path, dset, chunk_map)


def _version_and_path(state: FileState, obj: h5py.HLObject) -> tuple[str, str]:
    """(version, path inside the version) of an object opened from a version group."""
    prefix = state.versions.name.rstrip("/") + "/"
    assert obj.name is not None and obj.name.startswith(prefix)
    version, path = obj.name[len(prefix) :].split("/", 1)
    return version, path


def _write_dataset(
    state: FileState, version: str, group: h5py.Group, name: str, spec: DatasetCommit
) -> None:
    store = state.writable_store(
        spec.path,
        dtype=spec.dtype,
        chunks=spec.chunks,
        fillvalue=spec.fillvalue,
        filters=spec.filters,
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
    attrs = dset.attrs
    attrs[layout.ATTR_CHUNKS] = np.asarray(spec.chunks, dtype=np.int64)
    attrs[layout.ATTR_RAW_DATA] = store.raw_data.name
    for key, value in spec.attrs.items():
        attrs[key] = value
    state.remember_chunk_map(version, spec.path, dset, chunk_map)


def staged_chunk_map(array: StagedChangesArray, store: RawDataStore, fillvalue: Any) -> ChunkMap:
    """Store the staged chunks of ``array`` and return the chunk map of the result.

    Chunks still on the base slab (raw_data) keep their slot; chunks on the fill
    slab and staged chunks equal to the fill value are not stored (slot -1): the
    virtual dataset reads them as its fill value.
    """
    if array.n_base_slabs > 1:
        raise AssertionError("a staged dataset has at most one base slab (raw_data)")
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


def object_address(obj: h5py.HLObject) -> int:
    """The HDF5 object address: equal for every hard link to one object."""
    return int(h5py.h5o.get_info(obj.id).addr)
