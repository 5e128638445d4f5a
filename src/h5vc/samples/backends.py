"""Collection files of the sample backends ``00`` and ``01``: layout, writing, reading.

A collection file ``<uid>.hdf5`` holds ``collection_count`` datasets named ``"0"``,
``"1"``, ..., each a zero-initialised ``(collection_size, *shape)`` array. Samples fill
dataset ``"0"`` index 0, 1, ... then dataset ``"1"``, and so on. Files are created by one
writer, written in SWMR mode and never reopened for writing.

Backend ``01`` stores every sample as exactly one chunk, reads it with the chunk cache off
straight into a preallocated array and checks the xxhash64 of its bytes. Backend ``00``
splits the maximum sample shape into chunks of about :data:`CHUNK_TARGET_BYTES`, sets the
chunk cache from the chunk geometry and protects chunks with the Fletcher-32 filter.
"""

from __future__ import annotations

import collections
import contextlib
import math
import os
import pathlib
import secrets
import string
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

import h5py
import numpy as np
import xxhash

import h5vc.config as config
from h5vc.chunking import ChunkCache, chunk_cache
from h5vc.errors import (
    ClosedError,
    CorruptDataError,
    DataFileNotFoundError,
    RecordFormatError,
)
from h5vc.hdf5.chunktable import ChunkTable, sample_table
from h5vc.hdf5.codecs import Pipeline, pipeline_for, single_threaded_blosc
from h5vc.samples.records import SEP_HSH, SEP_KEY, SEP_LST, SEP_SLC, Record01, SampleRecord
from h5vc.samples.schema import Schema

__all__ = [
    "CHUNK_TARGET_BYTES",
    "QUEUE_BYTES",
    "QUEUE_MAX_CHUNK_BYTES",
    "QUEUE_MIN_CHUNK_BYTES",
    "QUEUE_SAMPLES",
    "SampleCheck",
    "content_digest",
    "sample_xxh64",
    "CollectionWriter",
    "CollectionReader",
    "batch_samples",
    "RecordChecker",
    "cache_settings",
    "chunk_shape",
    "collection_path",
    "decode_sample",
    "index_path",
    "read_index",
]

#: Backend ``00`` chunks are about this size (bytes, before compression).
CHUNK_TARGET_BYTES = config.SAMPLE_CHUNK_TARGET_BYTES
#: Backend ``00`` chunks hold several tiny samples until they reach this size.
CHUNK_MIN_BYTES = config.SAMPLE_CHUNK_MIN_BYTES
_UID_ALPHABET = string.ascii_letters + string.digits
_UID_LENGTH = 6
#: A collection file ``<uid>.hdf5`` is complete once its content index ``<uid>.index`` exists.
INDEX_SUFFIX = ".index"
#: :meth:`CollectionWriter.write_later` queues at most this many samples ...
QUEUE_SAMPLES = config.SAMPLE_QUEUE_SAMPLES
#: ... of at most this many bytes in all ...
QUEUE_BYTES = config.SAMPLE_QUEUE_BYTES
#: ... and none whose chunk is larger: Blosc splits such a chunk into blocks compressed
#: on its own threads when the writing thread encodes it ...
QUEUE_MAX_CHUNK_BYTES = config.SAMPLE_QUEUE_MAX_CHUNK_BYTES
#: ... or smaller: encoding it costs less than handing it to a thread.
QUEUE_MIN_CHUNK_BYTES = config.SAMPLE_QUEUE_MIN_CHUNK_BYTES
_DEFAULT_CACHE_BYTES = config.SAMPLE_CACHE_MIN_BYTES
_MAX_CACHE_BYTES = config.SAMPLE_CACHE_MAX_BYTES
#: What a reader needs to read a dataset's samples without HDF5: its chunk decoder,
#: the same without Fletcher-32 checks, its chunk table and the sample shape of a chunk.
_Readable = tuple[Pipeline, Pipeline, ChunkTable, tuple[int, ...]]
#: A chunk's stored bytes and filter mask as HDF5 stores them; ``None``: HDF5 writes it.
_Encoded = tuple[bytes, int] | None
#: Samples of a batch handed to a writer's pool (see :func:`batch_samples`), at most.
_BATCH_SAMPLES = 8
#: A batch handed to the pool: its slots, the copies of its samples and the job
#: giving their stored chunks.
_Batch = tuple[list[int], list[np.ndarray], Future[list[_Encoded]]]
#: How to check a decoded sample: a function of the sample and the value it must return.
SampleCheck = tuple[Callable[[np.ndarray], str], str] | None


#: (dtype, shape) -> xxh3-128 hasher fed with their text, copied for each sample.
_DIGEST_PREFIXES: dict[tuple[str, tuple[int, ...]], Any] = {}


def content_digest(array: np.ndarray) -> str:
    """Hex xxh3-128 of a sample's dtype, shape and bytes: its key in the content index."""
    key = (array.dtype.str, array.shape)
    prefix = _DIGEST_PREFIXES.get(key)
    if prefix is None:
        if len(_DIGEST_PREFIXES) >= 256:
            _DIGEST_PREFIXES.clear()
        prefix = _DIGEST_PREFIXES[key] = xxhash.xxh3_128(f"{key[0]}|{key[1]}|".encode())
    hasher = prefix.copy()
    hasher.update(array.data)
    return hasher.hexdigest()


def sample_xxh64(array: np.ndarray) -> str:
    """Hex xxhash64 of a sample's bytes: the checksum of a backend ``01`` record."""
    return xxhash.xxh64_hexdigest(array.data)


def chunk_shape(schema: Schema) -> tuple[int, ...]:
    """Chunk shape of every dataset of a collection file."""
    sample_chunk = [max(dim, 1) for dim in schema.shape]
    if schema.backend == "01":
        return (1, *sample_chunk)
    itemsize = schema.dtype.itemsize
    while math.prod(sample_chunk) * itemsize > CHUNK_TARGET_BYTES:
        axis = int(np.argmax(sample_chunk))
        sample_chunk[axis] = -(-sample_chunk[axis] // 2)
    samples_per_chunk = 1
    if sample_chunk == [max(dim, 1) for dim in schema.shape]:
        sample_bytes = math.prod(sample_chunk) * itemsize
        samples_per_chunk = max(1, min(schema.collection_size, CHUNK_MIN_BYTES // sample_bytes))
    return (samples_per_chunk, *sample_chunk)


def cache_settings(schema: Schema) -> ChunkCache:
    """Chunk cache for the datasets of a collection file.

    Backend ``01``: off (every read and write covers exactly one whole chunk). Backend
    ``00``: large enough for every chunk one maximum-size sample touches (so a partially
    covered chunk is filled in the cache and filtered once), at least the 1 MiB HDF5
    default; ``nslots`` a prime about 100 times the chunks that fit, but no more than the
    chunks of a dataset; ``w0 = 1`` because samples are read and written once each, so
    fully read or written chunks are the right ones to evict first.
    """
    if schema.backend == "01":
        return ChunkCache(0, 1, 1.0)
    chunks = chunk_shape(schema)
    chunk_bytes = math.prod(chunks) * schema.dtype.itemsize
    per_sample = math.prod(-(-max(dim, 1) // c) for dim, c in zip(schema.shape, chunks[1:]))
    return chunk_cache(
        chunk_bytes,
        -(-schema.collection_size // chunks[0]) * per_sample,
        cached_chunks=per_sample,
        min_nbytes=_DEFAULT_CACHE_BYTES,
        max_nbytes=max(_MAX_CACHE_BYTES, chunk_bytes),
        reread=False,
    )


def collection_path(directory: pathlib.Path, uid: str) -> pathlib.Path:
    return directory / f"{uid}.hdf5"


def index_path(directory: pathlib.Path, uid: str) -> pathlib.Path:
    """The content index of a collection file; it exists once the file is complete."""
    return directory / f"{uid}{INDEX_SUFFIX}"


def read_index(path: pathlib.Path) -> list[tuple[str, str]]:
    """The ``(content digest, record string)`` lines of the content index at ``path``.

    Raises CorruptDataError naming the line if one is malformed, OSError if the file
    cannot be read.
    """
    entries = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        digest, sep, record = line.partition(" ")
        if not sep or len(digest) != 32:
            raise CorruptDataError(
                f"Expected '<digest> <record>' on line {number} of {path}. Got {line!r} instead."
            )
        entries.append((digest, record))
    return entries


class _SampleIO:
    """Reads and writes whole samples of one dataset through HDF5's low-level calls.

    The low-level calls skip h5py's selection machinery, which costs more than the
    compression of an image-sized sample. The file dataspace is created once and
    reselected for every sample.
    """

    __slots__ = ("_file_space", "_memory_spaces", "dataset")

    def __init__(self, dataset: h5py.Dataset) -> None:
        self.dataset = dataset
        self._file_space = dataset.id.get_space()
        self._memory_spaces: dict[tuple[int, ...], h5py.h5s.SpaceID] = {}

    def _spaces(self, index: int, shape: tuple[int, ...]) -> tuple[Any, Any]:
        memory_space = self._memory_spaces.get(shape)
        if memory_space is None:
            memory_space = (
                h5py.h5s.create_simple(shape) if shape else h5py.h5s.create(h5py.h5s.SCALAR)
            )
            self._memory_spaces[shape] = memory_space
        self._file_space.select_hyperslab((index, *(0 for _ in shape)), (1, *shape))
        return memory_space, self._file_space

    def write(self, index: int, array: np.ndarray) -> None:
        self.dataset.id.write(*self._spaces(index, array.shape), array)

    def read(self, index: int, out: np.ndarray) -> None:
        self.dataset.id.read(*self._spaces(index, out.shape), out)


def _create_file(directory: pathlib.Path, cache: ChunkCache) -> tuple[str, h5py.File]:
    for _ in range(100):
        uid = "".join(secrets.choice(_UID_ALPHABET) for _ in range(_UID_LENGTH))
        try:
            h5file = h5py.File(
                collection_path(directory, uid), "x", libver="latest", **cache.as_h5py_kwargs()
            )
        except FileExistsError:
            continue
        return uid, h5file
    raise FileExistsError(f"Expected to find a free collection file name in {directory}.")


def _forget_last_chunk(dataset_id: h5py.h5d.DatasetID, index: int) -> None:
    """Make HDF5 forget what it remembers of the chunk of sample ``index``, just stored
    by ``H5Dwrite_chunk`` with a nonzero filter mask.

    HDF5 (2.0) keeps the location of the chunk it looked up last with each open dataset,
    and after ``H5Dwrite_chunk`` that entry has filter mask 0 whatever mask the chunk was
    stored with (the file itself holds the right one). Until another chunk is looked up,
    every read of that chunk in this process (through any handle of the file) would undo
    a filter that was never applied: Blosc then fails on the sample's raw bytes. Reading
    the stored bytes of another chunk (sample 0's, small and in the page cache; an
    unstored chunk raises, after its lookup) replaces the entry.
    """
    other = (1 if index == 0 else 0, *(0 for _ in range(dataset_id.rank - 1)))
    with contextlib.suppress(OSError, RuntimeError, ValueError):  # not stored: looked up
        dataset_id.read_direct_chunk(other)


class CollectionWriter:
    """One new collection file, open for writing in SWMR mode.

    Where a sample is exactly one chunk and the filter pipeline is one whose stored
    bytes :meth:`h5vc.hdf5.codecs.Pipeline.encode_like_hdf5` reproduces, chunks are
    encoded without HDF5 (by :meth:`encode`, on any thread) and stored with direct
    chunk writes. The encoder gives two kinds of stored chunks: compressed (filter mask
    0) and, for a sample Blosc cannot shrink, the sample's own bytes (filter mask 1, as
    HDF5 stores it when its optional Blosc filter fails). The first sample of each kind
    in every file is written through HDF5's filter pipeline and its stored bytes and
    filter mask compared with the encoder's: only on a match are chunks of that kind
    written directly, and on a mismatch the encoder is dropped for the file, so stored
    bytes are always those HDF5 itself would store.

    :meth:`write` stores a sample before it returns. :meth:`write_later` copies the
    sample into a batch; full batches (:func:`batch_samples`) are encoded on a thread
    pool while the caller goes on, and stored by a later call, in order of the calls,
    each batch with one run of chunk writes and one flush of its datasets; all of them
    by :meth:`flush` and :meth:`close`. Should encoding or storing a queued sample fail,
    the error is raised by the call that meets it, the file takes no more samples and
    :meth:`close` leaves it without its content index: records of the file are never
    published with a sample missing.
    """

    def __init__(self, directory: pathlib.Path, schema: Schema) -> None:
        self.schema = schema
        self.uid, self.h5file = _create_file(directory, cache_settings(schema))
        self.path = collection_path(directory, self.uid)
        self.entries: list[tuple[str, str]] = []
        self._slots_used = 0
        try:
            first = self._create_datasets()
            self.h5file.swmr_mode = True
        except BaseException:
            self.h5file.close()
            self.path.unlink()
            raise
        #: Sample shape -> its text in a record.
        self._shape_texts: dict[tuple[int, ...], str] = {}
        #: Dataset number -> its sample I/O, opened when first written.
        self._datasets: dict[int, _SampleIO] = {0: _SampleIO(first)}
        #: Datasets written since they were last flushed.
        self._unflushed: set[int] = set()
        self._chunk = tuple(max(dim, 1) for dim in schema.shape)
        self._chunk_bytes = math.prod(self._chunk) * schema.dtype.itemsize
        one_chunk = first.chunks == (1, *self._chunk)
        pipeline = pipeline_for(first) if one_chunk else None
        self._encoder = pipeline if pipeline is not None and pipeline.like_hdf5 else None
        #: Filter masks of the encoder's chunks found equal to HDF5's in this file.
        self._verified: set[int] = set()
        #: Dataset number -> sample index of the chunk HDF5 looked up last there, where
        #: it remembers it wrongly (see :func:`_forget_last_chunk`).
        self._stale: dict[int, int] = {}
        #: Batches handed to the pool, oldest first: their slots, the copies of their
        #: samples and the job giving their stored chunks.
        self._queue: collections.deque[_Batch] = collections.deque()
        #: Slots and copies of the samples of the next batch, not handed out yet.
        self._gathered_slots: list[int] = []
        self._gathered: list[np.ndarray] = []
        #: Samples (and their bytes) copied and not stored yet: gathered and queued.
        self._queued_samples = 0
        self._queued_bytes = 0
        self._pool: Executor | None = None
        self._workers = 1
        #: Keeps numcodecs' Blosc to the calling thread while batches are with the pool.
        self._blosc_single: contextlib.ExitStack[bool | None] | None = None
        #: Copies of stored samples (of one shape, never more than were queued at once) to
        #: copy queued samples into: reusing them spares the page faults of fresh
        #: allocations, which cost about 10 times the copy.
        self._spare: list[np.ndarray] = []
        #: The error that stopped the file (a queued sample that failed), if any.
        self.failure: BaseException | None = None

    def _create_datasets(self) -> h5py.Dataset:
        """Create the file's datasets; return dataset ``"0"``.

        h5py creates the first; the others are created from its property lists
        through HDF5's own call, which costs a fifth of h5py's per dataset and gives
        the same datasets (creation properties, type, space, link).
        """
        schema = self.schema
        options: dict[str, Any] = {
            "shape": (schema.collection_size, *schema.shape),
            # A zero-length axis is resizable: HDF5 then accepts its chunk extent of 1.
            "maxshape": (schema.collection_size, *(dim or None for dim in schema.shape)),
            "dtype": schema.dtype,
            "chunks": chunk_shape(schema),
            "fillvalue": np.zeros((), schema.dtype),
            "fletcher32": schema.backend == "00",
            **schema.compression.filter_kwargs(),
        }
        first = self.h5file.create_dataset("0", **options)
        dataset_id = first.id
        dcpl, dapl = dataset_id.get_create_plist(), dataset_id.get_access_plist()
        type_id, space = dataset_id.get_type(), dataset_id.get_space()
        for number in range(1, schema.collection_count):
            h5py.h5d.create(
                self.h5file.id, str(number).encode(), type_id, space, dcpl=dcpl, dapl=dapl
            ).close()
        return first

    def _sample_io(self, number: int) -> _SampleIO:
        """The sample I/O of dataset ``number``, opened on first use."""
        sample_io = self._datasets.get(number)
        if sample_io is None:
            sample_io = self._datasets[number] = _SampleIO(self.h5file[str(number)])
        return sample_io

    @property
    def full(self) -> bool:
        return self._slots_used >= self.schema.collection_count * self.schema.collection_size

    def encode(self, array: np.ndarray) -> _Encoded:
        """The stored bytes and filter mask of the chunk holding ``array`` (padded with
        zeros to the chunk), or ``None`` where HDF5 must write it. Thread-safe; touches
        no file."""
        encoder = self._encoder  # read once: the writing thread may drop it meanwhile
        if encoder is None or not array.size:
            return None
        if array.shape == self.schema.shape:
            chunk = array
        else:
            chunk = np.zeros(self._chunk, self.schema.dtype)
            chunk[tuple(slice(0, n) for n in array.shape)] = array
        return encoder.encode_like_hdf5(chunk)

    def _encode_batch(self, samples: list[np.ndarray]) -> list[_Encoded]:
        """:meth:`encode` of each sample: one job of the pool."""
        return [self.encode(sample) for sample in samples]

    def write(self, array: np.ndarray, *, flush: bool = True, checksum: str | None = None) -> str:
        """Store ``array`` (already checked against the schema) in the next free slot;
        return its record string.

        With ``flush`` (the default) readers in other processes see the sample once this
        returns; else once :meth:`flush` is called. Queued samples are stored first.
        ``checksum``: the xxhash64 of a backend ``01`` sample, if the caller has it.
        """
        self._check_usable()
        slot = self._slots_used
        if array.size:
            if self._queued_samples:
                self._store_queued(everything=True)
            self._store(slot, array, self.encode(array))
            if flush:
                self._flush_written()
        return self._record(slot, array, checksum)

    def write_later(
        self, array: np.ndarray, pool: Executor, workers: int, checksum: str | None = None
    ) -> str:
        """Store ``array`` (already checked against the schema) in the next free slot,
        its chunk encoded on ``pool`` (of ``workers`` threads) and stored by a later call;
        return its record string.

        ``array`` is copied into the next batch: the caller may change it once this
        returns. Samples the file's encoder does not take (chunks larger than
        :data:`QUEUE_MAX_CHUNK_BYTES` or smaller than :data:`QUEUE_MIN_CHUNK_BYTES`, any
        when the file has no encoder) are written now, as by ``write(array)``.
        ``checksum``: the xxhash64 of a backend ``01`` sample, if the caller has it.
        Before copying, the batches already encoded are stored (and their datasets
        flushed); when the queue is full (:data:`QUEUE_SAMPLES`, :data:`QUEUE_BYTES`)
        this waits until its older half is stored.

        Raises the error of a queued sample that failed (see the class documentation);
        this sample is then not stored.
        """
        self._check_usable()
        if (
            not array.size
            or self._encoder is None
            or not QUEUE_MIN_CHUNK_BYTES <= self._chunk_bytes <= QUEUE_MAX_CHUNK_BYTES
        ):
            return self.write(array, checksum=checksum)
        self._pool, self._workers = pool, max(1, workers)
        if self._queue:
            self._store_queued(everything=False, room=array.nbytes)
        if self._spare and self._spare[-1].shape == array.shape:
            sample = self._spare.pop()
        else:
            sample = np.empty(array.shape, self.schema.dtype)
        # Copied holding the GIL: numpy lets it go for a copy this large, and taking it
        # back from the encoding threads takes longer than the copy.
        sample.data.cast("B")[:] = array.data.cast("B")
        slot = self._slots_used
        self._gathered_slots.append(slot)
        self._gathered.append(sample)
        self._queued_samples += 1
        self._queued_bytes += sample.nbytes
        if len(self._gathered) >= batch_samples(self._chunk_bytes, self._workers):
            self._hand_out(1)
        return self._record(slot, array, checksum)

    def _hand_out(self, parts: int) -> None:
        """Hand the gathered samples to the pool, as up to ``parts`` batches."""
        slots, samples = self._gathered_slots, self._gathered
        self._gathered_slots, self._gathered = [], []
        if not samples or self._pool is None:
            return
        if self._blosc_single is None:
            self._blosc_single = contextlib.ExitStack()
            self._blosc_single.enter_context(single_threaded_blosc())
        size = -(-len(samples) // parts)
        for start in range(0, len(samples), size):
            part = samples[start : start + size]
            job = self._pool.submit(self._encode_batch, part)
            self._queue.append((slots[start : start + size], part, job))

    def _record(self, slot: int, array: np.ndarray, checksum: str | None) -> str:
        """The record string of ``array`` in ``slot``, which it now occupies
        (``checksum``: its xxhash64 for backend ``01``, computed here if ``None``).

        Built from fields this writer made (the file's uid, numbers, the sample's
        shape), which the record formats accept as they are: the same string as
        ``Record00``/``Record01(...).encode()``, without checking the fields again.
        """
        number, index = divmod(slot, self.schema.collection_size)
        self._slots_used = slot + 1
        shape = self._shape_texts.get(array.shape)
        if shape is None:
            shape = self._shape_texts[array.shape] = SEP_LST.join(map(str, array.shape))
        if self.schema.backend == "01":
            if checksum is None:
                checksum = sample_xxh64(array)
            return SEP_KEY.join(("01", self.uid, checksum, str(number), str(index), shape))
        return f"00{SEP_KEY}{self.uid}{SEP_HSH}{number}{SEP_LST}{index}{SEP_SLC}{shape}"

    def _store(self, slot: int, array: np.ndarray, encoded: _Encoded) -> None:
        """Write ``array`` into ``slot``: its stored bytes ``encoded`` (from
        :meth:`encode`), or through HDF5.

        The first chunk of each filter mask in the file goes through HDF5, and HDF5's
        stored bytes and mask are compared with ``encoded``: chunks of that mask are
        written directly from then on if they are equal; if not, the encoder is dropped.
        """
        number, index = divmod(slot, self.schema.collection_size)
        sample_io = self._sample_io(number)
        self._unflushed.add(number)
        encoder = self._encoder
        if encoded is None or encoder is None:
            sample_io.write(index, array)
            self._stale.pop(number, None)  # HDF5 looked this chunk up: remembered right
            return
        corner = (index,) + (0,) * len(self._chunk)
        stored_bytes, mask = encoded
        if mask in self._verified:
            sample_io.dataset.id.write_direct_chunk(corner, stored_bytes, mask)
            if mask:
                self._stale[number] = index
            else:
                self._stale.pop(number, None)
            return
        sample_io.write(index, array)
        self._stale.pop(number, None)
        stored_mask, stored = sample_io.dataset.id.read_direct_chunk(corner)
        if stored_mask == mask and bytes(stored) == stored_bytes:
            self._verified.add(mask)
        else:
            self._encoder = None

    def _store_queued(self, *, everything: bool, room: int = 0) -> None:
        """Store queued batches in order, then flush the datasets written once: all of
        them with ``everything`` (the gathered samples too, split among the workers);
        else every batch already encoded and, when the queue has no room for one more
        sample of ``room`` bytes, at least its older half (waiting for their encoding:
        the threads stay half a queue ahead, and this thread wakes once for many
        samples rather than once per sample).

        A failure stops the file (:attr:`failure`) and is raised; the queue is dropped.
        """
        if everything:
            self._hand_out(self._workers)
        queue = self._queue
        full = self._queued_samples >= QUEUE_SAMPLES or self._queued_bytes + room > QUEUE_BYTES
        try:
            while queue:
                slots, samples, job = queue[0]
                if not (everything or job.done() or (full and self._over_half(room))):
                    break  # still encoding, and room for the next sample: stored later
                try:
                    for slot, sample, encoded in zip(slots, samples, job.result()):
                        self._store(slot, sample, encoded)
                except Exception as err:
                    self._fail(err)
                    raise
                queue.popleft()
                self._queued_samples -= len(samples)
                self._queued_bytes -= sum(sample.nbytes for sample in samples)
                if self._spare and self._spare[-1].shape != samples[0].shape:
                    self._spare.clear()
                self._spare.extend(samples)
        finally:
            self._flush_written()
            if not queue and not self._gathered:
                self._let_blosc_go()

    def _let_blosc_go(self) -> None:
        """End :func:`single_threaded_blosc` for this file (no batch with the pool)."""
        single, self._blosc_single = self._blosc_single, None
        if single is not None:
            single.close()

    def _over_half(self, room: int) -> bool:
        """Whether more than half the queue is taken, counting ``room`` more bytes."""
        return (
            self._queued_samples > QUEUE_SAMPLES // 2
            or self._queued_bytes + room > QUEUE_BYTES // 2
        )

    def _flush_written(self) -> None:
        """Make every sample stored so far visible to readers in other processes: HDF5
        forgets the chunks it remembers wrongly (:func:`_forget_last_chunk`), once per
        run of writes rather than after every chunk stored with filter mask 1, as only
        the last chunk looked up in a dataset is remembered; then each dataset written
        since its last flush is flushed, once."""
        for number, index in self._stale.items():
            _forget_last_chunk(self._datasets[number].dataset.id, index)
        self._stale.clear()
        for number in sorted(self._unflushed):
            self._datasets[number].dataset.flush()
        self._unflushed.clear()

    def _fail(self, err: BaseException) -> None:
        self.failure = err
        for _slots, _samples, job in self._queue:
            job.cancel()
        self._queue.clear()
        self._gathered_slots, self._gathered = [], []
        self._queued_samples = self._queued_bytes = 0

    def _check_usable(self) -> None:
        if self.failure is not None:
            raise ClosedError(
                f"Expected a collection file that takes samples. {self.path} stopped when "
                f"storing a sample failed: {self.failure!r}"
            )

    def flush(self) -> None:
        """Store every queued sample, then make every sample written so far visible to
        readers in other processes."""
        self._check_usable()
        if self._queued_samples:
            self._store_queued(everything=True)
        self._flush_written()

    def close(self) -> None:
        """Store the queued samples, close the file, then write its content index, which
        marks it complete. A file that stopped (:attr:`failure`) is closed without an
        index; so is one whose queued samples fail here (the error is raised)."""
        if not self.h5file.id.valid:
            return
        try:
            if self._queued_samples and self.failure is None:
                self._store_queued(everything=True)  # raises past the index if interrupted
        finally:
            self._let_blosc_go()
            self.h5file.close()
        if self.failure is not None:
            return
        path = index_path(self.path.parent, self.uid)
        staging = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
        staging.write_text("".join(f"{digest} {record}\n" for digest, record in self.entries))
        os.replace(staging, path)


def batch_samples(chunk_bytes: int, workers: int) -> int:
    """Samples a writer hands its pool in one job: 8, fewer for large chunks, so that
    every worker has two batches within the queue's bounds (:data:`QUEUE_SAMPLES`,
    :data:`QUEUE_BYTES`). A job costs a future and a wake-up; a batch spreads them
    over its samples."""
    room = min(QUEUE_SAMPLES, QUEUE_BYTES // max(1, chunk_bytes)) // (2 * max(1, workers))
    return max(1, min(_BATCH_SAMPLES, room))


class CollectionReader:
    """One collection file, opened read-only in SWMR mode.

    A file whose writer is still adding samples ("live") has its dataset metadata
    refreshed before every read; once its content index appears the file is reopened and
    read without refreshing.

    Samples of a complete file are read without HDF5 when each sample is one chunk (always
    for backend ``01``, for backend ``00`` when the maximum sample shape fits one chunk)
    and the filter pipeline allows it (see :mod:`h5vc.hdf5.codecs`): :meth:`fetch`
    reads the stored bytes of the sample's chunk, :func:`decode_sample` decodes and
    verifies them. Any sample that path cannot deliver is read by :meth:`read_hdf5`, which
    gives the same data and raises every read error.
    """

    def __init__(self, directory: pathlib.Path, uid: str, schema: Schema) -> None:
        self.schema = schema
        self.path = collection_path(directory, uid)
        self._index_path = index_path(directory, uid)
        self._dtype = schema.dtype
        self._datasets: dict[str, _SampleIO] = {}
        self._chunks: dict[str, _Readable | None] = {}
        self._fd: int | None = None
        self._digests: dict[str, str] | None = None
        self._open()

    def _open(self) -> None:
        self.live = not self._index_path.exists()
        try:
            self.h5file = h5py.File(
                self.path,
                "r",
                libver="latest",
                swmr=True,
                **cache_settings(self.schema).as_h5py_kwargs(),
            )
        except FileNotFoundError as err:
            raise DataFileNotFoundError(
                f"Expected the collection file {self.path} of the record. It does not exist."
            ) from err
        except OSError as err:
            raise CorruptDataError(
                f"Expected an HDF5 collection file at {self.path}. Got an unreadable file: {err}"
            ) from err
        self._datasets.clear()
        self._chunks.clear()
        if not self.live:
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except OSError:
                self._fd = None  # read through HDF5 only

    def close(self) -> None:
        self._datasets.clear()
        self._chunks.clear()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.h5file.close()

    def check_complete(self) -> None:
        """Reopen a live file once its writer has finished it (its index exists)."""
        if self.live and self._index_path.exists():
            self.close()
            self._open()

    def _dataset(self, name: str) -> _SampleIO:
        sample_io = self._datasets.get(name)
        if sample_io is None:
            node = self.h5file.get(name)
            if not isinstance(node, h5py.Dataset):
                raise CorruptDataError(
                    f"Expected dataset {name!r} in collection file {self.path}. Got {node!r}."
                )
            sample_io = self._datasets[name] = _SampleIO(node)
        return sample_io

    def _chunk_table(self, name: str) -> _Readable | None:
        """Decoder, chunk locations and the sample shape of a chunk of dataset ``name``, or
        None to read it through HDF5."""
        table = None
        try:
            dataset = self._dataset(name).dataset
            decoder = pipeline_for(dataset)
            if decoder is not None and dataset.dtype.str == self._dtype.str:
                chunks = sample_table(dataset)
                if chunks is not None:
                    unchecked = decoder.unchecked()
                    table = (decoder, unchecked, chunks, tuple(dataset.chunks[1:]))
        except Exception:  # any trouble here: read through HDF5, which reports it
            table = None
        self._chunks[name] = table
        return table

    def _content_digests(self) -> dict[str, str]:
        """Record string -> content digest of every sample, from the file's index."""
        if self._digests is None:
            try:
                self._digests = {record: digest for digest, record in read_index(self._index_path)}
            except OSError:  # CorruptDataError too: then Fletcher-32 checks the stored bytes
                self._digests = {}
        return self._digests

    def fetch(
        self, record: SampleRecord
    ) -> tuple[Pipeline, bytes, int, SampleCheck, tuple[int, ...]] | None:
        """What :func:`decode_sample` needs besides the output: a decoder, the stored bytes
        and filter mask of the sample's chunk, the check of the decoded sample and the
        sample shape of a chunk; ``None`` unless the sample can be read without HDF5.

        A backend ``01`` sample is checked against its record's xxhash64. A backend ``00``
        sample is checked against its digest in the file's content index, which covers
        the decoded sample (decompression included) and costs less than the Fletcher-32
        sums of its stored bytes, so those are only stripped; without a digest the
        Fletcher-32 checksums are checked. Only records of a complete file qualify; call
        :meth:`check_complete` first.
        """
        if self._fd is None:
            return None
        try:
            table = self._chunks[record.dataset]
        except KeyError:
            table = self._chunk_table(record.dataset)
        if table is None:
            return None
        decoder, unchecked, chunks, chunk = table
        check: SampleCheck = None
        if isinstance(record, Record01):
            check = (sample_xxh64, record.checksum)
        else:
            digest = self._content_digests().get(record.encode())
            if digest is not None:
                decoder, check = unchecked, (content_digest, digest)
        try:
            location = chunks.location(record.index)
            if location is None:
                return None
            offset, size, mask = location
            return decoder, os.pread(self._fd, size, offset), mask, check, chunk
        except (IndexError, OSError):
            return None

    def read(self, record: SampleRecord) -> np.ndarray:
        """The sample ``record`` points to; checksums verified for backend ``01``, the
        Fletcher-32 checksums of its chunks for backend ``00``."""
        out = np.empty(record.shape, self._dtype)
        if self.live:
            self.check_complete()
        if self._fd is not None and out.size:
            fetched = self.fetch(record)
            if fetched is not None and decode_sample(out, *fetched):
                return out
        self.read_hdf5(record, out)
        return out

    def _check_stored_size(self, record: SampleRecord) -> None:
        """Refuse a Fletcher-32 chunk too short to hold its checksum before HDF5 reads it:
        some HDF5 builds read past the end of such a chunk (CVE-2024-29165) and crash."""
        if self._fd is None:
            return  # a live file: its chunks are not listed
        try:
            table = self._chunks[record.dataset]
        except KeyError:
            table = self._chunk_table(record.dataset)
        if table is None or not table[0].checksummed:
            return
        chunks = table[2]
        location = chunks.location(record.index) if record.index < len(chunks) else None
        if location is not None and location[1] < 4:
            raise CorruptDataError(
                f"Expected sample {record.index} of dataset {record.dataset!r} in "
                f"{self.path} to be stored with its 4-byte Fletcher-32 checksum. Got a "
                f"chunk of {location[1]} bytes."
            )

    def _check_stored(self, dataset: h5py.Dataset, record: SampleRecord) -> None:
        """Raise CorruptDataError if the chunk at the origin of the sample is not stored."""
        corner = (record.index,) + (0,) * (dataset.ndim - 1)
        if dataset.id.get_chunk_info_by_coord(corner).byte_offset is None:
            raise CorruptDataError(
                f"Expected sample {record.index} of dataset {record.dataset!r} in "
                f"{self.path} to be stored. Its writer has not stored it: it has not "
                "flushed it yet (SampleWriter.flush) or storing it failed."
            )

    def read_hdf5(self, record: SampleRecord, out: np.ndarray) -> None:
        """Read the sample into ``out`` through HDF5, checking the checksum of a ``01``
        record and the content digest of a ``00`` record of a complete file.

        ``out`` is C-contiguous, of the record's shape and the schema's dtype. Call
        :meth:`check_complete` first. In a live file, a sample whose chunk is not stored
        (its writer has not flushed it yet, or failed to store it) raises
        CorruptDataError instead of reading as zeros.
        """
        sample_io = self._dataset(record.dataset)
        self._check_stored_size(record)
        try:
            if self.live:
                sample_io.dataset.refresh()
                if out.size:
                    self._check_stored(sample_io.dataset, record)
            if out.size:
                sample_io.read(record.index, out)
        except OSError as err:
            if isinstance(err, CorruptDataError):
                raise
            raise CorruptDataError(
                f"Expected to read sample {record.index} of dataset {record.dataset!r} in "
                f"{self.path}. Got an HDF5 error instead: {err}"
            ) from err
        if isinstance(record, Record01):
            checksum = sample_xxh64(out)
            if checksum != record.checksum:
                raise CorruptDataError(
                    f"Expected sample {record.index} of dataset {record.dataset!r} in "
                    f"{self.path} to have xxhash64 {record.checksum}. Got {checksum} instead."
                )
        elif not self.live:
            expected = self._content_digests().get(record.encode())
            digest = content_digest(out)
            if expected is not None and digest != expected:
                raise CorruptDataError(
                    f"Expected sample {record.index} of dataset {record.dataset!r} in "
                    f"{self.path} to have the content digest {expected} of "
                    f"{self._index_path.name}. Got {digest} instead."
                )


def decode_sample(
    out: np.ndarray,
    decoder: Pipeline,
    data: bytes,
    mask: int,
    check: SampleCheck,
    chunk: tuple[int, ...],
) -> bool:
    """Decode the stored bytes ``data`` of a chunk of sample shape ``chunk`` into ``out``;
    True if they decoded and pass ``check`` (see :meth:`CollectionReader.fetch`).

    A backend ``00`` sample smaller than the chunk is its corner at the origin: the chunk
    is decoded into a buffer and that corner copied to ``out``. Runs without HDF5 and
    mostly without the GIL, so threads can decode in parallel.
    """
    try:
        if out.shape == chunk:
            decoder.decode_into(data, mask, out.reshape(-1).view(np.uint8))
        else:
            whole = np.empty(chunk, out.dtype)
            decoder.decode_into(data, mask, whole.reshape(-1).view(np.uint8))
            out[...] = whole[tuple(slice(0, dim) for dim in out.shape)]
    except Exception:  # the caller reads the sample through HDF5 instead
        return False
    return check is None or check[0](out) == check[1]


class RecordChecker:
    """Checks that records can point into the files of one schema ."""

    __slots__ = ("_backend", "_count", "_directory", "_fixed", "_limits", "_schema", "_size")

    def __init__(self, schema: Schema, directory: pathlib.Path) -> None:
        self._schema = schema
        self._directory = directory
        self._backend = schema.backend
        self._count = schema.collection_count
        self._size = schema.collection_size
        self._limits = schema.shape
        self._fixed = schema.backend == "01"

    def __call__(self, record: SampleRecord) -> None:
        """Raise RecordFormatError unless ``record`` can point into a file of the schema."""
        shape = record.shape
        if (
            record.format_code != self._backend
            or record.index >= self._size
            or int(record.dataset) >= self._count
            or (
                shape != self._limits
                if self._fixed
                else len(shape) != len(self._limits)
                or any(dim > limit for dim, limit in zip(shape, self._limits))
            )
        ):
            schema = self._schema
            raise RecordFormatError(
                f"Expected a {schema.backend!r} record within {schema.collection_count} "
                f"datasets of {schema.collection_size} samples of shape {schema.shape} in "
                f"{self._directory}. Got {record.encode()!r} instead."
            )
