"""Content-addressed sample stores: a directory of collection files and a schema.

Layout of a store directory::

    samples.json        the schema (backend, shape, dtype, compression, collection settings)
    <uid>.hdf5          collection files, one or more per writer session
    <uid>.index         content index of a complete collection file: one line per sample,
                        "<xxh3-128 of dtype, shape and bytes> <record>"

The index of a file is written (atomically) only after the file is closed, so its
existence marks the file complete. Writers load every index when they start, so writing a
sample that is already stored returns its existing record instead of storing it again.
"""

from __future__ import annotations

import itertools
import os
import pathlib
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, overload

import numpy as np

import h5vc.config as config
from h5vc.cores import usable
from h5vc.errors import (
    ClosedError,
    DataFileNotFoundError,
    InvalidOptionError,
    RecordFormatError,
    SchemaMismatchError,
)
from h5vc.samples.backends import (
    INDEX_SUFFIX,
    CollectionReader,
    CollectionWriter,
    RecordChecker,
    content_digest,
    decode_sample,
    read_index,
    sample_xxh64,
)
from h5vc.samples.records import Record00, Record01, SampleRecord, decode_record
from h5vc.samples.schema import (
    DEFAULT_COLLECTION_COUNT,
    DEFAULT_COLLECTION_SIZE,
    SCHEMA_FILE,
    Schema,
    check_sample,
)

__all__ = ["SampleReader", "SampleStore", "SampleWriter", "content_digest"]

#: At most this many decoding threads per reader unless asked for more.
_MAX_DEFAULT_THREADS = config.SAMPLE_THREADS_MAX
#: :meth:`SampleReader.read_many` reads this many stored chunks, then decodes them.
BATCH_WINDOW = config.SAMPLE_BATCH_WINDOW


def _load_index(directory: pathlib.Path) -> dict[str, str]:
    """Digest -> record of every complete collection file in ``directory``."""
    index: dict[str, str] = {}
    for path in sorted(directory.glob(f"*{INDEX_SUFFIX}")):
        for digest, record in read_index(path):
            index.setdefault(digest, record)
    return index


class SampleStore:
    """A directory of samples that all fit one schema.

    ``SampleStore(directory, backend="01", shape=(224, 224), dtype="uint8")`` creates a store
    (or opens it, if the directory already holds one with the same schema);
    ``SampleStore(directory)`` opens an existing store. ``shape`` is the fixed sample shape
    for backend ``01`` and the maximum sample shape for backend ``00``. ``compression`` takes
    the options described in :mod:`h5vc.samples.options`; ``None`` picks a default for the
    dtype. ``collection_count`` datasets of ``collection_size`` samples make one file.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        backend: str | None = None,
        shape: tuple[int, ...] | int | None = None,
        dtype: Any = None,
        compression: Mapping[str, Any] | None = None,
        *,
        collection_count: int | None = None,
        collection_size: int | None = None,
    ) -> None:
        self.directory = pathlib.Path(directory)
        requested = {
            "backend": backend,
            "shape": shape,
            "dtype": dtype,
            "compression": compression,
            "collection_count": collection_count,
            "collection_size": collection_size,
        }
        if (self.directory / SCHEMA_FILE).exists():
            self.schema = Schema.load(self.directory)
            self._check_requested(requested)
            return
        if shape is None or dtype is None:
            raise DataFileNotFoundError(
                f"Expected a sample store in {self.directory} (no {SCHEMA_FILE} there); "
                "pass shape= and dtype= to create one."
            )
        schema = Schema.parse(
            backend="01" if backend is None else backend,
            shape=shape,
            dtype=dtype,
            compression=compression,
            collection_count=DEFAULT_COLLECTION_COUNT
            if collection_count is None
            else collection_count,
            collection_size=DEFAULT_COLLECTION_SIZE if collection_size is None else collection_size,
        )
        self.directory.mkdir(parents=True, exist_ok=True)
        self.schema = schema.save(self.directory)
        if self.schema != schema:
            self._check_requested(requested)

    def _check_requested(self, requested: dict[str, Any]) -> None:
        """Raise SchemaMismatchError if an explicitly given setting differs from the schema."""
        saved = self.schema.to_dict()
        for key, value in requested.items():
            if value is None:
                continue
            wanted = Schema.parse(**{**{name: saved[name] for name in requested}, key: value})
            if getattr(wanted, key) != getattr(self.schema, key):
                raise SchemaMismatchError(
                    f"Expected {key}={saved[key]!r} for the existing sample store in "
                    f"{self.directory}. Got {key}={value!r} instead."
                )

    def __repr__(self) -> str:
        schema = self.schema
        return (
            f"<SampleStore {str(self.directory)!r} backend={schema.backend!r} "
            f"shape={schema.shape} dtype={schema.dtype}>"
        )

    def writer(self, *, threads: int | None = None) -> SampleWriter:
        """A new writer session; use it as a context manager.

        ``threads``: threads that compress samples while the caller goes on (``None``:
        one per usable core, at most 4; ``0``: compress in the calling thread, every
        sample stored before ``write`` returns).
        """
        return SampleWriter(self.directory, self.schema, threads=threads)

    def reader(self, *, threads: int | None = None) -> SampleReader:
        """A reader; it pickles, so worker processes can use it.

        ``threads``: decoding threads of :meth:`SampleReader.read_many` besides the calling
        thread (``None``: one fewer than the usable cores, at most 4; ``0``: none).
        """
        return SampleReader(self.directory, self.schema, threads=threads)

    def collection_files(self) -> list[pathlib.Path]:
        """The collection files of the store, sorted by name."""
        return sorted(self.directory.glob("*.hdf5"))


class SampleWriter:
    """A writer session: samples go into new collection files only.

    ``write(array)`` returns the record string of the stored sample. With encoding
    threads (``threads`` of :meth:`SampleStore.writer`, by default one per usable core)
    the sample's chunk is compressed on them while the caller goes on, and stored by a
    later call: a sample is readable from other processes once :meth:`flush`,
    :meth:`write_many` or :meth:`close` returns (most of them sooner, a bounded queue
    behind the calls). With ``threads=0`` every sample is stored and flushed before
    ``write`` returns. Leaving the ``with`` block (or ``close()``) stores every sample,
    closes the files and publishes their content indexes.

    Should storing a sample fail after its ``write`` returned, the error is raised by
    the next call of the writer that stores samples (``write``, ``write_many``,
    ``flush`` or ``close``), the writer stops taking samples (:class:`ClosedError`) and
    the file of that sample gets no content index, so it is never published as
    complete with a sample missing.
    """

    def __init__(
        self, directory: pathlib.Path, schema: Schema, *, threads: int | None = None
    ) -> None:
        self.directory = directory
        self.schema = schema
        self.threads = default_encode_threads() if threads is None else _parse_threads(threads)
        self._executor: ThreadPoolExecutor | None = None
        #: Digest -> record of the complete files of earlier sessions: a sample is read
        #: back and compared before one of these records is returned for it.
        self._index = _load_index(directory)
        #: Digest -> record of the samples this session wrote or found equal to a stored
        #: one: returned for a sample of the same digest.
        self._known: dict[str, str] = {}
        self._files: dict[str, CollectionWriter] = {}
        self._current: CollectionWriter | None = None
        self._verifier: SampleReader | None = None
        self._failure: BaseException | None = None
        self.closed = False

    def __enter__(self) -> SampleWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def write(self, array: np.ndarray) -> str:
        """Store ``array`` unless an identical sample is stored; return its record string.

        ``array`` may be changed once this returns (a queued sample is a copy). A sample
        that does not fit the schema raises :class:`SchemaMismatchError` and nothing is
        written.
        """
        self._check_open()
        array = check_sample(array, self.schema)
        return self._store(array, flush=True)

    def write_many(self, arrays: Iterable[np.ndarray]) -> list[str]:
        """Store several samples; return their record strings, in order.

        The same records, deduplication and files as :meth:`write` for each sample in
        turn, and every sample is readable from other processes once this returns. Every
        sample is checked against the schema first: a bad one raises
        :class:`SchemaMismatchError` and none is written.
        """
        self._check_open()
        checked = [check_sample(array, self.schema) for array in arrays]
        records = [self._store(array, flush=False) for array in checked]
        self.flush()
        return records

    def flush(self) -> None:
        """Store every sample written so far and make it readable from other processes."""
        self._check_open()
        if self._current is not None:
            self._guarded(self._current.flush)

    def _check_open(self) -> None:
        if self._failure is not None:
            raise ClosedError(
                f"Expected an open writer for {self.directory}. It stopped when storing a "
                f"sample failed: {self._failure!r}"
            )
        if self.closed:
            raise ClosedError(f"Expected an open writer for {self.directory}. It is closed.")

    def _store(self, array: np.ndarray, flush: bool) -> str:
        """The record of ``array``: that of an identical sample already stored, else of
        ``array`` stored in the next slot (queued for the encoding threads, if any).

        A duplicate costs one hash and a lookup, before anything is compressed or
        touches a file: this session's own samples are recognised by their content
        digest (xxh3-128 of dtype, shape and bytes, the key of the content index); a
        sample of an earlier session's index is read back and compared once, then known
        the same way. A backend ``01`` sample stored here has its xxhash64 computed
        once, for its record.
        """
        digest = content_digest(array)
        known = self._known.get(digest)
        if known is not None:
            return known
        existing = self._index.get(digest)
        if existing is not None and self._holds(existing, array):
            self._known[digest] = existing
            return existing
        checksum = sample_xxh64(array) if self.schema.backend == "01" else None
        collection = self._current
        if collection is None or collection.full:
            if collection is not None:
                self._guarded(collection.flush)  # its queue: visible before the next file
            collection = self._current = CollectionWriter(self.directory, self.schema)
            self._files[collection.uid] = collection
        if self.threads:
            pool = self._executor or self._encode_executor()
            record = self._guarded(collection.write_later, array, pool, self.threads, checksum)
        else:
            record = self._guarded(collection.write, array, flush=flush, checksum=checksum)
        collection.entries.append((digest, record))
        self._known[digest] = record
        return record

    def _guarded(self, action: Any, *args: Any, **kwargs: Any) -> Any:
        """``action(*args, **kwargs)`` on the current collection file; if that stopped
        the file (a queued sample failed), the writer stops too."""
        try:
            return action(*args, **kwargs)
        except BaseException as err:
            if self._current is not None and self._current.failure is err:
                self._failure = err
            raise

    def _encode_executor(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self.threads, thread_name_prefix="h5vc-samples-encode"
            )
        return self._executor

    def _holds(self, record_text: str, array: np.ndarray) -> bool:
        """True if ``record_text`` (of an earlier session's index) points to a readable
        sample equal to ``array``."""
        try:
            if self._verifier is None:
                self._verifier = SampleReader(self.directory, self.schema)
            stored = self._verifier.read(record_text)
        except (ValueError, OSError):
            return False  # unreadable or foreign: store the sample again
        return stored.shape == array.shape and np.array_equal(stored, array)

    def close(self) -> None:
        """Store every sample, close every file of the session and publish the content
        indexes (not that of a file where storing a sample failed: the first such error
        is raised, after every file is closed)."""
        if self.closed:
            return
        self.closed = True
        error: BaseException | None = None
        try:
            for collection in self._files.values():
                try:
                    collection.close()
                except BaseException as err:
                    if collection.failure is err:
                        self._failure = err
                    error = error or err
        finally:
            if self._executor is not None:
                self._executor.shutdown()
                self._executor = None
            if self._verifier is not None:
                self._verifier.close()
        if error is not None:
            raise error


def default_encode_threads() -> int:
    """Encoding threads a writer starts by default: one per usable core, at most 4.

    One thread on a single core too: handing the encoding to it lets the writer store and
    flush samples in batches, which costs less than doing it sample by sample.
    """
    return min(_MAX_DEFAULT_THREADS, usable())


def default_threads() -> int:
    """Decoding threads a reader starts for :meth:`SampleReader.read_many` by default.

    One fewer than the usable cores (at most 4): the calling thread decodes as well.
    """
    return max(0, min(_MAX_DEFAULT_THREADS, usable() - 1))


def _parse_threads(threads: Any) -> int:
    if threads is None:
        return default_threads()
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
        raise InvalidOptionError(
            f"Expected threads to be None or an int >= 0. Got {threads!r} instead."
        )
    return threads


def _parse_record(record: Any) -> SampleRecord:
    if isinstance(record, str):
        return decode_record(record)
    if isinstance(record, Record00 | Record01):
        return record
    raise RecordFormatError(
        f"Expected a record string or a Record00/Record01. Got {type(record).__name__} instead."
    )


def _decode_jobs(jobs: list[tuple[Any, ...]], counter: Iterator[int], failed: list[int]) -> None:
    """Decode jobs ``(position, out, decoder, data, mask, checksum, chunk)`` until
    ``counter`` passes the last one; append the positions that did not decode (or not to
    their checksum) to ``failed``.

    Several threads share ``counter`` (its ``next`` is atomic), so each job runs once.
    """
    count = len(jobs)
    for number in counter:
        if number >= count:
            return
        position, *job = jobs[number]
        if not decode_sample(*job):
            failed.append(position)


class SampleReader:
    """Reads samples by record; collection files are opened on first use and kept open.

    :meth:`read` reads one sample, :meth:`read_many` a batch, decoding samples on
    ``threads`` threads besides the calling one (``None``: one fewer than the usable
    cores, at most 4; ``0``: the calling thread only).

    Pickling a reader sends only the store's directory, the schema and ``threads``: the
    copy reopens files lazily in its own process, so readers can be handed to
    ``multiprocessing`` workers.
    """

    def __init__(
        self, directory: pathlib.Path, schema: Schema, *, threads: int | None = None
    ) -> None:
        self.directory = directory
        self.schema = schema
        self.threads = _parse_threads(threads)
        self._setup()

    def _setup(self) -> None:
        self._files: dict[str, CollectionReader] = {}
        self._check = RecordChecker(self.schema, self.directory)
        self._executor: ThreadPoolExecutor | None = None
        self._executor_pid = 0

    def __enter__(self) -> SampleReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        return {
            "directory": str(self.directory),
            "schema": self.schema.to_dict(),
            "threads": self.threads,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.directory = pathlib.Path(state["directory"])
        self.schema = Schema.from_dict(state["schema"], self.directory / SCHEMA_FILE)
        self.threads = _parse_threads(state.get("threads"))
        self._setup()

    def _collection(self, uid: str) -> CollectionReader:
        collection = self._files.get(uid)
        if collection is None:
            collection = self._files[uid] = CollectionReader(self.directory, uid, self.schema)
        return collection

    def read(self, record: str | SampleRecord) -> np.ndarray:
        """The sample ``record`` points to (a record string or a decoded record)."""
        parsed = decode_record(record) if isinstance(record, str) else _parse_record(record)
        self._check(parsed)
        collection = self._files.get(parsed.uid)
        if collection is None:
            collection = self._collection(parsed.uid)
        return collection.read(parsed)

    def __getitem__(self, record: str | SampleRecord) -> np.ndarray:
        return self.read(record)

    @overload
    def read_many(
        self, records: Iterable[str | SampleRecord], out: None = None
    ) -> list[np.ndarray]: ...

    @overload
    def read_many(self, records: Iterable[str | SampleRecord], out: np.ndarray) -> np.ndarray: ...

    def read_many(
        self, records: Iterable[str | SampleRecord], out: np.ndarray | None = None
    ) -> list[np.ndarray] | np.ndarray:
        """The samples ``records`` point to, in order: a batch read.

        Returns a list of new arrays, or fills ``out`` and returns it: a writable
        C-contiguous array of the schema's dtype and shape ``(len(records), *shape)``, where
        every record has that sample ``shape``.

        The result, checksum checks and errors are those of ``[read(r) for r in records]``
        (an error is the first one that loop would raise; samples before it may have been
        written into ``out``). Samples of complete files that are one chunk each and whose
        filters can be undone without HDF5 are read as stored bytes, then decoded by the
        calling thread and the reader's threads together, :data:`BATCH_WINDOW` samples at
        a time; all other samples are read one by one through HDF5.
        """
        records = list(records)
        if out is not None:
            self._check_out(out, len(records))
        samples: list[np.ndarray] = []
        for start in range(0, len(records), BATCH_WINDOW):
            self._read_window(records, start, min(start + BATCH_WINDOW, len(records)), out, samples)
        return samples if out is None else out

    def _read_window(
        self,
        records: list[str | SampleRecord],
        start: int,
        stop: int,
        out: np.ndarray | None,
        samples: list[np.ndarray],
    ) -> None:
        """Read ``records[start:stop]`` into ``samples`` (appended) or ``out``."""
        jobs: list[tuple[Any, ...]] = []
        error: Exception | None = None
        dtype = self.schema.dtype
        for position in range(start, stop):
            try:
                parsed = self._prepare(records[position], out)
                collection = self._files.get(parsed.uid)
                if collection is None:
                    collection = self._collection(parsed.uid)
                target = np.empty(parsed.shape, dtype) if out is None else out[position, ...]
                samples.append(target)
                if collection.live:
                    collection.check_complete()
                fetched = collection.fetch(parsed) if target.size else None
                if fetched is None:
                    collection.read_hdf5(parsed, target)
                else:
                    jobs.append((position, target, *fetched))
            except Exception as exc:  # raised below, after the samples before it
                error = exc
                break
        for position in self._decode(jobs):  # read again through HDF5: same data, or its error
            parsed = _parse_record(records[position])
            self._collection(parsed.uid).read_hdf5(parsed, samples[position])
        if error is not None:
            raise error

    def _decode(self, jobs: list[tuple[Any, ...]]) -> list[int]:
        """Decode ``jobs`` on this thread and the reader's threads; the failed positions."""
        failed: list[int] = []
        counter = itertools.count()
        helpers = min(self.threads, len(jobs) - 1)
        workers = []
        if helpers > 0:
            executor = self._decode_executor()
            workers = [executor.submit(_decode_jobs, jobs, counter, failed) for _ in range(helpers)]
        try:
            _decode_jobs(jobs, counter, failed)
        finally:
            for worker in workers:
                worker.result()
        return sorted(failed)

    def __getitems__(self, records: list[str | SampleRecord]) -> list[np.ndarray]:
        """``read_many(records)``: the batch-fetching hook of PyTorch-style datasets."""
        return self.read_many(records)

    def _prepare(self, record: str | SampleRecord, out: np.ndarray | None) -> SampleRecord:
        parsed = decode_record(record) if isinstance(record, str) else _parse_record(record)
        self._check(parsed)
        if out is not None and parsed.shape != out.shape[1:]:
            raise SchemaMismatchError(
                f"Expected records of sample shape {out.shape[1:]} to read into out. "
                f"Got {parsed.encode()!r} instead."
            )
        return parsed

    def _check_out(self, out: Any, count: int) -> None:
        schema = self.schema
        rank = len(schema.shape) + 1
        if (
            not isinstance(out, np.ndarray)
            or out.dtype != schema.dtype
            or out.ndim != rank
            or out.shape[0] != count
            or (schema.backend == "01" and out.shape[1:] != schema.shape)
            or not out.flags.c_contiguous
            or not out.flags.writeable
        ):
            described = (
                f"a {type(out).__name__}"
                if not isinstance(out, np.ndarray)
                else f"an array of dtype {out.dtype}, shape {out.shape}, "
                f"C-contiguous={out.flags.c_contiguous}, writeable={out.flags.writeable}"
            )
            raise SchemaMismatchError(
                f"Expected out to be a writeable C-contiguous numpy array of dtype "
                f"{schema.dtype} and shape ({count}, *sample shape) for {count} records. "
                f"Got {described} instead."
            )

    def _decode_executor(self) -> ThreadPoolExecutor:
        """The reader's decoding threads, started on first use (again after a fork)."""
        if self._executor is None or self._executor_pid != os.getpid():
            self._executor = ThreadPoolExecutor(
                max_workers=max(1, self.threads), thread_name_prefix="h5vc-samples-decode"
            )
            self._executor_pid = os.getpid()
        return self._executor

    def close(self) -> None:
        """Close every open collection file (the reader reopens them when used again)."""
        files, self._files = self._files, {}
        for collection in files.values():
            collection.close()
        executor, self._executor = self._executor, None
        if executor is not None and self._executor_pid == os.getpid():
            executor.shutdown()
