"""What ``show``, ``diff`` and ``du`` report about sample columns.

A column is a group of a version with a column schema attribute, holding its table
(the ``keys`` and ``records`` datasets, versioned like any dataset) and pointing at
samples in the file's sample store of its schema (outside the versions; see
docs/format.md). A sample is counted at the average stored size of its store's slots
(the sample datasets' storage size over the slots allocated), so compression and
deduplication are accounted for; no sample is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import h5py
import numpy as np

from h5vc.columns import SampleSlots, column_schema
from h5vc.columns.schema import ATTR_COLUMN, ColumnSchema
from h5vc.columns.storage import slots_of
from h5vc.columns.table import RECORDS
from h5vc.versions import FileState

__all__ = [
    "ColumnObject",
    "SampleSizes",
    "column_object",
    "format_keys",
    "is_column",
    "sample_usage",
]

#: Keys of a column shown per kind of change by ``h5vc diff`` (the JSON has them all).
SHOWN_KEYS = 5


def is_column(group: h5py.Group) -> bool:
    return ATTR_COLUMN in group.attrs


@dataclass
class ColumnObject:
    """One column group object of the file: its schema, and the samples it points at."""

    path: str
    schema: ColumnSchema
    keys: int
    slots: np.ndarray  # distinct store slots, sorted
    logical_bytes: int  # bytes of its samples, one copy per key
    versions: list[str] = field(default_factory=list)


def column_object(group: h5py.Group, path: str) -> ColumnObject | None:
    """The column held by ``group`` (a column group of a version), None if it is not one.

    Reads the column's records dataset, never its samples."""
    schema = column_schema(group.attrs, f"{group.name} of {group.file.filename!r}")
    if schema is None:
        return None
    records = group[RECORDS][()] if RECORDS in group and group[RECORDS].shape[0] else None
    if records is None:
        return ColumnObject(path, schema, 0, np.zeros(0, np.int64), 0)
    itemsize = schema.dtype.itemsize
    if "shape" in (records.dtype.names or ()):
        elements = int(np.prod(records["shape"].astype(np.int64), axis=1).sum())
    else:
        elements = len(records) * int(np.prod(schema.shape, dtype=np.int64))
    return ColumnObject(
        path,
        schema,
        len(records),
        np.unique(slots_of(records)),
        elements * itemsize,
    )


class SampleSizes:
    """Average stored bytes of one slot of each sample store (by schema uid)."""

    def __init__(self, state: FileState):
        self._state = state
        self._sizes: dict[str, float] = {}

    def __call__(self, schema: ColumnSchema) -> float:
        size = self._sizes.get(schema.uid)
        if size is None:
            store = SampleSlots.open(self._state.root, schema)
            size = 0.0
            if store is not None and store.count:
                stored = sum(
                    obj.id.get_storage_size()
                    for name, obj in store.group.items()
                    if name.isdigit() and isinstance(obj, h5py.Dataset)
                )
                size = stored / store.count
            self._sizes[schema.uid] = size
        return size


@dataclass
class SampleUsage:
    """The samples of one column path over every version (see :func:`sample_usage`)."""

    logical_bytes: int = 0
    stored_bytes: int = 0
    shared_bytes: int = 0
    #: Per version: ``[logical, stored, shared]`` bytes of the samples it uses here.
    versions: dict[str, list[int]] = field(default_factory=dict)


def sample_usage(objects: Sequence[ColumnObject], size: SampleSizes) -> dict[str, SampleUsage]:
    """Per column path: the logical bytes of its samples summed over versions, the
    bytes of the distinct samples it uses, and of those the samples used more than
    once (by several versions, or by several columns of one schema); and the same per
    version."""
    users: dict[str, np.ndarray] = {}  # per store: uses of each slot, over versions
    for obj in objects:
        count = users.setdefault(obj.schema.uid, np.zeros(0, np.int64))
        top = int(obj.slots.max(initial=-1)) + 1
        if len(count) < top:
            count = users[obj.schema.uid] = np.concatenate(
                (count, np.zeros(top - len(count), np.int64))
            )
        count[obj.slots] += len(obj.versions)
    by_path: dict[str, SampleUsage] = {}
    distinct: dict[str, list[np.ndarray]] = {}
    for obj in objects:
        entry = by_path.setdefault(obj.path, SampleUsage())
        distinct.setdefault(obj.path, []).append(obj.slots)
        slot_bytes = size(obj.schema)
        stored = round(len(obj.slots) * slot_bytes)
        shared = round(int(np.count_nonzero(users[obj.schema.uid][obj.slots] > 1)) * slot_bytes)
        entry.logical_bytes += obj.logical_bytes * len(obj.versions)
        for version in obj.versions:
            row = entry.versions.setdefault(version, [0, 0, 0])
            row[0] += obj.logical_bytes
            row[1] += stored
            row[2] += shared
    for path, entry in by_path.items():
        obj = next(o for o in objects if o.path == path)
        slots = np.unique(np.concatenate(distinct[path]))
        slot_bytes = size(obj.schema)
        entry.stored_bytes = round(len(slots) * slot_bytes)
        shared = int(np.count_nonzero(users[obj.schema.uid][slots] > 1))
        entry.shared_bytes = round(shared * slot_bytes)
    return by_path


def new_sample_bytes(
    obj: ColumnObject, earlier: Iterable[ColumnObject | None], size: SampleSizes
) -> int:
    """Bytes of the samples ``obj`` uses that none of ``earlier`` (the same column in
    the parent versions, None where a parent has none) uses."""
    slots = obj.slots
    for other in earlier:
        if other is not None and other.schema.uid == obj.schema.uid:
            slots = np.setdiff1d(slots, other.slots, assume_unique=True)
    return round(len(slots) * size(obj.schema))


def format_keys(keys: Sequence[Any], shown: int = SHOWN_KEYS) -> str:
    """``0, 1, 2, ... (5000)``: the first ``shown`` keys and how many there are."""
    head = ", ".join(repr(key) if isinstance(key, str) else str(key) for key in keys[:shown])
    return head if len(keys) <= shown else f"{head}, ... ({len(keys)})"


def json_key(key: Any) -> Any:
    """A key as JSON holds it: int keys as ints, str keys as str."""
    return int(key) if isinstance(key, int | np.integer) else str(key)
