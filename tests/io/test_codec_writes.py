"""Chunks encoded on the pool, a batch ahead of their writes, are what HDF5 reads."""

from __future__ import annotations

from pathlib import Path

import h5py
import hdf5plugin
import numpy as np
import pytest

from h5vc.hdf5 import codecs
from h5vc.store import rawdata
from h5vc.store.rawdata import RawDataStore

FILTERS = {
    "gzip": {"compression": "gzip", "compression_opts": 4},
    "gzip+shuffle": {"compression": "gzip", "shuffle": True},
    "blosc-zstd": dict(hdf5plugin.Blosc(cname="zstd", clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE)),
    "zstd": dict(hdf5plugin.Zstd(clevel=3)),
}


def _chunk(values: np.ndarray, chunks: tuple[int, ...], where: tuple[int, ...]) -> np.ndarray:
    return values[tuple(slice(i * c, (i + 1) * c) for i, c in zip(where, chunks))]


@pytest.mark.parametrize("cores", [1, 2])
@pytest.mark.parametrize("name", sorted(FILTERS))
def test_store_array_in_many_batches_reads_back_through_hdf5(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, cores: int
) -> None:
    monkeypatch.setattr(codecs, "workers", lambda: cores)
    chunks = (7, 5)
    # Three chunks a batch: many batches, each encoded while the one before is written.
    monkeypatch.setattr(rawdata, "HASH_BATCH_BYTES", 3 * 7 * 5 * 8)
    rng = np.random.default_rng(5)
    values = np.round(rng.normal(size=(60, 23)).cumsum(axis=0), 1)  # edge chunks on both axes
    values[7:14, 5:10] = 0.0  # a fill chunk, left out
    values[35:42, 10:15] = values[0:7, 0:5]  # a chunk equal to one of an earlier batch
    with h5py.File(tmp_path / "f.h5", "w") as f:
        store = RawDataStore.create(
            f, "x", dtype=np.dtype("f8"), chunks=chunks, filters=FILTERS[name]
        )
        # On one core only deflate (zlib-ng) beats HDF5's own filters.
        assert (store.pipeline is not None) == (cores > 1 or name.startswith("gzip"))
        slots = store.store_array(values)
        assert slots[1, 1] == -1
        assert slots[5, 2] == slots[0, 0]
        assert len(set(slots[slots >= 0].tolist())) == store.n_slots == slots.size - 2
        f.flush()
        raw = f["x/raw_data"][()]  # HDF5's own filter pipeline decodes every chunk
        for where in np.ndindex(*slots.shape):
            slot = int(slots[where])
            if slot < 0:
                continue
            expected = _chunk(values, chunks, where)
            got = raw[slot * 7 : slot * 7 + expected.shape[0], : expected.shape[1]]
            np.testing.assert_array_equal(got, expected)


def test_a_failing_encode_leaves_nothing_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(codecs, "workers", lambda: 2)
    monkeypatch.setattr(rawdata, "HASH_BATCH_BYTES", 2 * 10 * 8)
    calls = []
    encode = codecs.Pipeline.encode

    def failing(self: codecs.Pipeline, chunk: np.ndarray) -> bytes:
        calls.append(1)
        if len(calls) == 5:
            raise RuntimeError("codec failed")
        return encode(self, chunk)

    monkeypatch.setattr(codecs.Pipeline, "encode", failing)
    with h5py.File(tmp_path / "f.h5", "w") as f:
        store = RawDataStore.create(
            f, "x", dtype=np.dtype("f8"), chunks=(10,), filters=FILTERS["gzip"]
        )
        checkpoint = store.checkpoint()
        with pytest.raises(RuntimeError, match="codec failed"):
            store.store_array(np.arange(1.0, 101.0))
        assert store._unwritten == []
        store.rollback(checkpoint)
        assert store.n_slots == 0
        monkeypatch.setattr(codecs.Pipeline, "encode", encode)
        slots = store.store_array(np.arange(1.0, 101.0))
        np.testing.assert_array_equal(slots, np.arange(10))
        np.testing.assert_array_equal(f["x/raw_data"][()], np.arange(1.0, 101.0))
