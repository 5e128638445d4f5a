"""What the ``show`` and ``du`` commands report: version trees and storage use.

Everything here is computed from chunk maps (which ``raw_data`` slot each chunk of a
committed dataset uses) and object addresses; no array data is read.  A *slot* is
counted at the average stored size of its store's slots (``raw_data``'s storage size
over its slot count), so compression is accounted for.
"""

from __future__ import annotations

import itertools
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
            store = self._state.stores.get(path)
            size = 0.0
            if store is not None and store.n_slots:
                size = store.raw_data.id.get_storage_size() / store.n_slots
            self._sizes[path] = size
        return size


def _used(state: FileState, version: str, path: str, dataset: h5py.Dataset) -> np.ndarray:
    slots = state.chunk_maps.get(version, path, dataset).slots
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
    """One committed dataset object and the versions that link it.

    ``name`` is a path from the ``versions`` group to one link of it
    (``version/path``, as bytes)."""

    path: str
    name: bytes
    versions: list[str] = field(default_factory=list)


class _IrregularLinks(Exception):
    """A version holds a link that is not a hard link: walk it through h5py."""


def _objects(state: FileState, versions: list[str]) -> dict[int, _Object]:
    """Every committed dataset object, by address, with the versions that link it,
    in the order of the versions, then of the paths in each (by name, depth first).
    Empty groups are listed too (they are not told from datasets without opening).

    One HDF5 walk over the links of every version lists each group once, however
    many versions hard-link it: the members of an unchanged (hard-linked) group are
    not listed again.  A version holding a soft or external link is walked through
    h5py instead (:func:`_objects_through_h5py`)."""
    try:
        children = _children(state.versions)
    except _IrregularLinks:
        return _objects_through_h5py(state, versions)
    found: dict[int, _Object] = {}
    for version in versions:
        address = children.roots.get(version)
        if address is None:
            return _objects_through_h5py(state, versions)
        stack = [(address, "")]
        while stack:
            group, prefix = stack.pop()
            members = children.members.get(group, [])
            for leaf, member, name in reversed(members):
                if member in children.members:
                    stack.append((member, f"{prefix}{leaf}/"))
                    continue
                # A dataset, or an empty group (the caller opens it, and skips it).
                entry = found.get(member)
                if entry is None:
                    entry = found[member] = _Object(f"{prefix}{leaf}", name)
                entry.versions.append(version)
    # Paths come out in reverse within a version (a stack): restore the walk order.
    return _ordered(found, versions)


def _ordered(found: dict[int, _Object], versions: list[str]) -> dict[int, _Object]:
    """``found`` in the order of first link: by version, then path (depth first)."""
    rank = {name: i for i, name in enumerate(versions)}

    def key(item: tuple[int, _Object]) -> tuple[int, tuple[str, ...]]:
        obj = item[1]
        return rank[obj.versions[0]], tuple(obj.path.split("/"))

    for obj in found.values():
        obj.versions.sort(key=rank.__getitem__)
    return dict(sorted(found.items(), key=key))


@dataclass
class _Children:
    """Every group below ``versions``, by address: its members ``(name, address,
    path from versions)`` by name; and the address of each version group."""

    members: dict[int, list[tuple[str, int, bytes]]] = field(default_factory=dict)
    roots: dict[str, int] = field(default_factory=dict)


def _children(versions: h5py.Group) -> _Children:
    found = _Children()
    addresses: dict[bytes, int] = {}

    def visit(name: bytes, info: Any) -> None:
        if info.type != h5py.h5l.TYPE_HARD:
            raise _IrregularLinks(name)
        address = addresses[name] = int(info.u)
        parent, _, leaf = name.rpartition(b"/")
        if not parent:
            found.roots[leaf.decode()] = address
            found.members.setdefault(address, [])
        else:
            # HDF5 lists a group's members right after it, once, however many
            # links it has: only groups with members become keys.
            found.members.setdefault(addresses[parent], []).append((leaf.decode(), address, name))

    versions.id.links.visit(visit, idx_type=h5py.h5.INDEX_NAME, info=True)
    return found


def _objects_through_h5py(state: FileState, versions: list[str]) -> dict[int, _Object]:
    found: dict[int, _Object] = {}
    for version in versions:
        for path, parent, name in _walk(state.versions[version]):
            key = int(h5py.h5o.get_info(parent.id, name.encode()).addr)
            link = f"{version}/{path}".encode()
            found.setdefault(key, _Object(path, link)).versions.append(version)
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
    per dataset path.  ``advance(1)`` is called once per dataset object examined.

    Work grows with the dataset objects, not with the links to them: a dataset that
    versions share (hard-linked, unchanged) is read once, and the datasets of a
    group they share are listed once.  Each object's slots are read from its virtual
    mappings as runs, and each path's counts are taken over runs, not chunks."""
    state = vf.file_state
    with state.reading():
        names = state.log.names()
        usage = Usage(file_bytes=int(state.root.file.id.get_filesize()))
        usage.versions = {
            name: dict(logical_bytes=0, stored_bytes=0, shared_bytes=0) for name in names
        }
        slot_size = _SlotSizes(state)
        stores = _Stores(state)
        per_path: dict[str, list[tuple[_Object, _Runs]]] = {}
        for obj in _objects(state, names).values():
            dataset = h5py.h5o.open(state.versions.id, obj.name)
            if not isinstance(dataset, h5py.h5d.DatasetID):
                continue  # an empty group (or a named datatype): no data
            logical = int(np.prod(dataset.shape, dtype=np.int64)) * dataset.dtype.itemsize
            entry = usage.datasets.setdefault(obj.path, DatasetUsage(obj.path))
            entry.versions += len(obj.versions)
            entry.logical_bytes += logical * len(obj.versions)
            for version in obj.versions:
                usage.versions[version]["logical_bytes"] += logical
            per_path.setdefault(obj.path, []).append((obj, _slot_runs(state, stores, obj, dataset)))
            advance(1)
        for path, objects in per_path.items():
            _count_path(usage, path, objects, slot_size(path))
    return usage


@dataclass
class _Runs:
    """The distinct slots one dataset object uses, as sorted, disjoint runs
    ``[start, stop)``."""

    start: np.ndarray
    stop: np.ndarray

    @classmethod
    def of_slots(cls, slots: np.ndarray) -> _Runs:
        used = np.unique(slots[slots >= 0])
        if not len(used):
            return cls(used, used)
        breaks = np.flatnonzero(np.diff(used) != 1) + 1
        return cls(used[np.r_[0, breaks]], used[np.r_[breaks - 1, len(used) - 1]] + 1)


class _Stores:
    """Per dataset path: its own store's ``raw_data`` name, rows and chunk shape."""

    def __init__(self, state: FileState):
        self._state = state
        self._facts: dict[str, tuple[str, int, tuple[int, ...]] | None] = {}

    def __call__(self, path: str) -> tuple[str, int, tuple[int, ...]] | None:
        if path not in self._facts:
            store = self._state.stores.get(path)
            self._facts[path] = (
                None
                if store is None
                else (str(store.raw_data.name), int(store.raw_data.shape[0]), store.chunks)
            )
        return self._facts[path]


def _slot_runs(
    state: FileState, stores: _Stores, obj: _Object, dataset: h5py.h5d.DatasetID
) -> _Runs:
    """The slots ``dataset`` uses: from its mappings' source blocks when they are the
    plain case (hyperslabs of its own store's raw_data, aligned to whole slots, inside
    it), else from its chunk map (which checks the mappings, and raises where they
    are damaged)."""
    facts = stores(obj.path)
    runs = None if facts is None else _source_runs(dataset, *facts)
    if runs is None:
        version = obj.versions[0]
        chunk_map = state.chunk_maps.get(version, obj.path, h5py.Dataset(dataset))
        runs = _Runs.of_slots(chunk_map.slots)
    return runs


def _source_runs(
    dataset: h5py.h5d.DatasetID, raw_data: str, rows: int, chunks: tuple[int, ...]
) -> _Runs | None:
    dcpl = dataset.get_create_plist()
    if dcpl.get_layout() != h5py.h5d.VIRTUAL:
        return None
    ndim = len(chunks)
    runs: list[tuple[int, int]] = []
    for i in range(dcpl.get_virtual_count()):
        space = dcpl.get_virtual_srcspace(i)
        if space.get_select_type() != h5py.h5s.SEL_HYPERSLABS:
            return None
        if dcpl.get_virtual_dsetname(i) != raw_data or dcpl.get_virtual_filename(i) != ".":
            return None
        for first, last in space.get_select_hyper_blocklist().tolist():
            if len(first) != ndim or first[0] % chunks[0] or last[0] >= rows:
                return None  # left to the chunk map, which knows what is wrong
            if any(a != 0 or b >= c for a, b, c in zip(first[1:], last[1:], chunks[1:])):
                return None
            runs.append((first[0] // chunks[0], last[0] // chunks[0] + 1))
    runs.sort()
    merged = len(runs) < 2 or all(b[0] >= a[1] for a, b in itertools.pairwise(runs))
    if not merged:
        # Overlapping runs (a chunk stored once, used twice): count each slot once.
        slots = [np.arange(a, b) for a, b in runs]
        return _Runs.of_slots(np.concatenate(slots))
    array = np.asarray(runs, dtype=np.int64).reshape(-1, 2)
    return _Runs(array[:, 0], array[:, 1])


def _count_path(
    usage: Usage, path: str, objects: list[tuple[_Object, _Runs]], slot_size: float
) -> None:
    """Add the stored and shared bytes of one dataset path's objects to ``usage``."""
    weights = np.asarray([len(obj.versions) for obj, _ in objects], dtype=np.int64)
    lengths = np.asarray([len(runs.start) for _, runs in objects], dtype=np.int64)
    starts = np.concatenate([runs.start for _, runs in objects]).astype(np.int64)
    stops = np.concatenate([runs.stop for _, runs in objects]).astype(np.int64)
    owner = np.repeat(np.arange(len(objects)), lengths)
    n = int(stops.max(initial=0))
    # Versions using each slot, from +weight at each run's start, -weight at its stop.
    change = np.zeros(n + 1, dtype=np.int64)
    np.add.at(change, starts, weights[owner])
    np.add.at(change, stops, -weights[owner])
    users = np.cumsum(change[:-1])
    shared_before = np.concatenate([[0], np.cumsum(users > 1)])
    entry = usage.datasets[path]
    entry.stored_bytes = round(np.count_nonzero(users) * slot_size)
    entry.shared_bytes = round(int(shared_before[-1]) * slot_size)
    used = np.bincount(owner, weights=stops - starts, minlength=len(objects))
    shared = np.bincount(
        owner, weights=shared_before[stops] - shared_before[starts], minlength=len(objects)
    )
    for (obj, _), n_used, n_shared in zip(objects, used.tolist(), shared.tolist()):
        stored_bytes = round(int(n_used) * slot_size)
        shared_bytes = round(int(n_shared) * slot_size)
        for version in obj.versions:
            row = usage.versions[version]
            row["stored_bytes"] += stored_bytes
            row["shared_bytes"] += shared_bytes
