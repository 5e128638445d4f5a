"""Opening versioned files so that no crash, failed write or second writer costs a
committed version.

Files opened for writing by :func:`h5vc.open` go through a :class:`~h5vc.durable.journal.
JournaledFile`: h5vc marks a *commit point* at the end of every commit,
``delete_versions`` and ``modify_metadata`` (:func:`commit_point`), and an operation
that fails is undone by :func:`roll_back`, which restores the file to the last commit
point and reopens it. A leftover journal is rolled back whenever the file is opened.

One process writes a file at a time: a writer holds an open-file-description lock on
a byte range far beyond the end of the file (so HDF5's own ``flock`` of readers is not
involved); a second writer gets :class:`~h5vc.errors.WriterActiveError`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import os
import struct
import threading
import time
from typing import Any

import h5py

from h5vc.durable.journal import JournaledFile, journal_path, recover
from h5vc.errors import WriterActiveError

__all__ = [
    "close_file",
    "commit_point",
    "journal_of",
    "ReadLock",
    "open_file",
    "recover_abandoned",
    "roll_back",
]

_WRITER_BYTE = 1 << 62  # beyond any real file: the locks never cover data
#: Held exclusively while bytes of the last commit point change on disk, shared by
#: readers while they read (:class:`ReadLock`).
_APPLY_BYTE = _WRITER_BYTE + 1
#: Held exclusively by a writer waiting for :data:`_APPLY_BYTE`; readers pass through
#: it (shared) before they take theirs, so a waiting writer is never starved.
_TURNSTILE_BYTE = _WRITER_BYTE + 2
_SET_LOCK = getattr(fcntl, "F_OFD_SETLK", fcntl.F_SETLK)
_GET_LOCK = getattr(fcntl, "F_OFD_GETLK", fcntl.F_GETLK)
_WAIT_LOCK = getattr(fcntl, "F_OFD_SETLKW", fcntl.F_SETLKW)


def _request(kind: int, byte: int) -> bytes:
    """A ``struct flock`` for one byte (l_pid 0, as open-file-description locks want)."""
    return struct.pack("hh4xqqi4x", kind, os.SEEK_SET, byte, 1, 0)


# The requests a reader makes on every read, packed once.
_SHARE_APPLY = _request(fcntl.F_RDLCK, _APPLY_BYTE)
_RELEASE_APPLY = _request(fcntl.F_UNLCK, _APPLY_BYTE)
_ASK_TURNSTILE = _request(fcntl.F_WRLCK, _TURNSTILE_BYTE)
_UNLOCKED = struct.pack("h", fcntl.F_UNLCK)


class _Open:
    """What h5vc keeps for a file it opened for writing."""

    def __init__(self, journal: JournaledFile, lock_fd: int):
        self.journal = journal
        self.lock_fd = lock_fd


#: HDF5's file number -> the journal and lock of a file h5vc opened for writing.
_OPEN: dict[Any, _Open] = {}
#: Real paths this process has open for writing (a second writer here is refused too).
_WRITING: set[str] = set()


def _lock(fd: int, kind: int, blocking: bool = False, byte: int = _WRITER_BYTE) -> bool:
    """Take (or with ``F_UNLCK`` release) a lock on one byte; False if it is taken."""
    command = _WAIT_LOCK if blocking else _SET_LOCK
    try:
        fcntl.fcntl(fd, command, _request(kind, byte))
    except OSError as err:
        if err.errno in (errno.EACCES, errno.EAGAIN):
            return False
        raise
    return True


def _apply_lock(fd: int) -> Any:
    """The writer's side of the apply lock of the file open as ``fd``.

    A writer about to change committed bytes first takes the turnstile byte, so that
    readers arriving meanwhile wait behind it; then it waits for the readers already
    reading to finish, and lets the turnstile go once it holds the apply lock.
    """
    info = os.fstat(fd)
    identity = (info.st_dev, info.st_ino)

    suspended: list[ReadLock] = []

    def change(take: bool) -> None:
        if not take:
            mark_applied(fd)
            _lock(fd, fcntl.F_UNLCK, byte=_APPLY_BYTE)
            while suspended:
                suspended.pop()._resume()
            return
        # Reads of the file by this very thread (an h5vc.Reader batch around the
        # write) would make the writer wait for itself: they step aside, and read
        # the file anew afterwards.
        with _READING_MUTEX:
            suspended.extend(_READING.get(identity, {}).get(threading.get_ident(), ()))
        for lock in suspended:
            lock._suspend()
        _lock(fd, fcntl.F_WRLCK, blocking=True, byte=_TURNSTILE_BYTE)
        try:
            _lock(fd, fcntl.F_WRLCK, blocking=True, byte=_APPLY_BYTE)
        finally:
            _lock(fd, fcntl.F_UNLCK, byte=_TURNSTILE_BYTE)

    return change


#: Extended attribute a writer rewrites whenever it leaves a commit point (or a
#: roll-back): readers compare it to tell a commit from appends nothing refers to yet.
_APPLIED_ATTR = "user.h5vc.applied"
_marks = itertools.count()


def mark_applied(fd: int) -> None:
    """Mark the file open as ``fd`` as changed at a commit point (readers see a new
    mark). On a filesystem without user attributes, readers go by size and time."""
    mark = struct.pack("qqq", time.time_ns(), os.getpid(), next(_marks))
    try:
        os.setxattr(fd, _APPLIED_ATTR, mark)
    except OSError:
        with contextlib.suppress(OSError):
            os.removexattr(fd, _APPLIED_ATTR)  # an old mark would hide this change


def _applied(fd: int) -> bytes | None:
    """The mark of the last commit point, if the file has one."""
    try:
        return os.getxattr(fd, _APPLIED_ATTR)
    except OSError:
        return None


#: (device, inode) of a file -> thread identifier -> the :class:`ReadLock` s of the
#: file that thread of this process holds (a writer in it would wait for itself).
_READING: dict[tuple[int, int], dict[int, list[ReadLock]]] = {}
_READING_MUTEX = threading.Lock()


class ReadLock:
    """Keeps a writer from changing committed bytes while a reader reads.

    ``with lock:`` waits while a writer is at a commit point, or waits for one
    (writers go first: a reader arriving while a writer waits for the readers to
    finish waits behind it), then holds writers off until the block ends.
    :attr:`changed` tells whether the file changed since the last time it was looked
    at under the lock (HDF5's cached view of it is then stale). Blocks of one lock
    do not nest.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        self._fd = os.open(self.path, os.O_RDONLY)
        info = os.fstat(self._fd)
        self._identity = (info.st_dev, info.st_ino)
        self._seen: tuple[int, int, bytes | None] | None = None
        self._settled = False
        self._holder: int | None = None
        self.changed = True
        #: Set when this thread wrote the file in the middle of the read (see
        #: :func:`_apply_lock`): what was read of it before is stale.
        self.stale = False

    def __enter__(self) -> ReadLock:
        holder = threading.get_ident()
        if self.writer_waiting() and holder not in _READING.get(self._identity, ()):
            # Behind the turnstile: a writer holds it while it waits. (Not in a thread
            # reading the file already: the writer waits for that read to end.)
            _lock(self._fd, fcntl.F_RDLCK, blocking=True, byte=_TURNSTILE_BYTE)
            _lock(self._fd, fcntl.F_UNLCK, byte=_TURNSTILE_BYTE)
        fcntl.fcntl(self._fd, _WAIT_LOCK, _SHARE_APPLY)
        self._holder = holder
        with _READING_MUTEX:
            _READING.setdefault(self._identity, {}).setdefault(holder, []).append(self)
        info = os.fstat(self._fd)
        stamp = (info.st_size, info.st_mtime_ns, _applied(self._fd))
        # A change within the clock tick of the stamp seen last leaves size and time
        # the same: they are trusted once older than any tick, or while the mark of
        # h5vc's writers (changed at every commit point) is there and the same.
        self.changed = stamp != self._seen or self.stale
        if not self._settled and stamp[2] is None:
            self.changed = True
        self.stale = False
        self._seen = stamp
        self._settled = time.time_ns() - info.st_mtime_ns > 50_000_000
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.fcntl(self._fd, _SET_LOCK, _RELEASE_APPLY)
        holder, self._holder = self._holder, None
        if holder is None:
            return
        with _READING_MUTEX:
            threads = _READING.get(self._identity, {})
            held = threads.get(holder, [])
            if self in held:
                held.remove(self)
            if not held:
                threads.pop(holder, None)
            if not threads:
                _READING.pop(self._identity, None)

    def _suspend(self) -> None:
        """Let a writer of this thread in (the read resumes after its write)."""
        _lock(self._fd, fcntl.F_UNLCK, byte=_APPLY_BYTE)

    def _resume(self) -> None:
        _lock(self._fd, fcntl.F_RDLCK, blocking=True, byte=_APPLY_BYTE)
        self.stale = True

    def works(self) -> bool:
        """True if the file's filesystem takes byte-range locks (some network and
        FUSE filesystems refuse them)."""
        try:
            with self:
                return True
        except OSError as err:
            if err.errno in (errno.ENOLCK, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                return False
            raise

    def writer_waiting(self) -> bool:
        """True if a writer waits for the readers of the file to finish."""
        answer = fcntl.fcntl(self._fd, _GET_LOCK, _ASK_TURNSTILE)
        return bool(answer[:2] != _UNLOCKED)

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _writer_busy_error(path: str) -> WriterActiveError:
    return WriterActiveError(
        f"Cannot open {path!r} for writing: another process is writing it (it holds "
        f"h5vc's writer lock). Open it read-only, or wait until that process closes it."
    )


def open_file(
    path: str | os.PathLike[str], mode: str, *, durable: bool = False, **kwargs: Any
) -> h5py.File:
    """Open ``path`` with h5py's ``mode``; writable modes go through the journal.

    ``durable=True`` also syncs the journal and the file to the disk at every commit
    point, which makes commits survive a power loss, not only a killed process.
    """
    path = os.fspath(path)
    if mode == "r":
        recover_abandoned(path)
        return h5py.File(path, "r", **kwargs)
    if mode not in ("r+", "a", "w", "w-", "x"):
        raise ValueError(f"Expected an h5py mode (r, r+, a, w, w-, x). Got {mode!r}.")
    exists = os.path.exists(path)
    if mode in ("w-", "x") and exists:
        raise FileExistsError(f"Cannot create {path!r}: it already exists (mode {mode!r}).")
    if mode == "r+" and not exists:
        raise FileNotFoundError(f"Cannot open {path!r} with mode 'r+': no such file.")
    real = os.path.realpath(path)
    if real in _WRITING:
        raise WriterActiveError(
            f"Cannot open {path!r} for writing: this process already has it open for "
            f"writing. Close that handle first."
        )
    lock_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        if not _lock(lock_fd, fcntl.F_WRLCK):
            raise _writer_busy_error(path)
        create = mode in ("w", "w-", "x") or not exists or os.path.getsize(path) == 0
        journal = JournaledFile(
            path, create=create, durable=durable, apply_lock=_apply_lock(lock_fd)
        )
        try:
            file = h5py.File(journal, "w" if create else "r+", **kwargs)
        except BaseException:
            journal.close()
            raise
    except BaseException:
        os.close(lock_fd)
        raise
    _OPEN[file.id.fileno] = _Open(journal, lock_fd)
    _WRITING.add(real)
    return file


def recover_abandoned(path: str) -> None:
    """Roll back a journal left by a crashed writer, unless a writer is at work."""
    if not os.path.exists(journal_path(path)):
        return
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return  # read-only to us: HDF5 reads what is there (the journal stays)
    try:
        if _lock(fd, fcntl.F_WRLCK):  # no writer: the journal is left from a crash
            _lock(fd, fcntl.F_WRLCK, blocking=True, byte=_APPLY_BYTE)
            recover(path)
    finally:
        os.close(fd)


def journal_of(file: h5py.File | h5py.Group) -> JournaledFile | None:
    opened = _OPEN.get(file.file.id.fileno) if file.id.valid else None
    return None if opened is None else opened.journal


def commit_point(root: h5py.Group) -> None:
    """Flush HDF5 and make everything written so far the file's committed state.

    Raises ``OSError`` if a write failed since the last commit point (the caller
    then calls :func:`roll_back`). Files not opened by h5vc are only flushed.
    """
    root.file.flush()
    journal = journal_of(root)
    if journal is not None:
        journal.commit()


def roll_back(root: h5py.Group) -> h5py.Group | None:
    """Restore the file of ``root`` to its last commit point and reopen it.

    Returns the same group in the reopened file, or ``None`` if the file was not
    opened through h5vc (nothing is done then).
    """
    fileno = root.file.id.fileno
    opened = _OPEN.get(fileno)
    if opened is None:
        return None
    name = root.name or "/"
    journal = opened.journal
    journal.roll_back()
    journal.discarding = True
    with contextlib.suppress(Exception):
        root.file.close()
    journal.discarding = False
    del _OPEN[fileno]
    file = h5py.File(journal, "r+")
    _OPEN[file.id.fileno] = opened
    return file[name]


def close_file(file: h5py.File) -> None:
    """Close a file from :func:`open_file`: its last writes are committed.

    If a write failed since the last commit point, the file is rolled back to it
    and the error raised.
    """
    opened = _OPEN.pop(file.id.fileno, None) if file.id.valid else None
    if opened is None:
        if file.id.valid:
            file.close()
        return
    journal = opened.journal
    try:
        persists = bool(file.id.get_create_plist().get_file_space_strategy()[1])
        file.close()
        try:
            journal.commit()
            if persists:
                _settle(journal)
        except OSError:
            journal.roll_back()  # the file stays at its last commit point
            raise
    finally:
        _WRITING.discard(os.path.realpath(journal.path))
        journal.close()
        os.close(opened.lock_fd)


def _settle(journal: JournaledFile) -> None:
    """Open and close the file once more, through the journal and under the writer
    lock: HDF5 leaves the free-space information of a file that persists it in a form
    that the next writable open rewrites at close, so after this a later session that
    writes nothing leaves every byte of the file as it is."""
    h5py.File(journal, "r+").close()
    journal.commit()
