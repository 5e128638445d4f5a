"""Samples compressed on the writer's threads while the caller goes on: what ``write``
returns, when samples are stored, and what a failure leaves behind."""

from __future__ import annotations

import os
import pathlib
import threading
from typing import Any

import h5py
import numpy as np
import pytest
from sample_images import SHAPE, smooth

from h5vc.errors import ClosedError, CorruptDataError, InvalidOptionError, SchemaMismatchError
from h5vc.hdf5 import codecs
from h5vc.samples import SampleStore, decode_record
from h5vc.samples import backends as sample_backends
from h5vc.samples import store as sample_store

LZ4HC = {"complib": "blosc:lz4hc", "complevel": 5, "shuffle": "byte"}


def make_store(path: pathlib.Path, backend: str = "01", **options: Any) -> SampleStore:
    options.setdefault("collection_count", 2)
    options.setdefault("collection_size", 20)
    return SampleStore(path, backend, SHAPE, "uint8", LZ4HC, **options)


def index_files(store: SampleStore) -> list[pathlib.Path]:
    return sorted(store.directory.glob("*.index"))


def read_with_h5py(store: SampleStore, record_text: str) -> np.ndarray:
    """A sample read by plain h5py through HDF5's filter pipeline."""
    record = decode_record(record_text)
    with h5py.File(store.directory / f"{record.uid}.hdf5", "r") as f:
        return np.asarray(f[record.dataset][record.index])


class PoolEncoder:
    """Counts the chunks encoded on the writer's threads; makes the ``fail_at``-th raise."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_at: int = 0) -> None:
        self.calls = 0
        original = codecs.Pipeline.encode_like_hdf5

        def encode(encoder: Any, chunk: np.ndarray) -> tuple[bytes, int] | None:
            if threading.current_thread() is not threading.main_thread():
                self.calls += 1
                if self.calls == fail_at:
                    raise MemoryError("no memory for the compressed chunk")
            return original(encoder, chunk)

        monkeypatch.setattr(codecs.Pipeline, "encode_like_hdf5", encode)


@pytest.mark.parametrize("backend", ["00", "01"])
def test_queued_writes_store_what_the_calling_thread_stores(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    data = smooth(50, seed=1)
    data[30] = np.random.default_rng(2).integers(0, 256, SHAPE, dtype=np.uint8)  # incompressible
    data[40] = data[10].copy()  # a repeat of a sample that may still be queued
    pool = PoolEncoder(monkeypatch)
    results = {}
    for threads in (0, 2):
        store = make_store(tmp_path / str(threads), backend)
        with store.writer(threads=threads) as writer:
            assert writer.threads == threads
            results[threads] = [writer.write(sample) for sample in data]
        assert len(index_files(store)) == 2  # 49 distinct samples: two files, complete
        for record, sample in zip(results[threads], data):
            np.testing.assert_array_equal(read_with_h5py(store, record), sample)
        with store.reader() as reader:
            for record, sample in zip(results[threads], data):
                np.testing.assert_array_equal(reader.read(record), sample)
        assert (pool.calls > 40) == (threads > 0)  # queued: encoded on the threads
    queued = [decode_record(r) for r in results[2]]
    plain = [decode_record(r) for r in results[0]]
    # The same records (but for the random file names); the repeat is stored once.
    assert [(r.dataset, r.index, r.shape) for r in queued] == [
        (r.dataset, r.index, r.shape) for r in plain
    ]
    assert results[2][40] == results[2][10] and len(set(results[2])) == 49
    if backend == "01":
        assert [r.checksum for r in queued] == [r.checksum for r in plain]  # type: ignore[union-attr]


def test_the_caller_may_reuse_its_array_once_write_returns(tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path / "s")
    data = smooth(30, seed=3)
    buffer = np.empty(SHAPE, np.uint8)
    with store.writer(threads=2) as writer:
        records = []
        for sample in data:
            buffer[...] = sample
            records.append(writer.write(buffer))
        buffer[...] = 0
    with store.reader() as reader:
        for record, sample in zip(records, data):
            np.testing.assert_array_equal(reader.read(record), sample)


def test_flush_makes_queued_samples_readable_by_another_reader(tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path / "s", collection_size=100)
    data = smooth(40, seed=4)
    with store.writer(threads=2) as writer:
        records = [writer.write(sample) for sample in data]
        writer.flush()
        assert index_files(store) == []  # the file is still live
        with store.reader() as reader:
            for record, sample in zip(records, data):
                np.testing.assert_array_equal(reader.read(record), sample)
        more = writer.write_many(data[:5] + smooth(5, seed=5))  # flushed on return
        assert more[:5] == records[:5]
        with store.reader() as reader:
            for record, sample in zip(more[5:], smooth(5, seed=5)):
                np.testing.assert_array_equal(reader.read(record), sample)


def test_a_failed_queued_sample_stops_the_writer_and_its_file_gets_no_index(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(tmp_path / "s", collection_size=100)
    complete = [*smooth(3, seed=6)]
    with store.writer(threads=2) as writer:  # a complete file from before
        done = [writer.write(sample) for sample in complete]
    PoolEncoder(monkeypatch, fail_at=5)
    data = smooth(30, seed=7)
    writer = store.writer(threads=2)
    with pytest.raises(MemoryError, match="no memory"):
        for sample in data:
            writer.write(sample)
        writer.flush()
    with pytest.raises(ClosedError, match="storing a sample failed: MemoryError"):
        writer.write(data[0])
    with pytest.raises(ClosedError, match="storing a sample failed"):
        writer.flush()
    writer.close()  # the error was raised already: close closes the file quietly
    assert [p.stem for p in index_files(store)] == [decode_record(done[0]).uid]
    assert len(store.collection_files()) == 2
    # The next writer neither deduplicates against the incomplete file nor stores into it.
    with store.writer(threads=2) as second:
        again = [second.write(sample) for sample in data[:8]]
    assert len({decode_record(r).uid for r in again}) == 1
    with store.reader() as reader:
        for record, sample in zip(again + done, data[:8] + complete):
            np.testing.assert_array_equal(reader.read(record), sample)


@pytest.mark.parametrize("backend", ["00", "01"])
def test_a_queued_sample_that_cannot_be_stored_leaves_no_index(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    store = make_store(tmp_path / "s", backend, collection_size=100)
    data = smooth(10, seed=8)
    stored: list[int] = []
    original = sample_backends.CollectionWriter._store

    def store_chunk(self: Any, slot: int, array: np.ndarray, encoded: bytes | None) -> None:
        if slot == 7:
            raise OSError(28, os.strerror(28))  # no space left on the device
        stored.append(slot)
        original(self, slot, array, encoded)

    monkeypatch.setattr(sample_backends.CollectionWriter, "_store", store_chunk)
    writer = store.writer(threads=2)
    records = []
    with pytest.raises(OSError, match="No space left"):  # met by a write or by close
        for sample in data:
            records.append(writer.write(sample))
        writer.close()
    writer.close()
    assert len(records) > 7 and 7 not in stored
    assert index_files(store) == []
    with store.reader() as reader:  # samples stored before the failure read back
        np.testing.assert_array_equal(reader.read(records[3]), data[3])
        with pytest.raises(CorruptDataError, match="not stored it"):  # not read as zeros
            reader.read(records[7])
        with pytest.raises(CorruptDataError, match="not stored it"):
            reader.read_many(records[6:8])


def test_bad_input_raises_and_queues_nothing(tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path / "s")
    data = smooth(6, seed=9)
    with store.writer(threads=2) as writer:
        records = [writer.write(sample) for sample in data]
        with pytest.raises(SchemaMismatchError, match="dtype"):
            writer.write(data[0].astype(np.int16))
        with pytest.raises(SchemaMismatchError, match="C-ordered"):
            writer.write(np.asfortranarray(data[1]))
        records.append(writer.write(smooth(1, seed=10)[0]))
    assert [decode_record(r).index for r in records] == list(range(7))


def test_default_threads(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path / "s")
    for cores, expected in ((1, 1), (2, 2), (3, 3), (16, 4)):
        monkeypatch.setattr(sample_store, "usable", lambda cores=cores: cores)
        assert sample_store.default_encode_threads() == expected
        with store.writer() as writer:
            assert writer.threads == expected
    with pytest.raises(InvalidOptionError, match="threads"):
        store.writer(threads=-1)


def test_large_chunks_are_encoded_in_the_calling_thread(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sample_backends, "QUEUE_MAX_CHUNK_BYTES", SHAPE[0] * SHAPE[1] - 1)
    store = make_store(tmp_path / "s")
    data = smooth(5, seed=11)
    with store.writer(threads=2) as writer:
        records = [writer.write(sample) for sample in data]
        assert not writer._current._queue  # type: ignore[union-attr]
        with store.reader() as reader:  # each stored and flushed before write returned
            for record, sample in zip(records, data):
                np.testing.assert_array_equal(reader.read(record), sample)


_CRASHING_WRITER = """
import os, sys
import numpy as np
from h5vc.samples import SampleStore
store = SampleStore(sys.argv[1])
rng = np.random.default_rng(12)
rows, cols = np.indices(store.schema.shape)
with store.writer(threads=2) as writer:
    for number in range(int(sys.argv[2])):
        sample = ((rows * (number % 3) + cols // (1 + number % 4) + number) % 256).astype(np.uint8)
        print(writer.write(sample), number, sep="\t", flush=True)
    os._exit(3)  # killed: no flush, no close
"""


@pytest.mark.parametrize("backend", ["00", "01"])
def test_a_writer_killed_with_queued_samples_leaves_no_wrong_data(
    tmp_path: pathlib.Path, backend: str
) -> None:
    import subprocess
    import sys

    store = make_store(tmp_path / "s", backend, collection_size=200)
    script = tmp_path / "writer.py"
    script.write_text(_CRASHING_WRITER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(script), str(store.directory), "150"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    lines = [line.split("\t") for line in done.stdout.splitlines()]
    assert len(lines) == 150
    assert index_files(store) == []  # never published as complete
    rows, cols = np.indices(SHAPE)
    read = lost = 0
    with store.reader() as reader:
        for record, number_text in lines:
            number = int(number_text)
            expected = ((rows * (number % 3) + cols // (1 + number % 4) + number) % 256).astype(
                np.uint8
            )
            try:
                got = reader.read(record)
            except CorruptDataError as err:
                assert "not stored it" in str(err)
                lost += 1
            else:
                np.testing.assert_array_equal(got, expected)
                read += 1
    assert read > 0 and lost > 0  # the queue held samples the crash lost; none read wrong
