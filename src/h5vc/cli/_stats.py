"""What the ``show`` and ``du`` commands report: version trees and storage use.

Everything here is computed from chunk maps (which ``raw_data`` slot each chunk of a
committed dataset uses) and object addresses; no array data is read.  A *slot* is
counted at the average stored size of its store's slots (``raw_data``'s storage size
over its slot count), so compression is accounted for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import h5py
import numpy as np

from h5vc.api import VersionedHDF5File
from h5vc.store import layout
from h5vc.store.tree import find
from h5vc.versions import FileState, dataset_chunks, object_address

__all__ = ["DatasetUsage", "TreeNode", "Usage", "disk_usage", "version_tree"]


@dataclass
class TreeNode:
    """One group or dataset of a version."""

    path: str
    kind: str  # "group" or "dataset"
    attrs: list[str]
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    chunks: tuple[int, ...] | None = None
    #: Stored bytes of the chunks this version uses that none of its parents uses.
    new_bytes: int | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": "/" + self.path, "kind": self.kind, "attrs": self.attrs}
        if self.kind == "dataset":
            out.update(
                shape=list(self.shape or ()),
                dtype=self.dtype,
                chunks=list(self.chunks or ()),
                new_bytes=self.new_bytes,
            )
        return out


def _user_attrs(obj: h5py.HLObject, hidden: frozenset[str]) -> list[str]:
    return sorted(name for name in obj.attrs if name not in hidden)


def _members(group: h5py.Group, prefix: str = "") -> Iterator[tuple[str, h5py.HLObject]]:
    for name in sorted(group):
        obj = group[name]
        path = f"{prefix}{name}"
        yield path, obj
        if isinstance(obj, h5py.Group):
            yield from _members(obj, f"{path}/")


class _SlotSizes:
    """Average stored bytes of one slot of each dataset path's ``raw_data``."""

    def __init__(self, state: FileState):
        self._state = state
        self._sizes: dict[str, float] = {}

    def __call__(self, path: str) -> float:
        size = self._sizes.get(path)
        if size is None:
            store = self._state.store(path)
            size = 0.0
            if store is not None and store.n_slots:
                size = store.raw_data.id.get_storage_size() / store.n_slots
            self._sizes[path] = size
        return size


def _used(state: FileState, version: str, path: str, dataset: h5py.Dataset) -> np.ndarray:
    slots = state.chunk_map(version, path, dataset).slots
    return np.unique(slots[slots >= 0])


def version_tree(vf: VersionedHDF5File, version: str, parents: list[str]) -> list[TreeNode]:
    """Every group and dataset of ``version``, with the bytes it first stored.

    A chunk counts as first stored by ``version`` when none of ``parents`` uses
    its slot at the same path; a dataset that is the same object as in a parent
    (unchanged, hard-linked) stored nothing.
    """
    state = vf.file_state
    root = state.versions[version]
    slot_size = _SlotSizes(state)
    nodes = [TreeNode("", "group", _user_attrs(root, layout.VERSION_ATTRS))]
    for path, obj in _members(root):
        if isinstance(obj, h5py.Group):
            nodes.append(TreeNode(path, "group", _user_attrs(obj, frozenset())))
            continue
        node = TreeNode(
            path,
            "dataset",
            _user_attrs(obj, layout.DATASET_ATTRS),
            shape=tuple(obj.shape),
            dtype=str(obj.dtype),
            chunks=dataset_chunks(obj),
        )
        node.new_bytes = _new_bytes(state, version, path, obj, parents, slot_size)
        nodes.append(node)
    return nodes


def _new_bytes(
    state: FileState,
    version: str,
    path: str,
    dataset: h5py.Dataset,
    parents: list[str],
    slot_size: Callable[[str], float],
) -> int:
    used = _used(state, version, path, dataset)
    for parent in parents:
        other = find(state.versions[parent], path)
        if not isinstance(other, h5py.Dataset):
            continue
        if object_address(other) == object_address(dataset):
            return 0
        used = np.setdiff1d(used, _used(state, parent, path, other), assume_unique=True)
    return round(len(used) * slot_size(path))


@dataclass
class DatasetUsage:
    """Storage of one dataset path over every version."""

    path: str
    versions: int = 0
    logical_bytes: int = 0  # sum over versions of shape x itemsize
    stored_bytes: int = 0  # distinct chunks stored for this path
    shared_bytes: int = 0  # of those, chunks used by more than one version

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": "/" + self.path,
            "versions": self.versions,
            "logical_bytes": self.logical_bytes,
            "stored_bytes": self.stored_bytes,
            "shared_bytes": self.shared_bytes,
        }


@dataclass
class Usage:
    """Storage per version and per dataset path, and the file's size."""

    file_bytes: int
    versions: dict[str, dict[str, int]] = field(default_factory=dict)
    datasets: dict[str, DatasetUsage] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "file_bytes": self.file_bytes,
            "versions": [{"version": name, **row} for name, row in self.versions.items()],
            "datasets": [usage.as_dict() for usage in self.datasets.values()],
        }


@dataclass
class _Object:
    """One committed dataset object and the versions that link it."""

    path: str
    parent: h5py.Group
    name: str
    versions: list[str] = field(default_factory=list)


def _objects(state: FileState, versions: list[str]) -> dict[int, _Object]:
    """Every committed dataset object, by address, with the versions that link it."""
    found: dict[int, _Object] = {}
    for version in versions:
        for path, parent, name in _walk(state.versions[version]):
            key = int(h5py.h5o.get_info(parent.id, name.encode()).addr)
            found.setdefault(key, _Object(path, parent, name)).versions.append(version)
    return found


def _walk(group: h5py.Group, prefix: str = "") -> Iterator[tuple[str, h5py.Group, str]]:
    """``(path, parent, name)`` of every dataset below ``group``."""
    for name in group:
        info = h5py.h5o.get_info(group.id, name.encode())
        if info.type == h5py.h5o.TYPE_GROUP:
            yield from _walk(group[name], f"{prefix}{name}/")
        elif info.type == h5py.h5o.TYPE_DATASET:
            yield f"{prefix}{name}", group, name


def disk_usage(vf: VersionedHDF5File, advance: Callable[[float], None] = lambda n: None) -> Usage:
    """Logical size, stored bytes and bytes shared with other versions, per version and
    per dataset path.  ``advance(1)`` is called once per dataset object examined."""
    state = vf.file_state
    names = state.log.names()
    usage = Usage(file_bytes=int(state.root.file.id.get_filesize()))
    usage.versions = {name: dict(logical_bytes=0, stored_bytes=0, shared_bytes=0) for name in names}
    slot_size = _SlotSizes(state)
    per_path: dict[str, list[tuple[_Object, np.ndarray]]] = {}
    for obj in _objects(state, names).values():
        dataset = obj.parent[obj.name]
        logical = int(np.prod(dataset.shape, dtype=np.int64)) * dataset.dtype.itemsize
        entry = usage.datasets.setdefault(obj.path, DatasetUsage(obj.path))
        entry.versions += len(obj.versions)
        entry.logical_bytes += logical * len(obj.versions)
        for version in obj.versions:
            usage.versions[version]["logical_bytes"] += logical
        per_path.setdefault(obj.path, []).append(
            (obj, _used(state, obj.versions[0], obj.path, dataset))
        )
        advance(1)
    for path, objects in per_path.items():
        _count_path(usage, path, objects, slot_size(path))
    return usage


def _count_path(
    usage: Usage, path: str, objects: list[tuple[_Object, np.ndarray]], slot_size: float
) -> None:
    """Add the stored and shared bytes of one dataset path's objects to ``usage``."""
    all_slots = [slots for _, slots in objects]
    n = int(max((s.max() for s in all_slots if len(s)), default=-1)) + 1
    users = np.zeros(n, dtype=np.int64)  # versions using each slot
    for obj, slots in objects:
        users[slots] += len(obj.versions)
    entry = usage.datasets[path]
    entry.stored_bytes = round(np.count_nonzero(users) * slot_size)
    entry.shared_bytes = round(np.count_nonzero(users > 1) * slot_size)
    for obj, slots in objects:
        shared = np.count_nonzero(users[slots] > 1)
        for version in obj.versions:
            row = usage.versions[version]
            row["stored_bytes"] += round(len(slots) * slot_size)
            row["shared_bytes"] += round(shared * slot_size)
