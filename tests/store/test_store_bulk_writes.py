"""Large multi-dimensional datasets written at once: hashes, fill chunks, failures.

A dataset created with a large array is hashed, deduplicated and written batch by
batch on several threads (``RawDataStore.store_array``). Every chunk's digest must be
SHA-256 over its bytes and shape, chunks of only the fill value must stay unstored
(whatever the fill value), the data must read back as written, and a failure on a
worker thread must reach the caller and leave every earlier version as it was.
"""

from __future__ import annotations

import hashlib

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
