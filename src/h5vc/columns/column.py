"""Sample columns: keyed samples versioned with the rest of a versioned file.

A :class:`StagedColumn` is edited inside ``stage_version``; its new samples are
written to the file's sample store (:mod:`h5vc.columns.storage`) and its key -> record
table to the version (:mod:`h5vc.columns.table`) when the version is committed. A
:class:`CommittedColumn` reads a committed version's column.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import h5py
import numpy as np

from h5vc.columns.schema import (
    ATTR_COLUMN,
    ColumnSchema,
    check_key,
    check_sample,
    check_shape,
    key_type_of,
)
from h5vc.columns.storage import (
    COLLECTION_SIZE,
    SampleSlots,
    digest_of,
    sample_checksum,
    slots_of,
)
from h5vc.columns.table import (
    KEYS,
    RECORDS,
    TABLE_CHUNK_ROWS,
    Table,
    decode_keys,
    encode_keys,
    key_dtype,
    records_dtype,
)
from h5vc.errors import (
    ColumnKeyError,
    CorruptDataError,
    ReadOnlyError,
    SampleDtypeError,
    SampleShapeError,
)
from h5vc.versions import FileState

__all__ = [
    "ColumnDataset",
    "CommittedColumn",
    "StagedColumn",
    "column_schema",
    "read_table",
    "store_samples",
    "write_table",
]


def column_schema(attrs: Any, where: str) -> ColumnSchema | None:
    """The schema in a group's attributes, or None if the group is not a column."""
    if ATTR_COLUMN not in attrs:
        return None
    return ColumnSchema.from_json(attrs[ATTR_COLUMN], where)


def read_table(keys: Any, records: Any, schema: ColumnSchema, where: str) -> Table:
    """The table of a column from its two datasets (anything sliced with ``[()]``)."""
    raw_keys = keys[()] if keys.shape[0] else np.zeros(0, object)
    raw_records = records[()] if records.shape[0] else np.zeros(0, records_dtype(schema))
    expected = records_dtype(schema)
    if raw_records.dtype != expected or len(raw_keys) != len(raw_records):
        raise CorruptDataError(
            f"Expected {where} to hold keys and records of dtype {expected} of equal "
            f"length. Got {len(raw_keys)} keys and {len(raw_records)} records of dtype "
            f"{raw_records.dtype}."
        )
    return Table(decode_keys(raw_keys, schema.key_type), raw_records, schema.key_type)


def store_samples(
    state: FileState, schema: ColumnSchema, samples: Sequence[np.ndarray]
) -> np.ndarray:
    """Records (rows of the records table) of ``samples``, stored in the file's sample
    store of ``schema`` unless an identical sample is stored there already."""
    records = np.zeros(len(samples), records_dtype(schema))
    if not len(samples):
        return records
    digests = np.frombuffer(b"".join(digest_of(s) for s in samples), np.uint8).reshape(-1, 16)
    store = SampleSlots.require(state.root, schema)
    slots = store.find(digests)
    # distinct new samples, first occurrence of each
    first: dict[bytes, int] = {}
    missing = np.flatnonzero(slots < 0)
    for i in missing.tolist():
        first.setdefault(digests[i].tobytes(), i)
    if first:
        picks = np.fromiter(first.values(), np.int64, len(first))
        written = store.store([samples[i] for i in picks], digests[picks])
        by_digest = dict(zip(first, written.tolist()))
        for i in missing.tolist():
            slots[i] = by_digest[digests[i].tobytes()]
    records["dataset"] = slots // COLLECTION_SIZE
    records["index"] = slots % COLLECTION_SIZE
    records["checksum"] = [sample_checksum(s) for s in samples]
    if "shape" in records.dtype.names:
        records["shape"] = [s.shape for s in samples]
    return records


def write_table(
    target: Any, table: Table, rows: np.ndarray, key_rows: np.ndarray, create: Callable[..., Any]
) -> None:
    """Write the changed ``rows`` of ``table`` to ``target``'s records dataset and the
    changed ``key_rows`` to its keys dataset (objects with ``resize`` and slice
    assignment), whole chunks at a time; ``create`` makes the datasets if ``target``
    has none."""
    if KEYS not in target:
        create(KEYS, encode_keys(table.keys, table.key_type), key_dtype(table.key_type or "str"))
        create(RECORDS, table.records, table.records.dtype)
        return
    keys, records = target[KEYS], target[RECORDS]
    n = len(table.keys)
    if keys.shape[0] != n:
        keys.resize((n,))
        records.resize((n,))
    for chunk in np.unique(rows // TABLE_CHUNK_ROWS).tolist():
        start = chunk * TABLE_CHUNK_ROWS
        records[start : stop_of(start, n)] = table.records[start : stop_of(start, n)]
    for chunk in np.unique(key_rows // TABLE_CHUNK_ROWS).tolist():
        start = chunk * TABLE_CHUNK_ROWS
        stop = stop_of(start, n)
        keys[start:stop] = encode_keys(table.keys[start:stop], table.key_type)


def stop_of(start: int, n: int) -> int:
    """The end of the table chunk starting at row ``start`` of a table of ``n`` rows."""
    return min(start + TABLE_CHUNK_ROWS, n)


class _ColumnBase(Mapping[Any, Any]):
    """Reading shared by staged and committed columns."""

    _schema: ColumnSchema
    _state: FileState
    _name: str

    # A column is equal only to itself and hashable, like a group.
    __eq__ = object.__eq__  # type: ignore[assignment]
    __hash__ = object.__hash__  # type: ignore[assignment]

    @property
    def name(self) -> str:
        return self._name

    @property
    def shape(self) -> tuple[int, ...]:
        """The samples' shape (their maximum shape for a variable-shape column)."""
        return self._schema.shape

    @property
    def dtype(self) -> np.dtype:
        return self._schema.dtype

    @property
    def backend(self) -> str:
        return self._schema.backend

    @property
    def variable_shape(self) -> bool:
        return self._schema.variable_shape

    @property
    def compression(self) -> dict[str, Any]:
        return self._schema.compression.to_dict()

    @property
    def key_type(self) -> str | None:
        """``"str"`` or ``"int"`` (None until the first key is written)."""
        return self._schema.key_type

    def _key(self, key: Any) -> Any:
        return check_key(key, self._schema.key_type, self._name)

    def _missing(self, key: Any) -> ColumnKeyError:
        return ColumnKeyError(f"Column {self._name!r} has no sample with key {key!r}.")

    def _samples(self) -> SampleSlots:
        """The sample store (call inside ``state.reading()``), kept while the file's
        objects stay the same."""
        cached = getattr(self, "_store_cache", None)
        if cached is not None and cached[0] == self._state.generation:
            kept: SampleSlots = cached[1]
            return kept
        store = SampleSlots.open(self._state.root, self._schema)
        if store is None:
            raise CorruptDataError(
                f"Expected the sample store of column {self._name!r} "
                f"({self._schema.uid}) in {self._state.filename!r}. Got none."
            )
        self._store_cache = (self._state.generation, store)
        return store

    def _read_records(self, records: np.ndarray) -> list[np.ndarray] | np.ndarray:
        """The samples of ``records`` (rows of a records table), checked."""
        store = self._samples()
        slots = slots_of(records)
        if self._schema.variable_shape:
            shapes = records["shape"] if "shape" in (records.dtype.names or ()) else None
            samples: list[np.ndarray] | np.ndarray = [
                store.read_one(int(slot), self._schema.sample_shape(shapes, row))
                for row, slot in enumerate(slots.tolist())
            ]
        else:
            samples = store.read_fixed(slots)
        for row, sample in enumerate(samples):
            if sample_checksum(sample) != int(records["checksum"][row]):
                raise CorruptDataError(
                    f"Expected the sample of column {self._name!r} in "
                    f"{store.describe(int(slots[row]))} of {self._state.filename!r} to have "
                    f"xxhash64 {int(records['checksum'][row]):016x}. Got "
                    f"{sample_checksum(sample):016x} instead: the file is damaged."
                )
        return samples

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self._name!r}: {len(self)} samples of "
            f"{'at most ' if self.variable_shape else ''}{self.shape} {self.dtype}>"
        )


class StagedColumn(_ColumnBase, MutableMapping[Any, Any]):
    """A column of a version being staged (``g.create_column`` or ``g[name]``)."""

    def __init__(self, state: FileState, node: Any, schema: ColumnSchema, name: str):
        self._state = state
        self._node = node  # the column's staged group
        self._schema = schema
        self._stored_schema = schema if KEYS in node else None
        self._name = name
        self._base: Table | None = None
        self._pending: dict[Any, np.ndarray] = {}
        self._deleted: set[Any] = set()
        self._added = 0  # pending keys not in the base

    def _table(self) -> Table:
        if self._base is None:
            node = self._node
            if KEYS in node:
                with self._state.reading():
                    self._base = read_table(node[KEYS], node[RECORDS], self._schema, self._name)
            else:
                self._base = Table.empty(self._schema)
        return self._base

    def _check_writable(self) -> None:
        reason = getattr(self._node, "_read_only_reason", None)
        if reason is not None:
            raise ReadOnlyError(reason)

    # -- reading ------------------------------------------------------------------

    def _base_row(self, key: Any) -> int:
        if key in self._deleted:
            return -1
        return self._table().rows.get(key, -1)

    def __getitem__(self, key: Any) -> Any:
        key = self._key(key)
        pending = self._pending.get(key)
        if pending is not None:
            return pending.copy()
        row = self._base_row(key)
        if row < 0:
            raise self._missing(key)
        with self._state.reading():
            return self._read_records(self._table().records[row : row + 1])[0]

    def __contains__(self, key: object) -> bool:
        if key_type_of(key) != (self._schema.key_type or key_type_of(key)):
            return False
        return key in self._pending or self._base_row(key) >= 0

    def __iter__(self) -> Iterator[Any]:
        table = self._table()
        deleted = self._deleted
        for key in table.keys.tolist():
            if key not in deleted:
                yield key
        rows = table.rows
        for key in list(self._pending):
            if key not in rows:
                yield key

    def __len__(self) -> int:
        return len(self._table()) - len(self._deleted) + self._added

    def get_many(self, keys: Iterable[Any]) -> Any:
        """The samples of ``keys``: an ``(n, *shape)`` array (a list for a
        variable-shape column)."""
        return (
            [self[key] for key in keys]
            if self.variable_shape
            else _stack([self[key] for key in keys], self._schema)
        )

    # -- writing ------------------------------------------------------------------

    def _fix_key_type(self, key_type: str | None) -> None:
        if self._schema.key_type is None and key_type is not None:
            self._schema = self._schema.with_key_type(key_type)
            if self._base is not None and not len(self._base):
                self._base = Table.empty(self._schema)

    def _put(self, key: Any, sample: np.ndarray) -> None:
        if key not in self._pending:
            in_base = key in self._table().rows
            if in_base and key in self._deleted:
                self._deleted.discard(key)
            elif not in_base:
                self._added += 1
        self._pending[key] = sample

    def __setitem__(self, key: Any, value: Any) -> None:
        self._check_writable()
        key = self._key(key)
        sample = check_sample(value, self._schema, self._name)
        if sample is value or (isinstance(value, np.ndarray) and np.shares_memory(sample, value)):
            sample = sample.copy()
        self._fix_key_type(key_type_of(key))
        self._put(key, sample)

    def set_many(self, keys: Sequence[Any], arrays: Any) -> None:
        """``col[k] = a`` for each pair; every key and sample is checked first, so a bad
        one raises and nothing is written."""
        self._check_writable()
        keys = list(keys)
        key_type = self._schema.key_type or (key_type_of(keys[0]) if keys else None)
        checked = [check_key(key, key_type, self._name) for key in keys]
        if isinstance(arrays, np.ndarray) and not self.variable_shape:
            if arrays.dtype != self.dtype:
                raise SampleDtypeError(
                    f"Expected samples of dtype {self.dtype} for column {self._name!r}. Got "
                    f"an array of dtype {arrays.dtype} instead."
                )
            if arrays.ndim == 0:
                raise SampleShapeError(
                    f"Expected samples as an array of shape (n, *{self.shape}) for column "
                    f"{self._name!r}. Got a 0-d array instead."
                )
            check_shape(arrays.shape[1:], self._schema, self._name)
            batch = np.array(arrays, order="C")  # one copy for all
            samples: Sequence[np.ndarray] = list(batch)
        else:
            samples = [check_sample(a, self._schema, self._name) for a in arrays]
            samples = [np.array(s) for s in samples]
        if len(samples) != len(checked):
            raise SampleShapeError(
                f"Expected one sample per key for column {self._name!r}: {len(checked)} "
                f"keys. Got {len(samples)} samples instead."
            )
        self._fix_key_type(key_type)
        for key, sample in zip(checked, samples):
            self._put(key, sample)

    def __delitem__(self, key: Any) -> None:
        self._check_writable()
        key = self._key(key)
        in_base = self._base_row(key) >= 0
        if key in self._pending:
            del self._pending[key]
            if key not in self._table().rows:
                self._added -= 1
        elif not in_base:
            raise self._missing(key)
        if in_base:
            self._deleted.add(key)

    # -- commit -------------------------------------------------------------------

    @property
    def pending(self) -> bool:
        return bool(self._pending or self._deleted) or self._stored_schema != self._schema

    def flush(self) -> None:
        """Store the new samples and write the edited table to the staged group (at
        commit, inside the commit's operation)."""
        if not self.pending:
            return
        base = self._table()
        keys = list(self._pending)
        records = store_samples(self._state, self._schema, list(self._pending.values()))
        rows = base.lookup(keys)
        edited = rows >= 0
        deleted_rows = base.lookup(list(self._deleted))
        new_keys = [k for k, e in zip(keys, edited.tolist()) if not e]
        table, changed, key_rows = base.edit(
            deleted_rows, rows[edited], records[edited], new_keys, records[~edited]
        )
        node = self._node
        stored = self._stored_schema
        if stored is not None and stored.key_type != self._schema.key_type and KEYS in node:
            # The datasets of a column committed empty, before its key type was known.
            del node[KEYS], node[RECORDS]

        def create(name: str, data: np.ndarray, dtype: np.dtype) -> None:
            node.create_dataset(
                name,
                shape=(len(data),),
                dtype=dtype,
                data=data if len(data) else None,
                chunks=(TABLE_CHUNK_ROWS,),
                maxshape=(None,),
            )

        write_table(node, table, changed, key_rows, create)
        node.attrs[ATTR_COLUMN] = self._schema.to_json()
        self._base = table
        self._pending.clear()
        self._deleted.clear()
        self._added = 0
        self._stored_schema = self._schema


def _stack(samples: list[np.ndarray], schema: ColumnSchema) -> np.ndarray:
    out = np.empty((len(samples), *schema.shape), schema.dtype)
    for i, sample in enumerate(samples):
        out[i] = sample
    return out


class CommittedColumn(_ColumnBase):
    """A read-only column of a committed version."""

    def __init__(
        self, state: FileState, version: str, path: str, group: h5py.Group, schema: ColumnSchema
    ):
        self._state = state
        self._version = version
        self._path = path.strip("/")
        self._name = "/" + self._path
        self._schema = schema
        self._generation = state.generation
        self._table_cache: Table | None = None
        del group  # reopened from the version on each read of the table

    @property
    def version_name(self) -> str:
        return self._version

    def _table(self) -> Table:
        if self._table_cache is None or self._generation != self._state.generation:
            state = self._state
            with state.reading():
                generation = state.generation
                group = state.version_group(self._version)[self._path]
                self._table_cache = read_table(
                    group[KEYS], group[RECORDS], self._schema, self._name
                )
                self._generation = generation
        return self._table_cache

    def __getitem__(self, key: Any) -> Any:
        key = self._key(key)
        table = self._table()
        row = table.rows.get(key, -1)
        if row < 0:
            raise self._missing(key)
        with self._state.reading():
            return self._read_records(table.records[row : row + 1])[0]

    def __contains__(self, key: object) -> bool:
        found = key_type_of(key)
        if found is None or found != self._schema.key_type:
            return False
        return key in self._table().rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self._table().keys.tolist())

    def __len__(self) -> int:
        return len(self._table())

    def get_many(self, keys: Iterable[Any]) -> Any:
        """The samples of ``keys`` in one read plan: an ``(n, *shape)`` array (a list
        for a variable-shape column)."""
        checked = [self._key(key) for key in keys]
        table = self._table()
        rows = table.lookup(checked)
        if len(rows) and rows.min() < 0:
            raise self._missing(checked[int(np.argmin(rows))])
        with self._state.reading():
            return self._read_records(table.records[rows])

    def __setitem__(self, key: Any, value: Any) -> None:
        self._read_only()

    def __delitem__(self, key: Any) -> None:
        self._read_only()

    def set_many(self, keys: Any, arrays: Any) -> None:
        self._read_only()

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._read_only()

    def _read_only(self) -> None:
        raise ReadOnlyError(
            f"Column {self._name!r} of version {self._version!r} is committed and "
            f"read-only; stage a new version with stage_version() to change it."
        )

    def records(self) -> np.ndarray:
        """The column's records table (one row per key, in key order)."""
        return self._table().records.copy()

    def as_dataset(
        self, keys: Iterable[Any] | None = None, transform: Callable[[Any], Any] | None = None
    ) -> ColumnDataset:
        """A picklable map-style dataset of the samples of ``keys`` (default: every
        key): ``len(ds)``, ``ds[i] == transform(col[keys[i]])``. Each process that
        unpickles it opens the file read-only on first use; ``transform`` must pickle
        too (a module-level function, not a lambda) for worker processes."""
        chosen = list(self) if keys is None else [self._key(key) for key in keys]
        missing = [key for key in chosen if key not in self._table().rows]
        if missing:
            raise self._missing(missing[0])
        root = self._state.root.name or "/"
        return ColumnDataset(self._state.filename, root, self._version, self._path, chosen,
                             transform, self)  # fmt: skip

    def batches(self, batch_size: int, shuffle: bool = True, seed: int = 0) -> Iterator[Any]:
        """Every sample once, in batches of ``batch_size`` (the last may be smaller):
        arrays ``(n, *shape)`` (lists for a variable-shape column)."""
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"Expected batch_size an int >= 1. Got {batch_size!r} instead.")
        keys = list(self)
        if shuffle:
            random.Random(seed).shuffle(keys)
        for start in range(0, len(keys), batch_size):
            yield self.get_many(keys[start : start + batch_size])


class ColumnDataset:
    """A map-style dataset over a committed column (for torch's DataLoader or a
    ``multiprocessing`` pool): picklable, it reopens the file read-only in each process."""

    def __init__(
        self,
        filename: str,
        root: str,
        version: str,
        path: str,
        keys: list[Any],
        transform: Callable[[Any], Any] | None,
        column: CommittedColumn | None = None,
    ):
        self.filename = filename
        self.root = root
        self.version = version
        self.path = path
        self.keys = keys
        self.transform = transform
        self._column = column

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_column"] = None
        return state

    def __len__(self) -> int:
        return len(self.keys)

    def _open(self) -> CommittedColumn:
        if self._column is None:
            from h5vc.filecache import open_file

            opened = open_file(self.filename, self.root)
            state = FileState.shared(opened.root)
            with state.reading():
                group = state.version_group(self.version)[self.path]
                schema = column_schema(group.attrs, f"{group.name} of {self.filename!r}")
            if schema is None:
                raise CorruptDataError(f"Expected a column at {self.path!r} of {self.version!r}.")
            self._column = CommittedColumn(state, self.version, self.path, group, schema)
        return self._column

    def __getitem__(self, index: int) -> Any:
        sample = self._open()[self.keys[index]]
        return sample if self.transform is None else self.transform(sample)
