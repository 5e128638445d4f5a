"""Compressed samples encoded without HDF5 and stored with direct chunk writes: the same
bytes HDF5's filter pipeline stores, the same records, visible to other processes."""

from __future__ import annotations

import multiprocessing
import pathlib
import struct
from typing import Any

import numpy as np
import pytest
import xxhash
from sample_files import stored_chunks, without_uid
from sample_images import SHAPE, smooth

from h5vc.hdf5 import codecs
from h5vc.samples import SampleStore, decode_record


def samples(count: int, seed: int) -> list[np.ndarray]:
    """Compressible samples (gradients with a little noise), one incompressible, one of
    zeros and repeats."""
    rng = np.random.default_rng(seed + 1_000)
    out = smooth(count, seed)
    out[3] = rng.integers(0, 256, SHAPE, dtype=np.uint8)  # does not compress
    out[5] = np.zeros(SHAPE, np.uint8)
    out[7] = out[2].copy()  # a repeat: stored once
    return out


class CountingEncoder:
    """Counts the chunks the encoder gave bytes for."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.encoded = 0
        original = codecs.Pipeline.encode_like_hdf5

        def encode(encoder: Any, chunk: np.ndarray) -> tuple[bytes, int] | None:
            result = original(encoder, chunk)
            self.encoded += result is not None
            return result

        monkeypatch.setattr(codecs.Pipeline, "encode_like_hdf5", encode)


@pytest.mark.parametrize("backend", ["00", "01"])
@pytest.mark.parametrize(
    "compression",
    [
        {"complib": "blosc:lz4hc", "complevel": 5, "shuffle": "byte"},
        {"complib": "blosc:lz4", "complevel": 9, "shuffle": None},
        {"complib": "blosc:zstd", "complevel": 3, "shuffle": "bit"},
        {"complib": "blosc:blosclz", "complevel": 1, "shuffle": "byte"},
    ],
)
@pytest.mark.parametrize("threads", [0, 2])
def test_direct_writes_store_what_hdf5_stores(
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    compression: dict[str, Any],
    threads: int,
) -> None:
    data = samples(30, seed=1)
    if backend == "00":
        data[9] = data[9][:100, :90].copy()  # a smaller sample, padded in its chunk
    options = {"collection_count": 2, "collection_size": 8}
    direct = SampleStore(tmp_path / "direct", backend, SHAPE, "uint8", compression, **options)
    counting = CountingEncoder(monkeypatch)
    with direct.writer(threads=threads) as writer:
        records = writer.write_many(data[:20]) + [writer.write(s) for s in data[20:]]
    assert counting.encoded > 10  # most samples went through the encoder
    with monkeypatch.context() as m:
        m.setattr(codecs.Pipeline, "like_hdf5", property(lambda self: False))
        plain = SampleStore(tmp_path / "plain", backend, SHAPE, "uint8", compression, **options)
        with plain.writer() as writer:
            plain_records = [writer.write(s) for s in data]
    assert stored_chunks(direct.directory) == stored_chunks(plain.directory)
    assert without_uid(records) == without_uid(plain_records)
    assert records[7] == records[2] and len(set(records)) == 29
    with direct.reader() as reader:
        for record, sample in zip(records, data):
            np.testing.assert_array_equal(reader.read(record), sample)


def test_an_encoder_that_disagrees_with_hdf5_is_not_used(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = codecs.Pipeline.encode_like_hdf5

    def wrong(encoder: Any, chunk: np.ndarray) -> tuple[bytes, int] | None:
        result = original(encoder, chunk)
        if result is None:
            return None
        stored, mask = result
        return stored[:-1] + bytes([stored[-1] ^ 1]), mask

    monkeypatch.setattr(codecs.Pipeline, "encode_like_hdf5", wrong)
    compression = {"complib": "blosc:lz4hc", "complevel": 5, "shuffle": "byte"}
    store = SampleStore(tmp_path / "s", "01", SHAPE, "uint8", compression, collection_size=10)
    data = samples(25, seed=2)
    with store.writer() as writer:
        records = writer.write_many(data)
    with store.reader() as reader:  # complete files: read without HDF5, checked by xxhash64
        for record, sample in zip(records, data):
            np.testing.assert_array_equal(reader.read(record), sample)
    for mask, chunk in stored_chunks(store.directory):
        assert mask == 0 or len(chunk) == SHAPE[0] * SHAPE[1]


def test_write_many_checks_every_sample_first(tmp_path: pathlib.Path) -> None:
    from h5vc.errors import SchemaMismatchError

    store = SampleStore(tmp_path / "s", "01", SHAPE, "uint8")
    data = samples(8, seed=3)
    with store.writer() as writer:
        with pytest.raises(SchemaMismatchError, match="dtype"):
            writer.write_many([*data, data[0].astype(np.int16)])
        assert writer.write_many([]) == []
    assert store.collection_files() == []


def _digests(task: tuple[Any, list[str]]) -> list[str]:
    reader, records = task
    return [xxhash.xxh64_hexdigest(reader.read(r).tobytes()) for r in records]


def test_readers_in_other_processes_see_write_many_samples(tmp_path: pathlib.Path) -> None:
    compression = {"complib": "blosc:lz4hc", "complevel": 5, "shuffle": "byte"}
    options = {"collection_count": 1, "collection_size": 50}
    store = SampleStore(tmp_path / "s", "00", SHAPE, "uint8", compression, **options)
    data = samples(100, seed=4)
    expected = [xxhash.xxh64_hexdigest(s.tobytes()) for s in data]
    with multiprocessing.get_context("spawn").Pool(1) as pool, store.writer() as writer:
        records = writer.write_many(data[:30])
        assert pool.apply(_digests, ((store.reader(), records),)) == expected[:30]
        records += writer.write_many(data[30:])  # into a second file too
        assert len({decode_record(r).uid for r in records}) == 2
        assert pool.apply(_digests, ((store.reader(), records),)) == expected


def _with_repeats(rng: np.random.Generator, size: int, repeats: int, span: int) -> np.ndarray:
    """Random bytes with ``repeats`` copies of earlier runs of ``span`` bytes."""
    data = rng.integers(0, 256, size, dtype=np.uint8)
    for _ in range(repeats):
        source = int(rng.integers(0, size - 2 * span))
        target = int(rng.integers(source + span, size - span))
        data[target : target + span] = data[source : source + span]
    return data


@pytest.mark.parametrize("cname", ["lz4hc", "lz4"])
def test_a_chunk_proven_too_long_for_blosc_is_one_blosc_cannot_fit(cname: str) -> None:
    from numcodecs import blosc

    rng = np.random.default_rng(17)
    proven = unproven = 0
    for number in range(120):
        span = int(rng.integers(4, 40))
        data = _with_repeats(rng, 9000 + number * 37, int(rng.integers(0, 12)), span)
        if number % 4 == 0:
            data = data // int(rng.integers(2, 6))  # fewer values: short repeats by chance
        too_long = codecs._lz4_frame_too_long(data)
        proven += too_long
        unproven += not too_long
        for level in (1, 5, 9):
            for shuffle in (0, 1):
                frame = blosc.compress(data.data, cname.encode(), level, shuffle, 0, 1)
                assert not too_long or len(frame) > len(data), (number, level, shuffle)
    assert proven > 20 and unproven > 20  # both outcomes met, near the bound too


def test_lz4_streams_are_no_shorter_than_their_shortfall_allows() -> None:
    """Every LZ4 stream Blosc writes for one block is at least as long as
    ``codecs._lz4_shortfall`` says, compressible or not."""
    from numcodecs import blosc

    rng = np.random.default_rng(21)
    checked = 0
    for _ in range(60):
        size = int(rng.integers(9000, 60000))
        data = rng.integers(0, 256, size, dtype=np.uint8) // int(rng.integers(1, 40))
        for _ in range(int(rng.integers(0, 200))):
            span = int(rng.integers(4, 30))
            source = int(rng.integers(0, size - 2 * span))
            target = int(rng.integers(source + span, size - span))
            data[target : target + span] = data[source : source + span]
        repeats = codecs._repeated_quads(data)
        for cname in (b"lz4hc", b"lz4"):
            for level in (1, 5, 9):
                frame = blosc.compress(data.data, cname, level, 0, 0, 1)
                _, block, _, stream = struct.unpack_from("<III4xi", frame, 4)
                if frame[2] & 2 or block < size or stream >= size:
                    continue  # stored as it is, or several blocks
                checked += 1
                assert 255 * stream >= 255 * size - codecs._lz4_shortfall(repeats, size)
    assert checked > 100


@pytest.mark.parametrize("cname", ["lz4hc", "lz4"])
def test_blosc_block_sizes_are_those_of_hdf5s_filter(tmp_path: pathlib.Path, cname: str) -> None:
    import h5py
    import hdf5plugin

    with h5py.File(tmp_path / "f.h5", "w") as f:
        for size in (9000, 33000, 50176, 70000, 300000):
            for level in (1, 5, 9):
                options = hdf5plugin.Blosc(cname=cname, clevel=level, shuffle=1)
                name = f"{size}-{level}"
                dataset = f.create_dataset(name, (size,), np.uint8, chunks=(size,), **options)
                dataset[...] = np.arange(size) % 7
                _, chunk = dataset.id.read_direct_chunk((0,))
                block = struct.unpack_from("<I", chunk, 8)[0]
                assert codecs._blosc_block_bytes(size, cname, level, 1, 1) == block


def test_one_byte_chunks_proven_too_long_per_block_are_ones_blosc_cannot_fit() -> None:
    """With Blosc's blocks known, chunks with far more repeats than 24 are proven too
    long (the lengths of literal runs count), in one block or several, and are."""
    from numcodecs import blosc

    rng = np.random.default_rng(22)
    proven = beyond = unproven = 0
    for number in range(48):
        size = int(rng.choice([9000, 50176, 70000, 140000])) + number
        data = rng.integers(0, 256, size, dtype=np.uint8) // (1 + number % 8)
        for _ in range(int(rng.integers(0, 6))):
            span = int(rng.integers(4, 40))
            source = int(rng.integers(0, size - 2 * span))
            target = int(rng.integers(source + span, size - span))
            data[target : target + span] = data[source : source + span]
        for level in (1, 5, 9):
            for shuffle in (0, 1):
                values = (2, 2, 1, size, level, shuffle, 2)  # lz4hc
                too_long = codecs._Filter(codecs.FILTER_BLOSC, values, 1).surely_fails(data.data)
                frame = blosc.compress(data.data, b"lz4hc", level, shuffle, 0, 1)
                assert not too_long or len(frame) > size, (number, level, shuffle)
                proven += too_long
                unproven += not too_long
                beyond += too_long and codecs._repeated_quads(data) > 24
    assert beyond > 20 and unproven > 20


def test_bit_shuffled_bytes_are_not_proven_too_long(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bit shuffle moves the bits of one-byte items too: random bytes halved (their
    top bit always 0) look incompressible but fit once shuffled, and are stored as HDF5
    stores them (compressed), after a first random sample stored as it is."""
    rng = np.random.default_rng(20)
    noise = [rng.integers(0, 256, SHAPE, dtype=np.uint8) // (1 + (k > 0)) for k in range(6)]
    compression = {"complib": "blosc:lz4hc", "complevel": 5, "shuffle": "bit"}
    direct = SampleStore(tmp_path / "direct", "01", SHAPE, "uint8", compression)
    with direct.writer(threads=2) as writer:
        records = [writer.write(sample) for sample in noise]
    with monkeypatch.context() as m:
        m.setattr(codecs.Pipeline, "like_hdf5", property(lambda self: False))
        plain = SampleStore(tmp_path / "plain", "01", SHAPE, "uint8", compression)
        with plain.writer() as writer:
            for sample in noise:
                writer.write(sample)
    chunks = stored_chunks(direct.directory)
    assert [mask for mask, _ in chunks] == [1] + [0] * (len(noise) - 1)
    assert chunks == stored_chunks(plain.directory)
    with direct.reader() as reader:
        for record, sample in zip(records, noise):
            np.testing.assert_array_equal(reader.read(record), sample)


def test_samples_proven_incompressible_are_not_compressed(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from numcodecs import blosc

    compressed = [0]
    original = blosc.compress

    def counting(*args: Any, **kwargs: Any) -> Any:
        compressed[0] += any(memoryview(args[0]).cast("B"))  # not the zeros of a block size
        return original(*args, **kwargs)

    monkeypatch.setattr(blosc, "compress", counting)
    rng = np.random.default_rng(18)
    noise = [rng.integers(0, 256, SHAPE, dtype=np.uint8) // (1 + k % 2) for k in range(10)]
    gentle = smooth(10, seed=19)
    compression = {"complib": "blosc:lz4hc", "complevel": 5, "shuffle": "byte"}
    store = SampleStore(tmp_path / "s", "01", SHAPE, "uint8", compression)
    with store.writer(threads=2) as writer:
        records = [writer.write(sample) for sample in noise + gentle]
    assert compressed[0] == len(gentle)  # the random samples are stored as they are
    chunks = stored_chunks(store.directory)
    assert [mask for mask, _ in chunks] == [1] * len(noise) + [0] * len(gentle)
    assert [chunk for _, chunk in chunks[: len(noise)]] == [s.tobytes() for s in noise]
    with store.reader() as reader:
        for record, sample in zip(records, noise + gentle):
            np.testing.assert_array_equal(reader.read(record), sample)
