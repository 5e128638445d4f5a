"""Small chunk stores index their chunks in extensible arrays (layout message version 4).

A store whose chunk is under ``layout.SMALL_CHUNK_BYTES`` gets raw_data and hash_table
created at a low library bound of 1.10; bigger stores keep version-1 B-trees, which
reads parse from the file's bytes.  Every way of reading and rewriting a file must
handle both.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

import h5vc
from h5vc import VersionedHDF5File
from h5vc.errors import CorruptDataError
from h5vc.hdf5 import header
from h5vc.hdf5.btree import chunk_index
from h5vc.hdf5.chunktable import ChunkTable
from h5vc.store import groups, layout

SMALL = np.arange(3, dtype="i8")  # one 24-byte chunk
BIG_CHUNK = 1024  # 8 KiB chunks of float64


def _indexes(path: str | Path) -> tuple[int, int]:
    """(extensible-array headers, chunk B-tree nodes) in the file's bytes."""
    data = Path(path).read_bytes()
    return data.count(b"EAHD"), data.count(b"TREE\x01")


def _superblock_version(path: str | Path) -> int:
    return Path(path).read_bytes()[8]


def _write(path: str) -> None:
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v1") as g:
            g.create_dataset("small", data=SMALL, chunks=(3,), maxshape=(None,))
            g.create_dataset("big", data=np.arange(4 * BIG_CHUNK, dtype="f8"), chunks=(BIG_CHUNK,))
        with vf.stage_version("v2") as g:
            g["small"].resize((30,))  # ten chunks: the array grows past its first block
            g["small"][3:] = np.arange(100, 127)
            g["big"][5] = -1.0
        with vf.stage_version("v3") as g:
            g["small"][1] = 7


def _expected(version: str) -> dict[str, np.ndarray]:
    small = np.r_[SMALL, np.arange(100, 127)] if version != "v1" else SMALL.copy()
    big = np.arange(4 * BIG_CHUNK, dtype="f8")
    if version != "v1":
        big[5] = -1.0
    if version == "v3":
        small[1] = 7
    return {"small": small, "big": big}


@pytest.fixture
def written(path: str) -> str:
    _write(path)
    return path


def test_small_stores_get_extensible_arrays_and_big_stores_b_trees(written: str) -> None:
    if groups._bounds_call() is None:
        pytest.skip("h5py's HDF5 library cannot be called here")
    arrays, _ = _indexes(written)
    assert arrays == 2  # small's raw_data and hash_table
    with h5py.File(written, "r") as f:
        small, big = f["_version_data/small"], f["_version_data/big"]
        # Not a version-1 B-tree: the byte reader declines it and HDF5 is asked.
        assert chunk_index(small["raw_data"]) is None
        assert chunk_index(small["hash_table"]) is None
        found = chunk_index(big["raw_data"])
        assert found is not None and len(found.addresses) == 5  # 4 + the edited chunk
        assert small["hash_table"].chunks == (layout.HASH_TABLE_MIN_ROWS,)
        assert small["raw_data"].shape == (33,)  # 11 slots: 10 + the edited chunk
    # The bounds were raised only around the creation: the superblock is h5py's default.
    assert _superblock_version(written) == 0


def test_bounds_are_restored_after_creation(path: str) -> None:
    with h5py.File(path, "w") as f:
        before = f.id.get_access_plist().get_libver_bounds()
        with groups.compact_chunk_index(f) as raised:
            inside = f.id.get_access_plist().get_libver_bounds()
            f.create_dataset("x", data=SMALL, maxshape=(None,), chunks=(3,))
        assert f.id.get_access_plist().get_libver_bounds() == before
        f.create_dataset("y", data=SMALL, maxshape=(None,), chunks=(3,))
    if not raised:
        pytest.skip("h5py's HDF5 library cannot be called here")
    assert inside[0] == h5py.h5f.LIBVER_V110
    assert _indexes(path)[0] == 1  # only x
    with h5py.File(path, "r") as f:
        assert chunk_index(f["x"]) is None
        assert chunk_index(f["y"]) is not None


@pytest.mark.parametrize("opening", ["h5vc.open", "h5py.File"])
def test_round_trip_on_both_openings(written: str, opening: str) -> None:
    for mode in ("r", "r+"):
        if opening == "h5vc.open":
            with h5vc.open(written, mode) as vf:
                for version in ("v1", "v2", "v3"):
                    for name, expected in _expected(version).items():
                        np.testing.assert_array_equal(vf[version][name][()], expected)
        else:
            with h5py.File(written, mode) as f:
                vf = VersionedHDF5File(f)
                for version in ("v1", "v2", "v3"):
                    for name, expected in _expected(version).items():
                        np.testing.assert_array_equal(vf[version][name][()], expected)
                        # Plain h5py reads the virtual datasets over raw_data.
                        plain = f[f"_version_data/versions/{version}/{name}"][()]
                        np.testing.assert_array_equal(plain, expected)


def test_chunk_table_falls_back_to_hdf5_for_extensible_arrays(written: str) -> None:
    with h5py.File(written, "r") as f:
        raw_data = f["_version_data/small/raw_data"]
        n_slots = raw_data.shape[0] // 3
        table = ChunkTable(raw_data.id, n_slots, 3)
        for slot in range(n_slots):
            info = raw_data.id.get_chunk_info_by_coord((slot * 3,))
            assert table.location(slot) == (info.byte_offset, info.size, info.filter_mask)
            offset, size, _ = table.location(slot)
            with open(written, "rb") as fh:
                fh.seek(offset)
                stored = np.frombuffer(fh.read(size), dtype="i8")
            np.testing.assert_array_equal(stored, raw_data[slot * 3 : slot * 3 + 3])


def test_appends_past_the_first_block_after_reopening(written: str) -> None:
    for step in range(1, 4):
        with h5vc.open(written, "r+") as vf, vf.stage_version(f"grow{step}") as g:
            old = g["small"].shape[0]
            g["small"].resize((old + 300,))
            g["small"][old:] = np.arange(300) + 1000 * step
    with h5vc.open(written, "r") as vf:
        data = vf["grow3"]["small"][()]
    assert data.shape == (930,)
    for step in range(1, 4):
        start = 30 + 300 * (step - 1)
        np.testing.assert_array_equal(data[start : start + 300], np.arange(300) + 1000 * step)
    with h5py.File(written, "r") as f:
        assert f["_version_data/small/raw_data"].id.get_num_chunks() == 311


def test_lifecycle_operations_keep_small_stores_readable(written: str, tmp_path: Path) -> None:
    with h5vc.open(written, "r+") as vf:
        h5vc.delete_versions(vf, "v2")
    with h5vc.open(written, "r+") as vf, vf.stage_version("v4") as g:
        g["small"][4] = -5  # reuses the slots v2 released
    with h5py.File(written, "r") as f:
        report = h5vc.verify(f)
        assert report.ok, report
    packed = str(tmp_path / "packed.h5")
    h5vc.repack(written, packed)
    if groups._bounds_call() is not None:
        assert _indexes(packed)[0] == 2  # the copy keeps the small store's indexes
    with h5vc.open(packed, "r") as vf:
        assert h5vc.verify(vf).ok
        np.testing.assert_array_equal(vf["v1"]["small"][()], SMALL)
        expected = _expected("v3")["small"]
        np.testing.assert_array_equal(vf["v3"]["small"][()], expected)
        expected[4] = -5
        np.testing.assert_array_equal(vf["v4"]["small"][()], expected)
        np.testing.assert_array_equal(vf["v4"]["big"][()], _expected("v3")["big"])


def test_a_file_capped_below_hdf5_1_10_keeps_b_trees(path: str) -> None:
    # (h5vc's versions need 1.10 too, for their virtual datasets: this is the
    # creation helper alone.)
    with h5py.File(path, "w", libver=("earliest", "v108")) as f:
        with groups.compact_chunk_index(f) as raised:
            f.create_dataset("x", data=SMALL, maxshape=(None,), chunks=(3,))
        assert f.libver == ("earliest", "v108")
    assert not raised
    assert _indexes(path) == (0, 1)


def test_small_reads_read_the_version_2_header_of_raw_data(written: str) -> None:
    """A small store's raw_data has a version-2 (checksummed) header: its messages are
    read from the file's bytes, so small reads go straight to raw_data."""
    if groups._bounds_call() is None:
        pytest.skip("h5py's HDF5 library cannot be called here")
    kinds = frozenset((header.DATASPACE, header.DATATYPE, header.LAYOUT))
    with h5py.File(written, "r") as f:
        held = header.checked_messages(f["_version_data/small"], "raw_data", kinds)
        assert held is not None
        assert header.chunk_dims(held.messages[header.LAYOUT], held.sizeof_addr) == (3,)
        assert held.messages[header.LAYOUT][0] == 4  # layout message version 4
        virtual = header.stored_messages(f["_version_data/versions/v3"], "small", kinds)
        assert virtual is not None
        assert header.same_datatype(
            held.messages[header.DATATYPE], virtual.messages[header.DATATYPE]
        )


def test_a_damaged_version_2_header_is_reported(written: str, tmp_path: Path) -> None:
    if groups._bounds_call() is None:
        pytest.skip("h5py's HDF5 library cannot be called here")
    with h5py.File(written, "r") as f:
        store = f["_version_data/small"]
        address = int(store.id.links.get_info(b"raw_data").u)
    data = bytearray(Path(written).read_bytes())
    assert data[address : address + 4] == b"OHDR"
    data[address + 40] ^= 0x10  # inside the first block: its checksum no longer matches
    damaged = tmp_path / "damaged.h5"
    damaged.write_bytes(bytes(data))
    kinds = frozenset((header.DATASPACE,))
    with h5py.File(damaged, "r") as f, pytest.raises(CorruptDataError, match="checksum"):
        header.checked_messages(f["_version_data/small"], "raw_data", kinds)
    with h5vc.open(damaged, "r") as vf, pytest.raises(CorruptDataError):
        vf["v3"]["small"][()]


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        (b"\x10\x08\x00\x00\x08\x00\x00\x00", b"\x10\x08\x00\x00\x08\x00\x00\x00", True),
        (b"\x10\x08\x00\x00\x08\x00", b"\x10\x08\x00\x00\x08\x00\x00\x00", True),  # padding
        (b"\x10\x08\x00\x00\x08\x00", b"\x10\x08\x00\x00\x08\x00\x00\x01", False),
        (b"\x10\x08\x00\x00\x04\x00", b"\x10\x08\x00\x00\x08\x00\x00\x00", False),
        (b"\x10", b"\x10" + bytes(8), False),  # more than a padding
        (None, b"\x10", False),
    ],
)
def test_same_datatype(first: bytes | None, second: bytes | None, same: bool) -> None:
    assert header.same_datatype(first, second) is same
    assert header.same_datatype(second, first) is same
