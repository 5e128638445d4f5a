"""Helpers of the tests of what read-only handles keep by a file's stamp."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import h5py

import h5vc


def settle() -> None:
    """Let the file's times grow older than a clock tick (a stamp names the bytes)."""
    time.sleep(0.06)


@contextmanager
def opened(path: Path, way: str) -> Iterator[h5vc.VersionedHDF5File]:
    """``path`` opened read-only ``way``: ``"open"`` (``h5vc.open``) or the drop-in way
    (``h5py.File`` + ``VersionedHDF5File``)."""
    if way == "open":
        with h5vc.open(path) as vf:
            yield vf
        return
    with h5py.File(path, "r") as f:
        vf = h5vc.VersionedHDF5File(f)
        try:
            yield vf
        finally:
            vf.close()
