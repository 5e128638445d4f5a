"""The open state of one versioned root, shared by every handle on it, and the
transaction every write goes through.

:class:`FileState` is the process-wide registry entry of one root
(:meth:`FileState.shared`: every handle on the same root of the same open file gets
the same state).  It opens the layout (initializing a new one, repairing a legacy
one), holds the :class:`~h5vc.versions.log.VersionLog` and the
:class:`~h5vc.versions.refs.Refs`, and composes two owners of cached objects:

* ``state.stores``, a :class:`~h5vc.versions.stores.ChunkStores`: the chunk stores
  (opened once), the choice of the store a dataset writes to, and the undo list of
  stores written since the last commit;
* ``state.chunk_maps``, a :class:`~h5vc.versions.chunkmaps.ChunkMapCache`: the chunk
  maps of committed datasets, by name and by object address.

Both are dropped in one place, :meth:`FileState.drop_caches`, which bumps
:attr:`FileState.generation`: the layers above key their own caches (views of
committed objects) on it and never invalidate anything themselves.

Every change of the file is one :class:`Operation`, the transaction:
``with state.operation() as op:`` commits the caller's own writes first, brings the
layout up to date, and ends in a commit point; if anything fails, it rolls the file
back by its journal, or takes back the chunks written (the undo list), and drops the
caches.  No other code takes these steps.

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

from h5vc.durable import files as durable
from h5vc.errors import ReadOnlyError, UnsupportedFormatError, VersionNotFoundError
from h5vc.hdf5.damage import damaged
from h5vc.store import layout, timeindex, tree
from h5vc.versions.chunkmaps import ChunkMapCache
from h5vc.versions.log import VersionLog
from h5vc.versions.reading import file_of, guard_for
from h5vc.versions.refs import Refs
from h5vc.versions.stores import ChunkStores
from h5vc.versions.timestamps import attr_str, format_timestamp, now

__all__ = ["FileState", "Operation", "resolve_state"]


_logger = logging.getLogger(__name__)


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
        if state is not None and not state.closed:
            # A new handle reads ``current_version`` anew (the caller may have written
            # it through h5py meanwhile).
            state._current_version = None
            state._current_version_written = False
        else:
            if key[2] == "r+":  # the file's mode
                # A writable file the caller opened goes through the journal from now on.
                if isinstance(root, h5py.File):
                    durable.adopt(root)
                else:
                    durable.adopt(root.file, group_root=True)
                key = _state_key(root)
            state = _SHARED_STATES[key] = cls(root, data_version)
            if state.writable and _needs_repair(state.data_version):
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
        #: The outermost operation under way, if any (see :meth:`operation`).
        self._operation: Operation | None = None
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
            self.invalidate()  # views kept above are stale

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
        #: ``current_version`` of a writable file as h5vc last read or wrote it (None:
        #: read it from the file): see :attr:`current_version`.
        self._current_version: str | None = None
        #: Whether ``current_version`` is known to be stored as h5vc writes it (h5vc
        #: wrote it, or read it so, since the file was last read): then it is written
        #: over without checking its kind.
        self._current_version_written = False
        #: The file's name (error messages name it; read once, h5py makes a File
        #: object on every access to ``.file``).
        file = file_of(root)
        self.filename = str(file.filename)
        self.writable = file.mode == "r+"
        #: The journal the file is written through (None: not opened through h5vc, or
        #: read-only): fixed while the file is open, looked up anew when it is reopened.
        #: Held weakly, as durable holds it: the state keeps no closed file's journal.
        journal = durable.journal_of(root) if file.mode == "r+" else None
        self._journal = None if journal is None else weakref.ref(journal)
        if self.writable:
            durable.limit_metadata_cache(file)
        with damaged(self.filename, f"The versioned layout under {root.name!r}"):
            if self.writable and layout.VERSION_DATA not in root:
                tree.initialize(
                    root, format_timestamp(now()), data_version or layout.DATA_VERSION_H5VC
                )
            self.version_data, self.versions = tree.open_layout(root, self.filename)
            # A read-only file read before as it is now: what was read then holds.
            known = None if self.guard is None else self.guard.known
            if known is None or known.data_version is None:
                self.data_version = _data_version(self.versions)
                if known is not None:
                    known.data_version = self.data_version
            else:
                self.data_version = known.data_version
        if self.writable:
            # Read with data_version, while HDF5 holds the versions group's header:
            # read first later, it may have to be read from the file again.
            with contextlib.suppress(KeyError, OSError, ValueError, UnicodeError):
                self._current_version = self._read_current_version()
        if self.data_version not in layout.READABLE_DATA_VERSIONS:
            newer = self.data_version > layout.DATA_VERSION_H5VC
            raise UnsupportedFormatError(
                f"{self.filename!r} has data_version {self.data_version}; this "
                f"version of h5vc reads data_version "
                f"{sorted(layout.READABLE_DATA_VERSIONS)}."
                + (" It was written by a newer h5vc: upgrade h5vc." if newer else "")
            )
        self.log = VersionLog(
            self.versions, self.version_data, keep_opened=not self.writable, known=known
        )
        #: Appends committed versions to the time index (keeps its columns open).
        self.time_index = timeindex.IndexAppender(self.version_data)
        self.refs = Refs(self.versions, known=known)
        #: The chunk stores, the store choice and the undo list (they hold no strong
        #: reference to the state: it is freed once unused, as the registry expects).
        self.stores = ChunkStores(
            self.version_data,
            self.filename,
            version_group=weakref.WeakMethod(self.version_group),
            one_per_name=not self.h5vc_layout,
        )
        #: The chunk maps of committed datasets.
        self.chunk_maps = ChunkMapCache(self.stores, self.filename)
        #: The version being staged, if any: one at a time per root, because an
        #: abandoned stage takes back every chunk written since the last commit.
        self.staging: str | None = None

    @property
    def h5vc_layout(self) -> bool:
        """True for h5vc's own layout (merged runs, hard links, unmapped fill)."""
        return self.data_version in layout.H5VC_DATA_VERSIONS

    def check_writable(self, action: str) -> None:
        """Raise unless ``action`` may change the file."""
        filename = self.filename
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
        from h5vc.store import legacy

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

    @property
    def current_version(self) -> str:
        """The ``current_version`` attribute.  A writable file's is kept once read or
        written (only this process writes the file, through :meth:`write_current_version`;
        HDF5 scans every attribute of the ``versions`` group, one per ref, to read one):
        forgotten when the state reloads (:meth:`drop_caches`, a roll-back, a new handle)."""
        current = self._current_version
        if current is None:
            current = self._read_current_version()
            if self.writable:
                self._current_version = current
        return current

    def _read_current_version(self) -> str:
        """``current_version`` read from the file; one stored exactly as h5vc writes it
        is written over without checks from then on (a writable file's)."""
        plain = tree.plain_current_version(self.versions)
        if plain is None:
            return attr_str(tree.current_version(self.versions))
        self._current_version_written = self.writable
        return plain

    def set_current_version(self, name: str) -> None:
        if name != layout.FIRST_VERSION and name not in self.log:
            raise VersionNotFoundError(f"Version {name!r} not found.")
        self.write_current_version(name)

    def write_current_version(self, name: str) -> None:
        """Record ``name``, a committed version (not checked), as the current version."""
        self._current_version = None  # unknown if the write fails
        tree.set_current_version(self.versions, name, written=self._current_version_written)
        self._current_version_written = True
        self._current_version = name

    def version_group(self, name: str) -> h5py.Group:
        if name == layout.FIRST_VERSION:
            return self.versions[layout.FIRST_VERSION]
        if name not in self.log:
            raise VersionNotFoundError(f"Version {name!r} not found.")
        with damaged(self.filename, f"Version group {self.versions.name}/{name}"):
            return self.versions[name]

    def drop_caches(self) -> None:
        """Drop every cache (stores and chunk maps hold HDF5 objects open) and bump
        :attr:`generation`, so the views kept by the layers above are rebuilt: the one
        place caches are invalidated."""
        self.stores.clear()
        self.chunk_maps.clear()
        self._current_version = None
        self._current_version_written = False
        self.invalidate()

    def invalidate(self) -> None:
        """Make the views kept by the layers above stale (bump :attr:`generation`)."""
        self.generation += 1

    def forget(self) -> None:
        """Drop every cache (after the file was rewritten underneath)."""
        self.drop_caches()
        self.log.reload()
        self.refs.reload()

    @contextlib.contextmanager
    def operation(self, *, moves_chunks: bool = False) -> Iterator[Operation]:
        """One writing operation, all or nothing (see :class:`Operation`): every
        change of the file goes through it (a commit, ``delete_versions``,
        ``modify_metadata``, a merge, a branch or tag change).  ``moves_chunks``: the
        operation moves chunks or replaces stores, so every cache is dropped at its
        end, whatever happens.  An operation inside another is part of the outer one
        (one commit point, one roll-back)."""
        outer = self._operation
        op = Operation(self, moves_chunks=moves_chunks, outer=outer)
        if outer is not None:
            try:
                yield op
            finally:
                op.end()
            return
        self._operation = op
        try:
            op.begin()
            try:
                yield op
            finally:
                op.end()
            op.commit()
        except BaseException:
            op.abort()
            raise
        finally:
            self._operation = None

    def _reopened(self, old_key: tuple[Any, str, str], root: h5py.Group) -> None:
        """Load the state from ``root``, the file reopened at its last commit point
        (the handle of the failed operation, registered as ``old_key``, is gone); the
        registry finds it anew."""
        self.guard = None  # a writable file has none
        self._load(root)
        self.invalidate()  # views kept above are stale
        _SHARED_STATES.pop(old_key, None)
        _SHARED_STATES[_state_key(root)] = self


class Operation:
    """One writing operation on a :class:`FileState`: the transaction.

    Made by :meth:`FileState.operation`, which runs its steps:

    1. :meth:`begin`: the caller's own writes since the last commit point (through
       h5py, or the layout of a newly versioned file) become part of the last commit
       point, so a failing operation rolls back only itself; then the layout is
       brought up to date, so what is written next may use its features.
    2. The caller's writes.  Chunk stores written go on the undo list of
       ``state.stores``; a commit ends them there.
    3. :meth:`end`: with ``moves_chunks`` every cache is dropped, whatever happened.
    4. :meth:`commit`: a commit point of the file's journal; or, when anything
       failed, :meth:`abort`: a journaled file (opened by :func:`h5vc.open`, or a
       caller's ``h5py.File`` that h5vc took over) is restored to its last commit
       point and reopened (the state then starts afresh); elsewhere the chunks
       written since the last commit are taken back.  Either way every cache is
       dropped and :attr:`FileState.generation` bumped.

    An operation inside another (``outer`` is set) takes only step 3: the outer one
    commits or aborts for both.  :attr:`outcome` says how the operation ended.
    """

    __slots__ = ("journal", "moves_chunks", "outcome", "outer", "state")

    def __init__(self, state: FileState, *, moves_chunks: bool, outer: Operation | None):
        self.state = state
        self.moves_chunks = moves_chunks
        #: The operation this one is part of, if any.
        self.outer = outer
        #: "open"; then "committed", "rolled back" (to the journal's last commit
        #: point) or "undone" (the chunks written were taken back). An operation
        #: inside another ends "open": the outer one's outcome is its own.
        self.outcome = "open"
        #: The journal of the file (None: not opened through h5vc), set by :meth:`begin`.
        self.journal: Any = None

    def begin(self) -> None:
        state = self.state
        # The journal, looked up when the state loaded (each lookup asks HDF5 for the
        # file's number): both commit points are a flush of HDF5 and the journal's
        # commit, what durable.commit_point does.
        journal = self.journal = None if state._journal is None else state._journal()
        if journal is not None:
            h5py.h5f.flush(state.root.id)
            journal.commit()
        if state.data_version == layout.DATA_VERSION_H5VC_RUNS:  # upgrade the layout
            tree.write_attrs(
                state.versions, {layout.ATTR_DATA_VERSION: np.int64(layout.DATA_VERSION_H5VC)}
            )
            state.data_version = layout.DATA_VERSION_H5VC

    def end(self) -> None:
        if self.moves_chunks:
            self.state.forget()

    def commit(self) -> None:
        h5py.h5f.flush(self.state.root.id)
        if self.journal is not None:
            self.journal.commit()
        self.outcome = "committed"

    def abort(self) -> None:
        state = self.state
        old_key = _state_key(state.root)
        root = durable.roll_back(state.root)
        if root is not None:
            state._reopened(old_key, root)
            self.outcome = "rolled back"
            return
        state.stores.undo_writes()
        state.drop_caches()
        self.outcome = "undone"


def _needs_repair(data_version: int) -> bool:
    """Whether a writable file of ``data_version`` is repaired at open (see
    :meth:`FileState.repair_legacy`); the repairs load with the first writable open."""
    from h5vc.store import legacy

    return data_version in legacy.LEGACY_DATA_VERSIONS


_DATA_VERSION = layout.ATTR_DATA_VERSION.encode()


def _data_version(versions: h5py.Group) -> int:
    """The ``data_version`` attribute of ``versions`` (1 when it has none), read with
    HDF5's calls when it is a scalar integer (h5py's attribute objects cost several
    times more), else through h5py."""
    try:
        attr = h5py.h5a.open(versions.id, _DATA_VERSION)
    except KeyError:
        return 1
    if (
        attr.get_type().get_class() == h5py.h5t.INTEGER
        and attr.get_space().get_simple_extent_type() == h5py.h5s.SCALAR
    ):
        value = np.zeros((), dtype=np.int64)
        attr.read(value, mtype=h5py.h5t.NATIVE_INT64)
        return int(value)
    return int(versions.attrs[layout.ATTR_DATA_VERSION])


def _state_key(root: h5py.Group) -> tuple[Any, str, str]:
    file = file_of(root)
    return (file.id.fileno, root.name or "/", file.mode)


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
