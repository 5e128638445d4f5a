"""Helpers for the refs and merge tests."""

from __future__ import annotations

import hashlib
from pathlib import Path

import h5py
import numpy as np


def file_bytes(path: Path) -> str:
    """SHA-256 of the file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def contents(path: Path) -> dict[str, object]:
    """Every object's attributes and every dataset's data, keyed by path: a comparison
    of the file's contents that does not depend on HDF5's free-space bookkeeping."""
    found: dict[str, object] = {}
    with h5py.File(path, "r") as f:

        def visit(name: str, obj: h5py.HLObject) -> None:
            attrs = {k: _digest(obj.attrs[k]) for k in sorted(obj.attrs)}
            data = _digest(obj[()]) if isinstance(obj, h5py.Dataset) else None
            found[name] = (attrs, data)

        f.visititems(visit)
        found["/"] = {k: _digest(f.attrs[k]) for k in sorted(f.attrs)}
    return found


def _digest(value: object) -> str:
    array = np.asarray(value)
    if array.dtype.kind == "O":
        return repr(array.tolist())
    return f"{array.dtype}{array.shape}" + hashlib.sha256(array.tobytes()).hexdigest()
