"""The deflate implementation h5vc compresses and inflates with.

zlib-ng writes and reads the same zlib streams as the standard library's ``zlib``, at
the same levels, about 1.4x faster each way (HDF5's deflate filter reads what it
writes); the standard library stands in where zlib-ng is not installed.
"""

from __future__ import annotations

import types
import zlib

__all__ = ["ZLIB_NG", "codec"]

codec: types.ModuleType
try:
    from zlib_ng import zlib_ng as codec
except ImportError:  # pragma: no cover - zlib-ng is a dependency
    codec = zlib

#: Whether :data:`codec` is zlib-ng (faster than HDF5's own deflate filter).
ZLIB_NG = codec is not zlib
