"""Large multi-dimensional datasets written at once: hashes, fill chunks, failures.

A dataset created with a large array is hashed, deduplicated and written batch by
batch on several threads (``RawDataStore.store_array``). Every chunk's digest must be
SHA-256 over its bytes and shape, chunks of only the fill value must stay unstored
(whatever the fill value), the data must read back as written, and a failure on a
worker thread must reach the caller and leave every earlier version as it was.
"""

from __future__ import annotations

import hashlib
import threading
import time

import numpy as np
import pytest

import h5vc
import h5vc.store.rawdata as rawdata
from h5vc.hashing import chunk_hash, fill_chunk_hash, fill_item, may_be_fill
from h5vc.store import layout


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of a few chunks, so small arrays go through the threaded batches."""
    monkeypatch.setattr(rawdata, "HASH_BATCH_BYTES", 4096)
    monkeypatch.setattr(h5vc.wrappers.group, "WRITE_THROUGH_BYTES", 0)


def stored_rows(vf: h5vc.VersionedHDF5File, name: str = "x") -> tuple[np.ndarray, np.ndarray]:
    group = vf.f[f"{layout.VERSION_DATA}/{name}"]
    n_rows = int(group[layout.HASH_TABLE].attrs[layout.ATTR_LARGEST_INDEX])
    return group[layout.RAW_DATA][()], group[layout.HASH_TABLE][:n_rows]


def expected_digest(chunk: np.ndarray) -> bytes:
    return hashlib.sha256(
        np.ascontiguousarray(chunk).tobytes() + str(chunk.shape).encode("ascii")
    ).digest()


def test_digests_are_sha256_of_each_chunk_and_data_reads_back(path: str) -> None:
    rng = np.random.default_rng(0)
    values = rng.random((50, 70))  # edge chunks on both axes; chunks not contiguous
    chunks = (16, 20)
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=values, chunks=chunks)
        np.testing.assert_array_equal(vf["v1"]["x"][:], values)
        raw, rows = stored_rows(vf)
    expected = set()
    for i in range(0, 50, 16):
        for j in range(0, 70, 20):
            chunk = values[i : i + 16, j : j + 20]
            assert chunk_hash(chunk) == expected_digest(chunk)
            expected.add(expected_digest(chunk))
    assert {bytes(row) for row in rows["hash"]} == expected
    assert len(rows) == 4 * 4
    for row in rows:
        start, stop = int(row["shape"][0]), int(row["shape"][1])
        stored = raw[start:stop]
        matches = [
            expected_digest(stored[:, :width])
            for width in (20, 10)
            if expected_digest(stored[:, :width]) == bytes(row["hash"])
        ]
        assert matches, "a stored chunk's bytes do not give its row's digest"


@pytest.mark.parametrize(
    ("dtype", "fillvalue"),
    [("f8", None), ("f8", 7.5), ("f4", 0.1), ("i2", -3), ("u1", 255), ("f8", np.nan)],
)
def test_fill_chunks_stay_unstored(path: str, dtype: str, fillvalue) -> None:
    fill = np.zeros((), dtype)[()] if fillvalue is None else np.asarray(fillvalue, dtype)[()]
    values = np.full((40, 30), fill, dtype=dtype)
    values[:10, :10] = 1  # one chunk of data
    values[10, 10] = 2  # a chunk that starts with the fill value but holds data
    values[30:, 20:] = 1  # a chunk of data in the last corner (an edge chunk)
    values[30, 20] = fill  # starting with the fill value
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=values, chunks=(10, 10), fillvalue=fillvalue)
        got = vf["v1"]["x"][:]
        _, rows = stored_rows(vf)
    np.testing.assert_array_equal(got, values)  # NaN equal to NaN
    assert len(rows) == 3  # the three chunks with data; the nine of fill value unstored


def test_all_fill_array_stores_nothing(path: str) -> None:
    values = np.full((64, 48), 2.5)
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=values, chunks=(16, 16), fillvalue=2.5)
        np.testing.assert_array_equal(vf["v1"]["x"][:], values)
        _, rows = stored_rows(vf)
    assert len(rows) == 0


def test_fill_chunk_hashed_only_when_a_chunk_starts_with_the_fill_value(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    shapes = []

    def recording(shape, dtype, fillvalue):
        shapes.append(tuple(shape))
        return fill_chunk_hash(shape, dtype, fillvalue)

    monkeypatch.setattr(rawdata, "fill_chunk_hash", recording)
    values = np.random.default_rng(2).random((40, 40)) + 1  # no element is 0
    values[20:30, 0:10] = 0  # one chunk of the fill value
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=values, chunks=(10, 10))
        np.testing.assert_array_equal(vf["v1"]["x"][:], values)
        assert len(stored_rows(vf)[1]) == 15
    assert shapes == [(10, 10)]


def test_may_be_fill() -> None:
    assert may_be_fill(np.zeros((3, 3)), fill_item(np.dtype("f8"), 0))
    assert not may_be_fill(np.ones((3, 3)), fill_item(np.dtype("f8"), 0))
    assert may_be_fill(np.full(4, np.float32(0.1)), fill_item(np.dtype("f4"), 0.1))
    assert may_be_fill(np.full(4, np.nan), fill_item(np.dtype("f8"), 0.0))  # unsure: True
    assert may_be_fill(np.zeros(0), fill_item(np.dtype("f8"), 1.0))
    assert may_be_fill(np.zeros(2, "c16"), fill_item(np.dtype("c16"), 1))  # not decided
    assert fill_item(np.dtype("u1"), 300) is None  # not a value of the dtype
    assert may_be_fill(np.ones(2, "u1"), None)
    strided = np.arange(12.0).reshape(3, 4)[:, 1:]
    assert may_be_fill(strided, fill_item(np.dtype("f8"), 1.0))
    assert not may_be_fill(strided, fill_item(np.dtype("f8"), 0.0))


def test_failure_on_a_worker_thread_keeps_earlier_versions(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(1)
    first = rng.random((60, 60))
    with h5vc.open(path, "w") as vf, vf.stage_version("v1") as g:
        g.create_dataset("x", data=first, chunks=(10, 10))
    calls = []

    def failing(chunk: np.ndarray) -> bytes:
        calls.append(1)
        if len(calls) == 20:
            raise RuntimeError("hashing failed")
        return chunk_hash(chunk)

    monkeypatch.setattr(rawdata, "chunk_hash", failing)
    with h5vc.open(path, "r+") as vf:
        with pytest.raises(RuntimeError, match="hashing failed"), vf.stage_version("v2") as g:
            g.create_dataset("y", data=rng.random((60, 60)), chunks=(10, 10))
        assert len(calls) >= 20
        assert "v2" not in vf.versions
    monkeypatch.undo()
    with h5vc.open(path, "r") as vf:
        assert "v2" not in vf.versions
        np.testing.assert_array_equal(vf["v1"]["x"][:], first)
    with h5vc.open(path, "r+") as vf:
        with vf.stage_version("v2") as g:
            g.create_dataset("y", data=first + 1, chunks=(10, 10))
        np.testing.assert_array_equal(vf["v2"]["y"][:], first + 1)
        np.testing.assert_array_equal(vf["v1"]["x"][:], first)


def _store_in_file(
    tmp_path, name: str, values: np.ndarray, chunks: tuple[int, ...], fillvalue=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Slots, stored raw_data and hash-table rows of ``values`` stored at once."""
    import h5py

    dtype = values.dtype if values.dtype.kind != "O" else h5py.string_dtype()
    with h5py.File(tmp_path / f"{name}.h5", "w") as f:
        store = rawdata.RawDataStore.create(
            f, "x", dtype=np.dtype(dtype), chunks=chunks, fillvalue=fillvalue
        )
        slots = store.store_array(values, fillvalue=fillvalue)
        return slots, store.raw_data[()], store.rows()


@pytest.mark.parametrize(
    ("shape", "chunks"),
    [((37,), (5,)), ((23, 41), (4, 6)), ((9, 10, 11), (2, 3, 4)), ((16, 16), (4, 4))],
)
@pytest.mark.parametrize("cores", [2, 3])
def test_threads_store_what_one_thread_stores(
    tmp_path, monkeypatch: pytest.MonkeyPatch, shape, chunks, cores: int
) -> None:
    """Slots, stored bytes and hash-table rows do not depend on how many threads
    gathered and hashed the batches: edge chunks, fill chunks and repeated chunks
    included."""
    rng = np.random.default_rng(sum(shape))
    values = rng.integers(0, 3, size=shape).astype("f8")  # repeated chunks
    values[tuple(slice(0, c) for c in chunks)] = 0.0  # a fill chunk
    values[tuple(slice(n - 1, n) for n in shape)] = 0.0  # an edge chunk ending in fill
    monkeypatch.setattr(rawdata.codecs, "workers", lambda: 1)
    serial = _store_in_file(tmp_path, "serial", values, chunks)
    monkeypatch.setattr(rawdata.codecs, "workers", lambda: cores)
    threaded = _store_in_file(tmp_path, "threaded", values, chunks)
    np.testing.assert_array_equal(threaded[0], serial[0])
    np.testing.assert_array_equal(threaded[1], serial[1])
    assert threaded[2].tobytes() == serial[2].tobytes()
    assert -1 in serial[0]
    for where in np.ndindex(*serial[0].shape):
        chunk = values[tuple(slice(i * c, (i + 1) * c) for i, c in zip(where, chunks))]
        slot = int(serial[0][where])
        if slot < 0:
            assert not chunk.any()
            continue
        digests = {bytes(row["hash"]) for row in serial[2] if row["shape"][0] == slot * chunks[0]}
        assert digests == {expected_digest(chunk)}


@pytest.mark.parametrize("cores", [1, 2])
def test_strings_stored_by_threads_read_back(
    tmp_path, monkeypatch: pytest.MonkeyPatch, cores: int
) -> None:
    monkeypatch.setattr(rawdata.codecs, "workers", lambda: cores)
    values = np.array([f"s{i % 7}" * (i % 4) for i in range(13 * 9)], dtype=object)
    values = values.reshape(13, 9)
    slots, raw, rows = _store_in_file(tmp_path, "strings", values, (3, 4))
    assert slots.shape == (5, 3)
    for where in np.ndindex(*slots.shape):
        chunk = values[where[0] * 3 : where[0] * 3 + 3, where[1] * 4 : where[1] * 4 + 4]
        slot = int(slots[where])
        if slot < 0:
            assert all(item == "" for item in chunk.ravel())
            continue
        stored = raw[slot * 3 : slot * 3 + chunk.shape[0], : chunk.shape[1]]
        assert [item.decode() for item in stored.ravel()] == chunk.ravel().tolist()
        assert chunk_hash(chunk) in {bytes(row["hash"]) for row in rows}


@pytest.mark.parametrize("on_pool", [True, False])
def test_failure_gathering_on_either_thread_commits_nothing(
    path: str, monkeypatch: pytest.MonkeyPatch, on_pool: bool
) -> None:
    monkeypatch.setattr(rawdata.codecs, "workers", lambda: 2)
    rng = np.random.default_rng(3)
    first = rng.random((40, 40))
    with h5vc.open(path, "w") as vf, vf.stage_version("v1") as g:
        g.create_dataset("x", data=first, chunks=(8, 8))
    gather = rawdata._gather
    main = threading.current_thread()

    def failing(*args):
        if (threading.current_thread() is not main) == on_pool:
            raise MemoryError("no memory for the batch")
        time.sleep(0.01)  # the other thread surely takes a batch meanwhile
        return gather(*args)

    monkeypatch.setattr(rawdata, "_gather", failing)
    with h5vc.open(path, "r+") as vf:
        with pytest.raises(MemoryError, match="no memory"), vf.stage_version("v2") as g:
            g.create_dataset("y", data=rng.random((64, 40)), chunks=(8, 8))
        assert "v2" not in vf.versions
    monkeypatch.undo()
    with h5vc.open(path, "r") as vf:
        assert "v2" not in vf.versions
        np.testing.assert_array_equal(vf["v1"]["x"][:], first)
        assert len(stored_rows(vf)[1]) == 25


def test_a_failed_write_stops_the_gathering(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When writing a batch fails, store_array raises only once no batch is being
    gathered any more, and none is gathered afterwards."""
    import h5py

    monkeypatch.setattr(rawdata.codecs, "workers", lambda: 3)
    gather = rawdata._gather
    lock = threading.Lock()
    running = 0
    calls = 0

    def slow(*args):
        nonlocal running, calls
        with lock:
            running += 1
            calls += 1
        try:
            time.sleep(0.005)
            return gather(*args)
        finally:
            with lock:
                running -= 1

    place = rawdata._BatchWriter.place
    placed = 0

    def failing(self, *args):
        nonlocal placed
        placed += 1
        if placed == 2:
            raise OSError("disk full")
        return place(self, *args)

    monkeypatch.setattr(rawdata, "_gather", slow)
    monkeypatch.setattr(rawdata._BatchWriter, "place", failing)
    values = np.random.default_rng(4).random((64, 64))
    with h5py.File(tmp_path / "f.h5", "w") as f:
        store = rawdata.RawDataStore.create(f, "x", dtype=np.dtype("f8"), chunks=(8, 8))
        with pytest.raises(OSError, match="disk full"):
            store.store_array(values)
        with lock:
            assert running == 0
            seen = calls
        time.sleep(0.05)
        assert calls == seen <= 2 + 5  # the batches written and at most workers + 2 ahead


@pytest.mark.parametrize("cores", [1, 2, 4])
def test_batches_gathered_ahead_of_the_writes_stay_bounded(
    tmp_path, monkeypatch: pytest.MonkeyPatch, cores: int
) -> None:
    """Every batch gathered holds a buffer: at most ``workers + 2`` are gathered past
    the batch being written, however slow the writes."""
    import h5py

    monkeypatch.setattr(rawdata.codecs, "workers", lambda: cores)
    gather, place = rawdata._gather, rawdata._BatchWriter.place
    lock = threading.Lock()
    started = 0
    ahead = []

    def counting(*args):
        nonlocal started
        with lock:
            started += 1
        return gather(*args)

    def slow(self, batch, *args):
        time.sleep(0.002)  # the gathering threads run ahead as far as they may
        with lock:
            ahead.append(started - len(ahead) - 1)  # past the batch being written
        return place(self, batch, *args)

    monkeypatch.setattr(rawdata, "_gather", counting)
    monkeypatch.setattr(rawdata._BatchWriter, "place", slow)
    values = np.random.default_rng(6).random((96, 40))
    with h5py.File(tmp_path / "f.h5", "w") as f:
        store = rawdata.RawDataStore.create(f, "x", dtype=np.dtype("f8"), chunks=(8, 8))
        slots = store.store_array(values)
        np.testing.assert_array_equal(store.raw_data[()][:8, :8], values[:8, :8])
    assert len(ahead) > 4 and (slots >= 0).all()
    assert max(ahead) <= cores + 2
    if cores == 1:
        assert max(ahead) == 0  # gathered on the writing thread, one at a time
