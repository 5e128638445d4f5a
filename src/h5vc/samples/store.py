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

import os
import pathlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import xxhash

from h5vc.errors import CorruptDataError, DataFileNotFoundError, SchemaMismatchError
from h5vc.samples.backends import (
    CollectionReader,
    CollectionWriter,
    check_record,
)
from h5vc.samples.records import SampleRecord, decode_record
from h5vc.samples.schema import (
    DEFAULT_COLLECTION_COUNT,
    DEFAULT_COLLECTION_SIZE,
    SCHEMA_FILE,
    Schema,
    check_sample,
)

__all__ = ["SampleReader", "SampleStore", "SampleWriter", "content_digest"]

_INDEX_SUFFIX = ".index"


def content_digest(array: np.ndarray) -> str:
    """Hex xxh3-128 of a sample's dtype, shape and bytes: its key in the content index."""
    hasher = xxhash.xxh3_128(f"{array.dtype.str}|{array.shape}|".encode())
    hasher.update(array.data)
    return hasher.hexdigest()


def _load_index(directory: pathlib.Path) -> dict[str, str]:
    """Digest -> record of every complete collection file in ``directory``."""
    index: dict[str, str] = {}
    for path in sorted(directory.glob(f"*{_INDEX_SUFFIX}")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            digest, sep, record = line.partition(" ")
            if not sep or len(digest) != 32:
                raise CorruptDataError(
                    f"Expected '<digest> <record>' on line {number} of {path}. "
                    f"Got {line!r} instead."
                )
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

    def writer(self) -> SampleWriter:
        """A new writer session; use it as a context manager."""
        return SampleWriter(self.directory, self.schema)

    def reader(self) -> SampleReader:
        """A reader; it pickles, so worker processes can use it."""
        return SampleReader(self.directory, self.schema)

    def collection_files(self) -> list[pathlib.Path]:
        """The collection files of the store, sorted by name."""
        return sorted(self.directory.glob("*.hdf5"))


class SampleWriter:
    """A writer session: samples go into new collection files only.

    ``write(array)`` returns the record string of the stored sample; the sample is readable
    from other processes as soon as ``write`` returns. Leaving the ``with`` block (or
    ``close()``) closes the files and publishes their content indexes.
    """

    def __init__(self, directory: pathlib.Path, schema: Schema) -> None:
        self.directory = directory
        self.schema = schema
        self._index = _load_index(directory)
        self._files: dict[str, CollectionWriter] = {}
        self._current: CollectionWriter | None = None
        self._verifier: SampleReader | None = None
        self.closed = False

    def __enter__(self) -> SampleWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def write(self, array: np.ndarray) -> str:
        """Store ``array`` unless an identical sample is stored; return its record string."""
        if self.closed:
            raise ValueError(f"Expected an open writer for {self.directory}. It is closed.")
        array = check_sample(array, self.schema)
        digest = content_digest(array)
        existing = self._index.get(digest)
        if existing is not None and self._holds(existing, array):
            return existing
        if self._current is None or self._current.full:
            self._current = CollectionWriter(self.directory, self.schema)
            self._files[self._current.uid] = self._current
        record = self._current.write(array).encode()
        self._current.entries.append((digest, record))
        self._index[digest] = record
        return record

    def _holds(self, record_text: str, array: np.ndarray) -> bool:
        """True if ``record_text`` points to a readable sample equal to ``array``."""
        try:
            record = decode_record(record_text)
            collection = self._files.get(record.uid)
            if collection is not None:
                stored = collection.read(record)
            else:
                if self._verifier is None:
                    self._verifier = SampleReader(self.directory, self.schema)
                stored = self._verifier.read(record)
        except (ValueError, OSError):
            return False  # unreadable or foreign: store the sample again
        return stored.shape == array.shape and np.array_equal(stored, array)

    def close(self) -> None:
        """Close every file of the session and publish the content indexes."""
        if self.closed:
            return
        self.closed = True
        if self._verifier is not None:
            self._verifier.close()
        for collection in self._files.values():
            collection.close()


class SampleReader:
    """Reads samples by record; collection files are opened on first use and kept open.

    Pickling a reader sends only the store's directory and schema: the copy reopens files
    lazily in its own process, so readers can be handed to ``multiprocessing`` workers.
    """

    def __init__(self, directory: pathlib.Path, schema: Schema) -> None:
        self.directory = directory
        self.schema = schema
        self._files: dict[str, CollectionReader] = {}

    def __enter__(self) -> SampleReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"directory": str(self.directory), "schema": self.schema.to_dict()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.directory = pathlib.Path(state["directory"])
        self.schema = Schema.from_dict(state["schema"], self.directory / SCHEMA_FILE)
        self._files = {}

    def read(self, record: str | SampleRecord) -> np.ndarray:
        """The sample ``record`` points to (a record string or a decoded record)."""
        parsed = decode_record(record) if isinstance(record, str) else record
        check_record(parsed, self.schema, self.directory)
        collection = self._files.get(parsed.uid)
        if collection is None:
            collection = CollectionReader(self.directory, parsed.uid, self.schema)
            self._files[parsed.uid] = collection
        return collection.read(parsed)

    def __getitem__(self, record: str | SampleRecord) -> np.ndarray:
        return self.read(record)

    def close(self) -> None:
        """Close every open collection file (the reader reopens them when used again)."""
        files, self._files = self._files, {}
        for collection in files.values():
            collection.close()
