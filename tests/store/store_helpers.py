"""Helpers shared by the versioned store tests."""

from __future__ import annotations

import hashlib
from pathlib import Path

import h5py
import numpy as np


def snapshot_group(group: h5py.Group) -> dict[str, object]:
    """Every object below ``group`` with its attributes and a digest of its data.

    Two snapshots are equal when the files hold the same objects, attributes and
    values, whatever HDF5 did with free space in between.
    """
    out: dict[str, object] = {"/": _attrs(group)}

    def visit(name: str, obj: h5py.HLObject) -> None:
        if isinstance(obj, h5py.Dataset):
            data = obj[()]
            digest = hashlib.sha256(repr(data.tolist()).encode()).hexdigest()
            out[name] = ("dataset", obj.shape, obj.dtype.str, digest, _attrs(obj))
        else:
            out[name] = ("group", _attrs(obj))

    group.visititems(visit)
    return out


def _attrs(obj: h5py.HLObject) -> dict[str, str]:
    return {key: repr(obj.attrs[key]) for key in obj.attrs}


def file_digest(file_path: str) -> str:
    return hashlib.sha256(Path(file_path).read_bytes()).hexdigest()


def assert_same_array(actual: object, expected: np.ndarray) -> None:
    """Equal values, shape and dtype (object arrays compared element-wise)."""
    actual = np.asarray(actual)
    assert actual.shape == expected.shape
    if expected.dtype == object:
        assert actual.ravel().tolist() == expected.ravel().tolist()
    else:
        assert actual.dtype == expected.dtype
        np.testing.assert_array_equal(actual, expected)
