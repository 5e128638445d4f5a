"""Turning HDF5's errors about damaged bytes into :class:`CorruptDataError`.

HDF5 reports a damaged object header, heap or B-tree as whatever exception the
h5py call maps it to (``KeyError`` for an object that cannot be opened,
``RuntimeError``, ``OSError``), and a damaged type or attribute can surface as
an ``AttributeError`` or ``UnicodeDecodeError`` further on.  :func:`damaged`
wraps the places where h5vc opens the objects of its layout and raises one
:class:`CorruptDataError` naming the file and the object instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import h5py

from h5vc.errors import CorruptDataError, H5vcError

__all__ = ["damaged", "is_damage", "slot_count"]

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
def damaged(filename: str | Callable[[], str], what: str | Callable[[], str]) -> Iterator[None]:
    """Raise :class:`CorruptDataError` naming ``what`` in ``filename`` for damage
    (either given as a function, called only then: names HDF5 is asked for cost a
    call on every read that goes well)."""
    try:
        yield
    except (KeyError, RuntimeError, OSError, AttributeError, ValueError) as error:
        if not is_damage(error):
            raise
        if callable(filename):
            filename = filename()
        if callable(what):
            what = what()
        raise CorruptDataError(
            f"{what} in {filename!r} is damaged and cannot be read: {error}. "
            f"Run h5vc.verify on the file; restore it from a copy if it was written."
        ) from error


def slot_count(dataset_id: Any, c0: int) -> int:
    """The number of chunk slots of ``raw_data`` (its low-level id): its rows over ``c0``.

    Every slot holds a stored chunk, so a store has fewer slots than its file has
    bytes; an extent beyond that is a damaged dataspace (it would make h5vc allocate
    tables of that many slots), raised as :class:`CorruptDataError`.
    """
    n_slots = int(dataset_id.shape[0]) // c0
    file_id = h5py.h5i.get_file_id(dataset_id)
    if n_slots > file_id.get_filesize():
        file_name = h5py.h5f.get_name(dataset_id).decode(errors="replace")
        name = h5py.h5i.get_name(dataset_id).decode(errors="replace")
        raise CorruptDataError(
            f"{name} in {file_name!r} is damaged: its extent gives {n_slots} chunk slots, "
            f"more than the file has bytes. Run h5vc.verify on the file; restore it from "
            f"a copy if it was written."
        )
    return n_slots
