"""Columns across versions: diffs and three-way merges by key.

Both work on the committed key -> record tables (read whole, compared with numpy); a
record names a stored sample, and equal samples share one record, so two keys hold the
same sample exactly when their records are equal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import h5py
import numpy as np

from h5vc.columns.column import read_table, store_samples, write_table
from h5vc.columns.schema import ATTR_COLUMN, ColumnSchema, check_sample
from h5vc.columns.storage import (
    ATTR_SCHEMA as ATTR_SAMPLES,
)
from h5vc.columns.storage import (
    SAMPLES_GROUP,
    SampleSlots,
    digest_of,
    sample_checksum,
    slots_of,
)
from h5vc.columns.table import KEYS, RECORDS, Table
from h5vc.errors import CorruptDataError
from h5vc.store import layout
from h5vc.store.attributes import read_attributes
from h5vc.store.reading import read_fill, staged_array
from h5vc.versions import DatasetCommit, FileState, GroupCommit, Link

__all__ = [
    "ColumnDiff",
    "check_samples",
    "diff_columns",
    "live_columns",
    "merge_column",
    "open_column",
    "referenced_slots",
    "release_samples",
]


@dataclass(frozen=True, slots=True)
class ColumnDiff:
    """Keys added, removed and changed (another sample) from one version to another."""

    added: list[Any] = field(default_factory=list)
    removed: list[Any] = field(default_factory=list)
    changed: list[Any] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


def open_column(group: h5py.Group | None) -> tuple[ColumnSchema, Table] | None:
    """The schema and table of the column ``group`` (None if it is not a column)."""
    if group is None or not isinstance(group, h5py.Group) or ATTR_COLUMN not in group.attrs:
        return None
    where = f"{group.name} of {group.file.filename!r}"
    schema = ColumnSchema.from_json(group.attrs[ATTR_COLUMN], where)
    if KEYS not in group or RECORDS not in group:
        raise CorruptDataError(f"Expected datasets {KEYS!r} and {RECORDS!r} in column {where}.")
    return schema, read_table(group[KEYS], group[RECORDS], schema, where)


def diff_columns(old: h5py.Group | None, new: h5py.Group | None) -> ColumnDiff | None:
    """The key changes from column ``old`` to column ``new`` (either may be absent);
    None if neither is a column."""
    before, after = open_column(old), open_column(new)
    if before is None and after is None:
        return None
    if before is None:
        return ColumnDiff(added=after[1].keys.tolist()) if after else None
    if after is None:
        return ColumnDiff(removed=before[1].keys.tolist())
    if not before[0].same_samples(after[0]):  # another schema: every sample is new
        both = set(before[1].keys.tolist()) & set(after[1].keys.tolist())
        return ColumnDiff(
            added=[k for k in after[1].keys.tolist() if k not in both],
            removed=[k for k in before[1].keys.tolist() if k not in both],
            changed=[k for k in before[1].keys.tolist() if k in both],
        )
    added, removed, changed = before[1].compare(after[1])
    return ColumnDiff(added.tolist(), removed.tolist(), changed.tolist())


#: Decides a key both sides changed differently: gets the key and a reader of its
#: sample on each side (0 base, 1 ours, 2 theirs; None where absent) and returns
#: "ours", "theirs", or the merged sample (None: the key is removed).
KeyResolver = Callable[[Any, Callable[[int], Any]], Any]


def merge_column(
    state: FileState,
    versions: tuple[str | None, str, str],
    path: str,
    groups: tuple[h5py.Group | None, h5py.Group, h5py.Group],
    resolve: KeyResolver,
) -> GroupCommit | Link | None:
    """Merge column ``path`` of theirs into ours by key against the base; None if the
    two sides' columns do not take the same samples (a conflict of the whole column).

    A key changed (added, removed, given another sample) on one side only takes that
    change; a key changed differently on both sides is passed to ``resolve``.
    """
    ours_group, theirs_group = groups[1], groups[2]
    base, ours, theirs = (open_column(g) for g in groups)
    assert ours is not None and theirs is not None
    schema = ours[0]
    if not schema.same_samples(theirs[0]):
        return None
    if schema.key_type is None:  # ours never held a key (nor did the base): take theirs
        return Link(theirs_group.parent, theirs_group.name.rpartition("/")[2])
    if theirs[0].key_type not in (None, schema.key_type):
        return None
    if base is not None and not base[0].same_samples(schema):
        base = None
    o_table, t_table = ours[1], theirs[1]
    b_rows = base[1].rows if base is not None else {}
    added, removed, changed = o_table.compare(t_table)
    o_rows, t_rows = o_table.rows, t_table.rows
    tables = (base[1] if base is not None else None, o_table, t_table)

    def record(side: int, key: Any) -> bytes | None:
        table = tables[side]
        rows = b_rows if side == 0 else (o_rows if side == 1 else t_rows)
        row = rows.get(key, -1) if table is not None else -1
        return None if row < 0 or table is None else table.records[row].tobytes()

    def reader(key: Any) -> Callable[[int], Any]:
        def read(side: int) -> Any:
            table = tables[side]
            rows = b_rows if side == 0 else (o_rows if side == 1 else t_rows)
            row = rows.get(key, -1) if table is not None else -1
            if row < 0 or table is None:
                return None
            return _read_sample(state, schema, table.records[row : row + 1])

        return read

    set_keys: list[Any] = []
    set_records: list[np.ndarray] = []
    new_samples: list[tuple[Any, np.ndarray]] = []
    drop: list[Any] = []
    for key in [*added.tolist(), *removed.tolist(), *changed.tolist()]:
        b, o, t = record(0, key), record(1, key), record(2, key)
        if o == b or t == b:
            choice = "theirs" if o == b else "ours"
        else:
            choice = resolve(key, reader(key))
        if isinstance(choice, str):
            if choice == "ours":
                continue
            row = t_rows.get(key, -1)
            if row < 0:
                drop.append(key)
            else:
                set_keys.append(key)
                set_records.append(t_table.records[row : row + 1])
        elif choice is None:
            if key in o_rows:
                drop.append(key)
        else:
            new_samples.append((key, check_sample(choice, schema, "/" + path)))
    if new_samples:
        stored = store_samples(state, schema, [sample for _, sample in new_samples])
        set_keys += [key for key, _ in new_samples]
        set_records += [stored[i : i + 1] for i in range(len(stored))]
    if not set_keys and not drop and schema == ours[0]:
        return Link(ours_group.parent, ours_group.name.rpartition("/")[2])
    records = np.concatenate(set_records) if set_records else np.zeros(0, o_table.records.dtype)
    rows = o_table.lookup(set_keys)
    edited = rows >= 0
    new_keys = [k for k, e in zip(set_keys, edited.tolist()) if not e]
    table, changed_rows, key_rows = o_table.edit(
        o_table.lookup(drop), rows[edited], records[edited], new_keys, records[~edited]
    )
    return _table_commit(
        state, versions[1], path, ours_group, schema, table, changed_rows, key_rows
    )


def _read_sample(state: FileState, schema: ColumnSchema, records: np.ndarray) -> np.ndarray:
    store = SampleSlots.open(state.root, schema)
    if store is None:
        raise CorruptDataError(f"Expected the sample store {schema.uid} in {state.filename!r}.")
    slot = int(slots_of(records)[0])
    if schema.variable_shape:
        sample = store.read_one(slot, tuple(int(n) for n in records["shape"][0]))
    else:
        sample = store.read_fixed(np.array([slot]))[0]
    if sample_checksum(sample) != int(records["checksum"][0]):
        raise CorruptDataError(
            f"Expected the sample in {store.describe(slot)} of {state.filename!r} to match "
            f"its xxhash64 {int(records['checksum'][0]):016x}: the file is damaged."
        )
    return sample


def _table_commit(
    state: FileState,
    version: str,
    path: str,
    group: h5py.Group,
    schema: ColumnSchema,
    table: Table,
    rows: np.ndarray,
    key_rows: np.ndarray,
) -> GroupCommit:
    """The commit of column ``path`` holding ``table``, sharing the chunks of
    ``group`` (the column in ``version``) where rows did not change."""
    arrays: dict[str, Any] = {}
    specs: dict[str, DatasetCommit] = {}
    for name in (KEYS, RECORDS):
        dataset = group[name]
        dataset_path = f"{path}/{name}"
        store = state.stores.require(dataset_path, version, dataset)
        chunk_map = state.chunk_maps.get(version, dataset_path, dataset)
        dtype = store.raw_data.dtype
        array = staged_array(chunk_map, store.raw_data, dtype, read_fill(dtype, store.fillvalue))
        arrays[name] = array
        specs[name] = DatasetCommit(
            path=dataset_path,
            array=array,
            dtype=dtype,
            chunks=chunk_map.chunks,
            fillvalue=store.fillvalue,
            attrs=read_attributes(dataset.attrs, layout.DATASET_ATTRS),
            raw_data=store.raw_data,
        )
    write_table(_Arrays(arrays), table, rows, key_rows, _no_create)
    attrs = read_attributes(group.attrs, frozenset())
    attrs[ATTR_COLUMN] = schema.to_json()
    children: dict[str, GroupCommit | DatasetCommit | Link] = dict(specs)
    return GroupCommit(attrs=attrs, children=children)


class _Arrays:
    """Staged arrays by name, resized like datasets (for :func:`write_table`)."""

    def __init__(self, arrays: dict[str, Any]):
        self._arrays = {name: _Resizable(array) for name, array in arrays.items()}

    def __contains__(self, name: str) -> bool:
        return name in self._arrays

    def __getitem__(self, name: str) -> Any:
        return self._arrays[name]


class _Resizable:
    def __init__(self, array: Any):
        self.array = array

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    def resize(self, shape: tuple[int, ...]) -> None:
        self.array.resize(shape)

    def __setitem__(self, index: Any, value: Any) -> None:
        self.array[index] = value


def _no_create(*args: Any) -> None:
    raise AssertionError("the merged column's datasets exist")


def referenced_slots(group: h5py.Group) -> tuple[str, np.ndarray] | None:
    """``(sample store uid, slots)`` that the column ``group`` references."""
    opened = open_column(group)
    if opened is None:
        return None
    schema, table = opened
    return schema.uid, slots_of(table.records)


def live_columns(
    versions: h5py.Group, names: list[str], *, skip_damaged: bool = False
) -> list[tuple[h5py.Group, list[str]]]:
    """Every column object the versions ``names`` hold (a column shared by several
    versions through hard links once), with the versions that hold it.  A member HDF5
    cannot read raises, or with ``skip_damaged`` (for a check that reports it
    elsewhere; never before freeing samples) is left out."""
    found: dict[int, tuple[h5py.Group, list[str]]] = {}
    walked: dict[int, list[int]] = {}  # group address -> column addresses below it
    for name in names:
        for address in _columns_below(versions[name], found, walked, skip_damaged):
            found[address][1].append(name)
    return list(found.values())


def _columns_below(
    group: h5py.Group,
    found: dict[int, tuple[h5py.Group, list[str]]],
    walked: dict[int, list[int]],
    skip_damaged: bool = False,
) -> list[int]:
    address = h5py.h5o.get_info(group.id).addr
    known = walked.get(address)
    if known is not None:
        return known
    columns: list[int] = []
    try:
        members = list(group)
    except (RuntimeError, KeyError, OSError, ValueError):
        if not skip_damaged:
            raise
        members = []
    for name in members:
        try:
            info = h5py.h5o.get_info(group.id, name.encode())
            if info.type != h5py.h5o.TYPE_GROUP:
                continue
            child = group[name]
            is_column = ATTR_COLUMN in child.attrs
        except (RuntimeError, KeyError, OSError, ValueError):
            if not skip_damaged:
                raise
            continue
        if is_column:
            found.setdefault(info.addr, (child, []))
            columns.append(info.addr)
        else:
            columns += _columns_below(child, found, walked, skip_damaged)
    walked[address] = columns
    return columns


def release_samples(state: FileState, survivors: list[str]) -> int:
    """Free the slots of every sample store that no column of ``survivors`` references
    (after ``delete_versions``; later commits reuse them). The number freed."""
    group = state.root.get(SAMPLES_GROUP)
    if group is None:
        return 0
    keep: dict[str, list[np.ndarray]] = {}
    for column, _ in live_columns(state.versions, survivors):
        used = referenced_slots(column)
        if used is not None:
            keep.setdefault(used[0], []).append(used[1])
    freed = 0
    for uid in list(group):
        store = SampleSlots(group[uid], _stored_schema(group[uid]))
        slots = keep.get(uid, [])
        freed += store.release(np.concatenate(slots) if slots else np.zeros(0, np.int64))
    return freed


def _stored_schema(group: h5py.Group) -> ColumnSchema:
    return ColumnSchema.from_json(group.attrs[ATTR_SAMPLES], f"{group.name}")


#: Samples read at a time by :func:`check_samples`.
CHECK_BATCH = 4096


def check_samples(state: FileState, names: list[str]) -> list[tuple[str, str, tuple[str, ...]]]:
    """``(object, message, versions)`` for every referenced sample that is missing,
    unreadable, or not what its record and the store's digest say."""
    problems: list[tuple[str, str, tuple[str, ...]]] = []
    # a member HDF5 cannot read is reported by verify's own walk
    for column, holders in live_columns(state.versions, names, skip_damaged=True):
        where = column.name or ""
        versions = tuple(sorted(holders))
        try:
            opened = open_column(column)
            assert opened is not None
            schema, table = opened
            store = SampleSlots.open(state.root, schema)
            if store is None:
                if len(table):
                    problems.append((where, f"sample store {schema.uid} is missing", versions))
                continue
            problems += _check_table(store, schema, table, where, versions)
        except (CorruptDataError, OSError, KeyError, ValueError) as err:
            problems.append((where, f"cannot be read: {err}", versions))
    return problems


def _check_table(
    store: SampleSlots, schema: ColumnSchema, table: Table, where: str, versions: tuple[str, ...]
) -> list[tuple[str, str, tuple[str, ...]]]:
    problems = []
    keys = table.keys.tolist()
    slots = slots_of(table.records)
    digests = store.digests()
    for start in range(0, len(slots), CHECK_BATCH):
        batch = slots[start : start + CHECK_BATCH]
        records = table.records[start : start + CHECK_BATCH]
        for offset, slot in enumerate(batch.tolist()):
            key = keys[start + offset]
            if slot >= len(digests) or not digests[slot].any():
                problems.append((where, f"key {key!r}: slot {slot} holds no sample", versions))
        try:
            if schema.variable_shape:
                samples: Any = [
                    store.read_one(int(slot), tuple(int(n) for n in records["shape"][i]))
                    for i, slot in enumerate(batch.tolist())
                ]
            else:
                samples = store.read_fixed(batch)
        except (CorruptDataError, OSError) as err:
            problems.append((where, f"samples cannot be read: {err}", versions))
            continue
        for offset, sample in enumerate(samples):
            key = keys[start + offset]
            slot = int(batch[offset])
            if sample_checksum(sample) != int(records["checksum"][offset]):
                problems.append(
                    (
                        where,
                        f"key {key!r}: the sample in slot {slot} does not match its "
                        f"xxhash64 {int(records['checksum'][offset]):016x}",
                        versions,
                    )
                )
            elif slot < len(digests) and digests[slot].tobytes() != digest_of(sample):
                problems.append(
                    (
                        where,
                        f"key {key!r}: the sample in slot {slot} does not match the "
                        f"store's content digest",
                        versions,
                    )
                )
    return problems
