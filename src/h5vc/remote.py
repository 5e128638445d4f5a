"""Opening versioned files that are not local paths: file-like objects and URLs.

h5py reads HDF5 from any Python file-like object (``read``, ``seek``, ``tell``);
URLs (``https://``, ``s3://``, ``gs://``, ...) are opened with fsspec, which fetches
byte ranges on demand, so reading part of a version fetches the file's metadata and
the chunks the read touches rather than the whole file. Both are read-only.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import h5py

from h5vc.errors import MissingDependencyError, ReadOnlyError

__all__ = ["DEFAULT_BLOCK_SIZE", "is_url", "open_h5file", "open_private", "stream_descriptor"]

#: Bytes fsspec fetches per request (and caches) when reading a URL. HDF5 reads its
#: metadata in many small pieces near each other; a block this size serves most of
#: them from one request without fetching much beyond the chunks a read touches.
DEFAULT_BLOCK_SIZE = 64 * 1024


class _LocalStream(io.FileIO):
    """A local file read by h5py through Python: its repr is its path, which h5py
    takes as the HDF5 file name (so ``file.filename`` is the path)."""

    def __repr__(self) -> str:
        return str(self.name)

    def __del__(self) -> None:
        # Closed when HDF5 lets go of it (the last object of the file is gone):
        # that is the intended end of a forgotten cached handle, not a leak.
        with contextlib.suppress(Exception):
            self.close()


_gc_pauses = 0  # fetches under way
_gc_resume = False  # whether collection was on when the first of them began
_gc_lock = threading.Lock()


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No automatic garbage collection while one thread waits for fsspec's I/O thread.

    HDF5 reads a stream with h5py's global lock held, and fsspec fetches the bytes on
    its own event-loop thread.  A collection that starts on that thread and frees an
    h5py object waits for the global lock, which the reading thread keeps until the
    fetch ends: both wait forever.  Collection is process-wide, so it is paused while
    any fetch is under way and resumed by the last one to finish (if it was on).
    """
    global _gc_pauses, _gc_resume
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_resume = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_resume:
                gc.enable()


class _NamedStream:
    """A byte stream (fsspec's) whose repr is its URL, for the same reason; its reads
    run with garbage collection paused (:func:`_gc_paused`)."""

    def __init__(self, stream: Any, name: str):
        self._stream = stream
        self.name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._stream, attr)

    def read(self, *args: Any) -> Any:
        with _gc_paused():
            return self._stream.read(*args)

    def readinto(self, buffer: Any) -> Any:
        with _gc_paused():
            return self._stream.readinto(buffer)

    def __repr__(self) -> str:
        return self.name


def open_private(
    path: str, storage_options: dict[str, Any] | None = None
) -> tuple[h5py.File, Callable[[], None]]:
    """Open ``path`` (local or URL) read-only, apart from every other handle of it.

    HDF5 shares one open file between all handles of a process that open the same
    path: closing any of them closes the objects of all, and a file open read-only
    cannot be opened for writing. A file read through a Python stream is a file of
    its own to HDF5, so a cache of such handles neither blocks nor is closed by the
    caller's own handles. ``file.filename`` is still ``path``. Returns the file and
    a function that closes it and the stream.
    """
    if is_url(path):
        stream: Any = _NamedStream(_open_url(path, dict(storage_options or {})), path)
    else:
        stream = _LocalStream(path, "r")
    try:
        file = h5py.File(stream, "r")
    except BaseException:
        stream.close()
        raise
    if isinstance(stream, _LocalStream):
        key = _file_number(file)

        def forget(_: object, key: Any = key) -> None:
            _LOCAL_STREAMS.pop(key, None)

        _LOCAL_STREAMS[key] = weakref.ref(stream, forget)

    def close_both() -> None:
        try:
            if file.id.valid:
                file.close()
        finally:
            stream.close()

    return file, close_both


#: The local streams :func:`open_private` opened, by HDF5 file number (unique for the
#: life of the process), held weakly: what :func:`stream_descriptor` looks up.
_LOCAL_STREAMS: dict[Any, weakref.ref[_LocalStream]] = {}


def _file_number(file: h5py.File) -> Any:
    return file.id.fileno


def stream_descriptor(file: h5py.File) -> int | None:
    """The OS file descriptor of the local file that HDF5 reads ``file`` through, when
    :func:`open_private` opened it (a Python stream over a local file); else None.

    Lets positioned reads (:mod:`h5vc.store.fastread`) serve files opened privately.
    """
    try:
        ref = _LOCAL_STREAMS.get(_file_number(file))
    except ValueError:  # a closed file
        return None
    stream = None if ref is None else ref()
    if stream is None or stream.closed:
        return None
    return stream.fileno()


def is_url(target: Any) -> bool:
    """True for a string with a protocol other than ``file://``."""
    return isinstance(target, str) and "://" in target and not target.startswith("file://")


def _is_file_like(target: Any) -> bool:
    return all(hasattr(target, name) for name in ("read", "seek", "tell"))


def _refuse_write(what: str, mode: str) -> None:
    if mode != "r":
        raise ReadOnlyError(
            f"Cannot open {what} with mode {mode!r}: files read through a URL or a "
            f"file-like object are read-only. Open it with mode 'r' (nothing was written)."
        )


def _open_url(url: str, storage_options: dict[str, Any]) -> Any:
    try:
        import fsspec
    except ImportError:
        raise MissingDependencyError(
            f"Reading {url!r} needs fsspec: pip install fsspec (and the package of the "
            f"protocol, e.g. s3fs for s3://, aiohttp for https://), or "
            f"pip install 'h5vc[remote]'."
        ) from None
    options = {"block_size": DEFAULT_BLOCK_SIZE, "cache_type": "blockcache", **storage_options}
    return fsspec.open(url, "rb", **options).open()


def open_h5file(
    target: Any, mode: str = "r", *, storage_options: dict[str, Any] | None = None, **kwargs: Any
) -> tuple[h5py.File, Callable[[], None]]:
    """Open ``target`` (path, URL or file-like object) with h5py.

    Returns the file and a function that closes it (and, for URLs, the byte stream
    underneath). URLs and file-like objects open only with ``mode="r"``.
    """
    if is_url(target):
        _refuse_write(repr(target), mode)
        stream = _NamedStream(_open_url(target, dict(storage_options or {})), target)
        try:
            file = h5py.File(stream, "r", **kwargs)
        except BaseException:
            stream.close()
            raise

        def close_both() -> None:
            try:
                file.close()
            finally:
                stream.close()

        return file, close_both
    if isinstance(target, str | os.PathLike):
        if isinstance(target, str) and target.startswith("file://"):
            target = target[len("file://") :]
        file = h5py.File(target, mode, **kwargs)
        return file, file.close
    if _is_file_like(target):
        _refuse_write(f"the file-like object {target!r}", mode)
        file = h5py.File(target, "r", **kwargs)
        return file, file.close
    raise TypeError(
        f"Expected a path, a URL or a file-like object (with read, seek and tell). "
        f"Got {type(target).__name__} instead."
    )
