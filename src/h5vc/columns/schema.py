"""What the samples of a column look like, and the checks of keys and samples.

A column's schema is stored as JSON in the ``h5vc_column`` attribute of its group in
every version (see docs/format.md, "Sample columns").
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from h5vc.errors import (
    ColumnKeyTypeError,
    CorruptDataError,
    InvalidOptionError,
    SampleDtypeError,
    SampleShapeError,
)
from h5vc.samples.options import Compression, default_compression, parse_compression
from h5vc.samples.schema import BACKENDS, parse_dtype, parse_shape
from h5vc.store import layout

__all__ = ["ATTR_COLUMN", "KEY_TYPES", "ColumnSchema", "check_key", "check_sample"]

#: Attribute of a column's group: its schema as JSON.
ATTR_COLUMN = layout.ATTR_COLUMN
#: Key types of a column, fixed by its first key.
KEY_TYPES = ("str", "int")
_FORMAT = "h5vc-column"
_FORMAT_VERSION = 1


def _parse_dtype(dtype: Any) -> np.dtype:
    """A sample dtype in native byte order (the tables and checksums assume it)."""
    parsed = parse_dtype(dtype)
    return parsed.newbyteorder("=") if parsed.byteorder == ">" else parsed


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnSchema:
    """Backend, sample shape (fixed, or the maximum with ``variable_shape``), dtype,
    compression and key type of a column."""

    backend: str
    shape: tuple[int, ...]
    dtype: np.dtype
    variable_shape: bool
    compression: Compression
    key_type: str | None = None

    @classmethod
    def parse(
        cls,
        *,
        shape: Any,
        dtype: Any,
        backend: Any = "01",
        variable_shape: Any = False,
        compression: Mapping[str, Any] | None = None,
    ) -> ColumnSchema:
        """Validate user settings; raise InvalidOptionError on the first invalid one."""
        if not isinstance(backend, str) or backend not in BACKENDS:
            raise InvalidOptionError(
                f"Expected a column backend in {list(BACKENDS)}. Got {backend!r} instead."
            )
        if not isinstance(variable_shape, bool):
            raise InvalidOptionError(
                f"Expected variable_shape to be True or False. Got {variable_shape!r} instead."
            )
        if variable_shape and backend != "00":
            raise InvalidOptionError(
                "Expected backend '00' for a column with variable_shape=True (backend "
                f"'01' stores one fixed shape). Got backend {backend!r} instead."
            )
        parsed_shape = parse_shape(shape)
        parsed_dtype = _parse_dtype(dtype)
        return cls(
            backend=backend,
            shape=parsed_shape,
            dtype=parsed_dtype,
            variable_shape=variable_shape,
            compression=default_compression(parsed_dtype, parsed_shape)
            if compression is None
            else parse_compression(compression, backend),
        )

    @property
    def uid(self) -> str:
        """Names the column's sample store in the file: equal schemas share one."""
        text = json.dumps(self._sample_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def _sample_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "shape": list(self.shape),
            "dtype": self.dtype.str,
            "variable_shape": self.variable_shape,
            "compression": self.compression.to_dict(),
        }

    def same_samples(self, other: ColumnSchema) -> bool:
        """Whether the two schemas take the same samples (the key type aside)."""
        return self._sample_dict() == other._sample_dict()

    def with_key_type(self, key_type: str) -> ColumnSchema:
        return replace(self, key_type=key_type)

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": _FORMAT,
                "format_version": _FORMAT_VERSION,
                **self._sample_dict(),
                "key_type": self.key_type,
                "uid": self.uid,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: Any, where: str) -> ColumnSchema:
        """The schema stored at ``where``; CorruptDataError if it is not one."""
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        try:
            data = json.loads(text)
            if data.get("format") != _FORMAT or data.get("format_version") != _FORMAT_VERSION:
                raise ValueError("not a version 1 column schema")
            compression = data["compression"]
            schema = cls.parse(
                shape=tuple(data["shape"]),
                dtype=data["dtype"],
                backend=data["backend"],
                variable_shape=data["variable_shape"],
                compression=compression,
            )
            key_type = data["key_type"]
            if key_type not in (None, *KEY_TYPES):
                raise ValueError(f"key type {key_type!r}")
        except (ValueError, TypeError, KeyError, AttributeError, InvalidOptionError) as err:
            raise CorruptDataError(
                f"Expected a column schema (JSON) in {where}. Got {text!r}: {err}."
            ) from err
        return replace(schema, key_type=key_type)

    def sample_shape(self, shapes: np.ndarray | None, row: int) -> tuple[int, ...]:
        if shapes is None:
            return self.shape
        return tuple(int(n) for n in shapes[row])


def key_type_of(key: Any) -> str | None:
    if isinstance(key, str):
        return "str"
    if isinstance(key, int | np.integer) and not isinstance(key, bool | np.bool_):
        return "int"
    return None


def check_key(key: Any, key_type: str | None, column: str) -> Any:
    """``key`` as the column stores it (a str or an int); raises ColumnKeyTypeError."""
    found = key_type_of(key)
    if found is None or (key_type is not None and found != key_type):
        expected = f"a {key_type}" if key_type is not None else "a str or an int"
        raise ColumnKeyTypeError(
            f"Expected {expected} key for column {column!r}. Got {key!r} "
            f"({type(key).__name__}) instead."
        )
    if found == "int":
        value = int(key)
        if not -(2**63) <= value < 2**63:
            raise ColumnKeyTypeError(
                f"Expected an int key for column {column!r} that fits in 64 bits. Got {key!r}."
            )
        return value
    return key


def check_sample(value: Any, schema: ColumnSchema, column: str) -> np.ndarray:
    """``value`` as a C-ordered sample of the column; raises SampleDtypeError or
    SampleShapeError saying what was expected."""
    array = np.asarray(value)
    if (
        array.dtype != schema.dtype
        and not isinstance(value, np.ndarray | np.generic)
        and array.dtype.kind in "biufc"
    ):
        # Python numbers and lists take the column's dtype if no value changes.
        with np.errstate(all="ignore"):
            cast = array.astype(schema.dtype)
        if np.array_equal(cast, array):
            array = cast
    if array.dtype != schema.dtype:
        raise SampleDtypeError(
            f"Expected a sample of dtype {schema.dtype} for column {column!r}. Got dtype "
            f"{array.dtype} instead."
        )
    check_shape(array.shape, schema, column)
    return array if array.flags.c_contiguous else array.copy(order="C")


def check_shape(shape: tuple[int, ...], schema: ColumnSchema, column: str) -> None:
    if schema.variable_shape:
        if len(shape) != len(schema.shape) or any(
            n > limit for n, limit in zip(shape, schema.shape)
        ):
            raise SampleShapeError(
                f"Expected a sample of shape at most {schema.shape} for column {column!r}. "
                f"Got shape {shape} instead."
            )
    elif shape != schema.shape:
        raise SampleShapeError(
            f"Expected a sample of shape {schema.shape} for column {column!r}. Got shape "
            f"{shape} instead."
        )
