"""Turning HDF5's errors about damaged bytes into :class:`CorruptDataError`.

HDF5 reports a damaged object header, heap or B-tree as whatever exception the
h5py call maps it to (``KeyError`` for an object that cannot be opened,
``RuntimeError``, ``OSError``), and a damaged type or attribute can surface as
an ``AttributeError`` or ``UnicodeDecodeError`` further on.  :func:`damaged`
wraps the places where h5vc opens the objects of its layout and raises one
:class:`CorruptDataError` naming the file and the object instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from h5vc.errors import CorruptDataError, H5vcError

__all__ = ["damaged", "is_damage"]

#: Words of HDF5's error stack that mean stored bytes are not what they should be.
_DAMAGE_WORDS = (
    "signature",
    "version number",
    "not aligned",
    "truncated",
    "object header",
    "heap",
    "b-tree",
    "checksum",
    "determine object type",
    "bad flag",
    "buffer end",
    "addr overflow",
    "address overflow",
    "image size",
    "filter returned failure",
    "can't decode",
    "unable to decode",
    "bad value",
    "deprecated info",
    "check link existence",
    "get group info",
    "iterate over",
    "wrong",
    "exceeds eoa",
    "temporary file space",
    "on disk image",
)


def is_damage(error: BaseException) -> bool:
    """Whether ``error`` (raised by h5py) reports damaged bytes in the file."""
    if isinstance(error, H5vcError):
        return False
    if isinstance(error, UnicodeDecodeError | AttributeError):
        return True
    if isinstance(error, FileNotFoundError | PermissionError | BlockingIOError):
        return False
    text = str(error).lower()
    return any(word in text for word in _DAMAGE_WORDS)


@contextmanager
def damaged(filename: str, what: str) -> Iterator[None]:
    """Raise :class:`CorruptDataError` naming ``what`` in ``filename`` for damage."""
    try:
        yield
    except (KeyError, RuntimeError, OSError, AttributeError, ValueError) as error:
        if not is_damage(error):
            raise
        raise CorruptDataError(
            f"{what} in {filename!r} is damaged and cannot be read: {error}. "
            f"Run h5vc.verify on the file; restore it from a copy if it was written."
        ) from error
