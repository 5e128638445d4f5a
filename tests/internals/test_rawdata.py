"""The chunk store: dedup, fill chunks, hash-table bookkeeping, reopening."""

from __future__ import annotations

import hashlib
import threading
import time

import h5py
import numpy as np
import pytest

from h5vc.errors import MetadataMismatchError
from h5vc.hashing import chunk_hash, hash_in_batches, prefetch
from h5vc.store.layout import ATTR_LARGEST_INDEX
from h5vc.store.rawdata import RawDataStore


@pytest.fixture
def store(tmp_path):
    with h5py.File(tmp_path / "raw.h5", "w") as f:
        yield RawDataStore.create(f, "data/x", dtype=np.dtype("f8"), chunks=(4,), fillvalue=0.0)


def test_identical_chunks_share_a_slot_and_fill_chunks_are_not_stored(store) -> None:
    a, b = np.arange(4.0), np.arange(4.0) + 10
    slots = store.store_chunks([a, b, a.copy(), np.zeros(4), np.zeros(2), a[:3]], fillvalue=0.0)
    assert slots.tolist() == [0, 1, 0, -1, -1, 2]  # an edge chunk differs from a full one
    assert store.raw_data.shape == (12,)
    np.testing.assert_array_equal(store.raw_data[8:12], [0, 1, 2, 0])  # edge slot padded
    again = store.store_chunks([b, a[:3]], fillvalue=0.0)
    assert again.tolist() == [1, 2] and store.raw_data.shape == (12,)


def test_hash_table_rows_match_raw_data_and_count_is_written(store) -> None:
    chunks = [np.arange(4.0) * k for k in range(1, 5)] + [np.ones(1)]
    store.store_chunks(chunks, fillvalue=0.0)
    table = store.hash_table[...]
    assert store.hash_table.attrs[ATTR_LARGEST_INDEX] == len(table) == 5
    for row in table:
        start, stop = row["shape"]
        data = store.raw_data[start:stop]
        assert bytes(row["hash"]) == chunk_hash(data)


def test_index_is_rebuilt_from_the_file(store) -> None:
    store.store_chunks([np.arange(4.0), np.arange(4.0) + 1], fillvalue=0.0)
    reopened = RawDataStore(store.group)
    assert reopened.store_chunks([np.arange(4.0) + 1], fillvalue=0.0).tolist() == [1]
    assert reopened.n_slots == 2


def test_changed_dtype_or_chunks_are_refused(store) -> None:
    with pytest.raises(MetadataMismatchError, match=r"chunks \(4,\).*Got chunks=\(8,\)"):
        store.check_compatible("x", np.dtype("f8"), (8,))
    with pytest.raises(MetadataMismatchError, match=r"dtype float64.*Got dtype=int32"):
        store.check_compatible("x", np.dtype("i4"), (4,))


def test_chunk_hash_follows_the_format_rule() -> None:
    chunk = np.arange(6, dtype="<i8").reshape(2, 3)
    assert chunk_hash(chunk) == hashlib.sha256(chunk.tobytes() + b"(2, 3)").digest()
    strings = np.array([b"ab", "\u00e9"], dtype=object)
    expected = b"".join(len(s).to_bytes(8, "little") + s for s in (b"ab", "\u00e9".encode()))
    assert chunk_hash(strings) == hashlib.sha256(expected + b"(2,)").digest()


def test_parallel_hashing_gives_the_serial_digests() -> None:
    chunks = [np.random.default_rng(i).random(128 * 1024) for i in range(10)]  # 10 MiB
    batches = list(hash_in_batches(chunks, batch_bytes=3 * chunks[0].nbytes))
    assert [len(batch) for batch, _ in batches] == [3, 3, 3, 1]
    digests = [digest for _, batch_digests in batches for digest in batch_digests]
    assert digests == [chunk_hash(c) for c in chunks]


@pytest.mark.parametrize("ahead", [1, 2, 3])
def test_prefetch_keeps_order_and_at_most_ahead_items_in_flight(ahead: int) -> None:
    """Later items may finish first; results still come in order, and no more than
    ``ahead`` items beyond the one the caller holds are ever started."""
    started: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> int:
        with lock:
            started.append(i)
        time.sleep(0.002 * (5 - i % 5))  # the later of a group finish first
        return i * i

    seen = []
    for k, result in enumerate(prefetch(work, range(12), ahead)):
        with lock:
            assert len(started) <= min(12, k + 1 + ahead)
        seen.append(result)
    assert seen == [i * i for i in range(12)]


@pytest.mark.parametrize("order", ["in order", "reversed", "with a gap"])
def test_chunks_of_one_buffer_are_written_in_the_order_given(store, order: str) -> None:
    buffer = np.arange(40.0) + 1  # 10 full chunks of 4, back to back in memory
    chunks = [buffer[4 * i : 4 * (i + 1)] for i in range(10)]
    if order == "reversed":
        chunks = chunks[::-1]
    elif order == "with a gap":
        del chunks[3]
    slots = store.store_chunks(chunks, fillvalue=0.0)
    assert slots.tolist() == list(range(len(chunks)))
    np.testing.assert_array_equal(store.raw_data[...], np.concatenate(chunks))
