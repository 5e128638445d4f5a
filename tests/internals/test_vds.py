"""Virtual datasets built from chunk maps read back through plain HDF5."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from h5vc.errors import UnsupportedFormatError
from h5vc.store.chunkmap import ChunkMap
from h5vc.store.vds import create_virtual_dataset, mapping_count, read_chunk_map


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
    assert mapping_count(dset) == (3 if merge else 5)  # column 0 is one run when merged
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
