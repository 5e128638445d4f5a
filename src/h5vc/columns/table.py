"""A column's key -> record table: its encoding and vectorized edits, diffs and merges.

Each version stores a column as two datasets of equal length: ``keys`` (UTF-8 strings
or int64) and ``records`` (one row per key: where the sample lives and its
xxhash64). Edits keep unchanged rows where they are, so unchanged chunks of the two
datasets are shared between versions: an edit rewrites its row, a new key takes the
row of a deleted key or is appended, and the last rows move down into the holes
deletions leave.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np

if TYPE_CHECKING:
    from h5vc.columns.schema import ColumnSchema

__all__ = [
    "KEYS",
    "RECORDS",
    "TABLE",
    "TABLE_CHUNK_ROWS",
    "Table",
    "decode_keys",
    "encode_keys",
    "key_dtype",
    "records_dtype",
]

KEYS = "keys"
RECORDS = "records"
#: The datasets of a column's table.
TABLE = (KEYS, RECORDS)
#: Rows per chunk of the keys and records datasets.
TABLE_CHUNK_ROWS = 1024


def records_dtype(schema: ColumnSchema) -> np.dtype:
    """One row per key: sample dataset, row in it, xxhash64 of the sample's bytes, and
    (backend 00) the sample's shape."""
    fields: list[Any] = [("dataset", "<u4"), ("index", "<u4"), ("checksum", "<u8")]
    if schema.backend == "00" and schema.shape:
        fields.append(("shape", "<u4", (len(schema.shape),)))
    return np.dtype(fields)


def key_dtype(key_type: str) -> np.dtype:
    return h5py.string_dtype() if key_type == "str" else np.dtype("<i8")


def decode_keys(raw: np.ndarray, key_type: str | None) -> np.ndarray:
    """Keys as read from the file: an object array of str, or int64."""
    if key_type == "int":
        return np.asarray(raw, np.int64)
    out = np.empty(len(raw), object)
    out[:] = [k.decode("utf-8") if isinstance(k, bytes) else str(k) for k in raw]
    return out


def encode_keys(keys: np.ndarray, key_type: str | None) -> np.ndarray:
    """Keys as written to the file (UTF-8 bytes for str keys)."""
    if key_type == "int":
        return np.asarray(keys, np.int64)
    out = np.empty(len(keys), object)
    out[:] = [k.encode("utf-8") for k in keys]
    return out


def _sortable(keys: np.ndarray, key_type: str | None) -> np.ndarray:
    """Keys as an array numpy sorts in C (fixed-width text or int64)."""
    if key_type == "int":
        return np.asarray(keys, np.int64)
    return np.array(keys.tolist(), dtype=str) if len(keys) else np.zeros(0, "U1")


@dataclass
class Table:
    """The keys and records of a column in one version (or being staged)."""

    keys: np.ndarray
    records: np.ndarray
    key_type: str | None
    _rows: dict[Any, int] | None = field(default=None, repr=False)

    @classmethod
    def empty(cls, schema: ColumnSchema) -> Table:
        keys = np.zeros(0, np.int64) if schema.key_type == "int" else np.zeros(0, object)
        return cls(keys, np.zeros(0, records_dtype(schema)), schema.key_type)

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def rows(self) -> dict[Any, int]:
        """``{key: row}`` (built on first use)."""
        if self._rows is None:
            self._rows = dict(zip(self.keys.tolist(), range(len(self.keys))))
        return self._rows

    def lookup(self, keys: list[Any]) -> np.ndarray:
        """The rows of ``keys`` (-1 where absent)."""
        rows = self.rows
        return np.fromiter((rows.get(k, -1) for k in keys), np.int64, len(keys))

    def edit(
        self,
        deleted_rows: np.ndarray,
        edited_rows: np.ndarray,
        edited_records: np.ndarray,
        new_keys: list[Any],
        new_records: np.ndarray,
    ) -> tuple[Table, np.ndarray, np.ndarray]:
        """The table after the edits, the rows whose record differs from this table's
        and the rows whose key does (rows past the end of this table included)."""
        n = len(self.keys)
        keys = self.keys.copy()
        records = self.records.copy()
        records[edited_rows] = edited_records
        holes = np.sort(np.asarray(deleted_rows, np.int64))
        fill = min(len(holes), len(new_keys))
        new_key_array = _key_array(new_keys, self.key_type)
        keys[holes[:fill]] = new_key_array[:fill]
        records[holes[:fill]] = new_records[:fill]
        changed = [holes[:fill]]
        holes = holes[fill:]
        if len(holes):
            size = n - len(holes)
            low = holes[holes < size]
            keep = np.ones(n - size, bool)
            keep[holes[holes >= size] - size] = False
            movers = size + np.flatnonzero(keep)
            keys[low] = keys[movers]
            records[low] = records[movers]
            keys, records = keys[:size], records[:size]
            changed.append(low)
        else:
            keys = np.concatenate((keys, new_key_array[fill:]))
            records = np.concatenate((records, new_records[fill:]))
            changed.append(np.arange(n, len(keys)))
        key_rows = np.unique(np.concatenate(changed))
        key_rows = key_rows[key_rows < len(keys)]
        rows = np.unique(np.concatenate((key_rows, np.asarray(edited_rows, np.int64))))
        return Table(keys, records, self.key_type), rows[rows < len(keys)], key_rows

    def compare(self, other: Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Keys only in ``other``, only in this table, and in both with another record:
        ``(added, removed, changed)`` going from this table to ``other``, each in the
        order of the table it comes from."""
        key_type = self.key_type or other.key_type
        if (
            len(self.keys) == len(other.keys)
            and self.key_type == other.key_type
            and np.array_equal(self.keys, other.keys)
        ):
            differ = ~_same_records(self.records, other.records)
            return self.keys[:0], self.keys[:0], self.keys[differ]
        mine = _sortable(self.keys, key_type)
        theirs = _sortable(other.keys, key_type)
        _, in_mine, in_theirs = np.intersect1d(
            mine, theirs, assume_unique=True, return_indices=True
        )
        removed = np.ones(len(mine), bool)
        removed[in_mine] = False
        added = np.ones(len(theirs), bool)
        added[in_theirs] = False
        differ = ~_same_records(self.records[in_mine], other.records[in_theirs])
        changed_rows = np.sort(in_mine[differ])
        return other.keys[added], self.keys[removed], self.keys[changed_rows]


def _key_array(keys: list[Any], key_type: str | None) -> np.ndarray:
    if key_type == "int":
        return np.asarray(keys, np.int64).reshape(len(keys))
    out = np.empty(len(keys), object)
    out[:] = keys
    return out


def _same_records(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise equality of two records tables (same sample, same checksum)."""
    if a.dtype != b.dtype:
        return np.zeros(len(a), bool)
    width = a.dtype.itemsize
    left = np.ascontiguousarray(a).view(np.uint8).reshape(len(a), width)
    right = np.ascontiguousarray(b).view(np.uint8).reshape(len(b), width)
    return (left == right).all(axis=1)
