"""Content hashes of chunks.

A chunk's hash is SHA-256 over its bytes in C order followed by ``str(shape)``
encoded as ASCII (e.g. ``b"(1000,)"``), so chunks of equal bytes but different
shapes (edge chunks) never collide.  This is the rule of the versioned file
format, so chunks written by h5vc and by other writers of the format deduplicate
against each other.

Variable-length strings are hashed over a length-prefixed encoding of each
element (see :func:`_object_bytes`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

__all__ = ["chunk_hash", "hash_chunks", "fill_chunk_hash"]

#: Above this many bytes, chunks are hashed on two threads (hashlib releases the
#: GIL while hashing, so this uses both cores of a small machine).
PARALLEL_HASH_BYTES = 8 * 1024 * 1024
_POOL: ThreadPoolExecutor | None = None


def _object_bytes(chunk: np.ndarray) -> bytes:
    """Bytes of a chunk of variable-length strings: each element length-prefixed."""
    parts = []
    for item in chunk.ravel():
        data = item.encode("utf-8") if isinstance(item, str) else bytes(item)
        parts.append(len(data).to_bytes(8, "little"))
        parts.append(data)
    return b"".join(parts)


def chunk_hash(chunk: np.ndarray) -> bytes:
    """SHA-256 digest (32 bytes) identifying the content and shape of ``chunk``."""
    hasher = hashlib.sha256()
    if chunk.dtype.kind == "O":
        hasher.update(_object_bytes(chunk))
    else:
        hasher.update(np.ascontiguousarray(chunk).view(np.uint8).data)
    hasher.update(str(chunk.shape).encode("ascii"))
    return hasher.digest()


def _hash_all(chunks: Sequence[np.ndarray]) -> list[bytes]:
    return [chunk_hash(chunk) for chunk in chunks]


def hash_chunks(chunks: Sequence[np.ndarray]) -> list[bytes]:
    """:func:`chunk_hash` of every chunk, on two threads when there is much data."""
    global _POOL
    total = sum(chunk.nbytes for chunk in chunks)
    if total < PARALLEL_HASH_BYTES or len(chunks) < 2 or chunks[0].dtype.kind == "O":
        return _hash_all(chunks)
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="h5vc-hash")
    half = len(chunks) // 2
    first = _POOL.submit(_hash_all, chunks[:half])
    second = _hash_all(chunks[half:])
    return first.result() + second


def fill_chunk_hash(shape: tuple[int, ...], dtype: np.dtype, fillvalue: Any) -> bytes:
    """The hash of a chunk of ``shape`` holding only ``fillvalue``."""
    chunk = np.empty(shape, dtype=dtype)
    chunk[...] = fillvalue
    return chunk_hash(chunk)
