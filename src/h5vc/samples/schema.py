"""The schema of a sample store: what every sample looks like and how files are laid out.

The schema is parsed once, when a store is created or opened, and saved as JSON in the
store directory. :func:`check_sample` validates each array against it before anything is
written.
"""

from __future__ import annotations

import json
import os
import pathlib
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from h5vc.errors import CorruptDataError, InvalidOptionError, SchemaMismatchError
from h5vc.samples.options import Compression, default_compression, parse_compression

__all__ = [
    "BACKENDS",
    "DEFAULT_COLLECTION_COUNT",
    "DEFAULT_COLLECTION_SIZE",
    "SCHEMA_FILE",
    "Schema",
    "check_sample",
    "parse_backend",
    "parse_dtype",
    "parse_shape",
]

#: Format codes of the available backends.
BACKENDS = ("00", "01")
#: Datasets created in every collection file.
DEFAULT_COLLECTION_COUNT = 100
#: Samples held by every dataset of a collection file (its first dimension).
DEFAULT_COLLECTION_SIZE = 250
#: Name of the schema file in a store directory.
SCHEMA_FILE = "samples.json"
_FORMAT_NAME = "h5vc-samples"
_FORMAT_VERSION = 1
_DTYPE_KINDS = "biufc"


def parse_backend(backend: Any) -> str:
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise InvalidOptionError(
            f"Expected a sample backend code in {list(BACKENDS)}. Got {backend!r} instead."
        )
    return backend


def parse_shape(shape: Any) -> tuple[int, ...]:
    """A sample shape: an int or a sequence of ints >= 0, as a tuple."""
    if isinstance(shape, int | np.integer) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, Sequence) or not all(
        isinstance(dim, int | np.integer) and not isinstance(dim, bool) and dim >= 0
        for dim in shape
    ):
        raise InvalidOptionError(
            f"Expected the sample shape as a tuple of ints >= 0. Got {shape!r} instead."
        )
    return tuple(int(dim) for dim in shape)


def parse_dtype(dtype: Any) -> np.dtype:
    """A sample dtype: numeric or boolean, with no fields or subarray."""
    try:
        parsed = np.dtype(dtype)
    except TypeError as err:
        raise InvalidOptionError(f"Expected a numpy dtype. Got {dtype!r} instead.") from err
    if parsed.kind not in _DTYPE_KINDS or parsed.shape or parsed.fields:
        raise InvalidOptionError(
            "Expected a numeric or boolean dtype (kinds 'b', 'i', 'u', 'f', 'c'). "
            f"Got {parsed!r} instead."
        )
    return parsed


def _parse_count(value: Any, name: str) -> int:
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 1:
        raise InvalidOptionError(f"Expected {name} to be an int >= 1. Got {value!r} instead.")
    return int(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Schema:
    """What every sample of a store looks like and how its collection files are laid out.

    ``shape`` is the fixed sample shape of backend ``01`` and the maximum sample shape of
    backend ``00``.
    """

    backend: str
    shape: tuple[int, ...]
    dtype: np.dtype
    compression: Compression
    collection_count: int
    collection_size: int

    @classmethod
    def parse(
        cls,
        *,
        backend: Any,
        shape: Any,
        dtype: Any,
        compression: Mapping[str, Any] | None,
        collection_count: Any,
        collection_size: Any,
    ) -> Schema:
        """Validate user input; raise InvalidOptionError on the first invalid value."""
        backend = parse_backend(backend)
        shape = parse_shape(shape)
        dtype = parse_dtype(dtype)
        return cls(
            backend=backend,
            shape=shape,
            dtype=dtype,
            compression=default_compression(dtype, shape)
            if compression is None
            else parse_compression(compression, backend),
            collection_count=_parse_count(collection_count, "collection_count"),
            collection_size=_parse_count(collection_size, "collection_size"),
        )

    @property
    def sample_nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": _FORMAT_NAME,
            "version": _FORMAT_VERSION,
            "backend": self.backend,
            "shape": list(self.shape),
            "dtype": self.dtype.str,
            "compression": self.compression.to_dict(),
            "collection_count": self.collection_count,
            "collection_size": self.collection_size,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: object) -> Schema:
        """Rebuild a schema saved by :meth:`to_dict`; ``source`` names it in errors."""
        if data.get("format") != _FORMAT_NAME or data.get("version") != _FORMAT_VERSION:
            raise CorruptDataError(
                f"Expected a {_FORMAT_NAME!r} schema of version {_FORMAT_VERSION} in {source}. "
                f"Got format {data.get('format')!r}, version {data.get('version')!r} instead."
            )
        try:
            return cls.parse(
                backend=data["backend"],
                shape=data["shape"],
                dtype=data["dtype"],
                compression=data["compression"],
                collection_count=data["collection_count"],
                collection_size=data["collection_size"],
            )
        except (KeyError, InvalidOptionError) as err:
            raise CorruptDataError(f"Invalid schema in {source}: {err}") from err

    def save(self, directory: pathlib.Path) -> Schema:
        """Write the schema file atomically unless one exists; return the schema in force."""
        path = directory / SCHEMA_FILE
        staging = directory / f".{SCHEMA_FILE}.{secrets.token_hex(8)}"
        staging.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        try:
            os.link(staging, path)  # fails if another process created the store first
        except FileExistsError:
            return Schema.load(directory)
        finally:
            staging.unlink()
        return self

    @classmethod
    def load(cls, directory: pathlib.Path) -> Schema:
        path = directory / SCHEMA_FILE
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise CorruptDataError(f"Expected JSON in {path}. Got invalid text instead.") from err
        if not isinstance(data, dict):
            raise CorruptDataError(f"Expected a JSON object in {path}. Got {data!r} instead.")
        return cls.from_dict(data, path)


def check_sample(array: Any, schema: Schema) -> np.ndarray:
    """Return ``array`` if it fits ``schema``; raise SchemaMismatchError saying why not."""
    if (
        type(array) is np.ndarray
        and array.shape == schema.shape
        and array.dtype == schema.dtype
        and array.flags.c_contiguous
    ):
        return array  # the common case, checked first
    if not isinstance(array, np.ndarray):
        raise SchemaMismatchError(
            f"Expected a numpy.ndarray sample. Got {type(array).__name__} instead."
        )
    if array.dtype != schema.dtype:
        raise SchemaMismatchError(
            f"Expected a sample of dtype {schema.dtype}. Got dtype {array.dtype} instead."
        )
    if array.ndim != len(schema.shape):
        raise SchemaMismatchError(
            f"Expected a sample with {len(schema.shape)} dimensions, shape {schema.shape}. "
            f"Got {array.ndim} dimensions, shape {array.shape} instead."
        )
    if schema.backend == "01" and array.shape != schema.shape:
        raise SchemaMismatchError(
            f"Expected a sample of shape {schema.shape} (backend '01' has a fixed shape). "
            f"Got shape {array.shape} instead."
        )
    if any(dim > limit for dim, limit in zip(array.shape, schema.shape)):
        raise SchemaMismatchError(
            f"Expected a sample of shape at most {schema.shape}. Got shape {array.shape} instead."
        )
    if not array.flags.c_contiguous:
        order = "Fortran-ordered" if array.flags.f_contiguous else "non-contiguous"
        raise SchemaMismatchError(
            "Expected a C-ordered (C-contiguous) sample; use numpy.ascontiguousarray. "
            f"Got a {order} array instead."
        )
    return array
