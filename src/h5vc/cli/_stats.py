"""What the ``show`` and ``du`` commands report: version trees and storage use.

Everything here is computed from chunk maps (which ``raw_data`` slot each chunk of a
committed dataset uses) and object addresses; no array data is read.  A *slot* is
counted at the average stored size of its store's slots (``raw_data``'s storage size
over its slot count), so compression is accounted for.  A sample column counts as
one entry: its table (the ``keys`` and ``records`` datasets) and the samples its
records point at (:mod:`h5vc.cli._columns`).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np

from h5vc.api import VersionedHDF5File
from h5vc.columns.table import RECORDS, TABLE
from h5vc.errors import CorruptDataError
from h5vc.hdf5.damage import damaged
from h5vc.hdf5.filebytes import (
    FileBytes,
    Header,
    ManyDatasets,
    Unreadable,
    many_compact_links,
    many_datasets,
    many_links,
    many_mappings,
)
from h5vc.hdf5.header import DATASPACE, DATATYPE, LAYOUT, dataspace_dims, stored_messages_at
from h5vc.hdf5.mappings import header_mappings
from h5vc.store import layout
from h5vc.store.chunkmap import unique_sorted
from h5vc.store.tree import find
from h5vc.versions import FileState, dataset_chunks, object_address

if TYPE_CHECKING:  # the columns' modules are loaded when a column is met
    from h5vc.cli._columns import ColumnObject, SampleSizes

__all__ = ["DatasetUsage", "TreeNode", "Usage", "disk_usage", "version_tree"]


@dataclass
class TreeNode:
    """One group or dataset of a version."""

    path: str
    kind: str  # "group", "dataset" or "column"
    attrs: list[str]
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    chunks: tuple[int, ...] | None = None
    #: Stored bytes of the chunks this version uses that none of its parents uses
    #: (a column: of its table's chunks and of the samples it points at).
    new_bytes: int | None = None
    #: A column's backend, number of keys and whether its samples vary in shape.
    backend: str | None = None
    keys: int | None = None
    variable_shape: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": "/" + self.path, "kind": self.kind, "attrs": self.attrs}
        if self.kind == "dataset":
            out.update(
                shape=list(self.shape or ()),
                dtype=self.dtype,
                chunks=list(self.chunks or ()),
                new_bytes=self.new_bytes,
            )
        elif self.kind == "column":
            out.update(
                shape=list(self.shape or ()),
                dtype=self.dtype,
                backend=self.backend,
                variable_shape=self.variable_shape,
                keys=self.keys,
                new_bytes=self.new_bytes,
            )
        return out


def _user_attrs(obj: h5py.HLObject, hidden: frozenset[str]) -> list[str]:
    return sorted(name for name in obj.attrs if name not in hidden)


def _members(group: h5py.Group, prefix: str = "") -> Iterator[tuple[str, h5py.HLObject]]:
    """Every group and dataset below ``group``, by name, depth first; a column's
    group without its table."""
    from h5vc.cli._columns import is_column

    for name in sorted(group):
        obj = group[name]
        path = f"{prefix}{name}"
        yield path, obj
        if isinstance(obj, h5py.Group) and not is_column(obj):
            yield from _members(obj, f"{path}/")


class _SlotSizes:
    """Average stored bytes of one slot of each chunk store's ``raw_data`` (by store
    key: a dataset path, or the key of a dataset's alternate store)."""

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
    return unique_sorted(slots[slots >= 0])


def version_tree(vf: VersionedHDF5File, version: str, parents: list[str]) -> list[TreeNode]:
    """Every group and dataset of ``version``, with the bytes it first stored.

    A chunk counts as first stored by ``version`` when none of ``parents`` uses
    its slot at the same path; a dataset that is the same object as in a parent
    (unchanged, hard-linked) stored nothing.
    """
    from h5vc.cli._columns import SampleSizes, is_column

    state = vf.file_state
    root = state.versions[version]
    slot_size = _SlotSizes(state)
    sample_size = SampleSizes(state)
    nodes = [TreeNode("", "group", _user_attrs(root, layout.VERSION_ATTRS))]
    for path, obj in _members(root):
        if isinstance(obj, h5py.Group) and is_column(obj):
            nodes.append(_column_node(state, version, path, obj, parents, slot_size, sample_size))
            continue
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


def _column_node(
    state: FileState,
    version: str,
    path: str,
    group: h5py.Group,
    parents: list[str],
    slot_size: Callable[[str], float],
    sample_size: SampleSizes,
) -> TreeNode:
    """A column of ``version``: its schema, key count and the bytes it first stored
    (table chunks and samples none of ``parents`` uses at ``path``)."""
    from h5vc.cli._columns import column_object, new_sample_bytes

    column = column_object(group, path)
    assert column is not None  # is_column(group)
    schema = column.schema
    node = TreeNode(
        path,
        "column",
        _user_attrs(group, frozenset(column_attrs(group))),
        shape=schema.shape,
        dtype=str(schema.dtype),
        backend=schema.backend,
        keys=column.keys,
        variable_shape=schema.variable_shape,
    )
    earlier: list[ColumnObject | None] = []
    for parent in parents:
        other = find(state.versions[parent], path)
        if isinstance(other, h5py.Group) and object_address(other) == object_address(group):
            node.new_bytes = 0  # the same column object: unchanged
            return node
        earlier.append(column_object(other, path) if isinstance(other, h5py.Group) else None)
    table = 0
    for name in TABLE:
        dataset = group.get(name)
        if isinstance(dataset, h5py.Dataset):
            table += _new_bytes(state, version, f"{path}/{name}", dataset, parents, slot_size)
    node.new_bytes = table + new_sample_bytes(column, earlier, sample_size)
    return node


def column_attrs(group: h5py.Group) -> list[str]:
    """The attributes h5vc keeps on a column's group (not the user's)."""
    return [name for name in group.attrs if name.startswith("h5vc_")]


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
    #: "dataset", or "column": a column's table and the samples its records point at.
    kind: str = "dataset"

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": "/" + self.path,
            "kind": self.kind,
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


@dataclass(slots=True)
class _Object:
    """One committed dataset object and the versions that link it.

    ``name`` is a path from the ``versions`` group to one link of it
    (``version/path``, as bytes)."""

    path: str
    name: bytes
    versions: list[str] = field(default_factory=list)
    #: The object's header address.
    address: int = 0
    #: Its position among the objects :func:`disk_usage` counts (-1: not counted).
    index: int = -1
    #: The positions of its versions among the versions counted, where known.
    ranks: list[int] | None = None


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
                    entry = found[member] = _Object(f"{prefix}{leaf}", name, address=member)
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

    filename = versions.file.filename
    with damaged(filename, "a group of versions"):
        try:
            versions.id.links.visit(visit, idx_type=h5py.h5.INDEX_NAME, info=True)
        except RuntimeError as error:  # HDF5 could not decode a group's links
            raise CorruptDataError(
                f"a group of versions in {filename!r} is damaged and cannot be read: "
                f"{error}. Run h5vc.verify on the file; restore it from a copy if it "
                f"was written."
            ) from error
    return found


def _objects_through_h5py(state: FileState, versions: list[str]) -> dict[int, _Object]:
    found: dict[int, _Object] = {}
    for version in versions:
        for path, parent, name in _walk(state.versions[version]):
            key = int(h5py.h5o.get_info(parent.id, name.encode()).addr)
            link = f"{version}/{path}".encode()
            found.setdefault(key, _Object(path, link, address=key)).versions.append(version)
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
    mappings as runs, and each store's counts are taken over runs, not chunks, for
    all objects at once, and each version's sums over its objects' links in arrays.
    A file open read-only is read from its bytes (:mod:`h5vc.hdf5.filebytes`:
    groups' links, headers and mapping lists, and the versions' names from the time
    index, without opening an object); what those do not read is opened through HDF5.

    A slot is a slot of one chunk store: a dataset created again with a dtype or
    chunks its first store cannot hold has a store of its own, counted apart (its
    slots have their own size and are shared with no slot of the first store)."""
    state = vf.file_state
    with state.reading(), _no_cycle_collection():
        stores = _Stores(state)
        names, objects = _read_objects(state, stores)
        usage = Usage(file_bytes=int(state.root.file.id.get_filesize()))
        slot_size = _SlotSizes(state)
        per_store: dict[tuple[str, str], _StoreRuns] = {}
        columns: dict[str, list[ColumnObject]] = {}
        counted: list[_Object] = []
        logicals: list[int] = []
        datasets = usage.datasets
        for obj, found in objects:
            if found is None:
                found = _read_object(state, stores, obj)
            if found is None:
                continue  # an empty group (or a named datatype): no data
            logical, key, runs = found
            entry = datasets.get(obj.path)
            if entry is None:
                entry = datasets[obj.path] = DatasetUsage(obj.path)
            entry.versions += len(obj.versions)
            entry.logical_bytes += logical * len(obj.versions)
            obj.index = len(counted)
            counted.append(obj)
            logicals.append(logical)
            if key is not None:
                store_runs = per_store.get((obj.path, key))
                if store_runs is None:
                    store_runs = per_store[obj.path, key] = _StoreRuns()
                store_runs.add(obj, runs)
            advance(1)
            if obj.path.rpartition("/")[2] == RECORDS:
                _note_column(state, obj, columns)
        for (path, key), store_runs in list(per_store.items()):
            # Objects whose blocks are not whole slots, or hold a chunk twice: read
            # again through their chunk maps.
            for position, obj in store_runs.settle():
                found = _read_object(state, stores, obj)
                if found is None or found[1] is None:
                    continue
                if found[1] == key:
                    store_runs.add(obj, found[2], position)
                else:
                    per_store.setdefault((path, found[1]), _StoreRuns()).add(obj, found[2])
        per_version = _PerVersion(names, counted, logicals)
        for (path, key), store_runs in per_store.items():
            _count_store(usage, path, store_runs, slot_size(key), per_version)
        usage.versions = per_version.rows()
        if columns:
            _fold_columns(usage, columns, state)
    return usage


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector paused: :func:`disk_usage` makes a few objects per
    dataset object and per link (hundreds of thousands on 10,000 versions, none in a
    reference cycle), and the collector's passes over them cost about a tenth of its
    time.  The objects still alive at the end are moved to the oldest generation
    (``gc.freeze`` then ``gc.unfreeze``), as if they had survived the passes: the
    collector's first pass would otherwise scan them all at once."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()
            gc.unfreeze()
            gc.enable()


#: What is known of a dataset object: logical bytes, store key (None: no slot used)
#: and its slots (as runs, or as the blocks of its mappings, not checked yet).
_Found = tuple[int, str | None, "_Runs | _Blocks"]


def _read_object(state: FileState, stores: _Stores, obj: _Object) -> _Found | None:
    """What :func:`_from_header` or, failing that, HDF5 tell of a dataset object."""
    found = _from_header(state, stores, obj.address, obj)
    return found if found is not None else _through_hdf5(state, stores, obj)


def _read_objects(
    state: FileState, stores: _Stores
) -> tuple[list[str], list[tuple[_Object, _Found | None]]]:
    """The committed versions, oldest first, and every committed dataset object
    (:func:`_objects`) with what its bytes tell of it, read from a file open
    read-only (None where they do not: the caller asks :func:`_from_header` and
    HDF5)."""
    file_bytes = FileBytes.of(state.versions.file)
    if file_bytes is not None:
        with file_bytes:
            try:
                roots = _version_roots(state, file_bytes)
            except Unreadable:
                roots = None
            if roots is not None:
                # The links counted here need not be counted again by HDF5.
                names = state.log.names_by_time(len(roots), file_bytes)
                try:
                    return names, _objects_from_bytes(state, stores, file_bytes, names, roots)
                except Unreadable:
                    pass  # not a tree of the plain kind: walked through HDF5
    else:
        roots = None
    if roots is None:
        names = state.log.names_by_time()
    return names, [(obj, None) for obj in _objects(state, names).values()]


def _version_roots(state: FileState, file_bytes: FileBytes) -> list[tuple[str, int]]:
    """The links of the versions group, read from the file's bytes; raises
    :class:`Unreadable` where they are not of the plain kind."""
    versions = state.version_data.id.links.get_info(layout.VERSIONS.encode())
    if versions.type != h5py.h5l.TYPE_HARD:
        raise Unreadable("the versions group is not a hard link")
    roots = file_bytes.links(file_bytes.header(int(versions.u)))
    if roots is None:
        raise Unreadable("the versions group is not a group")
    return roots


def _objects_from_bytes(
    state: FileState,
    stores: _Stores,
    file_bytes: FileBytes,
    names: list[str],
    roots: list[tuple[str, int]],
) -> list[tuple[_Object, _Found | None]]:
    """:func:`_objects` from the file's bytes (``roots``: the links of the versions
    group), and what each dataset object's header and mappings say; raises
    :class:`Unreadable` where the tree is not of the plain kind (the caller walks it
    through HDF5).

    The tree is read level by level: the links of the groups of one level at once
    (:func:`many_links`), then the headers of their members at once
    (:func:`many_datasets`); what those do not read is read one by one."""
    root_of = dict(roots)
    for version in names:
        if version not in root_of:
            raise Unreadable(f"no group of version {version!r}")
    links_of: dict[int, list[tuple[str, int]]] = {}  # of every group
    headers: dict[int, Header] = {}  # of the other objects read one by one
    row_of: dict[int, int] = {}  # of the datasets read at once: their row in `levels`
    levels: list[tuple[list[int], ManyDatasets]] = []
    frontier = list(dict.fromkeys(root_of[version] for version in names))
    for address, links in zip(frontier, _many_groups(file_bytes, frontier)):
        if links is None:
            links = file_bytes.links(file_bytes.header(address))
            if links is None:
                raise Unreadable("a version that is not a group")
        links_of[address] = links
    while frontier:
        linked = dict.fromkeys(
            map(_target, itertools.chain.from_iterable(links_of[group] for group in frontier))
        )
        members = [
            member
            for member in linked
            if member not in links_of and member not in headers and member not in row_of
        ]
        if not members:
            break
        read = many_datasets(file_bytes, members)
        first_row = sum(len(done) for done, _ in levels)
        levels.append((members, read))
        frontier = []
        good = np.flatnonzero(read.ok)
        row_of.update(zip([members[i] for i in good.tolist()], (first_row + good).tolist()))
        others = [members[i] for i in np.flatnonzero(~read.ok).tolist()]
        for address, links in zip(others, _many_groups(file_bytes, others)):
            if links is not None:
                links_of[address] = links
                frontier.append(address)
                continue
            header = file_bytes.header(address)
            links = file_bytes.links(header)
            if links is None:
                headers[address] = header
            else:
                links_of[address] = links
                frontier.append(address)
    objects = _walk_links(names, root_of, links_of)
    plain = _plain_many(file_bytes, stores, levels, [row_of.get(obj.address) for obj in objects])
    found = list(zip(objects, plain))
    for i in [i for i, fast in enumerate(plain) if fast is None]:
        obj = objects[i]
        known = headers.get(obj.address)
        found[i] = (obj, _plain(file_bytes, stores, known or file_bytes.header(obj.address)))
    return found


def _target(link: tuple[str, int]) -> int:
    return link[1]


def _many_groups(file_bytes: FileBytes, addresses: list[int]) -> list[list[tuple[str, int]] | None]:
    """The links of the groups at ``addresses`` read at once, of either kind
    (:func:`many_links`, :func:`many_compact_links`); None for the others."""
    found = many_links(file_bytes, addresses)
    left = [i for i, links in enumerate(found) if links is None]
    if left:
        for i, links in zip(left, many_compact_links(file_bytes, [addresses[i] for i in left])):
            found[i] = links
    return found


def _walk_links(
    names: list[str], root_of: dict[str, int], links_of: dict[int, list[tuple[str, int]]]
) -> list[_Object]:
    """The objects that are not groups below the version groups, in the order of the
    versions, then of the paths in each (by name, depth first), with the versions
    that link them (once per link)."""
    #: Every object below a group that is not a group itself, as (path below the
    #: group, address), by the group's address: a group linked into many versions
    #: is walked once.
    below: dict[int, list[tuple[str, int]]] = {}
    named: dict[tuple[str, int], list[tuple[str, int]]] = {}  # the same, as ``leaf/path``
    open_groups: set[int] = set()  # the groups being walked (a cycle is damage)

    def flatten(group: int) -> list[tuple[str, int]]:
        if group in open_groups or len(open_groups) > _MAX_DEPTH:
            raise Unreadable("a group that holds itself")
        open_groups.add(group)
        flat: list[tuple[str, int]] = []
        for link in links_of[group]:
            if link[1] in links_of:
                flat += expand(link)
            else:
                flat.append(link)
        open_groups.discard(group)
        return flat

    def expand(link: tuple[str, int]) -> list[tuple[str, int]]:
        """What is below the group linked by ``link``, as paths from the link."""
        known = named.get(link)
        if known is None:
            leaf, member = link
            inside = below.get(member)
            if inside is None:
                inside = below[member] = flatten(member)
            known = named[link] = [(f"{leaf}/{path}", address) for path, address in inside]
        return known

    found: dict[int, _Object] = {}
    get = found.get
    for rank, version in enumerate(names):
        root = root_of[version]
        flat = below.get(root)
        if flat is None:
            # Flattened here (a cycle through a version's group is met below it).
            flat = []
            for link in links_of[root]:
                if link[1] in links_of:
                    flat += expand(link)
                else:
                    flat.append(link)
            below[root] = flat
        for path, address in flat:
            obj = get(address)
            if obj is None:
                name = f"{version}/{path}".encode()
                found[address] = _Object(path, name, [version], address, -1, [rank])
            else:
                obj.versions.append(version)
                assert obj.ranks is not None
                obj.ranks.append(rank)
    return list(found.values())


def _plain_many(
    file_bytes: FileBytes,
    stores: _Stores,
    levels: list[tuple[list[int], ManyDatasets]],
    rows: list[int | None],
) -> list[_Found | None]:
    """:func:`_plain` of the objects at ``rows`` of the headers read at once
    (``levels``), their mappings read at once; None for an object not so read."""
    found: list[_Found | None] = [None] * len(rows)
    if not levels:
        return found
    fields = ("rank", "dims", "type_class", "element_size", "has_heap", "heap", "index")
    every = {name: np.concatenate([getattr(read, name) for _, read in levels]) for name in fields}
    wanted = np.asarray([-1 if row is None else row for row in rows], dtype=np.int64)
    at = np.flatnonzero(wanted >= 0)
    picked = {name: values[wanted[at]] for name, values in every.items()}
    usable = ~np.isin(picked["type_class"], tuple(_OTHER_ITEMSIZE))
    logical = _logical_bytes(picked["rank"], picked["dims"], picked["element_size"])
    empty = _Runs(np.zeros(0, np.int64), np.zeros(0, np.int64))
    for k in np.flatnonzero(usable & ~picked["has_heap"]).tolist():
        found[int(at[k])] = (logical[k], None, empty)  # no mapping: every chunk the fill value
    for rank in unique_sorted(picked["rank"]).tolist():
        chosen = np.flatnonzero(usable & picked["has_heap"] & (picked["rank"] == rank))
        if not len(chosen):
            continue
        read = many_mappings(file_bytes, picked["heap"][chosen], picked["index"][chosen], rank)
        named = [stores.named(dataset) if file == b"." else None for file, dataset in read.names]
        source, virtual = read.source, read.virtual
        good = np.flatnonzero(read.ok)
        for i, k, name, first, count in zip(
            at[chosen[good]].tolist(),
            chosen[good].tolist(),
            read.source_name[good].tolist(),
            read.first[good].tolist(),
            read.count[good].tolist(),
        ):
            store = named[name]
            if store is None or len(store.chunks) != rank:
                continue
            found[i] = (logical[k], store.key, _Blocks(store, source, virtual, first, count))
    return found


def _logical_bytes(rank: np.ndarray, dims: np.ndarray, element_size: np.ndarray) -> list[int]:
    """The logical bytes of each dataset (the product of its first ``rank`` dimensions
    and its element size), in Python integers: computed once per distinct shape."""
    n = len(rank)
    if not n:
        return []
    keys = np.empty((n, 2 + dims.shape[1]), dtype=np.uint64)
    keys[:, 0] = rank
    keys[:, 1:-1] = dims
    keys[:, -1] = element_size
    distinct, inverse = _distinct_rows(keys)
    values = [math.prod(row[1 : 1 + row[0]]) * row[-1] for row in distinct.tolist()]
    return [values[i] for i in inverse.tolist()]


def _distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a 2-d array (sorted) and the position of each row among
    them (``np.unique(rows, axis=0, return_inverse=True)``, without numpy.ma)."""
    order = np.lexsort(rows.T[::-1])
    ordered = rows[order]
    first = np.ones(len(rows), dtype=bool)
    first[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    inverse = np.empty(len(rows), dtype=np.intp)
    inverse[order] = np.cumsum(first) - 1
    return ordered[first], inverse


#: Groups nested deeper than this in a version are a cycle of hard links.
_MAX_DEPTH = 256


def _plain(file_bytes: FileBytes, stores: _Stores, header: Header) -> _Found | None:
    """Logical bytes, store key and slot runs of the dataset object whose header is
    ``header``, in the plain case only (as :func:`_from_header`: every mapping a
    slot-aligned hyperslab of one store's ``raw_data``); None for anything else."""
    try:
        shape = file_bytes.dims(header)
    except Unreadable:
        return None
    element = file_bytes.element(header)
    if shape is None or element is None or element[0] in _OTHER_ITEMSIZE:
        return None
    mappings = file_bytes.mappings(header, len(shape))
    if mappings is None:
        return None
    logical = math.prod(shape) * element[1]
    if not mappings.sources:  # every chunk the fill value: no slot used
        return logical, None, _Runs(np.zeros(0, np.int64), np.zeros(0, np.int64))
    if len(mappings.sources) > 1:
        return None
    [(source_file, source_name)] = mappings.sources
    store = stores.named(source_name)
    if source_file != b"." or store is None:
        return None
    ndim2 = 2 * len(shape)
    if len(store.chunks) != len(shape) or len(mappings.source) != len(mappings.virtual):
        return None
    source = np.asarray(mappings.source, dtype=np.int64).reshape(-1, ndim2)
    virtual = np.asarray(mappings.virtual, dtype=np.int64).reshape(-1, ndim2)
    return logical, store.key, _Blocks(store, source, virtual, 0, len(source))


class _Blocks:
    """The blocks of a dataset object's mappings of one store's raw_data, as read:
    rows ``first:first + count`` of ``source`` and ``virtual`` (first and last
    coordinates, ``(n, 2 * ndim)``, which many objects may share);
    :meth:`_StoreRuns.settle` checks them.  (A plain class: one is made per dataset
    object.)"""

    __slots__ = ("count", "first", "source", "store", "virtual")

    def __init__(
        self, store: _Store, source: np.ndarray, virtual: np.ndarray, first: int, count: int
    ) -> None:
        self.store = store
        self.source = source
        self.virtual = virtual
        self.first = first
        self.count = count


def _note_column(state: FileState, obj: _Object, columns: dict[str, list[ColumnObject]]) -> None:
    """If ``obj`` is the records dataset of a column, note the column it belongs to."""
    from h5vc.cli._columns import column_object

    parent = obj.path.rpartition("/")[0]
    if not parent:
        return
    group = find(state.versions[obj.versions[0]], parent)
    if not isinstance(group, h5py.Group):
        return
    column = column_object(group, parent)
    if column is not None:
        column.versions = list(obj.versions)
        columns.setdefault(parent, []).append(column)


def _fold_columns(usage: Usage, columns: dict[str, list[ColumnObject]], state: FileState) -> None:
    """Replace each column's table datasets by one entry for the column, its samples
    added; add the samples to each version's row."""
    from h5vc.cli._columns import SampleSizes, sample_usage

    sample_size = SampleSizes(state)
    objects = [column for found in columns.values() for column in found]
    samples = sample_usage(objects, sample_size)
    for path, found in columns.items():
        entry = DatasetUsage(path, kind="column")
        entry.versions = sum(len(column.versions) for column in found)
        for name in TABLE:
            table = usage.datasets.pop(f"{path}/{name}", None)
            if table is not None:
                entry.logical_bytes += table.logical_bytes
                entry.stored_bytes += table.stored_bytes
                entry.shared_bytes += table.shared_bytes
        used = samples[path]
        entry.logical_bytes += used.logical_bytes
        entry.stored_bytes += used.stored_bytes
        entry.shared_bytes += used.shared_bytes
        usage.datasets[path] = entry
        for version, (logical, stored, shared) in used.versions.items():
            row = usage.versions[version]
            row["logical_bytes"] += logical
            row["stored_bytes"] += stored
            row["shared_bytes"] += shared


@dataclass
class _Runs:
    """The distinct slots one dataset object uses, as sorted, disjoint runs
    ``[start, stop)``."""

    start: np.ndarray
    stop: np.ndarray

    @classmethod
    def of_slots(cls, slots: np.ndarray) -> _Runs:
        used = unique_sorted(slots[slots >= 0])
        if not len(used):
            return cls(used, used)
        breaks = np.flatnonzero(np.diff(used) != 1) + 1
        return cls(used[np.r_[0, breaks]], used[np.r_[breaks - 1, len(used) - 1]] + 1)

    @classmethod
    def of_blocks(cls, first: np.ndarray, stop: np.ndarray) -> _Runs:
        """From slot ranges ``[first, stop)`` that may overlap (a chunk stored once and
        used twice): each slot once."""
        order = np.argsort(first, kind="stable")
        first, stop = first[order], stop[order]
        if len(first) > 1 and (first[1:] < np.maximum.accumulate(stop)[:-1]).any():
            return cls.of_slots(np.concatenate([np.arange(a, b) for a, b in zip(first, stop)]))
        return cls(first, stop)


@dataclass(frozen=True)
class _Store:
    """One chunk store: its key (path under the version data), rows and chunk shape."""

    key: str
    rows: int
    chunks: tuple[int, ...]


class _Stores:
    """The chunk stores of the file, by the name their virtual mappings give
    ``raw_data`` (as stored: ``"%%"`` for ``"%"``)."""

    def __init__(self, state: FileState):
        self._state = state
        self._prefix = (state.version_data.name or "").rstrip("/").encode() + b"/"
        self.versions_name = state.versions.name
        self._suffix = b"/" + layout.RAW_DATA.encode()
        self._by_name: dict[bytes, _Store | None] = {}
        #: Global heap collections read (address -> objects by index): HDF5 puts the
        #: mappings of many virtual datasets in one.
        self.collections: dict[int, dict[int, bytes]] = {}

    def named(self, source: bytes) -> _Store | None:
        """The store whose ``raw_data`` the mappings name ``source``, or None."""
        if source not in self._by_name:
            self._by_name[source] = self._look_up(source.replace(b"%%", b"%"))
        return self._by_name[source]

    def _look_up(self, name: bytes) -> _Store | None:
        if not (name.startswith(self._prefix) and name.endswith(self._suffix)):
            return None
        key = name[len(self._prefix) : -len(self._suffix)].decode()
        store = self._state.stores.get(key)
        if store is None or (store.raw_data.name or "").encode() != name:
            return None
        return _Store(key, int(store.raw_data.shape[0]), tuple(store.chunks))


#: Datatype classes whose size in the file is not numpy's item size (references,
#: variable-length data): their objects are opened through HDF5.
_OTHER_ITEMSIZE = frozenset((7, 9))
_MESSAGES = frozenset((DATASPACE, DATATYPE, LAYOUT))


def _from_header(
    state: FileState, stores: _Stores, address: int, obj: _Object
) -> tuple[int, str | None, _Runs] | None:
    """Logical bytes, store key (None: no slot used) and slot runs of the dataset
    object at ``address``,
    read from the file's bytes without opening it: the plain case only (a file open
    read-only, every mapping a slot-aligned hyperslab of one store's ``raw_data``);
    None for anything else, which :func:`_through_hdf5` reads."""
    where = f"{stores.versions_name}/{obj.name.decode(errors='replace')}"
    stored = stored_messages_at(state.versions, address, _MESSAGES, where)
    if stored is None or len(stored.messages) != len(_MESSAGES):
        return None
    datatype = stored.messages[DATATYPE]
    if datatype[0] & 0x0F in _OTHER_ITEMSIZE:
        return None
    mappings = header_mappings(stored, where, state.filename, stores.collections)
    if mappings is None or len(mappings.sources) > 1:
        return None
    shape = dataspace_dims(stored.messages[DATASPACE], stored.sizeof_size)
    logical = math.prod(shape) * int.from_bytes(datatype[4:8], "little")
    if not mappings.sources:  # every chunk the fill value: no slot used
        return logical, None, _Runs(np.zeros(0, np.int64), np.zeros(0, np.int64))
    [(source_file, source_name)] = mappings.sources
    store = stores.named(source_name)
    if source_file != b"." or store is None:
        return None
    runs = _plain_runs(mappings.source, store)
    if runs is None:
        return None
    return logical, store.key, runs


def _plain_runs(blocks: np.ndarray, store: _Store) -> _Runs | None:
    """The slots of source ``blocks`` (``(n, 2, ndim)`` first and last coordinates) of
    ``store``'s raw_data, if each block is whole slots inside it; else None."""
    chunks = store.chunks
    if blocks.shape[2] != len(chunks):
        return None
    c0 = chunks[0]
    if len(blocks) <= _FEW_BLOCKS:  # plain Python costs less than numpy's calls here
        runs = []
        for first, last in blocks.tolist():
            if (
                first[0] % c0
                or last[0] >= store.rows
                or any(first[1:])
                or any(a >= b for a, b in zip(last[1:], chunks[1:]))
            ):
                return None
            runs.append((first[0] // c0, last[0] // c0 + 1))
        runs.sort()
        if all(a[1] <= b[0] for a, b in itertools.pairwise(runs)):
            return _Runs(
                np.array([a for a, _ in runs], np.int64), np.array([b for _, b in runs], np.int64)
            )
    first, last = blocks[:, 0, :], blocks[:, 1, :]
    if (
        (first[:, 0] % c0).any()
        or (last[:, 0] >= store.rows).any()
        or (first[:, 1:] != 0).any()
        or (last[:, 1:] >= np.asarray(chunks[1:], np.int64)).any()
    ):
        return None  # left to the chunk map, which knows what is wrong
    return _Runs.of_blocks(first[:, 0] // c0, last[:, 0] // c0 + 1)


#: Mappings of at most this many blocks are checked in plain Python.
_FEW_BLOCKS = 16


def _through_hdf5(
    state: FileState, stores: _Stores, obj: _Object
) -> tuple[int, str | None, _Runs] | None:
    """Logical bytes, store key (None: no store) and slot runs of a dataset object,
    opened through HDF5 and read through its chunk map (which checks the mappings,
    and raises where they are damaged); None if the object is not a dataset."""
    dataset_id = h5py.h5o.open(state.versions.id, obj.name)
    if not isinstance(dataset_id, h5py.h5d.DatasetID):
        return None
    logical = int(np.prod(dataset_id.shape, dtype=np.int64)) * dataset_id.dtype.itemsize
    version = obj.versions[0]
    dataset = h5py.Dataset(dataset_id)
    chunk_map = state.chunk_maps.get(version, obj.path, dataset)
    runs = _Runs.of_slots(chunk_map.slots)
    if not len(runs.start):
        return logical, None, runs
    return logical, state.stores.key(version, obj.path, dataset), runs


class _StoreRuns:
    """The slot runs of every object of one dataset path in one chunk store: run ``i``
    is ``[starts[i], stops[i])`` of ``objects[owner[i]]``.  Blocks read from the
    file's bytes are kept apart until :meth:`settle` checks them, all at once."""

    def __init__(self) -> None:
        self.objects: list[_Object] = []
        self.owner: list[int] = []
        self.starts: list[int] = []
        self.stops: list[int] = []
        self.store: _Store | None = None
        #: Blocks not checked yet, by the arrays holding them: those arrays, and
        #: the first row, row count and object position of each object's blocks.
        self.blocks: dict[int, tuple[_Blocks, list[int], list[int], list[int]]] = {}

    def add(self, obj: _Object, runs: _Runs | _Blocks, position: int | None = None) -> None:
        """Add the runs or blocks of ``obj`` (as object ``position``: one added
        before and taken back by :meth:`settle`)."""
        if position is None:
            position = len(self.objects)
            self.objects.append(obj)
        if isinstance(runs, _Blocks):
            self.store = runs.store
            entry = self.blocks.get(id(runs.source))
            if entry is None:
                entry = self.blocks[id(runs.source)] = (runs, [], [], [])
            entry[1].append(runs.first)
            entry[2].append(runs.count)
            entry[3].append(position)
            return
        self.owner += [position] * len(runs.start)
        self.starts += runs.start.tolist()
        self.stops += runs.stop.tolist()

    def settle(self) -> list[tuple[int, _Object]]:
        """Turn the blocks into runs where each block is whole slots of the store,
        no block ends before it starts and no object uses a slot twice; return the
        objects (by position) whose blocks are not all so (their blocks dropped)."""
        store = self.store
        if store is None:
            return []
        ndim = len(store.chunks)
        owners, sources, virtuals = [], [], []
        for blocks, firsts, counts, positions in self.blocks.values():
            first = np.asarray(firsts, dtype=np.int64)
            count = np.asarray(counts, dtype=np.int64)
            rows = np.repeat(first - np.cumsum(count) + count, count) + np.arange(count.sum())
            owners.append(np.repeat(np.asarray(positions, dtype=np.int64), count))
            sources.append(blocks.source[rows])
            virtuals.append(blocks.virtual[rows])
        owner = np.concatenate(owners)
        source = np.concatenate(sources).reshape(-1, 2, ndim)
        virtual = np.concatenate(virtuals).reshape(-1, 2, ndim)
        first, last = source[:, 0], source[:, 1]
        c0 = store.chunks[0]
        wrong = (
            (first[:, 0] % c0 != 0)
            | (last[:, 0] >= store.rows)
            | (first[:, 1:] != 0).any(axis=1)
            | (last[:, 1:] >= np.asarray(store.chunks[1:], dtype=np.int64)).any(axis=1)
            | (last < first).any(axis=1)
            | (virtual[:, 1] < virtual[:, 0]).any(axis=1)
        )
        bad = np.zeros(len(self.objects), dtype=bool)
        bad[owner[wrong]] = True
        starts, stops = first[:, 0] // c0, last[:, 0] // c0 + 1
        order = np.lexsort((starts, owner))
        owner, starts, stops = owner[order], starts[order], stops[order]
        # Sorted by start, an object's runs are disjoint if each ends before the next.
        twice = (owner[1:] == owner[:-1]) & (starts[1:] < stops[:-1])
        bad[owner[1:][twice]] = True
        keep = ~bad[owner]
        self.owner += owner[keep].tolist()
        self.starts += starts[keep].tolist()
        self.stops += stops[keep].tolist()
        self.store = None
        self.blocks = {}
        return [(int(i), self.objects[i]) for i in np.flatnonzero(bad)]


class _PerVersion:
    """The logical, stored and shared bytes of each version, summed over the objects
    it links: ``objects`` (those counted, by :attr:`_Object.index`) and their
    logical bytes are known at the start; :meth:`add` adds stored and shared bytes
    of some objects to each of their versions."""

    def __init__(self, names: list[str], objects: list[_Object], logicals: list[int]):
        self.names = names
        rank = {name: i for i, name in enumerate(names)}
        counts = [len(obj.versions) for obj in objects]
        #: Each object's versions (by rank), object after object.
        self.links = np.fromiter(
            itertools.chain.from_iterable(
                obj.ranks if obj.ranks is not None else [rank[v] for v in obj.versions]
                for obj in objects
            ),
            dtype=np.int64,
            count=sum(counts),
        )
        self.counts = np.asarray(counts, dtype=np.int64)
        self.starts = np.cumsum(self.counts) - self.counts
        #: Sums of Python integers where they could leave int64 (never in practice).
        self.exact = (
            sum(logical * count for logical, count in zip(logicals, counts)) >= _INT64_SUMS_BELOW
        )
        self.objects = objects
        n = len(names)
        self.sums: dict[str, list[int] | np.ndarray]
        if self.exact:
            self.sums = {kind: [0] * n for kind in _KINDS}
            self._add_exact("logical_bytes", objects, logicals)
        else:
            self.sums = {kind: np.zeros(n, dtype=np.int64) for kind in _KINDS}
            self._add("logical_bytes", np.arange(len(objects)), np.asarray(logicals, np.int64))

    def add(self, positions: np.ndarray, stored: np.ndarray, shared: np.ndarray) -> None:
        """Add ``stored[i]`` and ``shared[i]`` bytes (int64) to every version of object
        ``positions[i]``."""
        if self.exact:
            objects = [self.objects[i] for i in positions.tolist()]
            self._add_exact("stored_bytes", objects, stored.tolist())
            self._add_exact("shared_bytes", objects, shared.tolist())
            return
        self._add("stored_bytes", positions, stored)
        self._add("shared_bytes", positions, shared)

    def _add(self, kind: str, positions: np.ndarray, values: np.ndarray) -> None:
        counts = self.counts[positions]
        total = int(counts.sum())
        if not total:
            return
        # The rows of self.links of each object's versions, object after object.
        first = np.repeat(self.starts[positions] - (np.cumsum(counts) - counts), counts)
        versions = self.links[first + np.arange(total)]
        sums = self.sums[kind]
        assert isinstance(sums, np.ndarray)
        np.add.at(sums, versions, np.repeat(values, counts))

    def _add_exact(self, kind: str, objects: list[_Object], values: list[int]) -> None:
        sums = self.sums[kind]
        rank = {name: i for i, name in enumerate(self.names)}
        for obj, value in zip(objects, values):
            for version in obj.versions:
                sums[rank[version]] += value

    def rows(self) -> dict[str, dict[str, int]]:
        """Each version's sums, as :attr:`Usage.versions` lists them."""
        columns = [
            sums.tolist() if isinstance(sums, np.ndarray) else sums for sums in self.sums.values()
        ]
        return {
            name: dict(logical_bytes=logical, stored_bytes=stored, shared_bytes=shared)
            for name, logical, stored, shared in zip(self.names, *columns)
        }


_KINDS = ("logical_bytes", "stored_bytes", "shared_bytes")
#: Per-version sums are taken in int64 while the logical bytes of every link of every
#: object sum to less than this; else in Python integers.
_INT64_SUMS_BELOW = 1 << 62


def _count_store(
    usage: Usage, path: str, runs: _StoreRuns, slot_size: float, per_version: _PerVersion
) -> None:
    """Add the stored and shared bytes of the objects of dataset ``path`` in one of its
    chunk stores to ``usage`` (those of each version to ``per_version``)."""
    objects = runs.objects
    weights = np.asarray([len(obj.versions) for obj in objects], dtype=np.int64)
    owner = np.asarray(runs.owner, dtype=np.int64)
    starts = np.asarray(runs.starts, dtype=np.int64)
    stops = np.asarray(runs.stops, dtype=np.int64)
    n = int(stops.max(initial=0))
    # Versions using each slot, from +weight at each run's start, -weight at its stop.
    weight = weights[owner]
    change = np.bincount(starts, weight, minlength=n + 1) - np.bincount(
        stops, weight, minlength=n + 1
    )
    change = change.astype(np.int64)  # sums of integers, exact in float64
    users = np.cumsum(change[:-1])
    shared_before = np.concatenate([[0], np.cumsum(users > 1)])
    entry = usage.datasets[path]
    entry.stored_bytes += round(np.count_nonzero(users) * slot_size)
    entry.shared_bytes += round(int(shared_before[-1]) * slot_size)
    used = np.bincount(owner, weights=stops - starts, minlength=len(objects))
    shared = np.bincount(
        owner, weights=shared_before[stops] - shared_before[starts], minlength=len(objects)
    )
    # Slot counts (exact in float64) times the slot size, rounded half to even as
    # round() rounds them.
    per_version.add(
        np.fromiter((obj.index for obj in objects), dtype=np.int64, count=len(objects)),
        np.rint(used * slot_size).astype(np.int64),
        np.rint(shared * slot_size).astype(np.int64),
    )
