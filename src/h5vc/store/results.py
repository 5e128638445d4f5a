"""Memory for the results of large reads, used again once their arrays are gone.

A new array of 128 MiB (``np.empty``) is memory the kernel hands out afresh: every page
is zeroed when the read first writes it, which costs about as much as the read's own
copy of the data (a full read of a 4000x4000 float64 dataset spends 40% of its time
in the kernel's ``clear_page``). The array of a large read is instead made on memory of
an earlier result its caller has dropped, where there is one of the same size: its
pages are mapped already and hold old bytes, which the read writes over whole (as it
writes over whatever ``np.empty`` gives).

The memory is a private anonymous map per result (its huge pages asked for, as numpy
asks for its large arrays); an array is made on it with :func:`numpy.frombuffer`, and
when that array and every view of it are gone (numpy's views keep it alive), the map
goes to a list of free maps, its pages given back lazily (``MADV_FREE``: the kernel
takes them where it needs memory, and a page it took reads as zeros). At most
:data:`KEEP_BYTES` of free maps are kept, the oldest dropped first. Results smaller
than :data:`MIN_BYTES` are numpy's own arrays.

An array made here does not own its memory (``flags.owndata`` is False and
``ndarray.resize`` refuses it, as for any array made on a buffer); it is otherwise an
ordinary writable C-contiguous array.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
import threading
import weakref

import numpy as np

__all__ = ["KEEP_BYTES", "MIN_BYTES", "empty"]

#: Results of at least this many bytes are made on maps kept for reuse.
MIN_BYTES = 32 << 20

#: Free maps kept for the next large result, at most this many bytes in all.
KEEP_BYTES = 256 << 20

#: Sizes of maps are rounded up to this (a huge page): results of nearly the same size
#: share maps.
_GRAIN = 2 << 20

_free: list[mmap.mmap] = []
_free_bytes = 0
#: Reentrant: a collection run inside a critical section (a list growing) can drop
#: another result, whose finalizer gives its map back on the same thread.
_mutex = threading.RLock()


def _forget() -> None:
    """In a forked child: the parent's free maps are copies it does not need."""
    global _free_bytes, _mutex
    _free.clear()
    _free_bytes = 0
    _mutex = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)

_USABLE = os.name == "posix" and hasattr(mmap, "MAP_PRIVATE") and hasattr(mmap, "MAP_ANONYMOUS")


def empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """``np.empty(shape, dtype)``, made on the memory of a dropped result where the
    result is large (:data:`MIN_BYTES`)."""
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < MIN_BYTES or not _USABLE or dtype.hasobject or not KEEP_BYTES:
        return np.empty(shape, dtype=dtype)
    size = -(-nbytes // _GRAIN) * _GRAIN
    pages = _take(size)
    if pages is None:
        try:
            pages = mmap.mmap(
                -1,
                size,
                flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                prot=mmap.PROT_READ | mmap.PROT_WRITE,
            )
        except OSError:
            return np.empty(shape, dtype=dtype)
        _advise(pages, "MADV_HUGEPAGE")
    flat = np.frombuffer(pages, dtype=dtype, count=math.prod(shape))
    # ``flat`` lives as long as any array made from it (numpy's views keep it).
    weakref.finalize(flat, _give_back, pages).atexit = False  # (nothing to keep at exit)
    return flat.reshape(shape)


def _take(size: int) -> mmap.mmap | None:
    """A free map of ``size`` bytes, taken off the list; None where there is none."""
    global _free_bytes
    with _mutex:
        for position, pages in enumerate(_free):
            if len(pages) == size:
                del _free[position]
                _free_bytes -= size
                return pages
    return None


def _give_back(pages: mmap.mmap) -> None:
    """The array made on ``pages`` is gone: keep them for the next result (their pages
    given back lazily), the oldest free maps dropped beyond :data:`KEEP_BYTES`."""
    global _free_bytes
    size = len(pages)
    if size > KEEP_BYTES:
        return
    _advise(pages, "MADV_FREE")
    with _mutex:
        _free.append(pages)
        _free_bytes += size
        while _free_bytes > KEEP_BYTES:
            _free_bytes -= len(_free.pop(0))


def _advise(pages: mmap.mmap, name: str) -> None:
    """``madvise`` the whole map with the advice ``name`` where the system has it."""
    advice = getattr(mmap, name, None)
    if advice is None:
        return
    with contextlib.suppress(OSError, ValueError):  # advice only
        pages.madvise(advice)
