"""First reads of committed datasets served from the file's bytes: HDF5's metadata
checksum called in C, and small reads that give what h5py reads of the same version
(or an error on damaged bytes), however the file was opened."""

from __future__ import annotations

import os

import pytest

from h5vc.hdf5 import clib
from h5vc.hdf5.header import checksum, checksum_python


def test_lookup3_in_c_equals_python() -> None:
    compiled = clib.lookup3()
    assert compiled is not None  # h5py's HDF5 is loaded in every test process
    for size in (0, 1, 3, 11, 12, 13, 23, 24, 25, 100, 1000, 4099):
        data = os.urandom(size)
        assert compiled(data) == checksum_python(data) == checksum(data), size
    assert checksum(bytearray(b"abc")) == checksum_python(b"abc")
    # The published test value of lookup3's hashlittle.
    assert checksum(b"Four score and seven years ago") == 0x17770551


def test_loaded_hdf5_is_h5pys() -> None:
    path = clib.loaded_hdf5()
    assert path is not None and path.name.startswith("libhdf5")


@pytest.mark.parametrize("size", [4, 1024 * 12 + 5])
def test_lookup3_any_length(size: int) -> None:
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    assert checksum(data) == checksum_python(data)
