"""Reading a local versioned file read-only while another process writes it.

HDF5 keeps what it read of a file (metadata, free space) in memory for as long as
the file is open, and never looks again: after a writer commits (above all after a
deletion, whose freed space later commits reuse), a handle opened before reads the
new bytes through the old metadata and gets another version's data, zeros, or
errors. So a read-only versioned file does not read through the handle it was
given: :class:`ReadGuard` reads through a private handle of its own
(:func:`h5vc.remote.open_private`), and every public read runs inside the guard
(:func:`reads`):

1. it takes the file's shared apply lock (:class:`h5vc.durable.files.ReadLock`),
   which keeps a writer from changing committed bytes until the read ends (a writer
   waiting for it goes first: readers queue behind it);
2. if the file changed since the last read, it opens a new private handle, reloads
   the :class:`~h5vc.versions.state.FileState` from it and bumps its ``generation``:
   views of committed objects open themselves again (a deleted version raises
   :class:`~h5vc.errors.VersionNotFoundError`).

Nested reads (a read calling reads) take the lock once. The caller's own handle
stays open and untouched; h5vc never reads through it.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import h5py

from h5vc.durable.files import ReadLock
from h5vc.remote import open_private, stream_descriptor
from h5vc.versions.refs import Refs

if TYPE_CHECKING:
    from h5vc.versions.state import FileState

__all__ = [
    "Generation",
    "KnownRoot",
    "ReadGuard",
    "file_of",
    "guard_for",
    "offer",
    "reads",
    "withdraw",
]

#: HDF5 drivers of handles whose file h5vc can lock and open again by name.
_LOCAL_DRIVERS = frozenset({"sec2", "stdio", "direct"})

F = TypeVar("F", bound=Callable[..., Any])


class Generation:
    """What was read of one read-only file's bytes as they are between two commit
    points, kept across its handles: a process opening an unchanged file again
    (``h5vc.open`` in a loop, a file cache reopening it) does not read and parse
    again what a handle opened before read of it. Found by the file's
    :attr:`~h5vc.durable.files.ReadLock.content_key` under its read lock (see
    :func:`generation_of`); what it holds is pure data of those bytes: the view of
    them (:class:`~h5vc.store.reading.FileView`) and, per versioned root
    (:meth:`root`), the versions found committed, the refs, ``data_version``."""

    __slots__ = ("_roots", "key", "view")

    def __init__(self, key: tuple[Any, ...]):
        self.key = key
        #: The view of the file's bytes: a FileView, None where there is none, or
        #: False until one was made.
        self.view: Any = False
        self._roots: dict[str, KnownRoot] = {}

    def root(self, name: str) -> KnownRoot:
        """What was read of the versioned root ``name`` (a path in the file)."""
        found = self._roots.get(name)
        if found is None:
            found = self._roots.setdefault(name, KnownRoot())
        return found

    def apart(self) -> Generation:
        """A copy of what is known, kept by no one else: what its user finds is not
        added to this one (see :meth:`ReadGuard.learn`)."""
        copied = Generation(self.key)
        view = self.view
        copied.view = view.apart() if view else view  # False (none made) or None stay
        copied._roots = {name: root.copy() for name, root in list(self._roots.items())}
        return copied


class KnownRoot:
    """What was read of one versioned root of a :class:`Generation` of a file."""

    __slots__ = ("committed", "data_version", "infos", "refs")

    def __init__(self) -> None:
        #: Names of versions found committed.
        self.committed: set[str] = set()
        #: Metadata of versions read, by name.
        self.infos: dict[str, Any] = {}
        #: ``(refs by kind, current branch)`` once read.
        self.refs: tuple[dict[str, dict[str, str]], str | None] | None = None
        self.data_version: int | None = None

    def copy(self) -> KnownRoot:
        copied = KnownRoot()
        copied.committed = set(self.committed)
        copied.infos = dict(self.infos)
        refs = self.refs
        if refs is not None:
            copied.refs = ({kind: dict(r) for kind, r in refs[0].items()}, refs[1])
        copied.data_version = self.data_version
        return copied


#: The last :class:`Generation` of each file read, by (device, inode), oldest first.
_GENERATIONS: dict[tuple[Any, ...], Generation] = {}
_GENERATIONS_MUTEX = threading.Lock()
#: Files whose last generation is kept (their maps stay open while kept).
KEPT_GENERATIONS = 8


def generation_of(lock: ReadLock) -> Generation | None:
    """The :class:`Generation` of the file of ``lock`` as it is in the block of it under
    way (a new one if it changed since the last one was kept); None where its stamp
    cannot tell a change (:attr:`~h5vc.durable.files.ReadLock.content_key`)."""
    key = lock.content_key
    if key is None:
        return None
    identity = key[:2]
    with _GENERATIONS_MUTEX:
        found = _GENERATIONS.pop(identity, None)
        if found is None or found.key != key:
            found = Generation(key)
        _GENERATIONS[identity] = found  # the newest last
        while len(_GENERATIONS) > KEPT_GENERATIONS:
            _GENERATIONS.pop(next(iter(_GENERATIONS)))
    return found


def kept_generation(lock: ReadLock) -> Generation | None:
    """The :class:`Generation` kept of the file of ``lock`` as it is in the block of it
    under way, if there is one (none is made); None also where its stamp cannot tell a
    change."""
    key = lock.content_key
    if key is None:
        return None
    with _GENERATIONS_MUTEX:
        found = _GENERATIONS.get(key[:2])
    return found if found is not None and found.key == key else None


def forget_generations() -> None:
    """Forget every kept :class:`Generation` (their maps close once unused)."""
    with _GENERATIONS_MUTEX:
        _GENERATIONS.clear()


#: Private handles opened by :func:`h5vc.open` under a read lock, by HDF5 file number:
#: the guard of their root takes the lock over and reads through the handle itself
#: until the file changes (see :func:`offer`).
_OFFERED: dict[Any, ReadLock] = {}


def offer(file: h5py.File, lock: ReadLock) -> None:
    """``file`` is a private handle (:func:`h5vc.remote.open_private`) opened while
    ``lock`` was held: the guard made for it next reads through it (not through a
    second handle) as long as the file is as it was then, and owns ``lock``. A lock
    still held when the guard is made is its first read's: the file cannot have
    changed since the handle was opened, and it is not looked at again."""
    _OFFERED[file.id.fileno] = lock


def withdraw(file: h5py.File) -> ReadLock | None:
    """The lock :func:`offer` gave with ``file`` if no guard took it."""
    try:
        return _OFFERED.pop(file.id.fileno, None)
    except ValueError:  # a closed file
        return None


def file_of(obj: h5py.HLObject) -> h5py.File:
    """The file of ``obj``: ``obj`` itself when it is one (h5py makes a new File
    object, at some cost, on every access to ``.file``)."""
    return obj if isinstance(obj, h5py.File) else obj.file


def guard_for(root: h5py.Group) -> ReadGuard | None:
    """A guard for the read-only root ``root`` of a local file, or None where the
    file cannot be locked or opened again by name (a URL, a caller's file object)."""
    file = file_of(root)
    if file.mode != "r":
        return None
    offered = withdraw(file)
    if offered is not None:
        return ReadGuard(str(file.filename), root.name or "/", root, offered, adopt=True)
    if file.driver not in _LOCAL_DRIVERS and stream_descriptor(file) is None:
        return None
    path = str(file.filename)
    if not os.path.isfile(path):
        return None
    try:
        lock = ReadLock(path)
    except OSError:  # HDF5 could open it, but not by name (permissions changed)
        return None
    try:
        works = lock.enter_if_works()
    except BaseException:
        lock.close()
        raise
    if not works:
        lock.close()
        return None  # a filesystem without byte-range locks: read as HDF5 does
    # Handed over held: the guard's first read (which its state makes at once) opens
    # the private handle under this lock session rather than a second one.
    return ReadGuard(path, root.name or "/", root, lock)


class ReadGuard:
    """The lock and the private handle of a read-only versioned root (see the module).

    ``with guard:`` is one read. :attr:`root` is the root group in the private handle
    (valid inside a read, and until the next read finds the file changed).
    """

    def __init__(
        self,
        path: str,
        root_name: str,
        anchor: h5py.Group,
        lock: ReadLock,
        *,
        adopt: bool = False,
    ):
        """``adopt``: ``anchor`` is h5vc's own private handle, opened under ``lock``:
        the first read goes through it if the file did not change since."""
        self.path = path
        self._adopt = adopt
        self.root_name = root_name
        #: The caller's root: h5vc does not read through it, but it closes with it.
        self.anchor = anchor
        self.root: h5py.Group | None = None
        self._lock = lock
        self._close_file: Callable[[], None] | None = None
        #: What is known of the file's bytes as the private handle read them (None:
        #: nothing kept, the stamp could not tell); set with every (re)load.
        self.kept: Generation | None = None
        #: Its part of this root (see :meth:`Generation.root`).
        self.known: KnownRoot | None = None
        #: (device, inode) of the file the private handle reads, while nothing is kept
        #: because the handle was opened when the stamp could not name the file's
        #: bytes (see :meth:`learn`); else None.
        self._unnamed: tuple[int, int] | None = None
        self._state: weakref.ref[FileState] | None = None
        self._reload: Callable[[FileState, h5py.Group], None] | None = None
        #: The lock was handed over held (see :func:`offer`, :func:`guard_for`): the
        #: first read, in the thread that holds it, takes it as it is.
        self._handed = lock.held
        self._local = threading.local()  # this thread's depth of reads, and if it holds
        self._mutex = threading.Lock()
        self._holders = 0  # threads of this process inside a read
        #: The file's stamp (:attr:`ReadLock.quiet`) at the last read under the lock,
        #: with the private handle and the state as that read left them; None when
        #: unknown or when they may have changed since.
        self.quiet: tuple[int, int, int] | None = None

    def unchanged(self, quiet: tuple[int, int, int]) -> bool:
        """True if no one wrote the file since it had the stamp ``quiet``
        (:meth:`ReadLock.unchanged`); False also forgets the stamp."""
        if self._lock.unchanged(quiet):
            return True
        if self.quiet == quiet:
            self.quiet = None
        return False

    def attach(self, state: FileState, reload: Callable[[FileState, h5py.Group], None]) -> None:
        """Serve ``state``: ``reload(state, root)`` loads it from a new private handle.
        The handle closes when the state is gone."""
        self._state = weakref.ref(state)
        self._reload = reload
        weakref.finalize(state, self.close)

    def __enter__(self) -> ReadGuard:
        local = self._local
        depth = getattr(local, "depth", 0)
        local.depth = depth + 1
        if depth:  # a read inside a read of this thread: the lock is held
            if self._lock.stale and local.held and self._holders == 1:
                # This thread wrote the file since (inside an h5vc.Reader batch).
                try:
                    self._lock.stale = False
                    self._open_again()
                except BaseException:
                    local.depth = depth
                    raise
            return self
        local.held = False
        if not self.anchor.id.valid:
            self._retire()  # the caller closed the file: reads raise ClosedError
            return self
        try:
            self._mutex.acquire()
            # Other threads of this process reading: join them, unless a writer
            # waits (then let them finish, and queue behind the writer).
            while self._holders and self._lock.writer_waiting():
                self._mutex.release()
                time.sleep(0.0005)
                self._mutex.acquire()
            try:
                if not self._holders:
                    handed, self._handed = self._handed, False
                    if not handed:
                        self._lock.__enter__()
                    try:
                        if self._adopt and self.root is None and (handed or not self._lock.changed):
                            self._adopted()
                        elif self._lock.changed or self.root is None:
                            self._open_again()
                        elif self._unnamed is not None:
                            self.learn()
                        self._adopt = False
                    except BaseException:
                        self.quiet = None
                        # The lock has taken the file's new stamp: without this, the
                        # next read would find no change and read the old handle on.
                        self._lock.stale = True
                        self._lock.__exit__(None, None, None)
                        raise
                    self.quiet = self._lock.quiet
                self._holders += 1
            finally:
                self._mutex.release()
            local.held = True
        except BaseException:
            local.depth = depth
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        local = self._local
        depth = local.depth - 1
        local.depth = depth
        if depth or not local.held:
            return
        with self._mutex:
            self._holders -= 1
            if not self._holders:
                self._lock.__exit__(None, None, None)

    def _retire(self) -> None:
        """The caller's file is closed: close the private handle, and make the views
        kept above open themselves again (they find the file closed)."""
        with self._mutex:
            if self._holders or self._close_file is None:
                return
            close, self._close_file = self._close_file, None
            self.kept = self.known = None
            self._unnamed = None
            self.quiet = None
            close()
            state = None if self._state is None else self._state()
            if state is not None:
                state.invalidate()

    def _know(self, file: h5py.File) -> None:
        """Find what is known of the file as it is in this read (see :class:`Generation`),
        ``file`` being the private handle just opened: nothing unless it reads the
        very file the lock stamps (not one put in its place since the lock was made)."""
        self.kept = self.known = None
        self._unnamed = None
        fd = stream_descriptor(file)
        if fd is None:
            return
        info = os.fstat(fd)
        identity = (info.st_dev, info.st_ino)
        generation = generation_of(self._lock)
        if generation is None:
            self._unnamed = identity
        elif generation.key[:2] == identity:
            self.kept = generation
            self.known = generation.root(self.root_name)

    def learn(self) -> None:
        """Take what earlier handles read of the file's bytes, for a private handle
        opened while its stamp could not name them (the file was written within a
        clock tick of the open: :attr:`~h5vc.durable.files.ReadLock.content_key`),
        once it can and the lock found the file unchanged since (the handle reads on
        as it is: its view of the file holds).

        What is kept of the bytes the stamp names now (:func:`kept_generation`) is
        theirs, so it holds for this handle too; a private copy of it is taken
        (:meth:`Generation.apart`): this handle read the file before its stamp named
        the bytes, so what it finds is not added to what later handles are given.
        The state's log learns the versions found committed, and its refs are those
        read then (they are of these bytes too). Nothing is done until
        another handle has read the file as it is now."""
        generation = kept_generation(self._lock)
        if generation is None or generation.key[:2] != self._unnamed:
            return
        self._unnamed = None
        self.kept = generation.apart()
        self.known = self.kept.root(self.root_name)
        state = None if self._state is None else self._state()
        if state is not None:
            state.log.learn(self.known)
            if self.known.refs is not None:
                state.refs = Refs(state.versions, known=self.known)

    def _adopted(self) -> None:
        """Read through the anchor (h5vc's own private handle, see ``adopt``): the
        state is loaded from it; it is not closed here (its opener closes it)."""
        self._know(file_of(self.anchor))
        state = None if self._state is None else self._state()
        if state is not None and self._reload is not None:
            self._reload(state, self.anchor)
        self._close_file = _keep_open
        self.root = self.anchor

    def _open_again(self) -> None:
        """Read the file anew (under the lock): a new private handle, the state
        reloaded from it, the old handle closed."""
        file, close = open_private(self.path)
        self._know(file)
        try:
            root = file if self.root_name == "/" else file[self.root_name]
            state = None if self._state is None else self._state()
            if state is not None and self._reload is not None:
                self._reload(state, root)
        except BaseException:
            self.kept = self.known = None
            self._unnamed = None
            close()
            raise
        old, self._close_file = self._close_file, close
        self.root = root
        if old is not None:
            old()

    def close(self) -> None:
        """Close the private handle and the lock's descriptor."""
        close, self._close_file = self._close_file, None
        self.root = None
        self.kept = self.known = None
        self._unnamed = None
        self.quiet = None
        if close is not None:
            close()
        self._lock.close()


def _keep_open() -> None:
    """What closes an adopted anchor here: nothing (its opener closes it)."""


def reads(method: F) -> F:
    """Run ``method`` (of an object whose ``_state`` is a FileState or None) as one
    read of the state's file, inside its :class:`ReadGuard` if it has one."""

    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        state = self._state
        guard = None if state is None else state.guard
        if guard is None:
            return method(self, *args, **kwargs)
        with guard:
            return method(self, *args, **kwargs)

    return guarded  # type: ignore[return-value]
