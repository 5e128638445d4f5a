"""SampleStore: layout of the collection files, round trips, dedup, bad input, corruption."""

from __future__ import annotations

import hashlib
import pathlib
import pickle
import re

import h5py
import numpy as np
import pytest
import xxhash

from h5vc.chunking import next_prime
from h5vc.errors import (
    CorruptDataError,
    DataFileNotFoundError,
    InvalidOptionError,
    RecordFormatError,
    SchemaMismatchError,
)
from h5vc.samples import Record00, Record01, SampleStore, decode_record
from h5vc.samples.backends import cache_settings, chunk_shape

GZIP = {"complib": "gzip", "complevel": 4, "shuffle": True}


def images(count: int, shape: tuple[int, ...] = (6, 5), seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 255, size=shape, dtype=np.uint8) for _ in range(count)]


def make_store(tmp_path: pathlib.Path, backend: str, **settings: object) -> SampleStore:
    return SampleStore(
        tmp_path / "store",
        backend,
        (6, 5),
        np.uint8,
        settings.pop("compression", None),  # type: ignore[arg-type]
        collection_count=settings.pop("collection_count", 3),  # type: ignore[arg-type]
        collection_size=settings.pop("collection_size", 4),  # type: ignore[arg-type]
    )


def file_digests(store: SampleStore) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in store.collection_files()}


@pytest.mark.parametrize("backend", ["00", "01"])
def test_write_read_round_trip(tmp_path: pathlib.Path, backend: str) -> None:
    store = make_store(tmp_path, backend)
    samples = images(20)
    with store.writer() as writer:
        records = [writer.write(sample) for sample in samples]
    assert len(set(records)) == 20
    with store.reader() as reader:
        for record, sample in zip(records, samples):
            got = reader.read(record)
            assert got.dtype == np.uint8 and got.flags.c_contiguous
            np.testing.assert_array_equal(got, sample)
            np.testing.assert_array_equal(reader.read(decode_record(record)), sample)


@pytest.mark.parametrize("backend", ["00", "01"])
def test_collection_file_layout(tmp_path: pathlib.Path, backend: str) -> None:
    store = make_store(tmp_path, backend)
    with store.writer() as writer:
        records = [decode_record(writer.write(sample)) for sample in images(5)]
    (path,) = store.collection_files()
    assert path.name == f"{records[0].uid}.hdf5"
    assert [(r.dataset, r.index) for r in records] == [
        ("0", 0), ("0", 1), ("0", 2), ("0", 3), ("1", 0)
    ]  # fmt: skip
    with h5py.File(path, "r") as h5file:
        assert sorted(h5file) == ["0", "1", "2"]
        for name in h5file:
            dataset = h5file[name]
            assert dataset.shape == (4, 6, 5) and dataset.dtype == np.uint8
            assert dataset.fillvalue == 0
        np.testing.assert_array_equal(h5file["2"][...], 0)  # zero-initialised
        assert h5file["2"].id.get_storage_size() == 0  # and no space used
        if backend == "01":
            assert h5file["0"].chunks == (1, 6, 5)
            assert h5file["0"].fletcher32 is False
        else:
            assert h5file["0"].fletcher32 is True


def test_01_record_carries_xxhash64(tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path, "01")
    sample = images(1)[0]
    with store.writer() as writer:
        record = decode_record(writer.write(sample))
    assert isinstance(record, Record01)
    assert record.checksum == xxhash.xxh64_hexdigest(sample.tobytes())
    assert record.shape == (6, 5)


def test_00_stores_smaller_samples_with_their_shape(tmp_path: pathlib.Path) -> None:
    store = SampleStore(tmp_path / "s", "00", (8, 7, 3), "float32", GZIP)
    rng = np.random.default_rng(1)
    samples = [rng.random(shape, dtype=np.float32) for shape in [(8, 7, 3), (1, 2, 3), (5, 0, 1)]]
    with store.writer() as writer:
        records = [writer.write(sample) for sample in samples]
    assert [decode_record(r).shape for r in records] == [(8, 7, 3), (1, 2, 3), (5, 0, 1)]
    assert isinstance(decode_record(records[1]), Record00)
    with store.reader() as reader:
        for record, sample in zip(records, samples):
            np.testing.assert_array_equal(reader.read(record), sample)


@pytest.mark.parametrize("backend", ["00", "01"])
def test_scalar_samples(tmp_path: pathlib.Path, backend: str) -> None:
    store = SampleStore(tmp_path / "s", backend, (), "int64")
    values = [np.array(v, dtype=np.int64) for v in (7, -3, 2**40)]
    with store.writer() as writer:
        records = [writer.write(v) for v in values]
    assert all(r.endswith(("*", ":")) for r in records)
    with store.reader() as reader:
        assert [reader.read(r)[()] for r in records] == [7, -3, 2**40]


@pytest.mark.parametrize("backend", ["00", "01"])
def test_samples_with_a_zero_length_axis(tmp_path: pathlib.Path, backend: str) -> None:
    store = SampleStore(tmp_path / "s", backend, (3, 0), "float32")
    with store.writer() as writer:
        first = writer.write(np.zeros((3, 0), np.float32))
        again = writer.write(np.empty((3, 0), np.float32))
    assert first == again  # no data: one stored sample
    assert decode_record(first).shape == (3, 0)
    with store.reader() as reader:
        got = reader.read(first)
        assert got.shape == (3, 0) and got.dtype == np.float32
        assert [a.shape for a in reader.read_many([first, again])] == [(3, 0), (3, 0)]


def test_sessions_start_new_files_and_never_rewrite_old_ones(tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path, "01", collection_count=2, collection_size=2)
    first = images(6, seed=1)
    with store.writer() as writer:
        records = [writer.write(sample) for sample in first]
    assert len(store.collection_files()) == 2  # 4 samples per file
    before = file_digests(store)
    with store.writer() as writer:
        second_records = [writer.write(sample) for sample in images(3, seed=2)]
    after = file_digests(store)
    assert {name: after[name] for name in before} == before
    new_uids = {decode_record(r).uid for r in second_records}
    assert not new_uids & {decode_record(r).uid for r in records}
    assert {f"{uid}.hdf5" for uid in new_uids} == set(after) - set(before)
    reopened = SampleStore(tmp_path / "store")
    with reopened.reader() as reader:
        for record, sample in zip(records, first):
            np.testing.assert_array_equal(reader.read(record), sample)


@pytest.mark.parametrize("backend", ["00", "01"])
def test_identical_sample_is_stored_once(tmp_path: pathlib.Path, backend: str) -> None:
    store = make_store(tmp_path, backend)
    sample, other = images(2)
    with store.writer() as writer:
        first = writer.write(sample)
        assert writer.write(sample.copy()) == first
        assert writer.write(other) != first
    files = file_digests(store)
    with SampleStore(tmp_path / "store").writer() as writer:  # a later session, reopened store
        assert writer.write(sample.copy()) == first
    assert file_digests(store) == files  # no new file for a duplicate


def test_dedup_tells_shapes_and_dtypes_apart(tmp_path: pathlib.Path) -> None:
    store = SampleStore(tmp_path / "s", "00", (4, 4), "uint8")
    sample = np.arange(16, dtype=np.uint8).reshape(4, 4)
    with store.writer() as writer:
        records = {writer.write(sample), writer.write(sample.reshape(4, 4)[:2].copy())}
        records.add(writer.write(np.ascontiguousarray(sample[:, :2])))
    assert len(records) == 3


def test_dedup_ignores_an_index_entry_whose_data_differs(tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path, "01")
    sample, other = images(2)
    with store.writer() as writer:
        record = writer.write(sample)
    (index_file,) = tmp_path.glob("store/*.index")
    digest = index_file.read_text().split()[0]
    with store.writer() as writer:
        other_record = writer.write(other)
    # Point the digest of `sample` at the record of `other`, as a hash collision would.
    index_file.write_text(f"{digest} {other_record}\n")
    with store.writer() as writer:
        again = writer.write(sample)
    assert again not in (record, other_record)
    with store.reader() as reader:
        np.testing.assert_array_equal(reader.read(again), sample)


def test_store_reopens_with_its_schema(tmp_path: pathlib.Path) -> None:
    store = SampleStore(tmp_path / "s", "00", (3, 4), "float64", GZIP, collection_size=9)
    reopened = SampleStore(tmp_path / "s")
    assert reopened.schema == store.schema
    assert reopened.schema.collection_size == 9
    assert SampleStore(tmp_path / "s", "00", (3, 4), "<f8").schema == store.schema


@pytest.mark.parametrize(
    "changed",
    [
        {"backend": "01"},
        {"shape": (3, 5)},
        {"dtype": "float32"},
        {"compression": {"complib": "lzf", "complevel": None, "shuffle": None}},
        {"collection_count": 7},
    ],
    ids=str,
)
def test_reopening_with_other_schema_raises(tmp_path: pathlib.Path, changed: dict) -> None:
    SampleStore(tmp_path / "s", "00", (3, 4), "float64", GZIP)
    with pytest.raises(SchemaMismatchError, match=r"Expected .* Got"):
        SampleStore(tmp_path / "s", **changed)


def test_opening_a_missing_store_raises(tmp_path: pathlib.Path) -> None:
    with pytest.raises(DataFileNotFoundError, match=r"samples\.json"):
        SampleStore(tmp_path / "nothing")


@pytest.mark.parametrize(
    ("arguments", "match"),
    [
        ({"backend": "02"}, r"\['00', '01'\]"),
        ({"backend": 1}, r"\['00', '01'\]"),
        ({"compression": {"complib": "snappy", "complevel": 1, "shuffle": None}}, "blosc:lz4"),
        ({"compression": {"complib": "gzip", "complevel": 12, "shuffle": None}}, "complevel"),
        ({"dtype": "U4"}, "numeric"),
        ({"dtype": object}, "numeric"),
        ({"shape": (3, -1)}, "shape"),
        ({"collection_size": 0}, "collection_size"),
    ],
    ids=str,
)
def test_invalid_store_settings_raise(tmp_path: pathlib.Path, arguments: dict, match: str) -> None:
    settings = {"backend": "01", "shape": (3, 4), "dtype": "uint8", **arguments}
    with pytest.raises(InvalidOptionError, match=match):
        SampleStore(tmp_path / "s", **settings)
    assert not (tmp_path / "s").exists()


BAD_SAMPLES = [
    ("01", np.zeros((6, 5), np.int16), "dtype uint8"),
    ("00", np.zeros((6, 5), np.float32), "dtype uint8"),
    ("01", np.zeros((5, 5), np.uint8), "shape"),
    ("00", np.zeros((7, 5), np.uint8), "at most"),
    ("00", np.zeros((6, 6), np.uint8), "at most"),
    ("01", np.zeros((6, 5, 1), np.uint8), "2 dimensions"),
    ("00", np.zeros((30,), np.uint8), "2 dimensions"),
    ("01", np.zeros((6, 5), np.uint8, order="F"), "Fortran-ordered"),
    ("00", np.zeros((5, 6), np.uint8).T, "Fortran-ordered"),
    ("01", np.zeros((12, 5), np.uint8)[::2], "non-contiguous"),
    ("01", [[0] * 5] * 6, "numpy.ndarray"),
]


@pytest.mark.parametrize(("backend", "sample", "match"), BAD_SAMPLES, ids=str)
def test_bad_samples_raise_and_lose_nothing(
    tmp_path: pathlib.Path, backend: str, sample: object, match: str
) -> None:
    store = make_store(tmp_path, backend)
    good = images(3)
    with store.writer() as writer:
        records = [writer.write(good[0]), writer.write(good[1])]
        with pytest.raises(SchemaMismatchError, match=match):
            writer.write(sample)  # type: ignore[arg-type]
        records.append(writer.write(good[2]))
    assert [decode_record(r).index for r in records] == [0, 1, 2]
    with store.reader() as reader:
        for record, sample_ in zip(records, good):
            np.testing.assert_array_equal(reader.read(record), sample_)


def test_record_whose_file_is_missing(tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path, "01")
    with store.writer() as writer:
        record = writer.write(images(1)[0])
    uid = decode_record(record).uid
    (tmp_path / "store" / f"{uid}.hdf5").unlink()
    with store.reader() as reader, pytest.raises(DataFileNotFoundError) as info:
        reader.read(record)
    assert f"{uid}.hdf5" in str(info.value)
    assert isinstance(info.value, FileNotFoundError)


@pytest.mark.parametrize(
    "record",
    [
        "00:abc$0 0*6 5",  # other backend
        "01:abc:0123456789abcdef:3:0:6 5",  # dataset number beyond collection_count
        "01:abc:0123456789abcdef:0:4:6 5",  # index beyond collection_size
        "01:abc:0123456789abcdef:0:0:6 4",  # other shape
        "01:abc:0123456789abcdef:0:0",  # malformed
    ],
)
def test_records_that_cannot_belong_to_the_store(tmp_path: pathlib.Path, record: str) -> None:
    store = make_store(tmp_path, "01")
    with store.reader() as reader, pytest.raises(RecordFormatError, match=re.escape(repr(record))):
        reader.read(record)


def test_01_detects_a_sample_rewritten_behind_its_back(tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path, "01")
    samples = images(6)
    with store.writer() as writer:
        records = [writer.write(sample) for sample in samples]
    target = decode_record(records[5])
    path = tmp_path / "store" / f"{target.uid}.hdf5"
    with h5py.File(path, "r+") as h5file:
        h5file[target.dataset][target.index] = samples[5] ^ 1
    with store.reader() as reader:
        np.testing.assert_array_equal(reader.read(records[4]), samples[4])
        with pytest.raises(CorruptDataError) as info:
            reader.read(records[5])
    message = str(info.value)
    assert str(path) in message and f"dataset '{target.dataset}'" in message
    assert f"sample {target.index}" in message and target.checksum in message


@pytest.mark.parametrize("backend", ["00", "01"])
def test_flipped_stored_bytes_raise_corrupt_data(tmp_path: pathlib.Path, backend: str) -> None:
    # Samples of 20 KiB: one chunk each in both backends.
    store = SampleStore(tmp_path / "store", backend, (128, 160), np.uint8, GZIP)
    samples = images(3, shape=(128, 160))
    with store.writer() as writer:
        records = [writer.write(sample) for sample in samples]
    target = decode_record(records[1])
    path = tmp_path / "store" / f"{target.uid}.hdf5"
    with h5py.File(path, "r+") as h5file:
        dataset = h5file[target.dataset]
        dataset_id = dataset.id
        offset = (target.index - target.index % dataset.chunks[0], 0, 0)
        filter_mask, chunk = dataset_id.read_direct_chunk(offset)
        damaged = bytearray(chunk)
        damaged[len(damaged) // 2] ^= 0xFF
        dataset_id.write_direct_chunk(offset, bytes(damaged), filter_mask)
    with store.reader() as reader:
        np.testing.assert_array_equal(reader.read(records[0]), samples[0])
        with pytest.raises(CorruptDataError) as info:
            reader.read(records[1])
        np.testing.assert_array_equal(reader.read(records[2]), samples[2])
    assert str(path) in str(info.value)
    assert f"sample {target.index} of dataset '{target.dataset}'" in str(info.value)


def test_reader_pickles_without_open_files(tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path, "01")
    sample = images(1)[0]
    with store.writer() as writer:
        record = writer.write(sample)
    with store.reader() as reader:
        reader.read(record)
        clone = pickle.loads(pickle.dumps(reader))
    assert clone.schema == store.schema
    np.testing.assert_array_equal(clone.read(record), sample)
    clone.close()


def test_same_process_reader_sees_samples_of_an_open_writer(tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path, "01")
    samples = images(8)
    with store.writer() as writer, store.reader() as reader:
        for sample in samples:
            np.testing.assert_array_equal(reader.read(writer.write(sample)), sample)


def test_writer_rejects_writes_after_close(tmp_path: pathlib.Path) -> None:
    writer = make_store(tmp_path, "01").writer()
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.write(images(1)[0])


def test_corrupt_index_file_is_reported(tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path, "01")
    with store.writer() as writer:
        writer.write(images(1)[0])
    (index_file,) = tmp_path.glob("store/*.index")
    index_file.write_text("not an index line\n")
    with pytest.raises(CorruptDataError, match=index_file.name):
        store.writer()


@pytest.mark.parametrize(
    ("shape", "dtype", "chunks"),
    [
        ((224, 224), "uint8", (1, 224, 224)),
        ((1024, 1024), "float32", (1, 128, 256)),
        ((10,), "float64", (204, 10)),
        ((), "int8", (250,)),
    ],
)
def test_00_chunk_cache_follows_the_chunk_geometry(
    tmp_path: pathlib.Path, shape: tuple[int, ...], dtype: str, chunks: tuple[int, ...]
) -> None:
    store = SampleStore(tmp_path / "s", "00", shape, dtype)
    assert chunk_shape(store.schema) == chunks
    cache = cache_settings(store.schema)
    chunk_bytes = int(np.prod(chunks)) * np.dtype(dtype).itemsize
    chunks_per_dataset = -(-250 // chunks[0]) * int(
        np.prod([-(-max(d, 1) // c) for d, c in zip(shape, chunks[1:])])
    )
    assert cache.nbytes >= max(chunk_bytes, 1024 * 1024)
    assert cache.nslots == next_prime(min(100 * (cache.nbytes // chunk_bytes), chunks_per_dataset))
    assert cache.w0 == 1.0
    with store.writer() as writer:
        record = writer.write(np.ones(shape, dtype))
    with store.reader() as reader:
        reader.read(record)
        (collection,) = reader._files.values()
        _, nslots, nbytes, w0 = collection.h5file.id.get_access_plist().get_cache()
    assert (nslots, nbytes, w0) == (cache.nslots, cache.nbytes, cache.w0)


def test_01_chunk_cache_is_off(tmp_path: pathlib.Path) -> None:
    store = SampleStore(tmp_path / "s", "01", (224, 224), "uint8")
    assert cache_settings(store.schema).nbytes == 0
    assert chunk_shape(store.schema) == (1, 224, 224)


def test_next_prime() -> None:
    assert [next_prime(n) for n in (0, 2, 4, 100, 251, 1000)] == [2, 2, 5, 101, 251, 1009]
