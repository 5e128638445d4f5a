"""What changed between two versions, from metadata alone.

Two objects at one path are the same when they are the same HDF5 object (a
hard link in h5vc's layout): nothing below them is compared.  Datasets are
compared chunk by chunk through their chunk maps: an equal slot means equal
data; different slots are compared by their SHA-256 digests in ``hash_table``,
so a chunk stored again with identical content does not count as changed.  No
array data is read by :func:`diff`; :func:`get_diff` reads only the regions that
differ.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import h5py
import ndindex
import numpy as np

from h5vc.columns.history import ColumnDiff, diff_columns
from h5vc.errors import DatasetNotFoundError, VersionNotFoundError
from h5vc.store import (
    ChunkMap,
    dataset_chunks,
    find,
    join_path,
    layout,
    read_attributes,
    read_fill,
    staged_array,
)
from h5vc.store import object_address as address
from h5vc.versions import FileState, resolve_state

__all__ = ["ColumnDiff", "DatasetChange", "VersionDiff", "diff", "get_diff"]

_ABSENT = -2  # chunk position outside a dataset's grid


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetChange:
    """A dataset present in both versions whose data or shape differs."""

    path: str
    shape1: tuple[int, ...]
    shape2: tuple[int, ...]
    #: Chunk-aligned regions (clipped to the larger shape) whose contents differ.
    regions: tuple[ndindex.Tuple, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionDiff:
    """Differences from ``version1`` to ``version2``.

    Paths are relative to the version root (``""`` is the root itself); an
    added or removed group is listed without its members.  Attributes are
    ``(object path, attribute name)`` pairs.
    """

    version1: str
    version2: str
    groups_added: tuple[str, ...] = ()
    groups_removed: tuple[str, ...] = ()
    datasets_added: tuple[str, ...] = ()
    datasets_removed: tuple[str, ...] = ()
    datasets_changed: tuple[DatasetChange, ...] = ()
    attrs_added: tuple[tuple[str, str], ...] = ()
    attrs_removed: tuple[tuple[str, str], ...] = ()
    attrs_changed: tuple[tuple[str, str], ...] = ()
    #: Key changes of each sample column that differs (path -> ColumnDiff); a column's
    #: own datasets are not listed among the datasets.
    columns: dict[str, ColumnDiff] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return any(
            getattr(self, name)
            for name in self.__dataclass_fields__
            if name not in ("version1", "version2")
        )

    def describe(self) -> str:
        """The differences as text, one line per item."""
        lines = [f"{self.version1} -> {self.version2}:"]
        for label, paths in (
            ("+ group", self.groups_added),
            ("- group", self.groups_removed),
            ("+ dataset", self.datasets_added),
            ("- dataset", self.datasets_removed),
        ):
            lines += [f"  {label} /{path}" for path in paths]
        for change in self.datasets_changed:
            shape = (
                f"shape {change.shape1} -> {change.shape2}, "
                if change.shape1 != change.shape2
                else ""
            )
            regions = ", ".join(_format_region(region) for region in change.regions[:3])
            more = f" and {len(change.regions) - 3} more" if len(change.regions) > 3 else ""
            lines.append(
                f"  ~ dataset /{change.path}: {shape}{len(change.regions)} chunk "
                f"region(s) differ: {regions}{more}"
            )
        for label, items in (
            ("+ attr", self.attrs_added),
            ("- attr", self.attrs_removed),
            ("~ attr", self.attrs_changed),
        ):
            lines += [f"  {label} /{path} {name!r}" for path, name in items]
        for path, keys in self.columns.items():
            lines.append(
                f"  ~ column /{path}: {len(keys.added)} key(s) added, "
                f"{len(keys.removed)} removed, {len(keys.changed)} changed"
            )
        if len(lines) == 1:
            lines.append("  no differences")
        return "\n".join(lines)

    def dataset(self, path: str) -> DatasetChange | None:
        """The change of dataset ``path``, or None if its data did not change."""
        path = path.strip("/")
        return next((c for c in self.datasets_changed if c.path == path), None)


def _format_region(region: ndindex.Tuple) -> str:
    """``[12288:16384, 0:100]`` for a chunk-aligned region."""
    parts = []
    for item in region.raw:
        parts.append(f"{item.start}:{item.stop}" if isinstance(item, slice) else str(item))
    return "[" + ", ".join(parts) + "]"


@dataclass
class _Collector:
    state: FileState
    version1: str
    version2: str
    lists: dict[str, list[Any]] = field(default_factory=dict)
    digests: dict[str, np.ndarray] = field(default_factory=dict)
    columns: dict[str, ColumnDiff] = field(default_factory=dict)

    def add(self, kind: str, item: Any) -> None:
        self.lists.setdefault(kind, []).append(item)

    def result(self) -> VersionDiff:
        sections = {kind: tuple(items) for kind, items in self.lists.items()}
        return VersionDiff(
            version1=self.version1, version2=self.version2, columns=self.columns, **sections
        )


def _committed(state: FileState, name: str) -> str:
    if name not in state.log:
        raise VersionNotFoundError(
            f"Expected a committed version to compare. Got {name!r}, which is not one."
        )
    return name


def diff(f: Any, version1: str, version2: str) -> VersionDiff:
    """Groups, datasets and attributes added, removed or changed from ``version1`` to ``version2``.

    ``f`` is a :class:`~h5vc.VersionedHDF5File` or the h5py file/group holding the
    versioned data.
    """
    state = resolve_state(f)
    collector = _Collector(state, _committed(state, version1), _committed(state, version2))
    _compare_groups(collector, state.versions[version1], state.versions[version2], "")
    return collector.result()


def _compare_attrs(
    collector: _Collector, attrs1: dict[str, Any], attrs2: dict[str, Any], path: str
) -> None:
    """Record attributes added, removed or changed between two user-attribute dicts."""
    keys1, keys2 = set(attrs1), set(attrs2)
    for key in sorted(keys2 - keys1):
        collector.add("attrs_added", (path, key))
    for key in sorted(keys1 - keys2):
        collector.add("attrs_removed", (path, key))
    for key in sorted(keys1 & keys2):
        if not _same_value(attrs1[key], attrs2[key]):
            collector.add("attrs_changed", (path, key))


def _same_value(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.all(a == b))


def _compare_groups(collector: _Collector, g1: h5py.Group, g2: h5py.Group, path: str) -> None:
    if path and address(g1) == address(g2):
        return  # one shared object: nothing below it differs
    hidden = layout.VERSION_ATTRS if path == "" else frozenset()
    _compare_attrs(
        collector, read_attributes(g1.attrs, hidden), read_attributes(g2.attrs, hidden), path
    )
    names1, names2 = set(g1), set(g2)
    for name in sorted(names1 | names2):
        child = join_path(path, name)
        obj1 = g1[name] if name in names1 else None
        obj2 = g2[name] if name in names2 else None
        kind1, kind2 = _kind(obj1), _kind(obj2)
        if "groups" in (kind1, kind2) and not (kind1 == kind2 and address(obj1) == address(obj2)):
            column = diff_columns(obj1, obj2)
            if column:
                collector.columns[child] = column
            if column is not None and kind1 == kind2:
                continue  # a column's datasets change with its keys
        if kind1 != kind2:
            if kind1:
                collector.add(f"{kind1}_removed", child)
            if kind2:
                collector.add(f"{kind2}_added", child)
        elif kind1 == "groups":
            _compare_groups(collector, obj1, obj2, child)
        elif obj1 is not None and obj2 is not None and address(obj1) != address(obj2):
            hidden = layout.DATASET_ATTRS
            _compare_attrs(
                collector,
                read_attributes(obj1.attrs, hidden),
                read_attributes(obj2.attrs, hidden),
                child,
            )
            change = _compare_dataset(collector, child, obj1, obj2)
            if change is not None:
                collector.add("datasets_changed", change)


def _kind(obj: Any) -> str:
    if obj is None:
        return ""
    return "groups" if isinstance(obj, h5py.Group) else "datasets"


def _slot_digests(collector: _Collector, path: str) -> np.ndarray:
    """SHA-256 digest of each slot of ``path``'s store, as ``V32`` scalars."""
    cached = collector.digests.get(path)
    if cached is None:
        store = collector.state.stores.require(path, collector.version2)
        cached = collector.digests[path] = store.slot_digests()
    return cached


def _compare_dataset(
    collector: _Collector, path: str, d1: h5py.Dataset, d2: h5py.Dataset
) -> DatasetChange | None:
    state = collector.state
    map1 = state.chunk_maps.get(collector.version1, path, d1)
    map2 = state.chunk_maps.get(collector.version2, path, d2)
    key1 = state.stores.key(collector.version1, path, d1)
    if key1 != state.stores.key(collector.version2, path, d2):
        # Created again with another dtype or chunks: every element may differ.
        whole = ndindex.Tuple(*(slice(0, max(a, b)) for a, b in zip(map1.shape, map2.shape)))
        regions = (whole,) if len(map1.shape) == len(map2.shape) else ()
        return DatasetChange(path=path, shape1=map1.shape, shape2=map2.shape, regions=regions)
    if map1 == map2:
        return None
    regions = tuple(_differing_regions(map1, map2, lambda: _slot_digests(collector, path)))
    if not regions and map1.shape == map2.shape:
        return None
    return DatasetChange(path=path, shape1=map1.shape, shape2=map2.shape, regions=regions)


def _differing_regions(map1: ChunkMap, map2: ChunkMap, digests: Any) -> Iterator[ndindex.Tuple]:
    chunks = map1.chunks
    grid = tuple(max(a, b) for a, b in zip(map1.slots.shape, map2.slots.shape))
    slots1, slots2 = _padded(map1.slots, grid), _padded(map2.slots, grid)
    differ = slots1 != slots2
    both = differ & (slots1 >= 0) & (slots2 >= 0)
    if both.any():
        table = digests()
        differ[both] = table[slots1[both]] != table[slots2[both]]
    for axis, c in enumerate(chunks):  # chunks whose extent differs (shape changes)
        starts = np.arange(grid[axis]) * c
        ext1 = np.clip(map1.shape[axis] - starts, 0, c)
        ext2 = np.clip(map2.shape[axis] - starts, 0, c)
        shape = [1] * len(grid)
        shape[axis] = grid[axis]
        differ |= (ext1 != ext2).reshape(shape)
    bound = tuple(max(a, b) for a, b in zip(map1.shape, map2.shape))
    for coords in np.argwhere(differ).tolist():
        yield ndindex.Tuple(
            *(slice(i * c, min((i + 1) * c, n)) for i, c, n in zip(coords, chunks, bound))
        )


def _padded(slots: np.ndarray, grid: tuple[int, ...]) -> np.ndarray:
    padded = np.full(grid, _ABSENT, dtype=np.int64)
    padded[tuple(slice(0, n) for n in slots.shape)] = slots
    return padded


def get_diff(
    f: Any, name: str, version1: str, version2: str
) -> dict[ndindex.Tuple, tuple[np.ndarray, np.ndarray]]:
    """``{region: (data in version1, data in version2)}`` for each differing chunk region of ``name``.

    Regions are chunk-aligned ``ndindex.Tuple`` keys clipped to the larger
    shape; each side is clipped to its own shape (empty where the region lies
    outside it, or where the dataset is absent from that version).
    """
    state = resolve_state(f)
    path = name.strip("/")
    versions = (_committed(state, version1), _committed(state, version2))
    datasets = [_dataset_or_none(state.versions[v], path) for v in versions]
    if datasets[0] is None and datasets[1] is None:
        raise DatasetNotFoundError(
            f"Expected dataset {name!r} in version {version1!r} or {version2!r}. Got neither."
        )
    present = next(d for d in datasets if d is not None)
    maps = [
        state.chunk_maps.get(v, path, d)
        if d is not None
        else ChunkMap.empty((0,) * present.ndim, dataset_chunks(present))
        for v, d in zip(versions, datasets)
    ]
    views = [
        None if d is None else _reader(state, v, path, m)
        for v, d, m in zip(versions, datasets, maps)
    ]
    collector = _Collector(state, *versions)
    result: dict[ndindex.Tuple, tuple[np.ndarray, np.ndarray]] = {}
    for region in _differing_regions(maps[0], maps[1], lambda: _slot_digests(collector, path)):
        sides = []
        for view, chunk_map in zip(views, maps):
            clipped = tuple(
                slice(min(s.start, n), min(s.stop, n)) for s, n in zip(region.raw, chunk_map.shape)
            )
            if view is None:
                sides.append(np.empty([s.stop - s.start for s in clipped], dtype=present.dtype))
            else:
                sides.append(np.asarray(view[clipped]))
        result[region] = (sides[0], sides[1])
    return result


def _reader(state: FileState, version: str, path: str, chunk_map: ChunkMap) -> Any:
    """A read-only array over dataset ``path`` of ``version``, read through its chunk map."""
    store = state.stores.require(path, version)
    dtype = store.raw_data.dtype
    return staged_array(chunk_map, store.raw_data, dtype, read_fill(dtype, store.fillvalue))


def _dataset_or_none(group: h5py.Group, path: str) -> h5py.Dataset | None:
    obj = find(group, path)
    return obj if isinstance(obj, h5py.Dataset) else None
