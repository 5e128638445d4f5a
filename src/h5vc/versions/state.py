"""The open state of one versioned root, shared by every handle on it.

:class:`FileState` keeps between calls: the HDF5 groups, one
:class:`~h5vc.store.rawdata.RawDataStore` per dataset path (its hash index loaded
once), a cache of chunk maps, the :class:`~h5vc.versions.log.VersionLog` and the
journal of chunk stores written since the last commit (to undo them).  It caches
nothing of the layers above; they key their own caches on :attr:`FileState.generation`.

:func:`resolve_state` is the one place where a public argument (a
``VersionedHDF5File`` or an h5py file/group) becomes the shared state.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import Iterator
from typing import Any

import h5py
import numpy as np

import h5vc.config as config
from h5vc.durable import files as durable
from h5vc.errors import (
    CorruptDataError,
    ReadOnlyError,
    UnsupportedFormatError,
    VersionNotFoundError,
)
from h5vc.hdf5.damage import damaged
from h5vc.hdf5.mappings import Mappings, stored_mappings
from h5vc.store import layout, legacy, tree
from h5vc.store.chunkmap import ChunkMap
from h5vc.store.rawdata import RawDataStore
from h5vc.store.vds import read_chunk_map
from h5vc.versions.cache import LRUCache
from h5vc.versions.log import VersionLog
from h5vc.versions.reading import guard_for
from h5vc.versions.refs import Refs
from h5vc.versions.timestamps import attr_str, format_timestamp, now

__all__ = ["CACHED_CHUNK_MAPS", "FileState", "resolve_state"]


_logger = logging.getLogger(__name__)

#: Chunk maps kept per open file.
CACHED_CHUNK_MAPS = config.CACHED_CHUNK_MAPS


class FileState:
    """The open state of one versioned root (a file or any group).

    Get it with :meth:`shared`: every :class:`~h5vc.VersionedHDF5File` over the same
    root of the same open file shares one state, so what one of them changes (a
    deletion moves chunks to other slots) is never hidden from another by its caches.
    """

    @classmethod
    def shared(cls, root: h5py.Group, data_version: int | None = None) -> FileState:
        """The state of ``root``, shared with every other user of it in this process.

        ``data_version`` is the layout of a root not versioned yet (default: h5vc's).
        """
        key = _state_key(root)
        state = _SHARED_STATES.get(key)
        if state is None or state.closed:
            if root.file.mode == "r+":
                # A writable file the caller opened goes through the journal from now on.
                if isinstance(root, h5py.File):
                    durable.adopt(root)
                else:
                    durable.adopt(root.file, group_root=True)
                key = _state_key(root)
            state = _SHARED_STATES[key] = cls(root, data_version)
            if state.writable and state.data_version in legacy.LEGACY_DATA_VERSIONS:
                try:
                    state.repair_legacy()
                except BaseException:
                    # The file is as it was (rolled back if h5vc opened it): the repair
                    # runs again on the next writable open.  A file h5vc reopened to
                    # roll it back is closed here: its opener holds the old handle.
                    _SHARED_STATES.pop(_state_key(state.root), None)
                    if state.root is not root and state.root.id.valid:
                        durable.close_file(state.root.file)
                    raise
        return state

    def __init__(self, root: h5py.Group, data_version: int | None = None):
        #: Incremented whenever the caches are dropped: caches kept by the layers
        #: above (views of committed objects) are valid while it is unchanged.
        self.generation = 0
        #: How deep in :meth:`operation` calls the caller is (0: in none).
        self._depth = 0
        #: A read-only local file is read through a private handle, under the file's
        #: read lock, reopened when the file changed (see :mod:`h5vc.versions.reading`).
        self.guard = guard_for(root)
        if self.guard is None:
            self._load(root, data_version)
            return
        self.guard.attach(self, FileState._reloaded)
        with self.guard:  # the first read opens the private handle and loads from it
            pass

    def _reloaded(self, root: h5py.Group) -> None:
        """Load the state from ``root``, a new handle of the file (it changed)."""
        loaded = hasattr(self, "root")
        self._load(root)
        if loaded:
            self.generation += 1  # views kept above are stale

    @property
    def closed(self) -> bool:
        """True once the h5py file the state was opened on is closed."""
        anchor = self.root if self.guard is None else self.guard.anchor
        return not anchor.id.valid

    def reading(self) -> contextlib.AbstractContextManager[Any]:
        """One read of the file: inside the read guard if it has one."""
        return contextlib.nullcontext() if self.guard is None else self.guard

    def _load(self, root: h5py.Group, data_version: int | None = None) -> None:
        self.root = root
        #: The file's name (error messages name it; read once, h5py makes a File
        #: object on every access to ``.file``).
        self.filename = str(root.file.filename)
        self.writable = root.file.mode == "r+"
        with damaged(self.filename, f"The versioned layout under {root.name!r}"):
            if layout.VERSION_DATA not in root and self.writable:
                tree.initialize(
                    root, format_timestamp(now()), data_version or layout.DATA_VERSION_H5VC
                )
            self.version_data, self.versions = tree.open_layout(root)
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
        self.refs = Refs(self.versions)
        self._stores: dict[str, RawDataStore] = {}
        #: Dataset path -> keys of its alternate stores (see :meth:`stores_of`).
        self._alternate_keys: dict[str, list[str]] = {}
        #: Stores written since the last commit (or abort), with what undoes the writes:
        #: a checkpoint, or for a store created meanwhile the topmost group created.
        self._written: dict[str, tuple[RawDataStore, tuple[int, int, int] | str]] = {}
        #: The version being staged, if any: one at a time per root, because an
        #: abandoned stage takes back every chunk written since the last commit.
        self.staging: str | None = None
        self._chunk_maps: LRUCache[tuple[str, str], ChunkMap] = LRUCache(CACHED_CHUNK_MAPS)
        # Object addresses are reused once an object is freed: this cache is dropped
        # whenever objects are deleted (drop_caches, after a failed commit or deletion).
        self._chunk_maps_by_address: LRUCache[int, ChunkMap] = LRUCache(CACHED_CHUNK_MAPS)

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

    def repair_legacy(self) -> None:
        """Rebuild the hash tables of a file in versioned-hdf5's layout before
        ``data_version`` 4, whose digests cannot be trusted, and mark it 4.

        One operation: in a file opened by :func:`h5vc.open` a crash or a failure
        leaves the file as it was (and the repair runs again on the next writable
        open).  Only the hash tables and ``data_version`` change.
        """
        old = self.data_version
        with self.operation():
            rebuilt = legacy.rebuild_hash_tables(self.version_data, self.versions, self.log.names())
            tree.write_attrs(
                self.versions, {layout.ATTR_DATA_VERSION: np.int64(layout.DATA_VERSION_COMPAT)}
            )
            self.data_version = layout.DATA_VERSION_COMPAT
        self.drop_caches()
        _logger.info(
            "Repaired %r: data_version %d (written by an older versioned-hdf5, hash "
            "tables not trusted) is now %d; rebuilt the hash tables of %d dataset(s) "
            "(%s) from their %d stored chunks, %d row(s) corrected.",
            self.filename,
            old,
            layout.DATA_VERSION_COMPAT,
            len(rebuilt.stores),
            ", ".join(rebuilt.stores) or "none",
            rebuilt.chunks,
            rebuilt.wrong_rows,
        )

    def upgrade_layout(self) -> None:
        """Bring an older h5vc layout up to date before writing: what is written next
        may use features of the current one."""
        if self.data_version == layout.DATA_VERSION_H5VC_RUNS:
            tree.write_attrs(
                self.versions, {layout.ATTR_DATA_VERSION: np.int64(layout.DATA_VERSION_H5VC)}
            )
            self.data_version = layout.DATA_VERSION_H5VC

    @property
    def current_version(self) -> str:
        return attr_str(self.versions.attrs[layout.ATTR_CURRENT_VERSION])

    def set_current_version(self, name: str) -> None:
        if name != layout.FIRST_VERSION and name not in self.log:
            raise VersionNotFoundError(f"Version {name!r} not found.")
        tree.set_current_version(self.versions, name)

    def version_group(self, name: str) -> h5py.Group:
        if name == layout.FIRST_VERSION:
            return self.versions[layout.FIRST_VERSION]
        if name not in self.log:
            raise VersionNotFoundError(f"Version {name!r} not found.")
        with damaged(self.filename, f"Version group {self.versions.name}/{name}"):
            return self.versions[name]

    def store(self, path: str) -> RawDataStore | None:
        """The chunk store of dataset ``path`` (relative to the version root), if any."""
        path = path.strip("/")
        cached = self._stores.get(path)
        if cached is not None:
            return cached
        where = f"The chunk store {self.version_data.name}/{path}"
        with damaged(self.filename, where):
            group = tree.find_group(self.version_data, path)
            if group is None or not (layout.RAW_DATA in group or layout.HASH_TABLE in group):
                return None
            store = RawDataStore(group)
        self._stores[path] = store
        return store

    def stores_of(self, path: str) -> list[tuple[str, RawDataStore]]:
        """``(store key, store)`` of every chunk store of dataset ``path``: its own
        (key ``path``) first, then those of the times it was created again with a
        dtype or chunks the earlier stores could not hold."""
        path = path.strip("/")
        found = []
        for key in [path, *self._alternates(path)]:
            store = self.store(key)
            if store is not None:
                found.append((key, store))
        return found

    def compatible_store(
        self, path: str, dtype: np.dtype, chunks: tuple[int, ...]
    ) -> RawDataStore | None:
        """The store a new dataset ``path`` of ``dtype`` and ``chunks`` goes to, if one
        exists (None: a new store will be created).

        In h5vc's layout a name is free after a delete: a dataset created again with
        another dtype or chunk shape gets a store of its own.  versioned-hdf5's
        layout (data_version 4) has one store per name, so there it raises
        :class:`~h5vc.errors.MetadataMismatchError`, as versioned-hdf5 does.
        """
        stores = self.stores_of(path)
        for _, store in stores:
            if _compatible(store, dtype, chunks):
                return store
        if stores and not self.h5vc_layout:
            stores[0][1].check_compatible(path, dtype, chunks)  # raises
        return None

    def writable_store(
        self,
        path: str,
        *,
        dtype: np.dtype,
        chunks: tuple[int, ...],
        fillvalue: Any,
        filters: dict[str, Any],
        raw_data: h5py.Dataset | None = None,
    ) -> RawDataStore:
        """The store of dataset ``path`` to write chunks to, created if there is none.

        ``raw_data`` is the store the staged dataset's chunks already sit on (it was
        opened from a version, or written through); otherwise the store is chosen
        by :meth:`compatible_store`.  Every store returned is remembered until
        :meth:`end_writes`, so :meth:`undo_writes` can take back what was written to it.
        """
        path = path.strip("/")
        if raw_data is not None:
            key = self._key_of_raw_data(path, raw_data)
            store = self.store(key)
        else:
            store = self.compatible_store(path, dtype, chunks)
            key = path if store is None else self._key_of_raw_data(path, store.raw_data)
        if store is not None:
            store.check_compatible(path, dtype, chunks)
            if key not in self._written:
                self._written[key] = (store, store.checkpoint())
            return store
        if self.store(path) is not None or key in self._written:
            key = tree.new_alternate_store(self.version_data, path)
            self._alternate_keys.pop(path, None)
        # What undo removes: the topmost group created with the store, or (when the
        # group exists already, e.g. it held the stores of a replaced subgroup's
        # datasets) the store's own raw_data and hash_table.
        undo = self._new_store_undo(key)
        try:
            store = RawDataStore.create(
                self.version_data,
                key,
                dtype=dtype,
                chunks=chunks,
                fillvalue=fillvalue,
                filters=filters,
            )
        except BaseException:
            self._remove_created(key, undo)
            raise
        self._stores[key] = store
        self._written[key] = (store, undo)
        return store

    def _alternates(self, path: str) -> list[str]:
        """Keys of the alternate stores of dataset ``path`` (cached)."""
        found = self._alternate_keys.get(path)
        if found is None:
            found = self._alternate_keys[path] = tree.alternate_stores(self.version_data, path)
        return found

    def _key_of_raw_data(self, path: str, raw_data: h5py.Dataset) -> str:
        """The store key of the store holding ``raw_data``."""
        prefix = (self.version_data.name or "").rstrip("/") + "/"
        name = raw_data.name or ""
        suffix = "/" + layout.RAW_DATA
        if name.startswith(prefix) and name.endswith(suffix):
            return name[len(prefix) : -len(suffix)]
        raise CorruptDataError(
            f"Expected the chunks of dataset {path!r} in a store under "
            f"{self.version_data.name!r} of {self.filename!r}. Got {name!r}."
        )

    def store_key(self, version: str, path: str, dataset: h5py.Dataset | None = None) -> str:
        """The key of the store that dataset ``path`` of committed ``version`` maps."""
        path = path.strip("/")
        if not self._alternates(path):
            return path
        if dataset is None:
            dataset = self.version_group(version)[path]
        return tree.store_key(self.version_data, path, dataset)

    def _new_store_undo(self, path: str) -> str:
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            if "/".join(parts[:i]) not in self.version_data:
                return "/".join(parts[:i])
        return ""  # every group exists: remove the store's datasets only

    def _remove_created(self, path: str, undo: str) -> None:
        """Remove what creating the store of ``path`` added (``undo`` as above)."""
        if undo:
            if undo in self.version_data:
                del self.version_data[undo]
            return
        group = self.version_data[path]
        for name in (layout.RAW_DATA, layout.HASH_TABLE):
            if name in group:
                del group[name]

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
            if isinstance(undo, str) and _dataset_path(path) not in used:
                self._stores.pop(path, None)
                self._alternate_keys.pop(_dataset_path(path), None)
                if undo:
                    del self.version_data[path]
                    tree.remove_empty_parents(self.version_data, path, stop=undo)
                else:
                    self._remove_created(path, undo)

    def undo_writes(self) -> None:
        """Take back every chunk stored since the last commit (a stage was abandoned or
        its commit failed): stores created meanwhile are removed, the others cut back."""
        written, self._written = self._written, {}
        for path, (store, undo) in reversed(written.items()):
            if isinstance(undo, str):
                self._remove_created(path, undo)
            else:
                store.rollback(undo)
        self.drop_caches()

    def require_store(
        self, path: str, version: str, dataset: h5py.Dataset | None = None
    ) -> RawDataStore:
        """The chunk store of dataset ``path`` (``dataset``, if given), which ``version``
        holds: it must exist."""
        store = self.store(self.store_key(version, path, dataset))
        if store is None:
            raise CorruptDataError(
                f"Expected a chunk store ({layout.RAW_DATA!r} and {layout.HASH_TABLE!r}) "
                f"at {self.version_data.name}/{path.strip('/')} of {self.filename!r} for "
                f"dataset {path!r} of version {version!r}. Got none."
            )
        if dataset is not None:
            _check_same_numbers(dataset, store)
        return store

    def mappings_before_open(
        self, version: str, path: str, group: h5py.Group, name: str
    ) -> Mappings | None:
        """The mappings of dataset ``group[name]`` (``path`` in ``version``) read from
        the file before HDF5 opens it (see :mod:`h5vc.hdf5.mappings`), unless its
        chunk map is known already (then HDF5 has opened it before)."""
        if self._chunk_maps.get((version, path.strip("/"))) is not None:
            return None
        try:
            if not group.id.links.exists(name.encode()):
                return None  # the caller reports the missing member
            info = group.id.links.get_info(name.encode())
        except (KeyError, RuntimeError):  # a path through a missing or damaged group
            return None
        if info.type == h5py.h5l.TYPE_HARD and self._chunk_maps_by_address.get(int(info.u)):
            return None
        return stored_mappings(group, name)

    def chunk_map(
        self, version: str, path: str, dataset: h5py.Dataset, mappings: Mappings | None = None
    ) -> ChunkMap:
        """The chunk map of ``dataset`` (``path`` in ``version``), parsed once (from
        ``mappings`` if given, see :meth:`mappings_before_open`).

        A dataset hard-linked into later versions is one object: its map is also found
        by object address, so a dataset edited every n-th commit is not parsed again.
        """
        key = (version, path.strip("/"))
        cached = self._chunk_maps.get(key)
        if cached is None:
            address = tree.object_address(dataset)
            cached = self._chunk_maps_by_address.get(address)
            if cached is None:
                where = f"Dataset {path!r} of version {version!r} ({dataset.name})"
                with damaged(self.filename, where):
                    cached = read_chunk_map(dataset, tree.dataset_chunks(dataset), mappings)
                self._check_slots(version, path, cached, dataset)
                self._chunk_maps_by_address[address] = cached
            self._chunk_maps[key] = cached
        return cached

    def _check_slots(
        self, version: str, path: str, chunk_map: ChunkMap, dataset: h5py.Dataset
    ) -> None:
        """Raise unless every slot of ``chunk_map`` lies in the dataset's raw_data."""
        highest = int(chunk_map.slots.max(initial=-1))
        if highest < 0:
            return
        store = self.require_store(path, version, dataset)
        rows = store.raw_data.shape[0]
        if highest * store.chunks[0] >= rows:
            raise CorruptDataError(
                f"Expected the virtual dataset {path!r} of version {version!r} in "
                f"{self.filename!r} to map rows of {store.raw_data.name!r} (it has "
                f"{rows}). Got a mapping of slot {highest}, rows from "
                f"{highest * store.chunks[0]}."
            )

    def remember_chunk_map(
        self, version: str, path: str, dataset: h5py.Dataset, chunk_map: ChunkMap
    ) -> None:
        """Cache the chunk map of ``dataset``, just written as ``path`` of ``version``."""
        self._chunk_maps[(version, path.strip("/"))] = chunk_map
        self._chunk_maps_by_address[tree.object_address(dataset)] = chunk_map

    def drop_caches(self) -> None:
        """Release every cached object (they hold HDF5 objects open)."""
        self._stores.clear()
        self._alternate_keys.clear()
        self._chunk_maps.clear()
        self._chunk_maps_by_address.clear()
        self.generation += 1

    def forget(self) -> None:
        """Drop every cache (after the file was rewritten underneath)."""
        self.drop_caches()
        self.log.reload()
        self.refs.reload()

    def _commit_outside_writes(self) -> None:
        """Make what was written since the last commit point outside h5vc's operations
        (the caller's own writes through h5py, the layout of a newly versioned file)
        part of it, so that a failing operation rolls back only itself."""
        if durable.journal_of(self.root) is not None:
            durable.commit_point(self.root)

    @contextlib.contextmanager
    def operation(self, *, moves_chunks: bool = False) -> Iterator[None]:
        """One writing operation, all or nothing: every change of the file goes
        through it (a commit, ``delete_versions``, ``modify_metadata``, a merge, a
        branch or tag change).

        It begins by making the caller's own writes since the last commit point part
        of it, and brings the layout up to date. It ends in a commit point. If it
        fails, a journaled file (opened by :func:`h5vc.open`, or a caller's
        ``h5py.File`` that h5vc took over) is restored to the last commit point and
        reopened (this state then starts afresh); elsewhere the chunks written since
        the last commit are taken back (:meth:`undo_writes`). ``moves_chunks``: the
        operation moves chunks or replaces stores, so every cache is dropped at its
        end, whatever happens. An operation inside another is part of the outer one
        (one commit point, one roll-back).
        """
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if moves_chunks:
                    self.forget()
            return
        self._depth = 1
        try:
            self._commit_outside_writes()
            self.upgrade_layout()
            try:
                yield
            finally:
                if moves_chunks:
                    self.forget()
            durable.commit_point(self.root)
        except BaseException:
            if not self.roll_back():
                self.undo_writes()
            raise
        finally:
            self._depth = 0

    def roll_back(self) -> bool:
        """Restore the file to its last commit point if h5vc opened it; True if so."""
        old_key = _state_key(self.root)
        root = durable.roll_back(self.root)
        if root is None:
            return False
        generation = self.generation
        self.__init__(root)  # type: ignore[misc]
        self.generation = generation + 1  # views kept above are stale
        _SHARED_STATES.pop(old_key, None)
        _SHARED_STATES[_state_key(root)] = self
        return True


def _compatible(store: RawDataStore, dtype: np.dtype, chunks: tuple[int, ...]) -> bool:
    """True if a dataset of ``dtype`` and ``chunks`` can share ``store``."""
    stored = store.raw_data.dtype
    same_dtype = np.dtype(dtype) == stored or (np.dtype(dtype).kind == "O" and stored.kind == "O")
    return tuple(chunks) == store.chunks and same_dtype


def _dataset_path(key: str) -> str:
    """The dataset path a store key belongs to (``ALT_STORES/p/@n`` belongs to ``p``)."""
    if key.startswith(layout.ALT_STORES + "/"):
        return key[len(layout.ALT_STORES) + 1 :].rpartition("/")[0]
    return key


def _state_key(root: h5py.Group) -> tuple[Any, str, str]:
    return (root.file.id.fileno, root.name or "/", root.file.mode)


#: The state of every versioned root in use, by (file number, root name, file mode).
_SHARED_STATES: weakref.WeakValueDictionary[tuple[int, str, str], FileState] = (
    weakref.WeakValueDictionary()
)


def resolve_state(f: Any) -> FileState:
    """The shared state of ``f``: a ``VersionedHDF5File`` (anything with a
    ``file_state``), the h5py file or group holding the versioned data, or the state."""
    if isinstance(f, FileState):
        return f
    if isinstance(f, h5py.Group):
        return FileState.shared(f)
    state = getattr(f, "file_state", None)  # raises ClosedError for a closed handle
    if isinstance(state, FileState):
        return state
    raise TypeError(
        f"Expected a VersionedHDF5File or an open h5py.File or h5py.Group. "
        f"Got {type(f).__name__} instead."
    )


def _check_same_numbers(dataset: h5py.Dataset, store: RawDataStore) -> None:
    """A committed dataset maps its store with the store's own datatype: a number type
    that differs (say in byte order) is a damaged header, which would read wrong values."""
    mine, stored = dataset.dtype, store.dtype
    if mine != stored and mine.kind in "biufc" and stored.kind in "biufc":
        raise CorruptDataError(
            f"{store.raw_data.name} in {store.filename!r} is damaged: its datatype "
            f"{stored} differs from {mine}, the datatype of {dataset.name}, which maps "
            f"it. Run h5vc.verify on the file; restore it from a copy if it was written."
        )
