"""A small per-process cache of files opened read-only, for tasks that carry names.

Dask tasks and pickled datasets carry the name of a file (a path or URL), never an open
handle. Whoever runs the task asks this cache for the file: each process opens a file
once, read-only, and keeps it for the next task, up to :data:`MAX_OPEN_FILES` files
(least recently used first out). Whatever the callers derive from a file (a versioned
view, committed datasets) is kept with it by :meth:`OpenFile.memo`. A local file that
changes is not opened again here: its versioned view reads it through a handle of its
own, under the file's read lock, and opens that anew when the file changed (see
:mod:`h5vc.versions.reading`); a handle is reopened only when the path names
another file (it was replaced).

Files are read through a Python file object (see :func:`h5vc.remote.open_private`),
so HDF5 treats each cached handle as a file of its own: it does not stop this process
from opening the file for writing, and closing the caller's handles of the file does
not close it. An evicted or outdated handle is only forgotten: whatever still reads
from it (an unpickled dataset) keeps it open, and it closes when the last user is
gone. :func:`clear` (also run at interpreter exit) closes every cached handle. A
process forked from one that holds open files starts with an empty cache of its own
and leaves the inherited handles alone: they belong to the parent.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import h5vc.config as config
from h5vc.remote import is_url, open_private

__all__ = [
    "MAX_OPEN_FILES",
    "OpenFile",
    "clear",
    "file_identity",
    "file_stamp",
    "forget",
    "open_file",
]

#: Files kept open per process.
MAX_OPEN_FILES = config.MAX_OPEN_FILES

#: fsspec options as sorted (key, value) pairs: hashable, part of a cache key.
Options = tuple[tuple[str, Any], ...]


def file_stamp(path: str) -> tuple[int, int] | None:
    """Modification time and size of a local file (None for URLs or a missing file)."""
    if is_url(path):
        return None
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size)


def file_identity(path: str) -> tuple[int, int] | None:
    """Device and inode of a local file (None for URLs or a missing file)."""
    if is_url(path):
        return None
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino)


class OpenFile:
    """One file opened read-only, its group ``root``, and what callers derived from it."""

    def __init__(self, path: str, root: str, storage_options: dict[str, Any]):
        self.path = path
        self.file, self._close = open_private(path, storage_options)
        try:
            self.root = self.file[root]
        except BaseException:
            self._close()
            raise
        self.identity = file_identity(path)
        self._memo: dict[Any, Any] = {}
        self._lock = threading.RLock()  # a maker may ask for another memo

    def usable(self) -> bool:
        """Still open, and the path still names the file opened here."""
        return bool(self.file.id.valid) and self.identity == file_identity(self.path)

    def memo(self, key: Any, make: Callable[[], Any]) -> Any:
        """``make()``, called once per key for this open file (thread-safe)."""
        found = self._memo.get(key)
        if found is None:
            with self._lock:
                found = self._memo.get(key)
                if found is None:
                    found = self._memo[key] = make()
        return found

    def close(self) -> None:
        """Close the file and its stream."""
        self._memo.clear()
        self._close()


class _Cache:
    def __init__(self) -> None:
        self.files: OrderedDict[tuple[str, str, Options], OpenFile] = OrderedDict()
        self.lock = threading.Lock()
        self.pid = os.getpid()

    def _check_fork(self) -> None:
        if self.pid != os.getpid():
            # Inherited from the parent: drop the handles without closing them.
            self.files = OrderedDict()
            self.lock = threading.Lock()
            self.pid = os.getpid()

    def get(self, path: str, root: str, options: Options) -> OpenFile:
        self._check_fork()
        key = (path, root, options)
        with self.lock:
            entry = self.files.pop(key, None)
            if entry is not None and entry.usable():
                self.files[key] = entry
                return entry
            # A stale or evicted handle is only forgotten: objects still using it
            # (an unpickled dataset) keep it open, the last one gone closes it.
            entry = OpenFile(path, root, dict(options))
            self.files[key] = entry
            while len(self.files) > MAX_OPEN_FILES:
                self.files.popitem(last=False)
            return entry

    def forget(self, path: str, root: str) -> None:
        self._check_fork()
        with self.lock:
            for key in [k for k in self.files if k[:2] == (path, root)]:
                del self.files[key]

    def clear(self) -> None:
        self._check_fork()
        with self.lock:
            entries = list(self.files.values())
            self.files.clear()
        for entry in entries:
            with contextlib.suppress(Exception):  # at exit, a file may already be gone
                entry.close()


_CACHE = _Cache()
atexit.register(_CACHE.clear)


def open_file(path: str, root: str = "/", storage_options: Options = ()) -> OpenFile:
    """The cached read-only file ``path`` (opened on first use in this process)."""
    return _CACHE.get(path, root, storage_options)


def forget(path: str, root: str = "/") -> None:
    """Forget the cached handle of ``path`` (it closes once nothing uses it)."""
    _CACHE.forget(path, root)


def clear() -> None:
    """Close every file this process has cached (objects read from them stop working)."""
    _CACHE.clear()
