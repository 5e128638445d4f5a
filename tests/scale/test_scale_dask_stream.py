"""Dask writes go to the file block by block: bounded memory, the same result as the
in-memory path, and nothing left behind when a block fails."""

from __future__ import annotations

import hashlib
import pathlib
import tracemalloc

import dask
import dask.array as da
import h5py
import numpy as np
import pytest

import h5vc
import h5vc.blockwrite
from h5vc.store import layout


def noisy(shape: tuple[int, ...], chunks: tuple[int, ...], seed: int = 3) -> da.Array:
    """Zeros with noise in one row of blocks out of three, and repeated blocks: some
    chunks are all fill, some equal to others, most unique."""
    rng = da.random.default_rng(seed)
    noise = rng.integers(0, 1000, size=shape, chunks=chunks).astype(np.float64)
    rows = da.arange(shape[0], chunks=chunks[0]) % (3 * chunks[0]) < chunks[0]
    mask = rows.reshape(-1, *(1,) * (len(shape) - 1))
    return da.where(mask, noise, 0.0)


def store_contents(f: h5py.File, path: str) -> tuple[int, set[bytes]]:
    """(slots in raw_data, digests in the hash table) of dataset ``path``'s store."""
    store = f[layout.VERSION_DATA][path]
    rows = store[layout.HASH_TABLE][: store[layout.HASH_TABLE].attrs[layout.ATTR_LARGEST_INDEX]]
    return store[layout.RAW_DATA].shape[0], {bytes(h) for h in rows["hash"]}


def chunk_digests(vf: h5vc.VersionedHDF5File, version: str, path: str) -> list[str]:
    """SHA-256 of every chunk of a committed dataset as read back, in grid order."""
    dataset = vf[version][path]
    chunks, shape = dataset.chunks, dataset.shape
    out = []
    for corner in np.ndindex(*(-(-n // c) for n, c in zip(shape, chunks))):
        box = tuple(slice(i * c, min((i + 1) * c, n)) for i, c, n in zip(corner, chunks, shape))
        out.append(hashlib.sha256(np.ascontiguousarray(dataset[box]).tobytes()).hexdigest())
    return out


def test_streamed_write_keeps_memory_bounded(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(h5vc.blockwrite, "WRITE_BLOCK_BYTES", 8 << 20)
    shape = (25_000, 1000)  # 200 MB of float64
    data = noisy(shape, (1000, 1000))
    path = tmp_path / "big.h5"
    with dask.config.set(scheduler="threads"), h5vc.open(path, "w") as vf:
        tracemalloc.start()
        try:
            with vf.stage_version("v1") as g:
                g.create_dataset("x", data=data, chunks=(500, 1000))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 100 << 20, f"peak {peak / 1e6:.0f} MB for a 200 MB array"
        stored = vf["v1"]["x"]
        want = data.compute()
        np.testing.assert_array_equal(stored[:], want)
    # Two blocks of each three rows of blocks are zeros: about a third of the chunks.
    assert path.stat().st_size < 0.45 * want.nbytes


@pytest.mark.parametrize("region", [(slice(None), slice(None)), (slice(30, 977), slice(5, 61))])
def test_streamed_write_matches_the_in_memory_path(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, region: tuple[slice, ...]
) -> None:
    monkeypatch.setattr(h5vc.blockwrite, "WRITE_BLOCK_BYTES", 40 * 64 * 8 * 3)  # 3 chunks
    shape, chunks = (1000, 64), (40, 16)
    base = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    size = tuple(len(range(*s.indices(n))) for s, n in zip(region, shape))
    value = noisy(size, (70, 30), seed=11)
    results = {}
    for how in ("dask", "numpy"):
        path = tmp_path / f"{how}.h5"
        with h5vc.open(path, "w") as vf:
            with vf.stage_version("v1") as g:
                g.create_dataset("x", data=base, chunks=chunks)
            with vf.stage_version("v2") as g:
                new = value if how == "dask" else value.compute()
                g["x"][region] = new
                g.create_dataset("y", data=new, chunks=chunks)
            results[how] = {
                name: (store_contents(vf.f, name), chunk_digests(vf, "v2", name))
                for name in ("x", "y")
            }
            want = base.copy()
            want[region] = value.compute()
            np.testing.assert_array_equal(vf["v2"]["x"][:], want)
            np.testing.assert_array_equal(vf["v2"]["y"][:], value.compute())
            np.testing.assert_array_equal(vf["v1"]["x"][:], base)
    # Same chunks stored (deduplicated, fill chunks left out), same digests.
    assert results["dask"] == results["numpy"]


def test_streamed_chunks_are_in_the_file_before_the_commit(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "a.h5"
    with h5vc.open(path, "w") as vf, vf.stage_version("v1") as g:
        g.create_dataset("x", data=da.arange(40_000.0, chunks=7000), chunks=(1000,))
        raw = vf.f[layout.VERSION_DATA]["x"][layout.RAW_DATA]
        assert raw.shape[0] == 40_000  # written while staging
        np.testing.assert_array_equal(raw[:], np.arange(40_000.0))
        np.testing.assert_array_equal(g["x"][39_990:], np.arange(39_990.0, 40_000.0))


def failing(shape: tuple[int, ...], chunks: tuple[int, ...], bad_block: int) -> da.Array:
    def block(block_info: dict | None = None) -> np.ndarray:
        assert block_info is not None
        info = block_info[None]
        if info["chunk-location"][0] == bad_block:
            raise RuntimeError("sensor offline")
        (start, _), *_ = info["array-location"]
        return np.full(info["chunk-shape"], float(start) + 1.0)

    from dask.array.core import normalize_chunks

    return da.map_blocks(block, chunks=normalize_chunks(chunks, shape), dtype=np.float64)


@pytest.mark.parametrize("opener", ["h5vc.open", "h5py.File"])
def test_failed_block_leaves_the_file_as_before(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, opener: str
) -> None:
    monkeypatch.setattr(h5vc.blockwrite, "WRITE_BLOCK_BYTES", 2000 * 8)
    path = tmp_path / "a.h5"
    with h5vc.open(path, "w") as vf, vf.stage_version("v1") as g:
        g.create_dataset("x", data=np.zeros(40_000), chunks=(1000,))
    before = path.read_bytes()
    with h5py.File(path, "r") as f:
        contents = store_contents(f, "x")
    bad = failing((40_000,), (2000,), bad_block=15)  # blocks before it are written
    with h5vc.open(path, "r+") if opener == "h5vc.open" else h5py.File(path, "r+") as handle:
        vf = (
            handle if isinstance(handle, h5vc.VersionedHDF5File) else h5vc.VersionedHDF5File(handle)
        )
        with pytest.raises(RuntimeError, match="sensor offline"), vf.stage_version("v2") as g:
            g["x"][:] = bad
        with pytest.raises(RuntimeError, match="sensor offline"), vf.stage_version("v2") as g:
            g.create_dataset("y", data=bad, chunks=(1000,))
        assert vf.versions == ["v1"]
        assert store_contents(vf.f, "x") == contents
        assert "y" not in vf.f[layout.VERSION_DATA]
        np.testing.assert_array_equal(vf["v1"]["x"][:], 0)
    if opener == "h5vc.open":
        assert path.read_bytes() == before
