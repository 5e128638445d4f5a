"""Virtual datasets built from chunk maps read back through plain HDF5."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from h5vc.errors import UnsupportedFormatError
from h5vc.hdf5 import mappings as mappings_module
from h5vc.hdf5.header import DATASPACE, LAYOUT, HeaderDamage, stored_messages
from h5vc.hdf5.mappings import Mappings, _heap_object, decode_mappings, stored_mappings
from h5vc.store.chunkmap import ChunkMap
from h5vc.store.vds import (
    _mappings_from_hdf5,
    create_virtual_dataset,
    group_runs,
    mapping_count,
    read_chunk_map,
)


@pytest.fixture
def raw(tmp_path):
    with h5py.File(tmp_path / "vds.h5", "w") as f:
        chunks = (4, 3)
        raw_data = f.create_dataset(
            "raw", shape=(6 * 4, 3), maxshape=(None, 3), chunks=chunks, dtype="i8"
        )
        raw_data[...] = np.arange(6 * 4 * 3).reshape(-1, 3)
        yield f, raw_data


@pytest.mark.parametrize("merge", [True, False])
def test_virtual_dataset_reads_chunks_from_their_slots(raw, merge: bool) -> None:
    f, raw_data = raw
    shape = (10, 5)  # 3 x 2 chunks of (4, 3), edge chunks on both axes
    slots = np.array([[0, 3], [1, -1], [2, 5]])
    chunk_map = ChunkMap(shape, (4, 3), slots)
    dset = create_virtual_dataset(f, "v", raw_data, chunk_map, fillvalue=-7, merge=merge)
    expected = np.full(shape, -7)
    source = raw_data[...]
    for (i, j), slot in np.ndenumerate(slots):
        if slot < 0:
            continue
        block = expected[i * 4 : (i + 1) * 4, j * 3 : (j + 1) * 3]
        block[...] = source[slot * 4 : slot * 4 + block.shape[0], : block.shape[1]]
    np.testing.assert_array_equal(dset[...], expected)
    # Merged: column 0 is one run; column 1 holds two runs (slots 3, 5) in one mapping.
    assert mapping_count(dset) == (2 if merge else 5)
    assert read_chunk_map(dset, (4, 3)) == chunk_map


def test_zero_extent_dataset_has_no_mapping(raw) -> None:
    f, raw_data = raw
    dset = create_virtual_dataset(f, "empty", raw_data, ChunkMap.empty((0, 3), (4, 3)))
    assert dset.shape == (0, 3) and dset.is_virtual
    assert read_chunk_map(dset, (4, 3)).slots.shape == (0, 1)


def test_unaligned_mapping_is_refused(raw) -> None:
    f, raw_data = raw
    layout = h5py.VirtualLayout(shape=(8, 3), dtype="i8")
    layout[1:5] = h5py.VirtualSource(raw_data)[0:4]
    dset = f.create_virtual_dataset("odd", layout)
    with pytest.raises(UnsupportedFormatError, match="aligned to its chunks"):
        read_chunk_map(dset, (4, 3))


# -- several runs per mapping -----------------------------------------------------------


def _expected(chunk_map: ChunkMap, source: np.ndarray, fill: int) -> np.ndarray:
    """What the virtual dataset of ``chunk_map`` over ``source`` reads as, chunk by chunk."""
    expected = np.full(chunk_map.shape, fill, dtype=source.dtype)
    c0 = chunk_map.chunks[0]
    for coords, slot in np.ndenumerate(chunk_map.slots):
        if slot < 0:
            continue
        region = tuple(slice(i * c, (i + 1) * c) for i, c in zip(coords, chunk_map.chunks))
        block = expected[region]
        rest = tuple(slice(0, n) for n in block.shape[1:])
        block[...] = source[(slice(slot * c0, slot * c0 + block.shape[0]), *rest)]
    return expected


@st.composite
def chunk_maps(draw):
    """A chunk map (1-d or 2-d) of a version after random edits: an initial run of
    slots, then edits that each move a few chunks to new slots, some left as fill."""
    ndim = draw(st.integers(1, 2))
    chunks = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    grid = tuple(draw(st.integers(1, 12)) for _ in range(ndim))
    shape = tuple(g * c - draw(st.integers(0, c - 1)) for g, c in zip(grid, chunks))
    slots = np.arange(int(np.prod(grid)), dtype=np.int64).reshape(grid)
    if ndim == 2:  # first written column by column, as a staged write lays chunks out
        slots = slots.reshape(grid[::-1]).T.copy()
    next_slot = slots.size
    for _ in range(draw(st.integers(0, 30))):
        flat = draw(st.integers(0, slots.size - 1))
        width = draw(st.integers(1, 3))
        for position in range(flat, min(flat + width, slots.size)):
            coords = np.unravel_index(position, grid)
            if draw(st.integers(0, 9)) == 0:
                slots[coords] = -1
            else:
                slots[coords] = next_slot
                next_slot += 1
    if draw(st.booleans()) and slots.size > 1:  # a chunk shared by two places (dedup)
        slots.flat[-1] = slots.flat[0]
    return ChunkMap(shape, chunks, slots), next_slot


@settings(max_examples=150, deadline=None)
@given(chunk_maps(), st.sampled_from([1, 2, 16]), st.sampled_from([1, 8, 10**6]))
def test_grouped_mappings_read_back_exactly(tmp_path_factory, case, max_runs, max_elements):
    chunk_map, n_slots = case
    path = tmp_path_factory.mktemp("vds") / "grouped.h5"
    with h5py.File(path, "w") as f:
        chunks = chunk_map.chunks
        raw_data = f.create_dataset(
            "raw",
            shape=(n_slots * chunks[0], *chunks[1:]),
            maxshape=(None, *chunks[1:]),
            chunks=chunks,
            dtype="i8",
        )
        raw_data[...] = np.arange(raw_data.size).reshape(raw_data.shape)
        runs = chunk_map.runs()
        groups = group_runs(runs, int(np.prod(chunks)), max_runs, max_elements)
        assert sorted(i for members in groups for i in members) == list(range(len(runs)))
        for members in groups:
            column = runs.coords[members, 1:]
            assert (column == column[0]).all()
            rows, slots = runs.coords[members, 0], runs.slot[members]
            assert np.all(np.diff(rows) > 0)
            assert np.all(runs.slot[members[1:]] >= (slots + runs.length[members])[:-1])
        dset = create_virtual_dataset(f, "v", raw_data, chunk_map, fillvalue=-1)
        assert mapping_count(dset) <= len(runs)
        np.testing.assert_array_equal(dset[...], _expected(chunk_map, raw_data[...], -1))
        assert read_chunk_map(dset, chunks) == chunk_map


def test_edited_history_needs_few_mappings(tmp_path) -> None:
    # 400 single-chunk edits of a 4000-chunk dataset split it into about 800 runs.
    rng = np.random.default_rng(7)
    slots = np.arange(4000, dtype=np.int64)
    for number, chunk in enumerate(rng.choice(4000, size=400, replace=False)):
        slots[chunk] = 4000 + number
    chunk_map = ChunkMap((4000 * 8,), (8,), slots)
    runs = chunk_map.runs()
    assert len(runs) > 750
    with h5py.File(tmp_path / "history.h5", "w") as f:
        raw_data = f.create_dataset(
            "raw", shape=(4400 * 8,), maxshape=(None,), chunks=(8,), dtype="i8"
        )
        raw_data[...] = np.arange(4400 * 8)
        dset = create_virtual_dataset(f, "v", raw_data, chunk_map)
        # Untouched pieces share an offset: 13 mappings of up to 32 runs. The edited
        # chunks go 16 to a mapping where their slots increase along the dataset.
        assert mapping_count(dset) < 120
        np.testing.assert_array_equal(dset[...], _expected(chunk_map, raw_data[...], 0))
        assert read_chunk_map(dset, (8,)) == chunk_map


def test_coordinates_beyond_32_bits(tmp_path) -> None:
    # The compact selection encoding holds 32-bit coordinates; larger ones take the
    # slower path and must map the same chunks.
    chunk = 1024
    far = 2**32 // chunk + 5  # a slot whose first row is past 2**32
    with h5py.File(tmp_path / "far.h5", "w") as f:
        raw_data = f.create_dataset(
            "raw", shape=((far + 2) * chunk,), maxshape=(None,), chunks=(chunk,), dtype="i4"
        )
        raw_data[far * chunk : (far + 2) * chunk] = np.arange(2 * chunk) + 1
        raw_data[0:chunk] = -5
        chunk_map = ChunkMap((4 * chunk,), (chunk,), np.array([far, 0, far + 1, -1]))
        dset = create_virtual_dataset(f, "v", raw_data, chunk_map, fillvalue=9)
        assert mapping_count(dset) == 2  # slots far and far + 1 share an offset of far
        expected = np.concatenate(
            [np.arange(chunk) + 1, np.full(chunk, -5), np.arange(chunk, 2 * chunk) + 1]
        )
        np.testing.assert_array_equal(dset[: 3 * chunk], expected)
        np.testing.assert_array_equal(dset[3 * chunk :], np.full(chunk, 9))
        assert read_chunk_map(dset, (chunk,)) == chunk_map


# -- mappings read from the file's bytes ---------------------------------------------------


def _same_mappings(found: Mappings, expected: Mappings) -> None:
    for name in ("virtual", "source", "counts", "source_counts"):
        np.testing.assert_array_equal(getattr(found, name), getattr(expected, name), err_msg=name)


def _write_raw_and_vds(path, chunk_map: ChunkMap, n_slots: int, merge: bool) -> None:
    _vds_file(path, chunk_map, n_slots, merge, -1, "i8")


@settings(max_examples=80, deadline=None)
@given(chunk_maps(), st.booleans())
def test_stored_mappings_are_those_hdf5_reads(tmp_path_factory, case, merge) -> None:
    chunk_map, n_slots = case
    path = tmp_path_factory.mktemp("vds") / "stored.h5"
    _write_raw_and_vds(path, chunk_map, n_slots, merge)
    with h5py.File(path, "r") as f:
        stored = stored_mappings(f, "v")
        assert stored is not None
        dset = f["v"]
        _same_mappings(stored, _mappings_from_hdf5(dset))
        assert read_chunk_map(dset, chunk_map.chunks, stored) == chunk_map


def test_stored_mappings_of_wide_coordinates(tmp_path) -> None:
    # Coordinates past 2**32 are stored in the version-3 selection encoding.
    chunk = 1024
    far = 2**32 // chunk + 5
    chunk_map = ChunkMap((4 * chunk,), (chunk,), np.array([far, 0, far + 1, -1]))
    _write_raw_and_vds(tmp_path / "far.h5", chunk_map, far + 2, merge=True)
    with h5py.File(tmp_path / "far.h5", "r") as f:
        stored = stored_mappings(f, "v")
        assert stored is not None and int(stored.source.max()) >= 2**32
        _same_mappings(stored, _mappings_from_hdf5(f["v"]))
        assert read_chunk_map(f["v"], (chunk,), stored) == chunk_map


def test_stored_mappings_only_where_the_file_bytes_are_current(tmp_path) -> None:
    chunk_map = ChunkMap((8,), (4,), np.array([1, 0]))
    _write_raw_and_vds(tmp_path / "v.h5", chunk_map, 2, merge=False)
    with h5py.File(tmp_path / "v.h5", "r+") as f:
        assert stored_mappings(f, "v") is None  # HDF5 may cache newer metadata
    with h5py.File(tmp_path / "v.h5", "r") as f:
        assert stored_mappings(f, "raw") is None  # a chunked dataset
        assert stored_mappings(f, "missing") is None
        stored = stored_mappings(f, "v")
        assert stored is not None and stored.counts.tolist() == [1, 1]


def test_stored_mappings_of_an_empty_dataset(tmp_path) -> None:
    with h5py.File(tmp_path / "e.h5", "w") as f:
        raw_data = f.create_dataset(
            "raw", shape=(0, 3), maxshape=(None, 3), chunks=(4, 3), dtype="i8"
        )
        create_virtual_dataset(f, "empty", raw_data, ChunkMap.empty((0, 3), (4, 3)))
    with h5py.File(tmp_path / "e.h5", "r") as f:
        stored = stored_mappings(f, "empty")
        assert stored is not None and len(stored.counts) == 0
        assert read_chunk_map(f["empty"], (4, 3), stored).slots.shape == (0, 1)


def _stored_blob(path) -> bytes:
    """The heap object holding the mappings of dataset ``v`` of ``path``."""
    with h5py.File(path, "r") as f:
        stored = stored_messages(f, "v", frozenset((DATASPACE, LAYOUT)))
        assert stored is not None
        blob = _heap_object(stored.reader, stored.messages[LAYOUT], 8, 8)
    assert blob is not None
    return blob


def test_version_1_mapping_list(tmp_path) -> None:
    # Version 1 of the list (a flags byte per entry) written by hand from version 0:
    # the source file is "this file" (no name), the dataset name is stored.
    chunk_map = ChunkMap((12, 2), (4, 2), np.array([[2], [0], [1]]))
    _write_raw_and_vds(tmp_path / "v.h5", chunk_map, 3, merge=False)
    blob = _stored_blob(tmp_path / "v.h5")
    expected = decode_mappings(blob, 2, 8)
    entries, pos = [], 9
    for _ in range(3):
        pos = blob.index(b"\0", pos) + 1  # "." is dropped
        start = pos
        pos = blob.index(b"\0", pos) + 1
        for _ in range(2):
            length = int.from_bytes(blob[pos + 12 : pos + 16], "little")
            pos += 16 + length
        entries.append(b"\x04" + blob[start:pos])
    rewritten = b"\x01" + blob[1:9] + b"".join(entries) + blob[-4:]
    _same_mappings(decode_mappings(rewritten, 2, 8), expected)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_mapping_list_is_refused_never_misread(tmp_path_factory, data) -> None:
    """Any byte of the list altered: the decoder raises HeaderDamage, leaves the list to
    HDF5, or returns well-formed blocks (HDF5's checksum then judges the bytes)."""
    path = tmp_path_factory.mktemp("vds") / "damaged.h5"
    chunk_map = ChunkMap((10, 5), (4, 3), np.array([[0, 3], [1, -1], [2, 5]]))
    _write_raw_and_vds(path, chunk_map, 6, merge=data.draw(st.booleans()))
    blob = bytearray(_stored_blob(path))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(blob) - 1))
        blob[at] = data.draw(st.integers(0, 255))
    try:
        found = decode_mappings(bytes(blob), 2, 8)
    except (HeaderDamage, mappings_module._Unknown):
        return
    assert found.virtual.shape[1:] == (2, 2) and found.source.shape[1:] == (2, 2)
    assert int(found.counts.sum()) == len(found.virtual)
    assert int(found.source_counts.sum()) == len(found.source)
    assert np.all(found.virtual[:, 1] >= found.virtual[:, 0])


def _appended_maps(rows: int, chunk_rows: int, steps: int) -> list[ChunkMap]:
    """Chunk maps of a dataset grown by ``rows`` a step, its last chunk rewritten into a
    new slot at every step (as appends store them)."""
    maps, slots, next_slot = [], [], 0
    for step in range(1, steps + 1):
        length = rows * step
        count = -(-length // chunk_rows)
        slots = slots[: count - 1] if len(slots) >= count else slots[: len(slots) - 1]
        while len(slots) < count:
            slots.append(next_slot)
            next_slot += 2  # never consecutive: one mapping a chunk
        maps.append(ChunkMap((length, 2), (chunk_rows, 2), np.array(slots)[:, None]))
    return maps


@pytest.mark.parametrize("fillvalue", [-1, -2])
def test_mappings_kept_for_the_next_virtual_dataset_map_the_same(
    tmp_path, fillvalue, monkeypatch
) -> None:
    """Where mappings are added one by one (no property list from bytes), virtual
    datasets of one chunk store made one after another reuse the first mappings of the
    one before: each reads as made from scratch, maps exactly its chunk map (virtual
    extents its own), in both HDF5's and the file's view of the mappings."""
    from h5vc.store import vds

    _without_frames(monkeypatch)
    maps = _appended_maps(rows=3, chunk_rows=4, steps=40)
    added: list[int] = []
    real_add = vds._Blocks.add_mappings

    def counting_add(self, dcpl, vspace, sspace, raw_name, groups):
        added.append(len(groups))
        return real_add(self, dcpl, vspace, sspace, raw_name, groups)

    path = tmp_path / "shared.h5"
    with h5py.File(path, "w") as f:
        slots = 2 * 40 * 3
        raw_data = f.create_dataset(
            "raw", shape=(slots * 4, 2), maxshape=(None, 2), chunks=(4, 2), dtype="f8"
        )
        raw_data[...] = np.arange(slots * 8, dtype=float).reshape(-1, 2)
        vds._Blocks.add_mappings = counting_add
        try:
            for number, chunk_map in enumerate(maps):
                create_virtual_dataset(f, f"v{number}", raw_data, chunk_map, fillvalue=fillvalue)
        finally:
            vds._Blocks.add_mappings = real_add
        # A different fill value never takes mappings kept with another one.
        other = create_virtual_dataset(f, "other", raw_data, maps[-1], fillvalue=fillvalue - 5)
        assert other.fillvalue == fillvalue - 5
    # Most datasets added only their last mapping (or two) instead of all of them.
    assert sum(added) < sum(len(m.runs()) for m in maps) // 3
    with h5py.File(path, "r") as f:
        source = f["raw"][...]
        for number, chunk_map in enumerate(maps):
            dset = f[f"v{number}"]
            assert dset.fillvalue == fillvalue
            assert read_chunk_map(dset, (4, 2)) == chunk_map
            stored = stored_mappings(f, f"v{number}")
            assert stored is not None
            _same_mappings(stored, _mappings_from_hdf5(dset))
            dcpl = dset.id.get_create_plist()
            for i in range(dcpl.get_virtual_count()):
                assert dcpl.get_virtual_vspace(i).shape == dset.shape
            expected = np.concatenate([source[s * 4 : s * 4 + 4] for s in chunk_map.slots[:, 0]])
            np.testing.assert_array_equal(dset[...], expected[: dset.shape[0]])


def _without_frames(monkeypatch) -> None:
    """Mappings added one ``H5Pset_virtual`` call at a time from here on."""
    from h5vc.store import vds

    monkeypatch.setattr(vds, "_plist_frame", lambda fill, key: None)


def _vds_file(path, chunk_map: ChunkMap, n_slots: int, merge: bool, fillvalue: object, dtype):
    chunks = chunk_map.chunks
    with h5py.File(path, "w") as f:
        raw_data = f.create_dataset(
            "raw",
            shape=(n_slots * chunks[0], *chunks[1:]),
            maxshape=(None, *chunks[1:]),
            chunks=chunks,
            dtype=dtype,
        )
        create_virtual_dataset(f, "v", raw_data, chunk_map, fillvalue=fillvalue, merge=merge)


@settings(max_examples=120, deadline=None)
@given(
    chunk_maps(),
    st.booleans(),
    st.sampled_from([(None, "i8"), (-1, "i8"), (2.5, "f4"), (b"ab", "S3"), (0, "u1")]),
)
def test_mappings_from_bytes_store_what_hdf5_calls_store(tmp_path_factory, case, merge, fill):
    """A virtual dataset made from the encoded property list stores the same mappings
    (each entry byte for byte, the order aside) as one whose mappings were added one
    ``H5Pset_virtual`` call at a time."""
    from _pytest.monkeypatch import MonkeyPatch

    chunk_map, n_slots = case
    fillvalue, dtype = fill
    folder = tmp_path_factory.mktemp("vds")
    _vds_file(folder / "bytes.h5", chunk_map, n_slots, merge, fillvalue, dtype)
    with MonkeyPatch.context() as patch:
        _without_frames(patch)
        _vds_file(folder / "calls.h5", chunk_map, n_slots, merge, fillvalue, dtype)
    with h5py.File(folder / "bytes.h5", "r") as a, h5py.File(folder / "calls.h5", "r") as b:
        assert a["v"].fillvalue == b["v"].fillvalue
        assert a["v"].dtype == b["v"].dtype and a["v"].shape == b["v"].shape
        assert mapping_count(a["v"]) == mapping_count(b["v"])
        count = mapping_count(b["v"])
    if count:
        assert _entries(folder / "bytes.h5", count) == _entries(folder / "calls.h5", count)


def _entries(path, count: int) -> list[bytes]:
    """The stored entries of the mapping list of ``path``'s dataset ``v``, sorted."""
    blob = _stored_blob(path)
    assert blob[0] == 0 and int.from_bytes(blob[1:9], "little") == count
    entries, pos = [], 9
    for _ in range(count):
        start = pos
        pos = blob.index(b"\0", blob.index(b"\0", pos) + 1) + 1  # file and dataset names
        for _ in range(2):  # source, then virtual selection
            pos += 16 + int.from_bytes(blob[pos + 12 : pos + 16], "little")
        entries.append(blob[start:pos])
    assert pos == len(blob) - 4  # then the checksum
    return sorted(entries)


def test_property_lists_are_made_from_bytes_here(raw, monkeypatch) -> None:
    """With h5py's own HDF5, no mapping is added one call at a time."""
    from h5vc.store import vds

    def refuse(*args, **kwargs):
        raise AssertionError("a mapping was added one call at a time")

    monkeypatch.setattr(vds._Blocks, "add_mappings", refuse)
    f, raw_data = raw
    chunk_map = ChunkMap((10, 5), (4, 3), np.array([[0, 3], [1, -1], [2, 5]]))
    dset = create_virtual_dataset(f, "v", raw_data, chunk_map, fillvalue=-7)
    assert read_chunk_map(dset, (4, 3)) == chunk_map
    assert dset[0, 0] == raw_data[0, 0] and dset[4, 3] == -7


def test_without_the_library_functions_mappings_are_added_one_by_one(raw, monkeypatch) -> None:
    from h5vc.store import vds

    monkeypatch.setattr(vds, "plist_codec", lambda: None)
    monkeypatch.setattr(vds, "_PLIST_FRAMES", {})
    f, raw_data = raw
    chunk_map = ChunkMap((10, 5), (4, 3), np.array([[0, 3], [1, -1], [2, 5]]))
    dset = create_virtual_dataset(f, "v", raw_data, chunk_map, fillvalue=-7)
    assert vds._PLIST_FRAMES and set(vds._PLIST_FRAMES.values()) == {None}
    assert read_chunk_map(dset, (4, 3)) == chunk_map
    assert dset[4, 3] == -7 and dset[0, 0] == raw_data[0, 0]


def test_a_frame_that_does_not_decode_the_same_is_not_used(monkeypatch) -> None:
    """An encoding that does not give the probe mapping back leaves no frame."""
    from h5vc.hdf5.clib import PlistCodec, plist_codec
    from h5vc.store import vds

    real = plist_codec()
    assert real is not None

    def decode_other(data: bytes):
        return real.decode_dcpl(data.replace(b"/probe%%", b"/other%%"))

    monkeypatch.setattr(vds, "plist_codec", lambda: PlistCodec(real.encode, decode_other))
    monkeypatch.setattr(vds, "_PLIST_FRAMES", {})
    assert vds._plist_frame(np.array(3, dtype="i8"), b"k") is None
    monkeypatch.setattr(vds, "plist_codec", lambda: real)
    monkeypatch.setattr(vds, "_PLIST_FRAMES", {})
    assert vds._plist_frame(np.array(3, dtype="i8"), b"k") is not None


def test_bytes_hdf5_refuses_fall_back_to_one_call_per_mapping(raw, monkeypatch) -> None:
    """Where HDF5 refuses the encoded list, the mappings are added one by one, and
    no list is decoded again for that fill value."""
    from h5vc.store import vds

    def refuse(frame, count, entries):
        raise ValueError("H5Pdecode failed")

    monkeypatch.setattr(vds, "_decode_plist", refuse)
    monkeypatch.setattr(vds, "_PLIST_FRAMES", {})
    f, raw_data = raw
    chunk_map = ChunkMap((10, 5), (4, 3), np.array([[0, 3], [1, -1], [2, 5]]))
    dset = create_virtual_dataset(f, "v", raw_data, chunk_map, fillvalue=-7)
    assert read_chunk_map(dset, (4, 3)) == chunk_map
    assert dset[4, 3] == -7 and dset[0, 0] == raw_data[0, 0]
    assert set(vds._PLIST_FRAMES.values()) == {None}


def _encoded_mappings(f, name, raw_data, chunk_map) -> bytes:
    """The encoded creation property list of the virtual dataset made of ``chunk_map``."""
    from h5vc.hdf5.clib import plist_codec

    codec = plist_codec()
    assert codec is not None
    dataset = create_virtual_dataset(f, name, raw_data, chunk_map, fillvalue=0)
    return codec.encode(dataset.id.get_create_plist())


@pytest.mark.parametrize("c0", [1, 3, 1024, 40000])
@pytest.mark.parametrize("seed", range(4))
def test_one_dimensional_mappings_from_the_last_ones_are_the_same(
    tmp_path, monkeypatch, c0: int, seed: int
) -> None:
    """A one-dimensional dataset's mappings worked out from those of the dataset made
    before it over the same chunk store (edits of a few chunks, new slots, shared ones,
    fill chunks, a resize) are those worked out from its whole chunk map with numpy."""
    from h5vc.store import vds

    rng = np.random.default_rng(seed)
    n_chunks = int(rng.integers(1, 120 if seed < 2 else 400))
    slots = np.arange(n_chunks, dtype=np.int64)
    if seed % 2:
        slots[rng.random(n_chunks) < 0.2] = -1
    next_slot = n_chunks
    with h5py.File(tmp_path / "columns.h5", "w") as f:
        raw_data, other = (
            f.create_dataset(name, shape=(4 * c0,), maxshape=(None,), chunks=(c0,), dtype="f4")
            for name in ("r%aw", "other")
        )
        for step in range(60):
            kind = rng.integers(0, 10)
            if kind == 0:  # resized
                n_chunks = max(1, n_chunks + int(rng.integers(-5, 6)))
                grown = np.full(n_chunks, -1, dtype=np.int64)
                grown[: min(n_chunks, len(slots))] = slots[:n_chunks]
                slots = grown
            elif kind == 1:  # many chunks at once
                where = rng.random(n_chunks) < 0.5
                slots[where] = next_slot + np.arange(int(where.sum()))
                next_slot += int(where.sum())
            else:  # a few chunks: new slots, ones stored already, or fill
                for row in rng.integers(0, n_chunks, int(rng.integers(1, 4))).tolist():
                    choice = rng.integers(0, 4)
                    if choice == 0:
                        slots[row] = -1
                    elif choice == 1:
                        slots[row] = int(rng.integers(0, next_slot))
                    else:
                        slots[row] = next_slot
                        next_slot += 1
            shape = (n_chunks * c0 - int(rng.integers(0, c0)),)
            chunk_map = ChunkMap(shape, (c0,), slots.copy())
            incremental = _encoded_mappings(f, f"a{step}", raw_data, chunk_map)
            with monkeypatch.context() as patch:
                patch.setattr(vds, "COLUMN_RUNS", 0)  # numpy's way
                whole = _encoded_mappings(f, f"b{step}", other, chunk_map)
            assert incremental == whole.replace(b"/other", b"/r%%aw"), step
