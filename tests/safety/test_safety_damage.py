"""Damaged files: a CorruptDataError naming the object, never a raw h5py error."""

from __future__ import annotations

import os
import shutil

import h5py
import numpy as np
import pytest
from flipscan import make, read_all_and_commit

import h5vc
from h5vc.errors import CorruptDataError


def _flip(path: str, damaged: str, obj: str, offset: int) -> None:
    with h5py.File(path, "r") as f:
        address = h5py.h5o.get_info(f[obj].id).addr
    with open(path, "rb") as file:
        data = bytearray(file.read())
    data[address + offset] ^= 0xFF
    with open(damaged, "wb") as file:
        file.write(data)


@pytest.mark.parametrize("fraction", [0.3, 0.9, 0.99])
def test_truncated_file(path: str, tmp_path, fraction: float) -> None:
    make(path)
    damaged = str(tmp_path / "truncated.h5")
    shutil.copy(path, damaged)
    with open(damaged, "r+b") as file:
        file.truncate(int(os.path.getsize(path) * fraction))
    with pytest.raises(CorruptDataError, match=r"truncated\.h5"):
        read_all_and_commit(damaged)


@pytest.mark.parametrize("name", ["raw_data", "hash_table"])
def test_missing_store_dataset(path: str, name: str) -> None:
    make(path)
    with h5py.File(path, "r+") as f:
        del f[f"_version_data/x/{name}"]
    with pytest.raises(CorruptDataError, match=f"/_version_data/x/{name}"):
        read_all_and_commit(path)


@pytest.mark.parametrize(
    ("obj", "offset", "named"),
    [
        ("_version_data", 0, "versioned layout"),
        ("_version_data", 24, "versioned layout"),
        ("_version_data/versions", 8, "versioned layout"),
        ("_version_data/versions", 40, "/_version_data/versions"),
        ("_version_data/versions/v1", 0, "/_version_data/versions/v1"),
        ("_version_data/versions/v2", 24, "/_version_data/versions/v2"),
        ("_version_data/versions/v2/x", 0, "/_version_data/versions/v2/x"),
        ("_version_data/versions/v2/x", 16, "/_version_data/versions/v2/x"),
        ("_version_data/versions/v2/x", 32, "/_version_data/versions/v2/x"),
        ("_version_data/x/raw_data", 0, "/_version_data/x/raw_data"),
        ("_version_data/x/hash_table", 16, "/_version_data/x/hash_table"),
        ("_version_data/x/hash_table", 64, "/_version_data/x/hash_table"),
        ("_version_data/x", 24, "/_version_data/x"),
        # The group's links (a new-style group: link messages in its header): the
        # address of its dense link storage, the name of 'versions', its address.
        ("_version_data", 30, "'/_version_data'.*'versions'"),
        ("_version_data", 116, "'/_version_data'.*'versions'"),
        ("_version_data", 124, "'/_version_data'.*'versions'"),
        # Object header sizes and addresses that point beyond the file or into
        # HDF5's temporary space.
        ("_version_data", 10, "versioned layout"),
        ("_version_data/versions", 31, "versioned layout"),
        ("_version_data/versions", 36, "versioned layout"),
        ("_version_data/versions", 594, "/_version_data/versions/v1"),
    ],
)
def test_flipped_metadata_byte(path: str, tmp_path, obj: str, offset: int, named: str) -> None:
    make(path)
    damaged = str(tmp_path / "flipped.h5")
    _flip(path, damaged, obj, offset)
    with pytest.raises(CorruptDataError, match=named):
        read_all_and_commit(damaged)


def test_error_is_an_oserror(path: str) -> None:
    make(path)
    with h5py.File(path, "r+") as f:
        del f["_version_data/x/raw_data"]
    with pytest.raises(OSError):
        read_all_and_commit(path)


def test_damaged_compressed_chunk(path: str) -> None:
    with h5vc.open(path, "w") as vf, vf.stage_version("v1") as g:
        g.create_dataset("z", data=np.arange(1000.0), chunks=(100,), compression="gzip")
    with h5py.File(path, "r") as f:
        info = f["_version_data/z/raw_data"].id.get_chunk_info(3)
    with open(path, "r+b") as file:
        file.seek(info.byte_offset + 2)
        file.write(b"\xff" * 8)
    with h5vc.open(path, "r") as vf:
        assert vf["v1"]["z"][:200].tolist() == list(range(200))  # undamaged chunks read
        with pytest.raises(CorruptDataError, match="/_version_data/z/raw_data"):
            vf["v1"]["z"][:]
        with pytest.raises(CorruptDataError, match="/_version_data/z/raw_data"):
            vf["v1"]["z"][250:350]  # a small selection, read by HDF5 from the version
        with pytest.raises(CorruptDataError, match="/_version_data/z/raw_data"):
            vf["v1"]["z"][::3]
        report = h5vc.verify(vf)
    assert not report.ok
