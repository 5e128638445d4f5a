"""The write path of sample writers: each distinct sample encoded once (on the writer's
threads), duplicates recognised by their hashes alone, the same records and stored bytes
as the sequential path, and errors on a thread raised as themselves with nothing
published."""

from __future__ import annotations

import pathlib
import threading
import time
from typing import Any

import h5py
import numpy as np
import pytest
import xxhash
from sample_files import stored_chunks, without_uid
from sample_images import SHAPE, smooth

from h5vc.errors import ClosedError, CorruptDataError
from h5vc.hdf5 import codecs
from h5vc.samples import Record00, Record01, SampleReader, SampleStore, decode_record
from h5vc.samples import backends as sample_backends
from h5vc.samples import store as sample_store

LZ4HC = {"complib": "blosc:lz4hc", "complevel": 5, "shuffle": "byte"}
ZSTD = {"complib": "blosc:zstd", "complevel": 3, "shuffle": "bit"}
#: Distinct samples of :func:`dedup_heavy`: half of them incompressible.
DISTINCT = 16


def dedup_heavy(count: int, seed: int) -> list[np.ndarray]:
    """``count`` samples cycling through :data:`DISTINCT` distinct ones, starting with an
    incompressible one: rolled and divided copies of random bytes (none compresses)
    alternating with smooth images (all compress)."""
    noise = np.random.default_rng(seed).integers(0, 256, SHAPE, dtype=np.uint8)
    rough = [np.roll(noise, k, axis=1) // (1 + k % 3) for k in range(DISTINCT // 2)]
    gentle = smooth(DISTINCT // 2, seed)
    distinct = [sample for pair in zip(rough, gentle) for sample in pair]
    return [distinct[i % DISTINCT].copy() for i in range(count)]


def make_store(path: pathlib.Path, backend: str, compression: Any = None, **options: Any) -> Any:
    options.setdefault("collection_count", 2)
    options.setdefault("collection_size", 40)
    return SampleStore(path, backend, SHAPE, "uint8", compression or LZ4HC, **options)


class Calls:
    """Counts chunk encodings, HDF5 writes of samples and sample reads, on every thread."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.encoded = 0
        self.hdf5_writes = 0
        self.reads = 0
        self._lock = threading.Lock()
        encode = codecs.Pipeline.encode_like_hdf5
        write = sample_backends._SampleIO.write
        read = sample_backends._SampleIO.read
        fetch = sample_backends.CollectionReader.fetch

        def counting_encode(encoder: Any, chunk: np.ndarray) -> tuple[bytes, int] | None:
            with self._lock:
                self.encoded += 1
            return encode(encoder, chunk)

        def counting_write(sample_io: Any, index: int, array: np.ndarray) -> None:
            self.hdf5_writes += 1
            write(sample_io, index, array)

        def counting_read(sample_io: Any, index: int, out: np.ndarray) -> None:
            self.reads += 1
            read(sample_io, index, out)

        def counting_fetch(reader: Any, record: Any) -> Any:
            self.reads += 1
            return fetch(reader, record)

        monkeypatch.setattr(codecs.Pipeline, "encode_like_hdf5", counting_encode)
        monkeypatch.setattr(sample_backends._SampleIO, "write", counting_write)
        monkeypatch.setattr(sample_backends._SampleIO, "read", counting_read)
        monkeypatch.setattr(sample_backends.CollectionReader, "fetch", counting_fetch)


@pytest.mark.parametrize("backend", ["00", "01"])
@pytest.mark.parametrize("threads", [0, 2])
def test_each_distinct_sample_is_encoded_once_and_duplicates_read_nothing(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, backend: str, threads: int
) -> None:
    data = dedup_heavy(64, seed=1)
    store = make_store(tmp_path / "s", backend)
    calls = Calls(monkeypatch)
    with store.writer(threads=threads) as writer:
        records = [writer.write(sample) for sample in data]
    assert calls.encoded == DISTINCT  # duplicates are never compressed
    assert calls.reads == 0  # ... nor read back
    # Through HDF5: only the first chunk of each kind (compressed, stored as is), to check
    # the encoder against HDF5's own bytes; the rest are direct chunk writes.
    assert calls.hdf5_writes == 2
    assert len(set(records)) == DISTINCT
    assert records[DISTINCT:] == records[:DISTINCT] * 3
    masks = [mask for mask, _ in stored_chunks(store.directory)]
    assert masks == [1, 0] * (DISTINCT // 2)  # incompressible samples stored as they are
    with store.reader() as reader:
        for record, sample in zip(records, data):
            np.testing.assert_array_equal(reader.read(record), sample)


@pytest.mark.parametrize("backend", ["00", "01"])
@pytest.mark.parametrize("compression", [LZ4HC, ZSTD], ids=["lz4hc", "zstd"])
def test_records_and_stored_bytes_match_the_sequential_path(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, backend: str, compression: Any
) -> None:
    data = dedup_heavy(70, seed=2)
    data[40] = np.zeros(SHAPE, np.uint8)  # one more distinct sample, late
    options = {"collection_count": 2, "collection_size": 6}  # several files
    ways = {
        "sequential": lambda writer: [writer.write(sample) for sample in data],
        "threads": lambda writer: [writer.write(sample) for sample in data],
        "write_many": lambda writer: writer.write_many(data),
    }
    records, chunks = {}, {}
    for name, write in ways.items():
        store = make_store(tmp_path / name, backend, compression, **options)
        with store.writer(threads=0 if name == "sequential" else 2) as writer:
            records[name] = write(writer)
        chunks[name] = stored_chunks(store.directory)
        with store.reader() as reader:
            for record, sample in zip(records[name], data):
                np.testing.assert_array_equal(reader.read(record), sample)
    with monkeypatch.context() as m:  # every chunk through HDF5's filter pipeline
        m.setattr(codecs.Pipeline, "like_hdf5", property(lambda self: False))
        plain = make_store(tmp_path / "plain", backend, compression, **options)
        with plain.writer(threads=0) as writer:
            plain_records = [writer.write(sample) for sample in data]
    assert len(set(plain_records)) == DISTINCT + 1
    assert len(stored_chunks(plain.directory)) == DISTINCT + 1
    for name in ways:
        assert without_uid(records[name]) == without_uid(plain_records), name
        assert chunks[name] == stored_chunks(plain.directory), name


def test_a_sample_of_an_earlier_session_is_read_back_once(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = dedup_heavy(DISTINCT, seed=3)
    store = make_store(tmp_path / "s", "01")
    with store.writer() as writer:
        first = [writer.write(sample) for sample in data]
    files = store.collection_files()
    verified: list[str] = []
    original = SampleReader.read

    def read(reader: Any, record: Any) -> np.ndarray:
        verified.append(record)
        return original(reader, record)

    monkeypatch.setattr(SampleReader, "read", read)
    with store.writer() as writer:
        again = [writer.write(sample.copy()) for sample in data * 3]
    assert again == first * 3
    assert sorted(verified) == sorted(first)  # each compared with the stored one once
    assert store.collection_files() == files


def test_a_different_sample_of_an_earlier_sessions_digest_is_stored_apart(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Within a session a sample is known by its 128-bit content digest alone (one hash
    # per duplicate); a record of an earlier session's index is returned only for a
    # sample read back and found equal.
    monkeypatch.setattr(sample_store, "content_digest", lambda array: "0" * 32)
    data = dedup_heavy(3, seed=4)
    store = make_store(tmp_path / "s", "01")  # 00 readers would check the false digests
    records = []
    for sample in data:
        with store.writer() as writer:
            records.append(writer.write(sample))
            assert writer.write(sample.copy()) == records[-1]
    assert len(set(records)) == 3
    assert len(store.collection_files()) == 3
    with store.reader() as reader:
        for record, sample in zip(records, data):
            np.testing.assert_array_equal(reader.read(record), sample)
    with store.writer() as writer:  # whichever record the index holds: the right sample
        again = writer.write(data[0].copy())
    with store.reader() as reader:
        np.testing.assert_array_equal(reader.read(again), data[0])


class CodecFault(RuntimeError):
    """The error a broken codec raises on an encoding thread."""


def failing_encoder(monkeypatch: pytest.MonkeyPatch, fail_at: int) -> list[BaseException]:
    """Make the ``fail_at``-th encoding raise CodecFault; return the list it goes into."""
    raised: list[BaseException] = []
    calls = [0]
    lock = threading.Lock()
    original = codecs.Pipeline.encode_like_hdf5

    def encode(encoder: Any, chunk: np.ndarray) -> tuple[bytes, int] | None:
        with lock:
            calls[0] += 1
            number = calls[0]
        if number == fail_at:
            raised.append(CodecFault(f"cannot encode chunk {number}"))
            raise raised[-1]
        return original(encoder, chunk)

    monkeypatch.setattr(codecs.Pipeline, "encode_like_hdf5", encode)
    return raised


@pytest.mark.parametrize("backend", ["00", "01"])
def test_an_error_on_an_encoding_thread_is_raised_as_itself_and_publishes_nothing(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    store = make_store(tmp_path / "s", backend, collection_size=100)
    data = dedup_heavy(48, seed=5)
    raised = failing_encoder(monkeypatch, fail_at=6)
    writer = store.writer(threads=2)
    records: list[str] = []
    with pytest.raises(CodecFault) as caught:
        for sample in data:
            records.append(writer.write(sample))
        writer.close()
    assert raised and caught.value is raised[0]  # the worker's own exception
    assert threading.current_thread() is threading.main_thread()
    with pytest.raises(ClosedError, match="storing a sample failed: CodecFault"):
        writer.write(data[0])
    writer.close()
    assert list(store.directory.glob("*.index")) == []  # no record of the file published
    with store.reader() as reader:  # a record of the failed file reads right or raises
        for record, sample in zip(records, data):
            try:
                got = reader.read(record)
            except CorruptDataError as err:
                assert "not stored it" in str(err)
            else:
                np.testing.assert_array_equal(got, sample)
    monkeypatch.undo()
    with store.writer(threads=2) as second:  # nothing to deduplicate against
        again = [second.write(sample) for sample in data[:DISTINCT]]
    assert {decode_record(r).uid for r in again}.isdisjoint({decode_record(r).uid for r in records})
    with store.reader() as reader:
        for record, sample in zip(again, data):
            np.testing.assert_array_equal(reader.read(record), sample)


def test_an_error_in_the_calling_thread_takes_no_slot(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(tmp_path / "s", "01")
    data = dedup_heavy(DISTINCT, seed=6)
    failing_encoder(monkeypatch, fail_at=3)
    with store.writer(threads=0) as writer:
        records = [writer.write(sample) for sample in data[:2]]
        with pytest.raises(CodecFault):
            writer.write(data[2])
        records += [writer.write(sample) for sample in data[2:]]  # the writer goes on
    assert [decode_record(r).index for r in records] == list(range(DISTINCT))
    (index_file,) = store.directory.glob("*.index")
    assert [line.split(" ", 1)[1] for line in index_file.read_text().splitlines()] == records
    with store.reader() as reader:
        for record, sample in zip(records, data):
            np.testing.assert_array_equal(reader.read(record), sample)


@pytest.mark.parametrize("backend", ["00", "01"])
def test_the_writing_process_reads_samples_stored_as_they_are(
    tmp_path: pathlib.Path, backend: str
) -> None:
    noise = np.random.default_rng(7).integers(0, 256, (12, *SHAPE), dtype=np.uint8)
    store = make_store(tmp_path / "s", backend)
    with store.writer(threads=2) as writer:
        records = [writer.write(sample) for sample in noise]
        writer.flush()
        # The same HDF5 file, shared within the process; the last sample stored first.
        with h5py.File(store.collection_files()[0], "r", swmr=True) as f:
            last = decode_record(records[-1])
            np.testing.assert_array_equal(f[last.dataset][last.index], noise[-1])
        with store.reader() as reader:
            for record, sample in zip(records[::-1], noise[::-1]):
                np.testing.assert_array_equal(reader.read(record), sample)
        assert writer.write(noise[0].copy()) == records[0]  # a duplicate: nothing stored
        with store.reader() as reader:
            np.testing.assert_array_equal(reader.read(records[-1]), noise[-1])


def test_small_chunks_are_encoded_in_the_calling_thread(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sample_backends, "QUEUE_MIN_CHUNK_BYTES", SHAPE[0] * SHAPE[1] + 1)
    threads: set[str] = set()
    original = codecs.Pipeline.encode_like_hdf5

    def encode(encoder: Any, chunk: np.ndarray) -> tuple[bytes, int] | None:
        threads.add(threading.current_thread().name)
        return original(encoder, chunk)

    monkeypatch.setattr(codecs.Pipeline, "encode_like_hdf5", encode)
    store = make_store(tmp_path / "s", "01")
    data = dedup_heavy(DISTINCT, seed=8)
    with store.writer(threads=2) as writer:
        records = [writer.write(sample) for sample in data]
        assert not writer._current._queue  # type: ignore[union-attr]
        with store.reader() as reader:  # each stored and flushed before write returned
            for record, sample in zip(records[::-1], data[::-1]):
                np.testing.assert_array_equal(reader.read(record), sample)
    assert threads == {threading.main_thread().name}


@pytest.mark.parametrize("backend", ["00", "01"])
def test_hdf5_forgets_chunks_stored_unfiltered_once_per_run_of_writes(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    # Incompressible samples are stored with Blosc skipped (filter mask 1), which HDF5
    # remembers wrongly for the chunk it looked up last: that is undone once before
    # the samples can be read, not after every chunk.
    forgotten: list[int] = []
    forget = sample_backends._forget_last_chunk

    def counting(dataset_id: Any, index: int) -> None:
        forgotten.append(index)
        forget(dataset_id, index)

    monkeypatch.setattr(sample_backends, "_forget_last_chunk", counting)
    rng = np.random.default_rng(11)
    data = [rng.integers(0, 256, SHAPE, dtype=np.uint8) for _ in range(12)]
    store = make_store(tmp_path / "s", backend, collection_size=100)
    with store.writer(threads=0) as writer:
        records = writer.write_many(data)
        assert forgotten == [len(data) - 1]  # the last one, before write_many returned
        with store.reader() as reader:  # this process, the file still being written
            for record, sample in zip(records, data):
                np.testing.assert_array_equal(reader.read(record), sample)
    masks = {mask for mask, _chunk in stored_chunks(store.directory)}
    assert masks == {1}


@pytest.mark.parametrize("backend", ["00", "01"])
@pytest.mark.parametrize("threads", [0, 2])
def test_records_are_those_the_record_classes_encode(
    tmp_path: pathlib.Path, backend: str, threads: int
) -> None:
    data = dedup_heavy(24, seed=12)
    if backend == "00":
        data[5] = data[5][:100, :7].copy()  # smaller samples have their own shape
        data[9] = np.zeros((3, 0), np.uint8)
    store = make_store(tmp_path / "s", backend, collection_size=5)  # datasets 0 and 1
    with store.writer(threads=threads) as writer:
        records = [writer.write(sample) for sample in data]
    uids = [decode_record(r).uid for r in records]
    slots = iter(range(len(data)))
    expected: dict[int, str] = {}
    for position, sample in enumerate(data):
        key = next(i for i in range(position + 1) if np.array_equal(data[i], sample))
        if key != position and data[key].shape == sample.shape:
            expected[position] = expected[key]
            continue
        slot = next(slots)
        fields = {
            "uid": uids[position],
            "dataset": str(slot // 5 % 2),
            "index": slot % 5,
            "shape": sample.shape,
        }
        if backend == "01":
            expected[position] = Record01(
                checksum=xxhash.xxh64_hexdigest(sample.tobytes()), **fields
            ).encode()
        else:
            expected[position] = Record00(**fields).encode()
    assert records == [expected[i] for i in range(len(data))]
    assert len(set(uids)) == 2  # 16 distinct samples (17 for 00): two files of 10


@pytest.mark.parametrize("backend", ["00", "01"])
@pytest.mark.parametrize("threads", [0, 2])
def test_a_duplicate_costs_one_hash_and_a_stored_sample_its_checksum_once(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, backend: str, threads: int
) -> None:
    hashed: dict[str, int] = {"digest": 0, "xxh64": 0}
    digest, xxh64 = sample_store.content_digest, sample_backends.sample_xxh64

    def counting_digest(array: np.ndarray) -> str:
        hashed["digest"] += 1
        return digest(array)

    def counting_xxh64(array: np.ndarray) -> str:
        hashed["xxh64"] += 1
        return xxh64(array)

    monkeypatch.setattr(sample_store, "content_digest", counting_digest)
    monkeypatch.setattr(sample_store, "sample_xxh64", counting_xxh64)
    monkeypatch.setattr(sample_backends, "sample_xxh64", counting_xxh64)
    data = dedup_heavy(64, seed=13)
    store = make_store(tmp_path / "s", backend)
    with store.writer(threads=threads) as writer:
        records = [writer.write(sample) for sample in data]
    assert hashed["digest"] == len(data)  # one hash per sample written ...
    # ... and the xxhash64 of a 01 record once per sample stored (none for 00 records)
    assert hashed["xxh64"] == (DISTINCT if backend == "01" else 0)
    with store.reader() as reader:
        for record, sample in zip(records, data):
            np.testing.assert_array_equal(reader.read(record), sample)


def test_queued_samples_are_stored_in_batches_with_one_flush_each(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flushes = [0]
    flush = h5py.Dataset.flush

    def counting_flush(dataset: h5py.Dataset) -> None:
        flushes[0] += 1
        flush(dataset)

    monkeypatch.setattr(h5py.Dataset, "flush", counting_flush)
    noise = np.random.default_rng(14).integers(0, 256, (96, *SHAPE), dtype=np.uint8)
    store = make_store(tmp_path / "s", "01", collection_count=1, collection_size=200)
    with store.writer(threads=2) as writer:
        records = []
        for sample in noise:  # a slow caller: the pool is done with a sample before the next
            records.append(writer.write(sample))
            time.sleep(0.002)
        with store.reader() as reader, pytest.raises(CorruptDataError, match="not stored it"):
            reader.read(records[-1])  # the last batch is still with the pool
        writer.flush()
        with store.reader() as reader:
            for record, sample in zip(records, noise):
                np.testing.assert_array_equal(reader.read(record), sample)
    batch = sample_backends.batch_samples(SHAPE[0] * SHAPE[1], 2)
    assert batch > 1
    assert flushes[0] <= len(noise) // batch + 2  # a flush per batch stored, not per sample


def test_blosc_runs_on_the_pool_threads_alone_while_they_encode(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from numcodecs import blosc

    seen: set[object] = set()
    original = codecs.Pipeline.encode_like_hdf5

    def encode(encoder: Any, chunk: np.ndarray) -> tuple[bytes, int] | None:
        if threading.current_thread() is not threading.main_thread():
            seen.add(blosc.use_threads)
        return original(encoder, chunk)

    monkeypatch.setattr(codecs.Pipeline, "encode_like_hdf5", encode)
    monkeypatch.setattr(blosc, "use_threads", True)  # a caller asked for Blosc's threads
    data = dedup_heavy(40, seed=15)
    store = make_store(tmp_path / "s", "01")
    with store.writer(threads=2) as writer:
        records = [writer.write(sample) for sample in data]
    assert seen == {False}  # no Blosc threads, nor numcodecs' lock, behind each worker
    assert blosc.use_threads is True  # the caller's setting back once the pool is done
    with store.reader() as reader:
        for record, sample in zip(records, data):
            np.testing.assert_array_equal(reader.read(record), sample)


@pytest.mark.parametrize("backend", ["00", "01"])
def test_every_dataset_of_a_collection_file_is_created_alike(
    tmp_path: pathlib.Path, backend: str
) -> None:
    store = make_store(tmp_path / "s", backend, collection_count=5, collection_size=3)
    data = dedup_heavy(12, seed=16)
    with store.writer(threads=2) as writer:
        records = [writer.write(sample) for sample in data]
    (path,) = store.collection_files()
    with h5py.File(path, "r") as f:
        assert sorted(f) == ["0", "1", "2", "3", "4"]
        first = f["0"]
        assert first.shape == (3, *SHAPE) and first.chunks == (1, *SHAPE)
        assert first.fletcher32 == (backend == "00")
        for name in f:
            dataset = f[name]
            assert dataset.id.get_create_plist() == first.id.get_create_plist()
            assert dataset.id.get_type() == first.id.get_type()
            assert (dataset.shape, dataset.maxshape) == (first.shape, first.maxshape)
            assert f.id.links.get_info(name.encode()).cset == f.id.links.get_info(b"0").cset
    with store.reader() as reader:
        for record, sample in zip(records, data):
            np.testing.assert_array_equal(reader.read(record), sample)
