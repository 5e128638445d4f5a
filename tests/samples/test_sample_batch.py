"""Batch reads (SampleReader.read_many) and the read path that skips HDF5 for complete files
(backend '01', and backend '00' when a sample is one chunk)."""

from __future__ import annotations

import multiprocessing
import pathlib
import pickle
from typing import Any

import h5py
import numpy as np
import pytest
import xxhash

from h5vc.errors import (
    CorruptDataError,
    DataFileNotFoundError,
    InvalidOptionError,
    RecordFormatError,
    SchemaMismatchError,
)
from h5vc.hdf5 import codecs
from h5vc.samples import SampleReader, SampleStore, decode_record
from h5vc.samples.backends import CollectionReader, chunk_shape, decode_sample
from h5vc.samples.store import BATCH_WINDOW

BLOSC = {"complib": "blosc:lz4", "complevel": 5, "shuffle": "byte"}
GZIP = {"complib": "gzip", "complevel": 4, "shuffle": True}
LZF = {"complib": "lzf", "complevel": None, "shuffle": True}
SHAPE = (12, 10)
#: Backend '00' samples of this shape (16 KiB of int16) are one chunk each; SHAPE ones share.
ONE_CHUNK = (128, 64)


def smooth_samples(count: int, shape: tuple[int, ...] = SHAPE, seed: int = 0) -> list[np.ndarray]:
    """Compressible samples (so that compression filters apply), all different."""
    rng = np.random.default_rng(seed)
    base = np.arange(int(np.prod(shape))).reshape(shape) // 8
    samples = [(base + rng.integers(0, 200)).astype(np.int16) for _ in range(count)]
    for number, sample in enumerate(samples):
        sample.reshape(-1)[-1] = number  # no two alike
    return samples


def make_store(
    tmp_path: pathlib.Path,
    backend: str = "01",
    compression: dict[str, Any] | None = None,
    shape: tuple[int, ...] = SHAPE,
    **settings: Any,
) -> SampleStore:
    return SampleStore(
        tmp_path / "store",
        backend,
        shape,
        "int16",
        compression,
        collection_count=settings.get("collection_count", 2),
        collection_size=settings.get("collection_size", 5),
    )


def write(store: SampleStore, samples: list[np.ndarray]) -> list[str]:
    with store.writer() as writer:
        return [writer.write(sample) for sample in samples]


def fast_path_used(reader: SampleReader, record: str) -> bool:
    parsed = decode_record(record)
    reader.read(parsed)  # opens the file
    return reader._files[parsed.uid].fetch(parsed) is not None


def damage_chunk(store: SampleStore, record: str, replacement: bytes | None = None) -> None:
    """Flip a byte in the middle of the record's stored chunk, or store other bytes."""
    target = decode_record(record)
    with h5py.File(store.directory / f"{target.uid}.hdf5", "r+") as h5file:
        dataset = h5file[target.dataset]
        offset = (target.index, *[0] * (dataset.ndim - 1))
        filter_mask, chunk = dataset.id.read_direct_chunk(offset)
        if replacement is None:
            damaged = bytearray(chunk)
            damaged[len(damaged) // 2] ^= 0xFF
            replacement = bytes(damaged)
        dataset.id.write_direct_chunk(offset, replacement, filter_mask)


def error_of(action: Any) -> BaseException:
    with pytest.raises(Exception) as info:
        action()
    return info.value


def flip_stored_bit(store: SampleStore, record: str, position: int | None) -> bytes:
    """Flip a bit of the stored bytes of the one-chunk sample ``record`` at ``position``
    (``None``: the middle); return the damaged bytes."""
    target = decode_record(record)
    with h5py.File(store.directory / f"{target.uid}.hdf5", "r") as h5file:
        _, chunk = h5file[target.dataset].id.read_direct_chunk((target.index, 0, 0))
    damaged = bytearray(chunk)
    damaged[len(chunk) // 2 if position is None else position] ^= 0x04
    damage_chunk(store, record, bytes(damaged))
    return bytes(damaged)


def hdf5_reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Record (record string, sample size) of every sample read through HDF5 from now on."""
    calls: list[tuple[str, int]] = []
    read_hdf5 = CollectionReader.read_hdf5

    def spy(self: CollectionReader, record: Any, out: np.ndarray) -> None:
        calls.append((record.encode(), out.size))
        read_hdf5(self, record, out)

    monkeypatch.setattr(CollectionReader, "read_hdf5", spy)
    return calls


@pytest.mark.parametrize("threads", [0, 1, 3])
@pytest.mark.parametrize(
    ("backend", "compression", "shape", "fast"),
    [
        ("01", BLOSC, SHAPE, True),
        ("01", GZIP, SHAPE, True),
        ("01", LZF, SHAPE, False),
        ("00", BLOSC, SHAPE, False),  # several samples per chunk
        ("00", GZIP, SHAPE, False),
        ("00", BLOSC, ONE_CHUNK, True),
        ("00", GZIP, ONE_CHUNK, True),
        ("00", LZF, ONE_CHUNK, False),
    ],
    ids=str,
)
def test_read_many_equals_reading_one_by_one(
    tmp_path: pathlib.Path,
    backend: str,
    compression: dict,
    shape: tuple[int, ...],
    fast: bool,
    threads: int,
) -> None:
    store = make_store(tmp_path, backend, compression, shape)
    samples = smooth_samples(23, shape)  # 3 files of 10 samples, the last one partly filled
    records = write(store, samples)
    order = np.random.default_rng(1).permutation(len(records))
    wanted = [records[i] for i in order]
    with store.reader(threads=threads) as reader:
        assert reader.threads == threads
        assert fast_path_used(reader, records[0]) == fast
        batch = reader.read_many(wanted)
        assert isinstance(batch, list) and len(batch) == len(wanted)
        one_by_one = [reader.read(record) for record in wanted]
    for position, i in enumerate(order):
        for got in (batch[position], one_by_one[position]):
            assert got.dtype == np.int16 and got.shape == shape and got.flags.c_contiguous
            np.testing.assert_array_equal(got, samples[i])


#: Options that store '00' chunks in every way the decoder meets: each Blosc compressor,
#: each shuffle, level 0 (chunks stored without the compression filter), deflate with
#: and without shuffle; LZF is read through HDF5.
OPTIONS_00 = [
    {"complib": "blosc:blosclz", "complevel": 5, "shuffle": None},
    {"complib": "blosc:lz4", "complevel": 5, "shuffle": "byte"},
    {"complib": "blosc:lz4hc", "complevel": 9, "shuffle": "bit"},
    {"complib": "blosc:zlib", "complevel": 1, "shuffle": "byte"},
    {"complib": "blosc:zstd", "complevel": 3, "shuffle": "none"},
    {"complib": "blosc:lz4", "complevel": 0, "shuffle": "byte"},
    {"complib": "gzip", "complevel": 0, "shuffle": False},
    {"complib": "gzip", "complevel": 9, "shuffle": True},
    {"complib": "gzip", "complevel": 4, "shuffle": None},
    {"complib": "lzf", "complevel": None, "shuffle": "byte"},
]


@pytest.mark.parametrize("compression", OPTIONS_00, ids=str)
def test_00_samples_of_one_chunk_skip_hdf5(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, compression: dict
) -> None:
    store = make_store(tmp_path, "00", compression, ONE_CHUNK)
    assert chunk_shape(store.schema) == (1, *ONE_CHUNK)
    rng = np.random.default_rng(3)
    smaller = [(1, 1), (127, 64), (128, 1), (5, 3), (0, 64), (64, 0)]
    samples = smooth_samples(4, ONE_CHUNK) + [
        rng.integers(-(2**15), 2**15, shape, dtype=np.int16) for shape in smaller
    ]  # smaller-than-maximum samples sit in the corner of their chunk, zeros around them
    samples.append(rng.integers(-(2**15), 2**15, ONE_CHUNK, dtype=np.int16))  # noise
    records = write(store, samples)
    order = np.random.default_rng(4).permutation(len(records))
    calls = hdf5_reads(monkeypatch)
    with store.reader(threads=2) as reader:
        one_by_one = [reader.read(records[i]) for i in order]
        batch = reader.read_many([records[i] for i in order])
        full = [i for i in order if samples[i].shape == ONE_CHUNK]
        out = np.full((len(full), *ONE_CHUNK), -1, np.int16)
        reader.read_many([records[i] for i in full], out)
    for position, i in enumerate(order):
        for got in (one_by_one[position], batch[position]):
            assert got.shape == samples[i].shape and got.dtype == np.int16
            np.testing.assert_array_equal(got, samples[i])
    np.testing.assert_array_equal(out, np.stack([samples[i] for i in full]))
    if compression["complib"] == "lzf":
        assert len(calls) == 2 * len(samples) + len(full)  # every read
    else:
        empty = sum(sample.size == 0 for sample in samples)
        assert len(calls) == 2 * empty and all(size == 0 for _, size in calls)


def test_00_samples_split_over_chunks_are_read_through_hdf5(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shape = (300, 256)  # 150 KiB of int16, over the chunk target: two chunks per sample
    store = make_store(tmp_path, "00", BLOSC, shape)
    assert chunk_shape(store.schema) == (1, 150, 256)
    samples = [*smooth_samples(3, shape), smooth_samples(1, (200, 7), seed=1)[0]]
    records = write(store, samples)
    calls = hdf5_reads(monkeypatch)
    with store.reader(threads=2) as reader:
        assert not fast_path_used(reader, records[0])
        for got, sample in zip(reader.read_many(records), samples):
            np.testing.assert_array_equal(got, sample)
    assert len(calls) == 1 + len(records)


@pytest.mark.parametrize("compression", [BLOSC, GZIP], ids=str)
@pytest.mark.parametrize("threads", [0, 2])
@pytest.mark.parametrize("checked_by", ["content digest", "Fletcher-32"])
def test_00_damaged_chunk_raises_the_hdf5_error(
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    compression: dict,
    threads: int,
    checked_by: str,
) -> None:
    store = make_store(tmp_path, "00", compression, ONE_CHUNK)
    samples = smooth_samples(9, ONE_CHUNK)
    records = write(store, samples)
    target = decode_record(records[6])
    damaged = flip_stored_bit(store, records[6], None)
    if checked_by == "Fletcher-32":  # no content index: the stored bytes' checksum
        for index_file in store.directory.glob("*.index"):
            index_file.write_text("")
    with store.reader(threads=threads) as reader:
        assert fast_path_used(reader, records[0])
        fetched = reader._files[target.uid].fetch(target)
        assert fetched is not None and fetched[1] == damaged
        assert (fetched[3] is None) == (checked_by == "Fletcher-32")
        assert not decode_sample(np.empty(ONE_CHUNK, np.int16), *fetched)
        single = error_of(lambda: reader.read(records[6]))
        batch = error_of(lambda: reader.read_many(records))
        out = np.full((9, *ONE_CHUNK), -1, np.int16)
        into = error_of(lambda: reader.read_many(records, out))
        good = reader.read_many(records[:6] + records[7:])
    monkeypatch.setattr(CollectionReader, "fetch", lambda self, record: None)
    with store.reader(threads=threads) as reader:  # the HDF5 read path alone
        hdf5_error = error_of(lambda: reader.read(records[6]))
    assert isinstance(single, CorruptDataError)
    for error in (batch, into, hdf5_error):
        assert type(error) is type(single) and str(error) == str(single)
    assert f"sample {target.index} of dataset '{target.dataset}'" in str(single)
    np.testing.assert_array_equal(out[:6], np.stack(samples[:6]))  # read before the error
    for got, sample in zip(good, samples[:6] + samples[7:]):
        np.testing.assert_array_equal(got, sample)


def test_00_content_digest_decides_when_the_index_is_there(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(tmp_path, "00", BLOSC, ONE_CHUNK)
    samples = smooth_samples(4, ONE_CHUNK)
    records = write(store, samples)
    target = decode_record(records[1])
    # Damage only the stored Fletcher-32 checksum: the sample's bytes are intact and
    # match their content digest, so the fast path returns them without HDF5.
    flip_stored_bit(store, records[1], -3)
    calls = hdf5_reads(monkeypatch)
    with store.reader() as reader:
        np.testing.assert_array_equal(reader.read(records[1]), samples[1])
        assert calls == []
    # A sample whose digest does not match (here the index's, as for a sample rewritten
    # with HDF5, checksum and all): read again through HDF5, then refused.
    index = store.directory / f"{target.uid}.index"
    lines = index.read_text().splitlines()
    lines[0] = "0" * 32 + lines[0][32:]
    index.write_text("".join(f"{line}\n" for line in lines))
    with store.reader() as reader:
        np.testing.assert_array_equal(reader.read(records[2]), samples[2])
        assert calls == []
        zeroed = decode_record(lines[0].partition(" ")[2])
        with pytest.raises(CorruptDataError, match=r"0{32}"):
            reader.read(zeroed)
        assert len(calls) == 1  # the mismatch sent it through HDF5
        with pytest.raises(CorruptDataError, match=r"0{32}"):
            reader.read_many(records)


def test_00_chunk_too_short_for_its_checksum_is_refused(tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path, "00", BLOSC, ONE_CHUNK)
    records = write(store, smooth_samples(3, ONE_CHUNK))
    damage_chunk(store, records[1], b"\x01\x02")
    with store.reader() as reader:
        with pytest.raises(CorruptDataError, match="Got a chunk of 2 bytes"):
            reader.read(records[1])
        with pytest.raises(CorruptDataError, match="Got a chunk of 2 bytes"):
            reader.read_many(records)
        assert reader.read(records[2]).shape == ONE_CHUNK


def test_read_many_into_out(tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path, "01", BLOSC)
    samples = smooth_samples(12)
    records = write(store, samples)
    wanted = records[::-1] + records[:3]
    out = np.full((len(wanted), *SHAPE), -1, np.int16)
    with store.reader(threads=2) as reader:
        assert reader.read_many(wanted, out) is out
        np.testing.assert_array_equal(out, np.stack(samples[::-1] + samples[:3]))
        assert reader.read_many([], np.empty((0, *SHAPE), np.int16)).shape == (0, *SHAPE)


def test_read_many_of_nothing(tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path)
    write(store, smooth_samples(2))
    with store.reader() as reader:
        assert reader.read_many([]) == []
        assert reader.read_many(iter([])) == []
        assert reader._files == {}


def test_read_many_takes_records_and_strings_and_iterables(tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path, "01", GZIP)
    samples = smooth_samples(6)
    records = write(store, samples)
    mixed = [decode_record(r) if n % 2 else r for n, r in enumerate(records)]
    with store.reader() as reader:
        for got, sample in zip(reader.read_many(iter(mixed)), samples):
            np.testing.assert_array_equal(got, sample)
        assert [a.tolist() for a in reader.__getitems__(records[:3])] == [
            s.tolist() for s in samples[:3]
        ]
        with pytest.raises(RecordFormatError, match="Got bytes instead"):
            reader.read_many([records[0], records[1].encode()])
        with pytest.raises(RecordFormatError, match="Got int instead"):
            reader.read(7)  # type: ignore[arg-type]


def test_read_many_spans_windows_and_files(tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path, "01", BLOSC, collection_count=3, collection_size=40)
    samples = smooth_samples(2 * BATCH_WINDOW + 5, seed=4)  # three windows
    records = write(store, samples)
    assert len(store.collection_files()) >= 3  # 120 samples per file
    order = np.random.default_rng(5).permutation(len(records))
    with store.reader(threads=1) as reader:
        batch = reader.read_many([records[i] for i in order])
    for position, i in enumerate(order):
        np.testing.assert_array_equal(batch[position], samples[i])


def test_00_samples_of_several_shapes(tmp_path: pathlib.Path) -> None:
    store = SampleStore(tmp_path / "s", "00", (6, 5, 3), "float32", GZIP, collection_size=4)
    rng = np.random.default_rng(2)
    shapes = [(6, 5, 3), (1, 2, 3), (6, 0, 1), (2, 5, 3), (6, 5, 3)]
    samples = [rng.random(shape, dtype=np.float32) for shape in shapes]
    records = write(store, samples)
    with store.reader() as reader:
        batch = reader.read_many(records[::-1])
        for got, sample in zip(batch, samples[::-1]):
            assert got.shape == sample.shape
            np.testing.assert_array_equal(got, sample)
        out = np.empty((2, 6, 5, 3), np.float32)
        reader.read_many([records[0], records[4]], out)
        np.testing.assert_array_equal(out, np.stack([samples[0], samples[4]]))
        with pytest.raises(SchemaMismatchError, match=r"sample shape \(6, 5, 3\)"):
            reader.read_many([records[0], records[1]], out)


@pytest.mark.parametrize("backend", ["00", "01"])
def test_scalar_samples(tmp_path: pathlib.Path, backend: str) -> None:
    scalars = SampleStore(tmp_path / "scalar", backend, (), "int64", BLOSC)
    values = [np.array(v, np.int64) for v in (5, -2, 2**40)]
    records = write(scalars, values)
    with scalars.reader() as reader:
        assert [a[()] for a in reader.read_many(records)] == [5, -2, 2**40]
        out = np.empty(3, np.int64)
        assert reader.read_many(records[::-1], out).tolist() == [2**40, -2, 5]


@pytest.mark.parametrize(
    "bad_out",
    [
        np.empty((3, *SHAPE), np.int32),  # dtype
        np.empty((2, *SHAPE), np.int16),  # count
        np.empty((3, 12, 9), np.int16),  # sample shape
        np.empty((3, 120), np.int16),  # rank
        np.empty((3, 10, 12), np.int16).transpose(0, 2, 1),  # not C-contiguous
        [[0]],  # not an array
    ],
    ids=["dtype", "count", "shape", "rank", "order", "list"],
)
def test_bad_out_raises_before_reading(tmp_path: pathlib.Path, bad_out: Any) -> None:
    store = make_store(tmp_path)
    records = write(store, smooth_samples(3))
    with store.reader() as reader, pytest.raises(SchemaMismatchError, match="Expected out"):
        reader.read_many(records, bad_out)
    readonly = np.empty((3, *SHAPE), np.int16)
    readonly.flags.writeable = False
    with store.reader() as reader, pytest.raises(SchemaMismatchError, match="writeable=False"):
        reader.read_many(records, readonly)


@pytest.mark.parametrize("threads", [-1, 1.5, True, "2"])
def test_bad_thread_counts_raise(tmp_path: pathlib.Path, threads: Any) -> None:
    store = make_store(tmp_path)
    with pytest.raises(InvalidOptionError, match="threads"):
        store.reader(threads=threads)


@pytest.mark.parametrize("compression", [BLOSC, GZIP], ids=str)
@pytest.mark.parametrize("threads", [0, 2])
@pytest.mark.parametrize("damage", ["flipped byte", "other sample's bytes"])
def test_corruption_raises_the_same_error_in_a_batch(
    tmp_path: pathlib.Path, compression: dict, threads: int, damage: str
) -> None:
    store = make_store(tmp_path, "01", compression)
    samples = smooth_samples(9)
    records = write(store, samples)
    if damage == "flipped byte":
        damage_chunk(store, records[6])
    else:  # decodes fine, to the wrong sample: only the checksum tells
        other = decode_record(records[2])
        with h5py.File(store.directory / f"{other.uid}.hdf5", "r") as h5file:
            _, replacement = h5file[other.dataset].id.read_direct_chunk((other.index, 0, 0))
        damage_chunk(store, records[6], replacement)
    with store.reader(threads=threads) as reader:
        single = error_of(lambda: reader.read(records[6]))
        batch = error_of(lambda: reader.read_many(records))
        out = np.full((9, *SHAPE), -1, np.int16)
        into = error_of(lambda: reader.read_many(records, out))
        good = reader.read_many(records[:6] + records[7:])
    assert isinstance(single, CorruptDataError)
    for error in (batch, into):
        assert type(error) is type(single) and str(error) == str(single)
    target = decode_record(records[6])
    assert f"sample {target.index} of dataset '{target.dataset}'" in str(single)
    np.testing.assert_array_equal(out[:6], np.stack(samples[:6]))  # read before the error
    for got, sample in zip(good, samples[:6] + samples[7:]):
        np.testing.assert_array_equal(got, sample)


def test_batch_raises_the_first_error_in_record_order(tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path, "01", BLOSC)
    records = write(store, smooth_samples(8))
    damage_chunk(store, records[3])
    malformed = "01:nope"
    with store.reader() as reader:
        expected = error_of(lambda: reader.read(records[3]))
        first = error_of(lambda: reader.read_many([records[0], records[3], malformed]))
        assert str(first) == str(expected)
        second = error_of(lambda: reader.read_many([records[0], malformed, records[3]]))
        assert isinstance(second, RecordFormatError) and repr(malformed) in str(second)
        missing = records[1].replace(decode_record(records[1]).uid, "Absent")
        third = error_of(lambda: reader.read_many([records[0], missing, records[3]]))
        assert isinstance(third, DataFileNotFoundError)


@pytest.mark.parametrize(("backend", "shape"), [("01", SHAPE), ("00", ONE_CHUNK)])
def test_live_and_complete_files_in_one_batch(
    tmp_path: pathlib.Path, backend: str, shape: tuple[int, ...]
) -> None:
    store = make_store(tmp_path, backend, BLOSC, shape, collection_count=1, collection_size=4)
    samples = smooth_samples(10, shape, seed=7)
    complete = write(store, samples[:5])  # two complete files
    writer = store.writer()
    live = [writer.write(sample) for sample in samples[5:]]  # two live files
    writer.flush()
    records = [*complete, *live]
    try:
        with store.reader(threads=1) as reader:
            assert fast_path_used(reader, complete[0])
            assert not fast_path_used(reader, live[0])
            for got, sample in zip(reader.read_many(records[::-1]), samples[::-1]):
                np.testing.assert_array_equal(got, sample)
            writer.close()  # the live files are complete now
            assert fast_path_used(reader, live[0])
            for got, sample in zip(reader.read_many(records), samples):
                np.testing.assert_array_equal(got, sample)
    finally:
        writer.close()


def test_without_numcodecs_blosc_samples_are_read_through_hdf5(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(tmp_path, "01", BLOSC)
    samples = smooth_samples(6)
    records = write(store, samples)
    monkeypatch.setattr(codecs, "_have_numcodecs", lambda: False)
    with store.reader() as reader:
        assert not fast_path_used(reader, records[0])
        for got, sample in zip(reader.read_many(records), samples):
            np.testing.assert_array_equal(got, sample)


def test_incompressible_samples_are_read_from_unfiltered_chunks(tmp_path: pathlib.Path) -> None:
    # Blosc cannot shrink noise, so HDF5 stores those chunks without the filter.
    store = make_store(
        tmp_path, "01", {"complib": "blosc:blosclz", "complevel": 1, "shuffle": None}
    )
    rng = np.random.default_rng(9)
    samples = [rng.integers(-(2**15), 2**15, SHAPE, dtype=np.int16) for _ in range(4)]
    records = write(store, samples)
    with store.reader() as reader:
        assert fast_path_used(reader, records[0])
        parsed = decode_record(records[0])
        fetched = reader._files[parsed.uid].fetch(parsed)
        assert fetched is not None and fetched[2] == 1  # filter mask: Blosc skipped
        for got, sample in zip(reader.read_many(records), samples):
            np.testing.assert_array_equal(got, sample)


def _read_batch_digests(task: tuple[SampleReader, list[str]]) -> list[str]:
    reader, records = task
    with reader:
        return [xxhash.xxh64_hexdigest(sample.tobytes()) for sample in reader.read_many(records)]


def test_pickled_reader_reads_batches_in_worker_processes(tmp_path: pathlib.Path) -> None:
    store = make_store(tmp_path, "01", BLOSC, collection_count=2, collection_size=8)
    samples = smooth_samples(40, seed=11)
    records = write(store, samples)
    with store.reader(threads=2) as reader:
        reader.read_many(records[:4])  # threads and open files in the parent must not travel
        clone = pickle.loads(pickle.dumps(reader))
        assert clone.threads == 2 and clone._files == {}
        halves = [records[::2], records[1::2]]
        with multiprocessing.get_context("spawn").Pool(2) as pool:
            digests = pool.map(_read_batch_digests, [(reader, half) for half in halves])
    expected = [xxhash.xxh64_hexdigest(sample.tobytes()) for sample in samples]
    assert digests == [expected[::2], expected[1::2]]


@pytest.mark.parametrize("failure", ["raises", "wrong bytes"])
def test_a_decode_that_fails_its_checksum_falls_back_to_hdf5(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    store = make_store(tmp_path, "01", BLOSC)
    samples = smooth_samples(7)
    records = write(store, samples)
    calls = []

    def broken(self: Any, data: bytes, mask: int, out: np.ndarray) -> None:
        calls.append(len(data))
        if failure == "raises":
            raise RuntimeError("a codec failure")
        out[...] = 0

    monkeypatch.setattr(codecs.Pipeline, "decode_into", broken)
    with store.reader(threads=1) as reader:
        for got, sample in zip(reader.read_many(records), samples):
            np.testing.assert_array_equal(got, sample)
        np.testing.assert_array_equal(reader.read(records[3]), samples[3])
    assert len(calls) == 8  # every sample went the fast way first
