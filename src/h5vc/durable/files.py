"""Opening versioned files so that no crash, failed write or second writer costs a
committed version.

Files opened for writing by :func:`h5vc.open` go through a :class:`~h5vc.durable.journal.
JournaledFile`: h5vc marks a *commit point* at the end of every commit,
``delete_versions`` and ``modify_metadata`` (:func:`commit_point`), and an operation
that fails is undone by :func:`roll_back`, which restores the file to the last commit
point and reopens it. A leftover journal is rolled back whenever the file is opened.

A writable ``h5py.File`` that a caller opened and hands to ``VersionedHDF5File`` is
taken over (:func:`adopt`): h5vc closes HDF5's handle and reopens the file through the
journal in the same ``h5py.File`` object, so code written for plain h5py gets the same
guarantees.

One process writes a file at a time: a writer holds an open-file-description lock on
a byte beyond the end of the file (h5vc's writers exclude each other), and a shared
``flock`` of the whole file, which HDF5's own writers (``h5py.File(path, "r+")``) ask
for exclusively and so are refused, while HDF5's readers (shared) are not. A second
writer gets :class:`~h5vc.errors.WriterActiveError`.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import fcntl
import gc
import itertools
import os
import struct
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import h5py

import h5vc.config as config
from h5vc.durable.journal import JournaledFile, journal_path, recover
from h5vc.errors import JournalPendingError, UnjournaledFileWarning, WriterActiveError
from h5vc.hdf5 import header

__all__ = [
    "adopt",
    "close_file",
    "commit_point",
    "descriptor_of",
    "journal_of",
    "limit_metadata_cache",
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


#: HDF5's file number -> the journal of a file h5vc writes (held weakly: a caller's
#: h5py.File that h5vc took over is finished when HDF5 closes it, see :func:`adopt`).
_OPEN: weakref.WeakValueDictionary[Any, JournaledFile] = weakref.WeakValueDictionary()
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


def _coarse(*times_ns: int) -> bool:
    """Whether any of these file times is of whole milliseconds: what a filesystem
    keeping coarse times (a second or two on some) gives, where a later write in the
    same tick leaves the time as it is."""
    return any(not t % 1_000_000 for t in times_ns)


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
        #: The stamp taken on entering names the file's bytes (see :attr:`content_key`).
        self._stamped = False
        self._ctime = 0

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
        # Change time too (a write, a truncation or a time set by hand moves it): the
        # bytes are named by a stamp only once both times are older than a tick.
        self._stamped = time.time_ns() - info.st_ctime_ns > 50_000_000 and self._settled
        self._ctime = info.st_ctime_ns
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.fcntl(self._fd, _SET_LOCK, _RELEASE_APPLY)
        self._stamped = False
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

    @property
    def content_key(self) -> tuple[Any, ...] | None:
        """Inside a block: a key that names the file's bytes as they are in it (device,
        inode, size, modification and change times, the mark of h5vc's writers),
        equal in a later block, of this lock or another one of the file, only if the
        file was not written in between. None where it cannot tell: either time lies
        within 50 ms of the block's start (a write in the same clock tick would leave
        it as it is), either time is of whole milliseconds (a filesystem of coarse
        times, whose tick may be a second or two), or this thread wrote the file in
        the block."""
        seen = self._seen
        if not self._stamped or seen is None or _coarse(seen[1], self._ctime):
            return None
        return (*self._identity, *seen, self._ctime)

    @property
    def quiet(self) -> tuple[int, int, int] | None:
        """Inside a block: the file's size, modification and change times, if they
        tell any later write (see :meth:`unchanged`); None where they may not: a
        time within 50 ms of the block's start, a time of whole milliseconds (a
        filesystem of coarse times), or a write by this thread in the block."""
        seen = self._seen
        if not self._stamped or seen is None or _coarse(seen[1], self._ctime):
            return None
        return seen[0], seen[1], self._ctime

    def unchanged(self, quiet: tuple[int, int, int]) -> bool:
        """True if nothing wrote the file since :attr:`quiet` was ``quiet``.

        Any write, truncation or time set by hand moves the modification or change
        time to the present, which is not the time seen then (older than any clock
        tick); a writer moves them before its bytes change."""
        try:
            info = os.fstat(self._fd)
        except (OSError, ValueError):
            return False
        return (info.st_size, info.st_mtime_ns, info.st_ctime_ns) == quiet

    @property
    def held(self) -> bool:
        """True inside a ``with`` block of this lock (between enter and exit)."""
        return self._holder is not None

    def _suspend(self) -> None:
        """Let a writer of this thread in (the read resumes after its write)."""
        _lock(self._fd, fcntl.F_UNLCK, byte=_APPLY_BYTE)

    def _resume(self) -> None:
        _lock(self._fd, fcntl.F_RDLCK, blocking=True, byte=_APPLY_BYTE)
        self.stale = True
        self._stamped = False

    def works(self) -> bool:
        """True if the file's filesystem takes byte-range locks (some network and
        FUSE filesystems refuse them)."""
        if not self.enter_if_works():
            return False
        self.__exit__(None, None, None)
        return True

    def enter_if_works(self) -> bool:
        """Enter the lock (as ``with``) and return True; False, nothing held, if the
        file's filesystem refuses byte-range locks. The caller exits it."""
        try:
            self.__enter__()
        except OSError as err:
            if err.errno in (errno.ENOLCK, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                return False
            raise
        return True

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


def _take_writer_locks(path: str, lock_fd: int) -> None:
    """Take h5vc's writer lock and the shared ``flock`` that keeps HDF5's writers out."""
    if not _lock(lock_fd, fcntl.F_WRLCK):
        raise _writer_busy_error(path)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as err:
        if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise
        raise WriterActiveError(
            f"Cannot open {path!r} for writing: another program has it open for writing "
            f"through HDF5 (h5py.File with mode 'r+', 'a' or 'w' holds HDF5's lock). "
            f"Close that handle first, or open the file read-only."
        ) from None


def _writing_here(real: str) -> bool:
    """True if this process writes the file at real path ``real``.

    A file HDF5 has closed whose journal is kept alive by a reference cycle is
    finished by the garbage collector: it is run once before saying so.
    """
    if real in _WRITING:
        gc.collect()
    return real in _WRITING


def _release(path: str, lock_fd: int) -> None:
    _WRITING.discard(os.path.realpath(path))
    os.close(lock_fd)  # releases both locks


def _journaled(path: str, lock_fd: int, *, create: bool, durable: bool) -> JournaledFile:
    if create or os.path.exists(journal_path(path)):
        # Truncating the file, or rolling a crashed writer's journal back, changes
        # committed bytes: readers are kept out meanwhile.
        with _applying(lock_fd):
            return _new_journaled(path, lock_fd, create=create, durable=durable)
    return _new_journaled(path, lock_fd, create=create, durable=durable)


def _new_journaled(path: str, lock_fd: int, *, create: bool, durable: bool) -> JournaledFile:
    return JournaledFile(
        path,
        create=create,
        durable=durable,
        apply_lock=_apply_lock(lock_fd),
        on_close=lambda: _release(path, lock_fd),
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
    if _writing_here(real):
        raise WriterActiveError(
            f"Cannot open {path!r} for writing: this process already has it open for "
            f"writing. Close that handle first."
        )
    lock_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        _take_writer_locks(path, lock_fd)
        create = mode in ("w", "w-", "x") or not exists or os.path.getsize(path) == 0
        journal = _journaled(path, lock_fd, create=create, durable=durable)
    except BaseException:
        os.close(lock_fd)
        raise
    _WRITING.add(real)
    try:
        file = h5py.File(journal, "w" if create else "r+", **kwargs)
    except BaseException:
        journal.close()
        raise
    _OPEN[file.id.fileno] = journal
    return file


def adopt(file: h5py.File, *, group_root: bool = False) -> bool:
    """Make a writable ``h5py.File`` that the caller opened go through the journal and
    hold the writer locks, as a file from :func:`open_file` does. True if it does now.

    HDF5's handle of the file is flushed and closed, the file is reopened through a
    :class:`JournaledFile`, and the new handle is put into the same ``h5py.File``
    object, so the caller's ``with`` block and later uses of ``file`` work on it; its
    close (``file.close()``, the end of the ``with`` block) commits its last writes and
    releases the locks. A journal left by a crashed writer is rolled back first. A file
    that cannot be taken over (other objects of it are open, the versioned root is a
    group of it (``group_root``), or it uses a driver other than HDF5's default) keeps
    HDF5's handle: if a crashed writer's journal is waiting, :class:`JournalPendingError`
    is raised; otherwise it is written without the journal, with a warning. A file read
    through a Python file object or held in memory (drivers ``fileobj`` and ``core``)
    is left as it is, without a warning.
    """
    if file.mode != "r+" or journal_of(file) is not None:
        return journal_of(file) is not None
    if file.driver in _IN_MEMORY_DRIVERS:
        return False  # a Python file object or memory: whoever provides it keeps it safe
    path = os.fspath(file.filename)
    reason = "the versioned root is a group, and the file stays open beside it"
    reason = reason if group_root else _cannot_adopt(file, path)
    if reason:
        _write_unjournaled(path, reason)
        return False
    real = os.path.realpath(path)
    if _writing_here(real):
        raise WriterActiveError(
            f"Cannot write {path!r}: this process already has it open for writing "
            f"through h5vc. Close that handle first."
        )
    settings = _access_settings(file)
    metadata_cache = file.id.get_mdc_config()
    lock_fd = os.open(path, os.O_RDWR)
    if not _lock(lock_fd, fcntl.F_WRLCK):
        os.close(lock_fd)
        raise _writer_busy_error(path)
    if os.path.exists(journal_path(path)):
        # A crashed writer's journal: HDF5 opened the file as that writer left it, so
        # what it would write at its close must not reach the file before recovery.
        _close_without_writing(file, path)
    else:
        file.flush()
        file.id.close()  # HDF5's handle (and its flock) goes; the file is as flushed
    try:
        _take_writer_locks(path, lock_fd)
        journal = _journaled(path, lock_fd, create=False, durable=False)
    except BaseException:
        os.close(lock_fd)
        file._id = h5py.File(path, "r+", **settings).id  # the caller keeps its file
        raise
    _WRITING.add(real)
    try:
        reopened = h5py.File(journal, "r+", **settings)
    except BaseException:
        journal.close()
        file._id = h5py.File(path, "r+", **settings).id
        raise
    reopened.id.set_mdc_config(metadata_cache)
    file._id = reopened.id  # the caller's object now uses the journaled handle
    journal.owner = weakref.ref(file)
    _OPEN[file.id.fileno] = journal
    _finish_on_close(file, weakref.ref(journal))
    return True


def _finish_on_close(file: h5py.File, journal: Callable[[], JournaledFile | None]) -> None:
    """Make ``file.close()`` (and the end of its ``with`` block) finish the journal: the
    locks go with the close, whoever else still holds the journal object. HDF5's view
    is flushed first, so what the journal commits is whole even if another handle of
    the file keeps HDF5 from closing it at once."""
    close = type(file).close

    def close_and_finish() -> None:
        if file.id.valid:
            file.flush()
        close(file)
        found = journal()
        if found is not None:
            found.finish()

    file.close = close_and_finish  # type: ignore[method-assign]


def _write_unjournaled(path: str, reason: str) -> None:
    """Let HDF5's own handle of ``path`` write (why: ``reason``), unless a crashed
    writer's journal waits or an h5vc writer holds the file."""
    if os.path.exists(journal_path(path)):
        raise JournalPendingError(
            f"Cannot write {path!r}: a writer that crashed left {journal_path(path)!r}, "
            f"which must roll the file back to its last commit point first, and h5vc "
            f"cannot take over this handle ({reason}). Close it, open the file once "
            f"with h5vc.open({path!r}) (or run `h5vc log {path}`), then reopen it."
        )
    lock_fd = os.open(path, os.O_RDONLY)
    try:
        if not _lock(lock_fd, fcntl.F_RDLCK):  # an h5vc writer holds the file
            raise _writer_busy_error(path)
    finally:
        os.close(lock_fd)
    warnings.warn(
        f"{path!r} is written without h5vc's rollback journal: {reason}. A crash "
        f"while it is written can damage it; open it with h5vc.open(), or pass "
        f"VersionedHDF5File an h5py.File with nothing else of it open.",
        UnjournaledFileWarning,
        stacklevel=4,
    )


def _close_without_writing(file: h5py.File, path: str) -> None:
    """Close HDF5's handle of ``file`` so that nothing it writes at its close reaches
    the file: its descriptor is replaced first by one of a scratch copy of the file,
    which HDF5 reads and writes as it closes (it may read metadata then, and a close
    that fails leaves the file open inside HDF5, where a later open of the same path
    would share its stale view). The copy costs one pass over the file: it happens only
    when a crashed writer's journal waits."""
    import tempfile

    with tempfile.TemporaryFile(dir=os.path.dirname(os.path.abspath(path))) as scratch:
        # No room for a copy: HDF5 may fail to close (and keep the file open).
        with contextlib.suppress(OSError), builtins.open(path, "rb") as source:
            _copy(source.fileno(), scratch.fileno())
        os.dup2(scratch.fileno(), file.id.get_vfd_handle())
    with contextlib.suppress(Exception):  # what HDF5 cannot do at its close
        file.id.close()


def _copy(source: int, target: int) -> None:
    size = os.fstat(source).st_size
    done = 0
    while done < size:
        copied = os.copy_file_range(source, target, size - done, done, done)
        if copied <= 0:
            raise OSError(errno.EIO, "the copy made no progress")
        done += copied


#: Drivers whose bytes h5vc cannot journal nor lock: a Python file object (HDF5's
#: ``fileobj`` driver) or memory (``core``). They are written as HDF5 writes them.
_IN_MEMORY_DRIVERS = frozenset({"fileobj", "core"})


def _cannot_adopt(file: h5py.File, path: str) -> str:
    """Why ``file`` cannot be taken over ("" if it can)."""
    if file.driver != "sec2":
        return f"it uses HDF5's {file.driver!r} driver"
    if not os.path.isfile(path):
        return "it is no file on disk"
    others = h5py.h5f.get_obj_count(file.id, h5py.h5f.OBJ_ALL) - 1
    if others:
        return f"{others} other object(s) of the file are open (groups, datasets or files)"
    return ""


def _access_settings(file: h5py.File) -> dict[str, Any]:
    """The caller's file-access settings that a reopened handle keeps."""
    _, slots, nbytes, w0 = file.id.get_access_plist().get_cache()
    return {"libver": file.libver, "rdcc_nslots": slots, "rdcc_nbytes": nbytes, "rdcc_w0": w0}


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
            with _applying(fd):
                recover(path)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _applying(fd: int) -> Any:
    """Change committed bytes of the file open as ``fd`` as a writer does at a commit
    point: readers are kept out meanwhile, and see the file as changed afterwards."""
    change = _apply_lock(fd)
    change(True)
    try:
        yield
    finally:
        change(False)


def journal_of(file: h5py.File | h5py.Group) -> JournaledFile | None:
    # Any object's identifier gives its file's number: h5py makes a File object on
    # every access to ``.file``, which costs ten times as much.
    object_id = file.id
    return _OPEN.get(object_id.fileno) if object_id.valid else None


# Headers of journaled files are checked through the journal, which gives the bytes
# HDF5 reads (held pages included): HDF5 reads such files through no OS descriptor.
header.BYTE_SOURCES.append(journal_of)


def descriptor_of(root: h5py.Group) -> int | None:
    """The OS file descriptor the file of ``root`` is on, where it has one: the
    journal's file, or HDF5's own (sec2) descriptor. Reads through it see the file
    as on disk."""
    journal = journal_of(root)
    if journal is not None:
        return journal.descriptor if journal.descriptor >= 0 else None
    return header.file_descriptor(root.file)


def limit_metadata_cache(file: h5py.File) -> None:
    """Keep HDF5's metadata cache of the writable ``file`` to
    :data:`~h5vc.config.WRITE_METADATA_CACHE_BYTES`.

    HDF5's flush, which every commit point makes, takes time in the number of entries
    the cache holds, and a writer touches the objects of more versions as it goes: on
    HDF5's default cache (up to 32 MiB) a flush after 3,000 small objects took 0.6 ms
    against 0.06 ms with the cache kept to 256 KiB. Entries evicted are read again when
    needed (a commit touches few). A cache already smaller is left as it is.
    """
    limit = config.WRITE_METADATA_CACHE_BYTES
    settings = file.id.get_mdc_config()
    if settings.max_size <= limit:
        return
    settings.max_size = limit
    settings.min_size = min(settings.min_size, limit)
    settings.set_initial_size = True
    settings.initial_size = limit
    file.id.set_mdc_config(settings)


def commit_point(root: h5py.Group) -> None:
    """Flush HDF5 and make everything written so far the file's committed state.

    Raises ``OSError`` if a write failed since the last commit point (the caller
    then calls :func:`roll_back`). Files not opened by h5vc are only flushed.
    """
    h5py.h5f.flush(root.id)  # what ``root.file.flush()`` does, without a File object
    journal = journal_of(root)
    if journal is not None:
        journal.commit()


def roll_back(root: h5py.Group) -> h5py.Group | None:
    """Restore the file of ``root`` to its last commit point and reopen it.

    Returns the same group in the reopened file, or ``None`` if the file was not
    opened through h5vc (nothing is done then). A caller's ``h5py.File`` that h5vc
    took over gets the reopened handle.
    """
    fileno = root.file.id.fileno
    journal = _OPEN.get(fileno)
    if journal is None:
        return None
    name = root.name or "/"
    journal.roll_back()
    journal.discarding = True
    with contextlib.suppress(Exception):
        root.file.close()
    journal.discarding = False
    del _OPEN[fileno]
    file = h5py.File(journal, "r+")
    owner = journal.owner() if journal.owner is not None else None
    if owner is not None:
        owner._id = file.id
        file = owner
    _OPEN[file.id.fileno] = journal
    return file[name]


def close_file(file: h5py.File) -> None:
    """Close a file from :func:`open_file`: its last writes are committed.

    If a write failed since the last commit point, the file is rolled back to it
    and the error raised.
    """
    journal = _OPEN.pop(file.id.fileno, None) if file.id.valid else None
    if journal is None:
        if file.id.valid:
            file.close()
        return
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
        journal.close()


def _settle(journal: JournaledFile) -> None:
    """Open and close the file once more, through the journal and under the writer
    lock: HDF5 leaves the free-space information of a file that persists it in a form
    that the next writable open rewrites at close, so after this a later session that
    writes nothing leaves every byte of the file as it is."""
    h5py.File(journal, "r+").close()
    journal.commit()
