"""The versioned tree in the file: version groups, links, attributes and their walks.

In h5vc's layout an unchanged dataset or group is a hard link shared by several
version groups.  Every operation that rewrites committed objects therefore works
on *objects* (keyed by their HDF5 address), rebuilds each one once and relinks
it at every *link location* (parent group, link name) that named it.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import h5py
import numpy as np

from h5vc.errors import CorruptDataError, NotVersionedError, UnsupportedFormatError
from h5vc.hdf5.damage import is_damage
from h5vc.hdf5.header import check_dataset_header
from h5vc.hdf5.mappings import Mappings, stored_mappings
from h5vc.store import fastattrs, layout, timeindex
from h5vc.store.attributes import read_attributes
from h5vc.store.chunkmap import ChunkMap
from h5vc.store.groups import new_group, require_groups
from h5vc.store.vds import create_virtual_dataset, read_chunk_map

__all__ = [
    "DatasetObject",
    "alternate_stores",
    "new_alternate_store",
    "collect_datasets",
    "copy_attrs",
    "dataset_chunks",
    "drop_store",
    "find",
    "find_group",
    "initialize",
    "join_path",
    "link_object",
    "linker",
    "mark_committed",
    "object_address",
    "rebuild_virtual_dataset",
    "relink",
    "remove_empty_parents",
    "current_version",
    "set_current_version",
    "set_prev_version",
    "store_key",
    "store_paths",
    "walk_version",
    "write_attrs",
]


def join_path(prefix: str, name: str) -> str:
    """``prefix/name``, or ``name`` at the root (``prefix == ""``)."""
    return f"{prefix}/{name}" if prefix else name


def object_address(obj: h5py.HLObject) -> int:
    """The HDF5 object address: equal for every hard link to one object.

    Read with ``H5Gget_objinfo``, which gives the address and little else:
    ``H5Oget_info`` also counts the object's attributes and reads its header for
    that (about 100 µs for a virtual dataset just written, against 8 µs).
    """
    if _objinfo is None:
        return int(h5py.h5o.get_info(obj.id).addr)
    low, high = _objinfo(obj.id).objno
    return int(low) | int(high) << _LONG_BITS


#: ``h5py.h5g.get_objinfo`` where h5py offers it (HDF5 builds without deprecated
#: calls do not); its ``objno`` is the address split into two C ``unsigned long``.
_objinfo = getattr(h5py.h5g, "get_objinfo", None)
_LONG_BITS = 8 * ctypes.sizeof(ctypes.c_ulong)


def dataset_chunks(dataset: h5py.Dataset) -> tuple[int, ...]:
    """The versioned chunk shape of a committed dataset (its ``chunks`` attribute)."""
    chunks = dataset.attrs.get(layout.ATTR_CHUNKS)
    if chunks is None:
        raise UnsupportedFormatError(
            f"Expected a {layout.ATTR_CHUNKS!r} attribute on the committed dataset "
            f"{dataset.name!r} of {dataset.file.filename!r}. Got none: it was not "
            f"written by a versioned store."
        )
    return tuple(int(c) for c in np.atleast_1d(chunks))


def initialize(
    root: h5py.Group, timestamp: str, data_version: int = layout.DATA_VERSION_H5VC
) -> None:
    """Create an empty versioned layout (no version yet) in the writable ``root``.

    ``data_version`` is h5vc's layout (the default) or versioned-hdf5's
    (:data:`~h5vc.store.layout.DATA_VERSION_COMPAT`, one mapping per chunk, no
    time index), which versioned-hdf5 reads and writes too.
    """
    # The versions group stays of the old kind: its attributes are rewritten at every
    # commit, which in a header full of link messages moves them to new file space.
    versions = require_groups(root, layout.VERSION_DATA).create_group(layout.VERSIONS)
    first = new_group(versions, layout.FIRST_VERSION)
    first.attrs[layout.ATTR_TIMESTAMP] = timestamp
    versions.attrs[layout.ATTR_CURRENT_VERSION] = layout.FIRST_VERSION
    versions.attrs[layout.ATTR_DATA_VERSION] = np.int64(data_version)
    if data_version in layout.H5VC_DATA_VERSIONS:
        timeindex.write_index(root[layout.VERSION_DATA], [], {})


_VERSION_DATA = layout.VERSION_DATA.encode()
_VERSIONS = layout.VERSIONS.encode()


def open_layout(root: h5py.Group, filename: str | None = None) -> tuple[h5py.Group, h5py.Group]:
    """``(version data group, versions group)`` of ``root``, which must be versioned
    (a writable root is initialized before, see :func:`initialize`); ``filename`` is
    the file's name if the caller knows it already."""
    try:  # the usual case in two HDF5 calls; anything else is looked at below
        version_data_id = h5py.h5o.open(root.id, _VERSION_DATA)
        versions_id = h5py.h5o.open(version_data_id, _VERSIONS)
    except Exception:
        pass
    else:
        if isinstance(version_data_id, h5py.h5g.GroupID) and isinstance(
            versions_id, h5py.h5g.GroupID
        ):
            return h5py.Group(version_data_id), h5py.Group(versions_id)
    if filename is None:
        filename = root.file.filename if not isinstance(root, h5py.File) else root.filename
    if layout.VERSION_DATA not in root:
        raise NotVersionedError(
            f"Expected a versioned HDF5 file or group with a {layout.VERSION_DATA!r} "
            f"group. {filename!r} (group {root.name!r}) has none and is open read-only, "
            f"so it cannot be initialized."
        )
    version_data = root[layout.VERSION_DATA]
    try:
        found = layout.VERSIONS in version_data
        versions = version_data[layout.VERSIONS] if found else None
    except (KeyError, OverflowError) as error:
        # A link that cannot be looked up or opened (damage HDF5 does not name as
        # such: an address past the end of the file, or too large to read at).
        # Damage HDF5 names goes to the caller, which names the layout.
        if is_damage(error):
            raise
        raise _damaged_versions_link(version_data, filename, f"({error})") from error
    if versions is None:
        listed = _listed_names(version_data)
        if listed is None or layout.VERSIONS in listed:
            # Listed but not found by name (the group's index of link names is
            # damaged), or the links cannot be listed at all (a damaged name).
            raise _damaged_versions_link(version_data, filename, "")
        raise NotVersionedError(
            f"Expected a {layout.VERSIONS!r} group in {version_data.name!r} of "
            f"{filename!r}. Got none: this is not a versioned file."
        )
    return version_data, versions


def _damaged_versions_link(
    version_data: h5py.Group, filename: str, detail: str
) -> CorruptDataError:
    return CorruptDataError(
        f"The group {version_data.name!r} in {filename!r} is damaged and cannot be read: "
        f"its link {layout.VERSIONS!r} cannot be looked up by name{' ' + detail if detail else ''}. "
        f"Run h5vc.verify on the file; restore it from a copy if it was written."
    )


def _listed_names(group: h5py.Group) -> list[str] | None:
    """The link names of ``group`` as its iteration finds them (None if that fails:
    a name that is not UTF-8, or link storage that cannot be read)."""
    try:
        names = list(group)
    except (KeyError, RuntimeError, OSError, ValueError, OverflowError):
        return None
    # h5py gives a name that is not UTF-8 as bytes.
    return names if all(isinstance(name, str) for name in names) else None


def write_attrs(obj: h5py.HLObject, attrs: Mapping[str, Any], *, new: bool = False) -> None:
    """Write ``attrs`` on ``obj`` (values as h5py stores them; the layout's own kinds
    of value through :mod:`~h5vc.store.fastattrs`). ``new``: ``obj`` was just created
    and has no attributes yet, so none is looked for to be replaced."""
    for key, value in attrs.items():
        if not fastattrs.write(obj, key, value, new=new):
            obj.attrs[key] = value


def mark_committed(
    group: h5py.Group, metadata: Mapping[str, Any] | None = None, *, new: bool = False
) -> None:
    """Write a version group's ``metadata`` (if not written before), then its
    ``committed`` marker (last: a group without it is left over from an interrupted
    commit and ignored). ``new``: the group has none of these attributes yet (see
    :func:`write_attrs`)."""
    write_attrs(group, {**(metadata or {}), layout.ATTR_COMMITTED: np.bool_(True)}, new=new)


def plain_current_version(versions: h5py.Group) -> str | None:
    """The ``current_version`` attribute of ``versions`` if it is stored exactly as
    :func:`set_current_version` writes it (a scalar variable-length UTF-8 string), so
    it can be written over without checks (``written=True``); None when it is stored
    otherwise (read it with :func:`current_version`) or there is none."""
    return fastattrs.read_str(versions, layout.ATTR_CURRENT_VERSION, exact=True)


def current_version(versions: h5py.Group) -> Any:
    """The ``current_version`` attribute of ``versions`` (a ``str`` when it is
    stored as h5vc and versioned-hdf5 write it, else as h5py reads it); raises
    ``KeyError`` when there is none."""
    value = fastattrs.read_str(versions, layout.ATTR_CURRENT_VERSION)
    return versions.attrs[layout.ATTR_CURRENT_VERSION] if value is None else value


def set_current_version(versions: h5py.Group, name: str, *, written: bool = False) -> None:
    """Record ``name`` as the current version; ``written``: h5vc wrote the attribute
    since the file was last read, so it is written over without checks
    (:func:`~h5vc.store.fastattrs.write_str_over`)."""
    if written:
        fastattrs.write_str_over(versions, layout.ATTR_CURRENT_VERSION, name)
    else:
        write_attrs(versions, {layout.ATTR_CURRENT_VERSION: name})


def set_prev_version(version_group: h5py.Group, name: str) -> None:
    """Record ``name`` as the parent of a committed version."""
    version_group.attrs[layout.ATTR_PREV_VERSION] = name


def set_merge_parents(version_group: h5py.Group, names: Sequence[str]) -> None:
    """Record the parents of a merge after the first (none: the attribute goes)."""
    attrs = version_group.attrs
    if names:
        attrs[layout.ATTR_MERGE_PARENTS] = np.array(list(names), dtype=h5py.string_dtype())
    elif layout.ATTR_MERGE_PARENTS in attrs:
        del attrs[layout.ATTR_MERGE_PARENTS]


def link_object(group: h5py.Group, name: str, parent: h5py.Group, source_name: str) -> None:
    """Make ``group[name]`` a new hard link to ``parent[source_name]`` (one HDF5 call)."""
    group.id.links.create_hard(name.encode(), parent.id, source_name.encode())


def linker(group: h5py.Group) -> Callable[[str, h5py.Group, str], None]:
    """:func:`link_object` for many links in ``group``: the link proxy is made once."""
    create_hard = group.id.links.create_hard

    def link(name: str, parent: h5py.Group, source_name: str) -> None:
        create_hard(name.encode(), parent.id, source_name.encode())

    return link


def relink(parent: h5py.Group, name: str, target_parent: h5py.Group, target_name: str) -> None:
    """Make ``parent[name]`` a hard link to ``target_parent[target_name]``."""
    if name in parent:
        del parent[name]
    link_object(parent, name, target_parent, target_name)


def remove_empty_parents(root: h5py.Group, path: str, stop: str) -> None:
    """Remove the empty groups above ``path`` up to and including ``stop``."""
    parent = path.rpartition("/")[0]
    while parent and len(parent) >= len(stop) and parent in root and not len(root[parent]):
        del root[parent]
        parent = parent.rpartition("/")[0]


def drop_store(version_data: h5py.Group, path: str) -> None:
    """Delete the chunk store of ``path`` and the groups it leaves empty."""
    group = version_data[path]
    del group[layout.RAW_DATA]
    del group[layout.HASH_TABLE]
    if not len(group):
        del version_data[path]
        remove_empty_parents(version_data, path, stop="")


def walk_version(
    group: h5py.Group,
    seen_groups: set[int] | None = None,
    prefix: str = "",
    on_damage: Callable[[str, Exception], None] | None = None,
) -> Iterator[tuple[str, h5py.Group, str]]:
    """Yield ``(path, parent, name)`` for every member below ``group``.

    Members are not opened, except groups, which are entered.  Groups whose
    address is in ``seen_groups`` are yielded but not entered (their members
    were yielded before, through another hard link); entered groups are added.
    A member HDF5 cannot read raises, or with ``on_damage`` is passed to
    ``on_damage(path, error)`` and skipped.
    """
    try:
        members = list(group)
    except (RuntimeError, KeyError, OSError, ValueError) as error:
        if on_damage is None:
            raise
        on_damage(prefix.rstrip("/") or ".", error)
        return
    for name in members:
        path = f"{prefix}{name}"
        try:
            info = h5py.h5o.get_info(group.id, name.encode())
            child = group[name] if info.type == h5py.h5o.TYPE_GROUP else None
        except (RuntimeError, KeyError, OSError, ValueError) as error:
            if on_damage is None:
                raise
            on_damage(path, error)
            continue
        yield path, group, name
        if child is None:
            continue
        if seen_groups is not None:
            if int(info.addr) in seen_groups:
                continue
            seen_groups.add(int(info.addr))
        yield from walk_version(child, seen_groups, f"{path}/", on_damage)


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
        return self._open()[0]

    def _open(self) -> tuple[h5py.Dataset, Mappings | None]:
        """The dataset, and its mappings when they were read before HDF5 opened it
        (which also spares HDF5 mappings it would crash on)."""
        parent, name = self.locations[0]
        mappings = stored_mappings(parent, name)
        dataset = parent[name]
        if not isinstance(dataset, h5py.Dataset):
            raise CorruptDataError(
                f"Expected a dataset at {parent.name}/{name} of {parent.file.filename!r} "
                f"(it was one when the versions were walked). Got {type(dataset).__name__}."
            )
        return dataset, mappings

    def chunk_map(self) -> ChunkMap:
        dataset, mappings = self._open()
        return read_chunk_map(dataset, dataset_chunks(dataset), mappings)


def find(group: h5py.Group, path: str) -> Any:
    """The object at ``path`` under ``group``, or None where there is none.  Walked one
    link at a time: a multi-link lookup that fails halfway costs an HDF5 error stack,
    whose message h5py has been seen to fail to decode (a ``UnicodeDecodeError`` from
    whatever bytes the message buffer held) instead of raising ``KeyError``."""
    found: Any = group
    for name in path.strip("/").split("/"):
        if name == "." and isinstance(found, h5py.Group):
            continue  # the group itself, as h5py finds it
        # links.exists: one HDF5 call (``name in group`` costs three Python layers more)
        if (
            not isinstance(found, h5py.Group)
            or not name
            or not found.id.links.exists(name.encode())
        ):
            return None
        found = found[name]
    return found


def find_group(group: h5py.Group, path: str) -> h5py.Group | None:
    """The group at ``path`` under ``group``, or None (see :func:`find`)."""
    found = find(group, path)
    return found if isinstance(found, h5py.Group) else None


def _alternates_group(version_data: h5py.Group, path: str) -> h5py.Group | None:
    """The group of the alternate stores of ``path``, or None (most files have none)."""
    return find_group(version_data, f"{layout.ALT_STORES}/{path.strip('/')}")


def alternate_stores(version_data: h5py.Group, path: str) -> list[str]:
    """Store keys of the alternate chunk stores of dataset ``path``, oldest first.

    A dataset created again with a dtype or chunks its store cannot hold gets a
    store of its own at ``ALT_STORES/path/@n`` (see :mod:`h5vc.store.layout`).
    """
    group = _alternates_group(version_data, path)
    if group is None:
        return []
    numbers = []
    for name in group:
        if name.startswith(layout.ALT_PREFIX) and name[1:].isdigit():
            member = group[name]
            if isinstance(member, h5py.Group) and layout.RAW_DATA in member:
                numbers.append(int(name[1:]))
    return [f"{layout.ALT_STORES}/{path}/{layout.ALT_PREFIX}{n}" for n in sorted(numbers)]


def new_alternate_store(version_data: h5py.Group, path: str) -> str:
    """The store key for a new alternate store of dataset ``path``."""
    group = _alternates_group(version_data, path)
    taken = [
        int(name[1:])
        for name in (group if isinstance(group, h5py.Group) else ())
        if name.startswith(layout.ALT_PREFIX) and name[1:].isdigit()
    ]
    return f"{layout.ALT_STORES}/{path}/{layout.ALT_PREFIX}{max(taken, default=0) + 1}"


def store_key(version_data: h5py.Group, path: str, dataset: h5py.Dataset) -> str:
    """The store (path under ``version_data``) that committed ``dataset`` maps.

    ``path`` unless the dataset's ``raw_data`` attribute names another store under
    ``version_data`` (a dataset created again with other dtype or chunks).
    """
    value = dataset.attrs.get(layout.ATTR_RAW_DATA)
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    prefix = (version_data.name or "").rstrip("/") + "/"
    suffix = "/" + layout.RAW_DATA
    if isinstance(value, str) and value.startswith(prefix) and value.endswith(suffix):
        key = value[len(prefix) : -len(suffix)]
        if key.startswith(layout.ALT_STORES + "/"):
            return key
    return path


def collect_datasets(
    versions_group: h5py.Group,
    versions: Iterable[str],
    only_path: str | None = None,
    on_damage: Callable[[str, str, Exception], None] | None = None,
) -> dict[str, dict[int, DatasetObject]]:
    """``{store key: {object address: DatasetObject}}`` over ``versions``.

    The store key is the dataset path, except for a dataset created again with a
    dtype or chunks its earlier store could not hold: the key of its own store
    (:func:`store_key`); ``DatasetObject.path`` is always the dataset path.
    Shared groups are entered once, so each link location is listed once.  With
    ``only_path`` the walk looks that path up in each version instead of walking.
    Objects are identified without opening them (but those of a path with several
    stores, which are opened to read their store's name).  A member HDF5 cannot read
    raises, or with ``on_damage`` is passed to ``on_damage(version, path, error)``
    and left out.
    """
    found: dict[str, dict[int, DatasetObject]] = {}
    seen_groups: set[int] = set()
    seen_locations: set[tuple[int, str]] = set()
    version_data = versions_group.parent
    several: dict[str, bool] = {}
    keys: dict[int, str] = {}

    def record(version: str, path: str, parent: h5py.Group, name: str) -> None:
        info = h5py.h5o.get_info(parent.id, name.encode())
        if info.type != h5py.h5o.TYPE_DATASET:
            return
        key = int(info.addr)
        if path not in several:
            several[path] = bool(alternate_stores(version_data, path))
        store = path
        if several[path]:
            if key not in keys:
                keys[key] = store_key(version_data, path, parent[name])
            store = keys[key]
        entry = found.setdefault(store, {}).setdefault(key, DatasetObject(path, key))
        entry.versions.append(version)
        location = (object_address(parent), name)
        if location not in seen_locations:
            seen_locations.add(location)
            entry.locations.append((parent, name))

    for version in versions:
        group = versions_group[version]
        if only_path is None:
            damage = None
            if on_damage is not None:
                damage = functools.partial(on_damage, version)
            for path, parent, name in walk_version(group, seen_groups, on_damage=damage):
                record(version, path, parent, name)
            continue
        parent_path, _, name = only_path.rpartition("/")
        parent = group.get(parent_path) if parent_path else group
        if isinstance(parent, h5py.Group) and name in parent:
            record(version, only_path, parent, name)
    return found


def store_paths(version_data: h5py.Group, *, with_hash_table: bool = True) -> list[str]:
    """Paths (relative to the version root) of every dataset with a raw_data store
    (and a hash_table, unless ``with_hash_table`` is false).

    Only groups are opened; a store's datasets are not, and their object headers are
    checked (:func:`~h5vc.hdf5.header.check_dataset_header`) before HDF5 reads them.
    """
    paths: list[str] = []

    def visit(group: h5py.Group, prefix: str) -> None:
        for name in (layout.RAW_DATA, layout.HASH_TABLE):
            check_dataset_header(group, name)
        for name in group:
            if not prefix and name == layout.VERSIONS:
                continue
            try:
                kind = h5py.h5o.get_info(group.id, name.encode()).type
            except (KeyError, RuntimeError):
                continue  # a link to nothing, or to an object that cannot be opened
            if kind != h5py.h5o.TYPE_GROUP:
                continue
            obj = group[name]
            if _is_store(obj, with_hash_table):
                paths.append(f"{prefix}{name}")
            visit(obj, f"{prefix}{name}/")

    visit(version_data, "")
    return paths


def _is_store(group: h5py.Group, with_hash_table: bool) -> bool:
    """Whether ``group`` holds a chunk store (its datasets are not opened)."""
    if layout.RAW_DATA not in group:
        return False
    if with_hash_table:
        return layout.HASH_TABLE in group
    check_dataset_header(group, layout.RAW_DATA)
    info = h5py.h5o.get_info(group.id, layout.RAW_DATA.encode())
    return bool(info.type == h5py.h5o.TYPE_DATASET)


def copy_attrs(source: h5py.AttributeManager, target: h5py.AttributeManager) -> None:
    """Copy every attribute with its exact HDF5 type (strings stay vlen or fixed)."""
    for key in source:
        attr_id = source.get_id(key)
        value = source[key]
        if isinstance(value, h5py.Empty):
            target[key] = value
            continue
        target.create(key, data=value, shape=attr_id.shape, dtype=attr_id.dtype)


def copy_group(source: h5py.Group, group: h5py.Group, name: str) -> h5py.Group:
    """A new empty group ``group[name]`` with the attributes of ``source``."""
    sub = new_group(group, name)
    write_attrs(sub, read_attributes(source.attrs, frozenset()), new=True)
    return sub


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
    write_attrs(new, attrs or {})
    for parent, name in entry.locations[1:]:
        relink(parent, name, first_parent, first_name)
    entry.address = object_address(new)
