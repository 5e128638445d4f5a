"""Chunk shapes and chunk-cache settings.

A chunk is both HDF5's unit of I/O and h5vc's unit of sharing between versions:
too small and every read touches many chunks (and the version metadata grows),
too large and changing one element rewrites a lot.  :func:`guess_chunks` picks a
shape from the dataset's shape and dtype when the user gives none;
:func:`chunk_cache` sizes HDF5's per-dataset chunk cache following the HDF5
guidance: ``nslots`` a prime about 100 times the number of chunks that fit in
``nbytes`` (but not above the number of chunks), ``w0`` low when chunks are
re-read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

import h5vc.config as config
from h5vc.errors import InvalidOptionError

__all__ = ["ChunkCache", "chunk_cache", "guess_chunks", "next_prime", "parse_chunks"]

#: Chunk byte sizes guess_chunks aims between; larger datasets get larger chunks.
MIN_CHUNK_BYTES = config.MIN_CHUNK_BYTES
MAX_CHUNK_BYTES = config.MAX_CHUNK_BYTES
#: Extent assumed for an axis of length 0 or an unlimited axis when guessing.
UNKNOWN_EXTENT = 1024


def _target_bytes(total_bytes: float) -> int:
    """Chunk size target: 64 KiB for small data, doubling every 8x of data, <= 1 MiB."""
    if total_bytes <= 16 * MIN_CHUNK_BYTES:
        return MIN_CHUNK_BYTES
    steps = math.log(total_bytes / (16 * MIN_CHUNK_BYTES), 8)
    return int(min(MAX_CHUNK_BYTES, MIN_CHUNK_BYTES * 2 ** max(0, math.floor(steps))))


def guess_chunks(
    shape: tuple[int, ...],
    dtype: np.dtype,
    maxshape: tuple[int | None, ...] | None = None,
) -> tuple[int, ...]:
    """A chunk shape for a dataset of ``shape`` and ``dtype``.

    Axes of length 0 or unlimited in ``maxshape`` are sized as if they held
    :data:`UNKNOWN_EXTENT` elements, so the dataset can grow along them.  The
    chunk is shrunk by halving its currently largest axis (relative to the
    dataset) until it fits the byte target; the last axes stay as whole as
    possible so chunks are contiguous runs of the C-ordered data.
    """
    if not shape:
        return ()
    itemsize = 16 if np.dtype(dtype).kind == "O" else max(np.dtype(dtype).itemsize, 1)
    extents = []
    for axis, n in enumerate(shape):
        unlimited = maxshape is not None and maxshape[axis] is None
        extents.append(max(n, UNKNOWN_EXTENT) if unlimited or n == 0 else n)
    target = _target_bytes(float(np.prod(extents, dtype=np.float64)) * itemsize)
    chunks = list(extents)
    while math.prod(chunks) * itemsize > target and max(chunks) > 1:
        # Halve the axis that is the largest relative to the others, preferring
        # the leading axes on ties so rows stay contiguous.
        axis = max(range(len(chunks)), key=lambda a: (chunks[a], -a))
        chunks[axis] = -(-chunks[axis] // 2)
    return tuple(int(c) for c in chunks)


def parse_chunks(chunks: Any, ndim: int, what: str) -> tuple[int, ...]:
    """``chunks`` (an int or a sequence of ints) as a chunk shape of ``ndim`` positive
    extents; :class:`~h5vc.errors.InvalidOptionError` names ``what`` otherwise."""
    try:
        parsed = (
            (int(chunks),)
            if isinstance(chunks, int | np.integer)
            else tuple(int(c) for c in chunks)
        )
    except (TypeError, ValueError):
        parsed = ()
    if len(parsed) != ndim or any(c <= 0 for c in parsed):
        raise InvalidOptionError(
            f"Expected chunks for {what} as {ndim} positive integers (one per axis). "
            f"Got chunks={chunks!r} instead."
        )
    return parsed


def next_prime(n: int) -> int:
    """The smallest prime >= n."""
    candidate = max(2, n)
    while True:
        if candidate < 4 or all(candidate % d for d in range(2, math.isqrt(candidate) + 1)):
            return candidate
        candidate += 1


@dataclass(frozen=True, slots=True)
class ChunkCache:
    """Settings for HDF5's per-dataset raw data chunk cache."""

    nbytes: int
    nslots: int
    w0: float

    def as_h5py_kwargs(self) -> dict[str, float]:
        """Keyword arguments for ``h5py.File(..., rdcc_nbytes=, rdcc_nslots=, rdcc_w0=)``."""
        return {"rdcc_nbytes": self.nbytes, "rdcc_nslots": self.nslots, "rdcc_w0": self.w0}


def chunk_cache(
    chunk_nbytes: int,
    n_chunks: int,
    *,
    cached_chunks: int = 32,
    min_nbytes: int = 0,
    max_nbytes: int = 64 * 1024 * 1024,
    reread: bool = True,
) -> ChunkCache:
    """Cache settings holding ``cached_chunks`` chunks of ``chunk_nbytes`` bytes.

    ``n_chunks`` is the number of chunks in the dataset (an upper bound for
    ``nslots``).  ``reread=True`` (chunks are read more than once, as in partial
    reads of a committed version) gives ``w0=0``: evict the least recently used
    chunk; ``False`` gives ``w0=1``: prefer evicting fully read chunks.
    The size is kept between ``min_nbytes`` and ``max_nbytes``.
    ``chunk_nbytes=0`` or ``cached_chunks=0`` turns the cache off.
    """
    if chunk_nbytes <= 0 or cached_chunks <= 0:
        return ChunkCache(0, 1, 1.0)
    nbytes = min(max_nbytes, max(min_nbytes, chunk_nbytes * cached_chunks))
    fitting = max(1, nbytes // chunk_nbytes)
    nslots = next_prime(max(1, min(100 * fitting, max(n_chunks, 1))))
    return ChunkCache(int(nbytes), nslots, 0.0 if reread else 1.0)
