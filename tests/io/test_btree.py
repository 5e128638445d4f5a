"""The chunk index read from the file's bytes is HDF5's, chunk for chunk."""

from __future__ import annotations

from pathlib import Path

import h5py
import hdf5plugin
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import h5vc
from h5vc.hdf5.btree import chunk_index
from h5vc.hdf5.header import LAYOUT, object_messages


def _hdf5_index(dataset: h5py.Dataset) -> tuple[np.ndarray, ...]:
    found: list = []
    dataset.id.chunk_iter(found.append)
    rank = len(dataset.shape)
    return (
        np.array([info.chunk_offset for info in found], dtype=np.int64).reshape(-1, rank),
        np.array([info.byte_offset for info in found], dtype=np.int64),
        np.array([info.size for info in found], dtype=np.int64),
        np.array([info.filter_mask for info in found], dtype=np.int64),
    )


def _assert_same(dataset: h5py.Dataset) -> None:
    index = chunk_index(dataset)
    assert index is not None
    coords, addresses, sizes, masks = _hdf5_index(dataset)
    np.testing.assert_array_equal(index.coords, coords)
    np.testing.assert_array_equal(index.addresses, addresses)
    np.testing.assert_array_equal(index.sizes, sizes)
    np.testing.assert_array_equal(index.masks, masks)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    shape=st.lists(st.integers(1, 40), min_size=1, max_size=3),
    chunk_seed=st.integers(0, 2**16),
    written=st.floats(0.0, 1.0),
    compressed=st.booleans(),
)
def test_index_matches_hdf5(tmp_path: Path, shape, chunk_seed, written, compressed) -> None:
    rng = np.random.default_rng(chunk_seed)
    chunks = tuple(int(rng.integers(1, n + 1)) for n in shape)
    path = tmp_path / f"t{chunk_seed}.h5"
    options = {"compression": "gzip"} if compressed else {}
    with h5py.File(path, "w") as f:
        dset = f.create_dataset(
            "x", shape=shape, chunks=chunks, maxshape=(None,) * len(shape), dtype="i4", **options
        )
        grid = [range(0, n, c) for n, c in zip(shape, chunks)]
        for corner in np.array(np.meshgrid(*grid, indexing="ij")).reshape(len(shape), -1).T:
            if rng.random() < written:
                box = tuple(slice(int(a), int(a) + c) for a, c in zip(corner, chunks))
                dset[box] = rng.integers(0, 5, size=dset[box].shape)
    with h5py.File(path, "r") as f:
        _assert_same(f["x"])


def test_deep_tree_and_filter_masks(tmp_path: Path) -> None:
    """Thousands of chunks (a tree of three levels), some stored with a filter skipped."""
    path = tmp_path / "deep.h5"
    with h5py.File(path, "w") as f:
        dset = f.create_dataset(
            "x", shape=(6000 * 4,), chunks=(4,), maxshape=(None,), dtype="i8", compression="gzip"
        )
        dset[...] = np.arange(6000 * 4)
        raw = np.arange(4, dtype="i8").tobytes()
        dset.id.write_direct_chunk((400,), raw, filter_mask=1)  # stored unfiltered
    with h5py.File(path, "r") as f:
        _assert_same(f["x"])
        index = chunk_index(f["x"])
        assert index is not None and len(index.addresses) == 6000
        assert index.masks[100] == 1 and index.masks.sum() == 1


def test_nothing_allocated(tmp_path: Path) -> None:
    with h5py.File(tmp_path / "e.h5", "w") as f:
        f.create_dataset("x", shape=(100,), chunks=(10,), maxshape=(None,), dtype="f8")
    with h5py.File(tmp_path / "e.h5", "r") as f:
        index = chunk_index(f["x"])
        assert index is not None and index.coords.shape == (0, 1)


@pytest.mark.parametrize("case", ["writable", "latest", "contiguous"])
def test_hdf5_is_asked_where_the_bytes_may_not_be_current_or_differ(tmp_path, case) -> None:
    path = tmp_path / "o.h5"
    options = {"libver": "latest"} if case == "latest" else {}
    with h5py.File(path, "w", **options) as f:
        if case == "contiguous":
            f.create_dataset("x", data=np.arange(10))
        else:
            f.create_dataset("x", data=np.arange(10), chunks=(3,), maxshape=(None,))
    with h5py.File(path, "r+" if case == "writable" else "r") as f:
        assert chunk_index(f["x"]) is None


def test_damaged_node_leaves_the_index_to_hdf5(tmp_path: Path) -> None:
    path = tmp_path / "d.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(1000), chunks=(10,), maxshape=(None,))
    with h5py.File(path, "r") as f:
        assert chunk_index(f["x"]) is not None
        stored = object_messages(f["x"], frozenset((LAYOUT,)))
        assert stored is not None
        root = int.from_bytes(stored.messages[LAYOUT][3:11], "little")
    data = bytearray(path.read_bytes())
    assert data[root : root + 5] == b"TREE\x01"
    data[root + 5] += 1  # the root's level: its children are not of the level below
    path.write_bytes(bytes(data))
    with h5py.File(path, "r") as f:
        assert chunk_index(f["x"]) is None


def test_reads_through_the_index(tmp_path: Path, monkeypatch) -> None:
    """Full and partial reads of versions of a file opened read-only (whose chunk table
    comes from the index) equal HDF5's reads of the same versions."""
    from h5vc.hdf5 import chunktable

    indexes: list = []

    def spy(dataset: h5py.Dataset):
        indexes.append(chunk_index(dataset))
        return indexes[-1]

    monkeypatch.setattr(chunktable, "chunk_index", spy)
    path = tmp_path / "v.h5"
    rng = np.random.default_rng(5)
    data = rng.random(50_000)
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=data, chunks=(256,))
            g.create_dataset("z", data=data, chunks=(512,), **hdf5plugin.Zstd(clevel=1))
        for k in range(1, 6):
            with vf.stage_version(f"v{k}") as g:
                start = int(rng.integers(0, 49_000))
                g["x"][start : start + 700] = -k
                g["z"][start : start + 700] = k
    with h5vc.open(path, "r") as vf, h5py.File(path, "r") as plain:
        for version in ("v0", "v3", "v5"):
            for name in ("x", "z"):
                expected = plain[f"_version_data/versions/{version}/{name}"][...]
                np.testing.assert_array_equal(vf[version][name][:], expected)
                np.testing.assert_array_equal(vf[version][name][1234:40000], expected[1234:40000])
    assert len(indexes) == 2 and all(index is not None for index in indexes)  # x and z
