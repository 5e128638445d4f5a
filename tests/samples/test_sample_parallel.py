"""Readers in worker processes: pickled readers, and reading while a writer adds files."""

from __future__ import annotations

import multiprocessing
import pathlib

import numpy as np
import pytest
import xxhash

from h5vc.samples import SampleReader, SampleStore, decode_record

_worker_reader: SampleReader | None = None


def _install_reader(reader: SampleReader) -> None:
    global _worker_reader
    _worker_reader = reader


def _read_digests(records: list[str]) -> list[str]:
    assert _worker_reader is not None
    return [xxhash.xxh64_hexdigest(_worker_reader.read(r).tobytes()) for r in records]


def _digest(sample: np.ndarray) -> str:
    return xxhash.xxh64_hexdigest(sample.tobytes())


def _samples(count: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 255, size=(16, 12), dtype=np.uint8) for _ in range(count)]


@pytest.mark.parametrize("backend", ["00", "01"])
def test_pool_of_two_workers_reads_with_a_pickled_reader(
    tmp_path: pathlib.Path, backend: str
) -> None:
    store = SampleStore(tmp_path / "s", backend, (16, 12), "uint8", collection_size=10)
    samples = _samples(60, seed=3)
    with store.writer() as writer:
        records = [writer.write(sample) for sample in samples]
    order = np.random.default_rng(4).permutation(60)
    with store.reader() as reader:
        reader.read(records[0])  # open files in the parent: they must not travel
        with multiprocessing.get_context("spawn").Pool(2) as pool:
            got = pool.map(reader.read, [records[i] for i in order], chunksize=5)
    for position, i in enumerate(order):
        np.testing.assert_array_equal(got[position], samples[i])


def test_workers_read_while_a_writer_adds_files(tmp_path: pathlib.Path) -> None:
    store = SampleStore(
        tmp_path / "s", "01", (16, 12), "uint8", collection_count=2, collection_size=3
    )
    samples = _samples(20, seed=5)
    expected = [_digest(sample) for sample in samples]
    context = multiprocessing.get_context("spawn")
    with context.Pool(1, initializer=_install_reader, initargs=(store.reader(),)) as pool:
        writer = store.writer()
        records = [writer.write(sample) for sample in samples[:4]]
        writer.flush()  # every sample written so far is readable from other processes
        # The worker opens the first file while it is still being written.
        assert pool.apply(_read_digests, (records,)) == expected[:4]
        records += [writer.write(sample) for sample in samples[4:14]]
        writer.flush()
        assert len({decode_record(r).uid for r in records}) == 3  # 6 samples per file
        # Same worker, same open files: it must see the samples added since.
        assert pool.apply(_read_digests, (records,)) == expected[:14]
        writer.close()
        with store.writer() as second:
            records += [second.write(sample) for sample in samples[14:]]
            second.flush()
            assert pool.apply(_read_digests, (records[::-1],)) == expected[::-1]
        # After the writers closed, the files are complete and read as such.
        assert pool.apply(_read_digests, (records,)) == expected
