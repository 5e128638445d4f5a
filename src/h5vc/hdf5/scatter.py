"""Scatter reads: stretches of a file read straight to their places in an array.

``os.preadv`` wants one Python buffer object per place, which costs a microsecond or
more each; a 2-D read of 100x100 chunks has 100 places per chunk.  Here the places
are described by numpy arrays (file offset, address, length per segment), turned into
``struct iovec`` arrays without a Python loop and read with the C library's
``preadv`` through :mod:`ctypes`, which lets go of the GIL while the kernel copies.
Segments that follow each other in the file go into one call, up to ``IOV_MAX``
segments and about ``piece_bytes`` bytes; a short gap between them (at most
``max_gap`` bytes nobody asked for) is read into a throw-away buffer rather than paid
for with another call. The sizes are the caller's (the versioned store's read
planner holds them).

Every address is checked to lie inside the destination array before anything is
read: a plan that would write outside it raises instead.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

__all__ = ["Plan", "available", "c_library", "plan", "run"]

#: The most segments one ``preadv`` call takes (POSIX's ``IOV_MAX`` on Linux and macOS).
IOV_MAX = 1024

_preadv: Any = None


#: Where the C library is looked for, in order: the symbols already loaded into the
#: process (the interpreter's own C library), then the C library by its usual names.
_C_LIBRARIES = (None, "libc.so.6", "libc.dylib", "libc.so")


@functools.cache
def c_library() -> ctypes.CDLL | None:
    """The C library (the first of :data:`_C_LIBRARIES` with ``mmap``), with ``errno``
    kept for :func:`ctypes.get_errno`; None where there is none (or not on POSIX).

    Found without :func:`ctypes.util.find_library`, which imports :mod:`shutil` and
    runs ``ldconfig`` or a compiler as a subprocess (tens of milliseconds, paid by the
    first read of a process); that is asked only where no known name serves."""
    if os.name != "posix":  # pragma: no cover - Windows has no mmap or preadv to call
        return None
    for name in _C_LIBRARIES:
        library = _with_mmap(name)
        if library is not None:
            return library
    import ctypes.util  # pragma: no cover - a C library of an unusual name

    found = ctypes.util.find_library("c")  # pragma: no cover
    return None if found is None else _with_mmap(found)  # pragma: no cover


def _with_mmap(name: str | None) -> ctypes.CDLL | None:
    """The library ``name`` (None: the process's own symbols) if it has ``mmap``."""
    try:
        library = ctypes.CDLL(name, use_errno=True)
        library["mmap"]  # raises AttributeError where missing
    except (OSError, AttributeError):
        return None
    return library


def _bind() -> Any:
    """The C library's ``preadv``, or None where there is none to call."""
    libc = c_library()
    try:
        # A function object of its own (not the library's shared attribute): its
        # types are set here.
        function = None if libc is None else libc["preadv"]
    except AttributeError:  # pragma: no cover - a C library without preadv
        function = None
    if function is None:  # pragma: no cover
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int64]
    function.restype = ctypes.c_ssize_t
    return function


_preadv = _bind()


def available() -> bool:
    """Whether scatter reads can run here (a C library with ``preadv``)."""
    return _preadv is not None


class Plan:
    """``preadv`` calls that fill the segments of one read.

    ``iov`` holds a ``struct iovec`` (address, length) per entry; call ``i`` reads
    ``nbytes[i]`` bytes of the file at ``offsets[i]`` into entries ``starts[i]`` to
    ``starts[i + 1]``.
    """

    __slots__ = ("iov", "keep", "nbytes", "offsets", "starts")

    def __init__(
        self,
        iov: np.ndarray,
        starts: np.ndarray,
        offsets: np.ndarray,
        nbytes: np.ndarray,
        keep: tuple[Any, ...],
    ):
        self.iov = iov
        self.starts = starts
        self.offsets = offsets
        self.nbytes = nbytes
        self.keep = keep  # the arrays the addresses point into, alive while the plan is

    def __len__(self) -> int:
        return len(self.offsets)

    def groups(self, count: int) -> list[range]:
        """The calls in ``count`` runs of about equal bytes, in order."""
        if count <= 1 or len(self) <= 1:
            return [range(len(self))]
        done = np.cumsum(self.nbytes)
        cuts = np.searchsorted(done, done[-1] * np.arange(1, count) / count, side="right")
        bounds = [0, *sorted(set(cuts.tolist()) - {0, len(self)}), len(self)]
        return [range(a, b) for a, b in itertools.pairwise(bounds)]


def plan(
    destination: np.ndarray,
    file_offsets: np.ndarray,
    addresses: np.ndarray,
    lengths: np.ndarray,
    piece_bytes: int,
    *,
    max_gap: int,
) -> Plan:
    """The calls that read ``lengths[i]`` bytes of the file at ``file_offsets[i]`` to
    ``addresses[i]`` for every segment ``i``, each address inside ``destination``;
    a gap of at most ``max_gap`` bytes between two segments is read and thrown away,
    a longer one ends the call.

    Segments may come in any order and overlap in the file (two places of the result
    that read the same stored bytes); they must not overlap in ``destination``.
    """
    file_offsets = np.asarray(file_offsets, dtype=np.int64)
    addresses = np.asarray(addresses, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    keep = lengths > 0
    if not keep.all():
        file_offsets, addresses, lengths = file_offsets[keep], addresses[keep], lengths[keep]
    empty = np.zeros(0, np.int64)
    if not len(lengths):
        return Plan(np.zeros((0, 2), np.uint64), empty, empty, empty, (destination,))
    base = destination.ctypes.data
    if (
        not destination.flags.writeable
        or file_offsets.min() < 0
        or addresses.min() < base
        or (addresses + lengths).max() > base + destination.nbytes
    ):
        raise ValueError(
            "Expected every segment of a scatter read inside the destination array "
            f"({destination.nbytes} bytes at {base:#x}) and at a file offset >= 0. "
            "Got one outside."
        )
    # Long segments cut into pieces, so that threads can share them out.
    pieces = -(-lengths // piece_bytes)
    if pieces.max() > 1:
        first = np.repeat(np.cumsum(pieces) - pieces, pieces)
        within = (np.arange(len(first)) - first) * piece_bytes
        owner = np.repeat(np.arange(len(lengths)), pieces)
        file_offsets = file_offsets[owner] + within
        addresses = addresses[owner] + within
        lengths = np.minimum(lengths[owner] - within, piece_bytes)
    order = np.argsort(file_offsets, kind="stable")
    file_offsets, addresses, lengths = file_offsets[order], addresses[order], lengths[order]

    # Gaps: read into a sink if short, else the next segment starts a new call.
    gaps = file_offsets[1:] - (file_offsets[:-1] + lengths[:-1])
    bridged = (gaps > 0) & (gaps <= max_gap)
    sink = np.empty(int(gaps[bridged].max()) if bridged.any() else 0, np.uint8)
    n = len(lengths)
    # Entries: segment i at 2i, the sink for the gap after it at 2i + 1 (if bridged).
    entry_address = np.empty(2 * n, np.int64)
    entry_length = np.zeros(2 * n, np.int64)
    entry_offset = np.empty(2 * n, np.int64)
    entry_address[0::2] = addresses
    entry_length[0::2] = lengths
    entry_offset[0::2] = file_offsets
    entry_address[1::2] = sink.ctypes.data
    entry_length[1:-1:2] = np.where(bridged, gaps, 0)
    entry_offset[1::2] = file_offsets + lengths
    hard = np.zeros(2 * n, bool)
    hard[0] = True
    hard[2::2] = (gaps < 0) | (gaps > max_gap)
    used = entry_length > 0
    entry_address, entry_length = entry_address[used], entry_length[used]
    entry_offset, hard = entry_offset[used], hard[used]

    # Calls: a new one at every hard break, every IOV_MAX entries and every
    # piece_bytes bytes counted from the hard break before.
    index = np.arange(len(hard))
    group_start = np.maximum.accumulate(np.where(hard, index, 0))
    before = np.cumsum(entry_length) - entry_length
    bucket = (before - before[group_start]) // piece_bytes
    count_bucket = (index - group_start) // IOV_MAX
    new = hard.copy()
    new[1:] |= (bucket[1:] != bucket[:-1]) | (count_bucket[1:] != count_bucket[:-1])
    starts = np.flatnonzero(new)
    iov = np.empty((len(entry_length), 2), np.uint64)
    iov[:, 0] = entry_address
    iov[:, 1] = entry_length
    return Plan(
        iov,
        np.append(starts, len(entry_length)),
        entry_offset[starts],
        np.add.reduceat(entry_length, starts),
        (destination, sink),
    )


def run(
    fd: int,
    plan: Plan,
    spread: Callable[[Callable[[range], None], Iterable[range]], Iterator[Any]],
    threads: int,
) -> None:
    """Carry out ``plan`` on ``fd``, its calls shared out in ``threads`` runs by
    ``spread`` (``map``-like: runs each function call, perhaps on other threads)."""

    def calls(group: range) -> None:
        for i in group:
            _call(fd, plan, i)

    for _ in spread(calls, plan.groups(threads)):
        pass


def _call(fd: int, plan: Plan, i: int) -> None:
    """Call ``i`` of ``plan``, continued after a short read."""
    iov = plan.iov[int(plan.starts[i]) : int(plan.starts[i + 1])]
    offset, remaining = int(plan.offsets[i]), int(plan.nbytes[i])
    while True:
        n = _preadv(fd, iov.ctypes.data, len(iov), offset)
        if n == remaining:
            return
        if n < 0:
            code = ctypes.get_errno()
            if code == errno.EINTR:
                continue
            raise OSError(code, f"preadv at offset {offset}: {os.strerror(code)}")
        if n == 0:
            raise OSError(f"Expected {remaining} more bytes at offset {offset}. Got 0.")
        # A short read: go on from where it stopped, on a copy of the entries left.
        ends = np.cumsum(iov[:, 1].astype(np.int64))
        k = int(np.searchsorted(ends, n, side="right"))
        skip = n - (int(ends[k - 1]) if k else 0)
        iov = iov[k:].copy()
        iov[0, 0] += np.uint64(skip)
        iov[0, 1] -= np.uint64(skip)
        offset += n
        remaining -= n
