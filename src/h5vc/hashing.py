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

import numpy as np

__all__ = ["chunk_hash"]


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
        hasher.update(memoryview(np.ascontiguousarray(chunk)).cast("B"))
    hasher.update(str(chunk.shape).encode("ascii"))
    return hasher.digest()
