"""Shared helpers of the lifecycle operations: open state, tree walks, object copies.

In h5vc's layout an unchanged dataset or group is a hard link shared by several
version groups.  Every operation that rewrites committed objects therefore works
on *objects* (keyed by their HDF5 address), rebuilds each one once and relinks
it at every *link location* (parent group address, link name) that named it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import h5py
import numpy as np

from h5vc.api import VersionedHDF5File
from h5vc.errors import DatasetNotFoundError
from h5vc.store import layout
from h5vc.store.chunkmap import ChunkMap
from h5vc.store.vds import create_virtual_dataset, read_chunk_map
from h5vc.versions import FileState, dataset_chunks
from h5vc.versions import object_address as address

__all__ = [
    "DatasetNotFoundError",
    "DatasetObject",
    "address",
    "as_versioned",
    "collect_datasets",
    "copy_attrs",
    "relink",
    "rebuild_virtual_dataset",
    "store_paths",
    "walk_version",
]


def as_versioned(f: VersionedHDF5File | h5py.Group) -> VersionedHDF5File:
    """``f`` itself, or a :class:`VersionedHDF5File` over the h5py file or group ``f``."""
    if isinstance(f, VersionedHDF5File):
        return f
    if isinstance(f, h5py.Group):
        return VersionedHDF5File(f)
    raise TypeError(
        f"Expected a VersionedHDF5File or an open h5py.File or h5py.Group. "
        f"Got {type(f).__name__} instead."
    )


def walk_version(
    group: h5py.Group, seen_groups: set[int] | None = None, prefix: str = ""
) -> Iterator[tuple[str, h5py.Group, str]]:
    """Yield ``(path, parent, name)`` for every member below ``group``.

    Members are not opened, except groups, which are entered.  Groups whose
    address is in ``seen_groups`` are yielded but not entered (their members
    were yielded before, through another hard link); entered groups are added.
    """
    for name in group:
        path = f"{prefix}{name}"
        yield path, group, name
        info = h5py.h5o.get_info(group.id, name.encode())
        if info.type != h5py.h5o.TYPE_GROUP:
            continue
        if seen_groups is not None:
            if int(info.addr) in seen_groups:
                continue
            seen_groups.add(int(info.addr))
        yield from walk_version(group[name], seen_groups, f"{path}/")


@dataclass
class DatasetObject:
    """One committed virtual dataset object and every link that names it.

    No handle is kept open: HDF5 holds every mapping of an open virtual dataset
    in memory, so the object is opened only while it is read or rebuilt.
    """

    path: str
    address: int
    versions: list[str] = field(default_factory=list)
    locations: list[tuple[h5py.Group, str]] = field(default_factory=list)

    def open(self) -> h5py.Dataset:
        parent, name = self.locations[0]
        dataset = parent[name]
        assert isinstance(dataset, h5py.Dataset)
        return dataset

    def chunk_map(self) -> ChunkMap:
        dataset = self.open()
        return read_chunk_map(dataset, dataset_chunks(dataset))


def collect_datasets(
    state: FileState, versions: Iterable[str], only_path: str | None = None
) -> dict[str, dict[int, DatasetObject]]:
    """``{dataset path: {object address: DatasetObject}}`` over ``versions``.

    Shared groups are entered once, so each link location is listed once.  With
    ``only_path`` the walk looks that path up in each version instead of walking.
    Objects are identified without opening them.
    """
    found: dict[str, dict[int, DatasetObject]] = {}
    seen_groups: set[int] = set()
    seen_locations: set[tuple[int, str]] = set()

    def record(version: str, path: str, parent: h5py.Group, name: str) -> None:
        info = h5py.h5o.get_info(parent.id, name.encode())
        if info.type != h5py.h5o.TYPE_DATASET:
            return
        key = int(info.addr)
        entry = found.setdefault(path, {}).setdefault(key, DatasetObject(path, key))
        entry.versions.append(version)
        location = (address(parent), name)
        if location not in seen_locations:
            seen_locations.add(location)
            entry.locations.append((parent, name))

    for version in versions:
        group = state.versions[version]
        if only_path is None:
            for path, parent, name in walk_version(group, seen_groups):
                record(version, path, parent, name)
            continue
        parent_path, _, name = only_path.rpartition("/")
        parent = group.get(parent_path) if parent_path else group
        if isinstance(parent, h5py.Group) and name in parent:
            record(version, only_path, parent, name)
    return found


def store_paths(version_data: h5py.Group) -> list[str]:
    """Paths (relative to the version root) of every dataset with a raw_data store."""
    paths: list[str] = []

    def visit(group: h5py.Group, prefix: str) -> None:
        for name, obj in group.items():
            if not isinstance(obj, h5py.Group) or (not prefix and name == layout.VERSIONS):
                continue
            if layout.RAW_DATA in obj and layout.HASH_TABLE in obj:
                paths.append(f"{prefix}{name}")
            visit(obj, f"{prefix}{name}/")

    visit(version_data, "")
    return paths


def copy_attrs(source: h5py.AttributeManager, target: h5py.AttributeManager) -> None:
    """Copy every attribute with its exact HDF5 type (strings stay vlen or fixed)."""
    for key in source:
        attr_id = source.get_id(key)
        value = source[key]
        if isinstance(value, h5py.Empty):
            target[key] = value
            continue
        target.create(key, data=value, shape=attr_id.shape, dtype=attr_id.dtype)


def rebuild_virtual_dataset(
    entry: DatasetObject,
    raw_data: h5py.Dataset,
    chunk_map: ChunkMap,
    *,
    merge: bool,
    dtype: np.dtype | None = None,
    fillvalue: Any = None,
    attrs: dict[str, Any] | None = None,
) -> None:
    """Replace ``entry``'s object by a new virtual dataset at each of its locations.

    User attributes are copied with their types; ``attrs`` overrides some of them.
    The old object is freed once no other link names it.
    """
    old = entry.open()
    first_parent, first_name = entry.locations[0]
    fill = old.fillvalue if fillvalue is None else fillvalue
    if dtype is not None and dtype.kind != "O":
        fill = np.asarray(fill).astype(dtype)[()]
    del first_parent[first_name]  # `old` stays open, so its attributes stay readable
    new = create_virtual_dataset(
        first_parent, first_name, raw_data, chunk_map, fillvalue=fill, merge=merge
    )
    copy_attrs(old.attrs, new.attrs)
    for key, value in (attrs or {}).items():
        new.attrs[key] = value
    for parent, name in entry.locations[1:]:
        relink(parent, name, first_parent, first_name)
    entry.address = address(new)


def relink(parent: h5py.Group, name: str, target_parent: h5py.Group, target_name: str) -> None:
    """Make ``parent[name]`` a hard link to ``target_parent[target_name]``."""
    if name in parent:
        del parent[name]
    parent.id.links.create_hard(name.encode(), target_parent.id, target_name.encode())
