"""h5py-like groups of a versioned file: staged (writable) and committed (read-only)."""

from __future__ import annotations

import contextlib
import sys
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Union

import h5py
import numpy as np

import h5vc.config as config
from h5vc.errors import (
    CorruptDataError,
    InvalidFillValueError,
    InvalidPathError,
    MetadataMismatchError,
    NotSupportedError,
    ReadOnlyError,
)
from h5vc.hdf5 import filters as filter_keywords
from h5vc.hdf5.damage import damaged
from h5vc.store import layout
from h5vc.store.attributes import member_has_only
from h5vc.store.rawdata import check_storable
from h5vc.store.reading import read_fill, staged_array
from h5vc.store.tree import join_path as _join
from h5vc.versions import FileState, LRUCache
from h5vc.versions.reading import reads
from h5vc.wrappers.attrs import CommittedAttributes, StagedAttributes
from h5vc.wrappers.dataset import (
    CommittedDataset,
    StagedDataset,
    coerce_value,
    default_fill,
    file_view,
    known_view,
    open_committed_dataset,
    opening_member,
    reopen_version,
)
from h5vc.wrappers.views import NamesView

if TYPE_CHECKING:
    from h5vc.columns import CommittedColumn, StagedColumn
    from h5vc.versions import DatasetCommit, GroupCommit, Link

__all__ = ["CommittedGroup", "CommittedViews", "StagedGroup"]

Node = Union["StagedGroup", StagedDataset]
#: ``create_dataset(data=...)`` with at least this many bytes of numbers writes the
#: chunks to the file right away instead of staging a copy in memory (undone if the
#: version is not committed).
WRITE_THROUGH_BYTES = config.WRITE_THROUGH_BYTES
#: Read-only views of committed objects kept per open handle.
CACHED_VIEWS = config.CACHED_VIEWS
#: Version attributes only h5vc writes (read them with ``version_info()``).
H5VC_VERSION_ATTRS = frozenset({layout.ATTR_MESSAGE, layout.ATTR_AUTHOR})


def _split(path: str) -> list[str]:
    if not isinstance(path, str):
        raise TypeError(f"Expected a str name. Got {type(path).__name__} instead.")
    parts = [p for p in path.split("/") if p]
    if not parts:
        raise ValueError(f"Expected a non-empty object name. Got {path!r} instead.")
    return parts


class CommittedViews:
    """Read-only views of committed objects, keyed by (version, path).

    Committed objects never change until versions are deleted or rewritten, which
    drops the file state's caches and bumps its ``generation``: the views are then
    forgotten too.
    """

    __slots__ = ("__weakref__", "_cache", "_generation", "_state")

    def __init__(self, state: FileState, maxsize: int = CACHED_VIEWS):
        self._state = state
        self._generation = state.generation
        self._cache: LRUCache[tuple[str, str], Any] = LRUCache(maxsize)

    def get(self, key: tuple[str, str]) -> Any:
        if self._generation != self._state.generation:
            self._cache.clear()
            self._generation = self._state.generation
        return self._cache.get(key)

    def __setitem__(self, key: tuple[str, str], value: Any) -> None:
        self._cache[key] = value

    def clear(self) -> None:
        self._cache.clear()


class _GroupBase(Mapping[str, Any]):
    """Navigation shared by staged and committed groups (a read-only ``Mapping``)."""

    _path: str
    # A group is equal only to itself and hashable, like an h5py group.
    __eq__ = object.__eq__  # type: ignore[assignment]
    __hash__ = object.__hash__  # type: ignore[assignment]

    @property
    def name(self) -> str:
        return "/" + self._path

    def _child(self, name: str) -> Any:
        raise NotImplementedError

    def _has_member(self, name: str) -> bool:
        """Whether a link ``name`` exists in this group (nothing is opened)."""
        raise NotImplementedError

    def _names(self) -> list[str]:
        """The names of the members, in the order ``keys()`` gives them."""
        raise NotImplementedError

    def __getitem__(self, path: str) -> Any:
        node: Any = self
        for part in _split(path):
            if not isinstance(node, _GroupBase):
                raise KeyError(f"Unable to open object: {part!r} is under a dataset in {path!r}")
            node = node._child(part)
        return node

    def get(self, path: str, default: Any = None) -> Any:
        try:
            return self[path]
        except KeyError:
            return default

    def _version_root_name(self) -> str | None:
        """The HDF5 path of this version's group (``/_version_data/versions/<name>``)."""
        return None

    def __contains__(self, path: object) -> bool:
        """Whether ``path`` names a member; like h5py, only the links are checked."""
        if not isinstance(path, str):
            return False
        root = self._version_root_name()
        if root is not None and (path + "/").startswith(root + "/"):
            # An absolute HDF5 path inside this version (as versioned-hdf5 accepts).
            return self._contains_absolute(path[len(root) :].strip("/"))
        parts = [p for p in path.split("/") if p]
        if not parts:
            return False
        node: _GroupBase = self
        for part in parts[:-1]:
            if not node._has_member(part):
                return False
            child = node._child(part)
            if not isinstance(child, _GroupBase):
                return False
            node = child
        return node._has_member(parts[-1])

    def _contains_absolute(self, rest: str) -> bool:
        """``rest`` (relative to the version root) is this group or a member below it."""
        if rest == self._path:
            return True
        if self._path and not rest.startswith(self._path + "/"):
            return self._outside_contains(rest)
        return rest[len(self._path) :].strip("/") in self

    def _outside_contains(self, rest: str) -> bool:
        return False

    def datasets(self) -> dict[str, Any]:
        """Every dataset below this group, by path relative to it."""
        found: dict[str, Any] = {}
        self.visititems(
            lambda name, obj: (
                found.__setitem__(name, obj)
                if hasattr(obj, "dtype") and not _is_column(obj)
                else None
            )
        )
        return found

    # keys(), values() and items() are live views, as h5py's are (those of ``Mapping``).
    def keys(self) -> NamesView:
        return NamesView(self)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def visititems(self, func: Callable[[str, Any], Any]) -> Any:
        """Call ``func(relative_name, object)`` on every member, recursively, like h5py.

        Members are visited depth first, each group before its members, names in
        sorted order (h5py's order), until ``func`` returns something other than None.
        """
        stack: list[tuple[str, str, _GroupBase]] = [
            (key, key, self) for key in sorted(self.keys(), reverse=True)
        ]
        while stack:
            relative, key, parent = stack.pop()
            child = parent._child(key)
            result = func(relative, child)
            if result is not None:
                return result
            if isinstance(child, _GroupBase):
                members = sorted(child.keys(), reverse=True)
                stack.extend((_join(relative, name), name, child) for name in members)
        return None

    def visit(self, func: Callable[[str], Any]) -> Any:
        return self.visititems(lambda name, _obj: func(name))

    def __repr__(self) -> str:
        return f'<{type(self).__name__} "{self.name}" ({len(self)} members)>'


class CommittedGroup(_GroupBase):
    """A read-only group of a committed version (the version root or a subgroup)."""

    def __init__(
        self,
        state: FileState,
        version: str,
        group: h5py.Group | None,
        path: str = "",
        views: CommittedViews | None = None,
    ):
        """``group`` None: the group is opened on first use (a version found
        committed in the bytes the file has now, whose group HDF5 opened then)."""
        self._state = state
        # The views cache the groups made from them: held weakly, so that a group
        # cached there makes no reference cycle with them (a dropped handle frees its
        # views and HDF5 objects at once, without the cycle collector).
        self._views_ref = None if views is None else weakref.ref(views)
        self._own_views = CommittedViews(state) if views is None else None
        self._version = version
        self._path = path
        self._generation = state.generation
        self._take(group)

    def _take(self, group: h5py.Group | None) -> None:
        self._group_obj = group
        # versioned-hdf5 shows prev_version, committed and timestamp on a version;
        # h5vc's own message and author stay behind version_info().
        path, version = self._path, self._version
        hidden = H5VC_VERSION_ATTRS if path == "" else frozenset()
        where = f"version {version!r}" if path == "" else f"group {self.name!r} of {version!r}"
        self._attrs_of = (hidden, where)

    @contextlib.contextmanager
    def _live_attrs(self) -> Iterator[h5py.AttributeManager]:
        """The group's attributes in the file, for one read of them."""
        with self._state.reading():
            yield self._current().attrs

    def _current(self) -> h5py.Group:
        """The group in the file, opened anew if the file's objects changed since (the
        version's tree may have been rebuilt); raises if the version is gone."""
        state = self._state
        if state.generation != self._generation or self._group_obj is None:
            with state.reading():
                generation = state.generation
                if generation != self._generation or self._group_obj is None:
                    root = reopen_version(state, self._version, f"The group {self.name!r}")
                    self._take(root[self._path] if self._path else root)
                    self._generation = generation
        group = self._group_obj
        assert group is not None
        return group

    @property
    def _group(self) -> h5py.Group:
        return self._current()

    @property
    def _views(self) -> CommittedViews:
        views = self._own_views
        if views is None:
            views = self._views_ref() if self._views_ref is not None else None
            if views is None:  # the handle whose views made this group is gone
                views = self._own_views = CommittedViews(self._state)
        return views

    @property
    def attrs(self) -> CommittedAttributes:
        self._current()
        # Made at each access (as h5py does): kept, it would hold this group through
        # ``live`` in a reference cycle.
        hidden, where = self._attrs_of
        return CommittedAttributes(None, hidden, where, live=self._live_attrs)

    def _version_root_name(self) -> str | None:
        return f"{self._state.versions.name}/{self._version}"

    @reads
    def _outside_contains(self, rest: str) -> bool:
        return rest in self._state.versions[self._version]

    @property
    def version_name(self) -> str:
        return self._version

    @property
    @reads
    def group(self) -> h5py.Group:
        """The version's group in the file."""
        return self._group

    @reads
    def _names(self) -> list[str]:
        return list(self._group.keys())

    @reads
    def _has_member(self, name: str) -> bool:
        return name in self._group

    def _child(self, name: str) -> CommittedGroup | CommittedDataset | CommittedColumn:
        key = (self._version, _join(self._path, name))
        cached = self._views.get(key)  # a view checks its version when it reads
        if cached is None:
            cached = self._known_dataset(name)
            if cached is None:
                with self._state.reading():
                    cached = self._open_child(name)
            self._views[key] = cached
        return cached

    def _known_dataset(self, name: str) -> CommittedDataset | None:
        """The view of dataset ``name`` if the file's bytes read in this generation
        of the file said it is one (None: not known): no read of the file, as for a
        view kept (its first read checks the file and opens it anew if it changed)."""
        state = self._state
        if state.generation != self._generation:
            return None
        found = known_view(state)
        if found is None:
            return None
        view, versions = found
        where = f"{versions}/{self._version}"
        kinds = view.known_kinds(f"{where}/{self._path}" if self._path else where)
        if kinds is None or not kinds.get(name):
            return None
        # The group holding it is opened when the dataset needs it (a first read
        # from the file's bytes does not).
        return open_committed_dataset(
            state, self._version, _join(self._path, name), self._group_obj or self._current
        )

    def _open_child(self, name: str) -> CommittedGroup | CommittedDataset | CommittedColumn:
        group = self._group
        path = _join(self._path, name)
        state = self._state

        def missing() -> str:
            return (
                f"Unable to open object {name!r} in {self.name!r} of version "
                f"{self._version!r}: no such member"
            )

        # Made by a first read (opening the map costs more than a lookup), or made
        # now where it is kept for later handles of the same bytes.
        found = known_view(state)
        if found is None and state.guard is not None and state.guard.kept is not None:
            found = file_view(state)
        if found is not None:
            view, versions = found
            # The kind of object from its header in the file's bytes.
            if view.is_dataset(f"{versions}/{self._version}/{path}"):
                return open_committed_dataset(state, self._version, path, group)
        with opening_member(state, group, name, missing):
            link = name.encode()
            if not group.id.links.exists(link):
                raise KeyError(name)
            # The kind of object, from its header: a dataset is opened by HDF5
            # (after its mappings are checked) on its first use.
            kind = h5py.h5o.get_info(group.id, link).type
            if kind == h5py.h5o.TYPE_DATASET:
                return open_committed_dataset(state, self._version, path, group)
            obj = group[name]
        where = f"Object {group.name}/{name}"
        if isinstance(obj, h5py.Group):
            if layout.ATTR_COLUMN in obj.attrs:
                from h5vc.columns import CommittedColumn, column_schema

                schema = column_schema(obj.attrs, f"{where} of {self._state.filename!r}")
                if schema is not None:
                    return CommittedColumn(self._state, self._version, path, obj, schema)
            return CommittedGroup(self._state, self._version, obj, path, self._views)
        raise CorruptDataError(
            f"{where} in {self._state.filename!r} is neither a group nor a dataset "
            f"({type(obj).__name__}): it cannot be read as part of version {self._version!r}."
        )

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise ReadOnlyError(
            f"Version {self._version!r} is committed and read-only; "
            f"stage a new version with stage_version() to change it."
        )

    create_dataset = create_group = require_group = require_dataset = _read_only
    __setitem__ = __delitem__ = _read_only


class StagedGroup(_GroupBase):
    """A group of a version being staged; behaves like an ``h5py.Group``."""

    def __init__(
        self, state: FileState, base_version: str | None, base: h5py.Group | None, path: str = ""
    ):
        self._state = state
        self._base_version = base_version
        self._base = base
        self._base_members: list[str] | None = None
        self._path = path
        self._loaded: dict[str, Node] = {}
        self._deleted: set[str] = set()
        self._structure_changed = False
        root = path == ""
        # Attributes of a version group belong to that version only; those of
        # subgroups carry over.
        self.attrs = StagedAttributes(
            None if root or base is None else base.attrs,
            layout.VERSION_ATTRS if root else frozenset(),
        )
        self._read_only_reason: str | None = None
        #: The column this group holds (a group with a column schema), once opened.
        self._column: StagedColumn | None = None

    # -- reading ------------------------------------------------------------------

    def _version_root_name(self) -> str | None:
        staging = self._state.staging
        return None if staging is None else f"{self._state.versions.name}/{staging}"

    def _names(self) -> list[str]:
        names = [k for k in self._base_names() if k not in self._deleted]
        names += [k for k in self._loaded if k not in names]
        return names

    def _base_names(self) -> list[str]:
        """The members of the base group (a committed version's: they never change),
        read once, in h5py's order."""
        if self._base_members is None:
            self._base_members = [] if self._base is None else member_names(self._base)
        return self._base_members

    def _has_member(self, name: str) -> bool:
        if name in self._loaded:
            return True
        return self._base is not None and name not in self._deleted and name in self._base

    def _child(self, name: str) -> Any:
        node = self._loaded.get(name)
        if node is not None:
            return _column_or(node)
        if self._base is None or name in self._deleted or name not in self._base:
            raise KeyError(f"Unable to open object {name!r} in {self.name!r}: no such member")
        node = self._load(name)
        if self._read_only_reason is not None:  # opened after the stage ended
            node.close_staging(self._read_only_reason)
        self._loaded[name] = node
        return _column_or(node)

    def _load(self, name: str) -> Node:
        from h5vc.versions import Link  # the commit writer: loaded to write

        base, version = self._base, self._base_version
        if base is None or version is None:  # _child checked name is in the base
            raise KeyError(f"Unable to open object {name!r} in {self.name!r}: no such member")
        path = _join(self._path, name)
        where = f"Object {base.name}/{name}"
        # A dataset whose chunk map is known (the last commit wrote it, say) is not
        # opened: HDF5 would decode every mapping. Its attributes are read through
        # the dataset only if it has any but the layout's.
        chunk_map = self._state.chunk_maps.known(version, path)
        attrs: StagedAttributes | None = None
        if chunk_map is not None:
            if self._state.chunk_maps.plain(version, path):  # written so here
                attrs = StagedAttributes(dict, layout.DATASET_ATTRS)
            else:
                with damaged(self._state.filename, where):
                    if member_has_only(base, name, layout.DATASET_ATTRS):
                        attrs = StagedAttributes(dict, layout.DATASET_ATTRS)
        if attrs is not None and chunk_map is not None:
            store = self._state.stores.require(path, version)
        else:
            with damaged(self._state.filename, where):
                obj = _open_writable(base, name)
            if isinstance(obj, h5py.Group):
                return StagedGroup(self._state, version, obj, path)
            store = self._state.stores.require(path, version, obj)
            chunk_map = self._state.chunk_maps.get(version, path, obj)
            attrs = StagedAttributes(obj.attrs, layout.DATASET_ATTRS)
        dtype = store.raw_data.dtype
        array = staged_array(chunk_map, store.raw_data, dtype, read_fill(dtype, store.fillvalue))
        if store.recent:  # the chunks the last commit wrote: read from memory
            from h5vc.store.recent import RecentChunksSlab

            array.slabs[1] = RecentChunksSlab(
                store.raw_data, dict(store.recent), chunk_map.chunks[0]
            )
        return StagedDataset(
            "/" + path,
            array,
            chunks=chunk_map.chunks,
            fillvalue=store.fillvalue,
            dtype=dtype,
            attrs=attrs,
            raw_data=store.raw_data,
            base=Link(base, name),
            base_shape=chunk_map.shape,
            base_slots=chunk_map.slots,
            state=self._state,
        )

    # -- writing ------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self._read_only_reason is not None:
            raise ReadOnlyError(self._read_only_reason)

    def _parent_for(self, path: str, create: bool) -> tuple[StagedGroup, str]:
        parts = _split(path)
        group: StagedGroup = self
        for part in parts[:-1]:
            if part in group:
                child = group._child(part)
                if not isinstance(child, StagedGroup):
                    raise ValueError(f"Unable to create {path!r}: {part!r} is a dataset")
                group = child
            elif create:
                group = group.create_group(part)
            else:
                raise KeyError(f"Unable to open object {part!r}: no such member")
        return group, parts[-1]

    def _add(self, name: str, node: Node) -> None:
        if name in self:
            raise ValueError(f"Unable to create {name!r} in {self.name!r} (name already exists)")
        self._deleted.discard(name)
        self._loaded[name] = node
        self._structure_changed = True

    def _check_relative(self, name: str, action: str) -> None:
        """Refuse an absolute path for a new object (as versioned-hdf5): in h5py it names
        the file's root, which is not versioned."""
        if isinstance(name, str) and name.startswith("/"):
            raise InvalidPathError(
                f"Cannot {action} {name!r} in the staged version: expected a path relative "
                f"to the version's group. Root level objects cannot be created inside a "
                f"versioned group (write them through h5py, outside the versions)."
            )

    def create_group(self, name: str, track_order: Any = None) -> StagedGroup:
        self._check_writable()
        self._check_relative(name, "create group")
        parent, leaf = self._parent_for(name, create=True)
        if parent is not self:
            return parent.create_group(leaf)
        group = StagedGroup(self._state, None, None, _join(self._path, leaf))
        self._add(leaf, group)
        return group

    def create_column(
        self,
        name: str,
        shape: Any,
        dtype: Any,
        *,
        backend: str = "01",
        variable_shape: bool = False,
        compression: Any = None,
    ) -> StagedColumn:
        """A new, empty sample column (see docs/samples.md): samples of ``shape``
        (their maximum with ``variable_shape``, backend ``"00"``) and ``dtype``, keyed
        by str or int."""
        from h5vc.columns import ColumnSchema, StagedColumn

        self._check_writable()
        self._check_relative(name, "create column")
        schema = ColumnSchema.parse(
            shape=shape,
            dtype=dtype,
            backend=backend,
            variable_shape=variable_shape,
            compression=compression,
        )
        group = self.create_group(name)
        group._column = StagedColumn(self._state, group, schema, group.name)
        return group._column

    def require_group(self, name: str) -> StagedGroup:
        if name in self:
            node = self[name]
            if not isinstance(node, StagedGroup):
                raise TypeError(f"Incompatible object ({type(node).__name__}) already exists")
            return node
        return self.create_group(name)

    def create_dataset(
        self,
        name: str,
        shape: Any = None,
        dtype: Any = None,
        data: Any = None,
        *,
        chunks: Any = None,
        fillvalue: Any = None,
        compression: Any = None,
        compression_opts: Any = None,
        shuffle: Any = None,
        fletcher32: Any = None,
        scaleoffset: Any = None,
        maxshape: Any = None,
        **kwds: Any,
    ) -> StagedDataset:
        """Create a dataset, with the arguments of ``h5py.Group.create_dataset``."""
        self._check_writable()
        self._check_relative(name, "create dataset")
        if hasattr(data, "__dask_graph__"):  # a Dask array: written block by block
            from h5vc.blockwrite import create_dataset as create_from_dask

            return create_from_dask(
                self, name, data, shape=shape, dtype=dtype, chunks=chunks, fillvalue=fillvalue,
                compression=compression, compression_opts=compression_opts, shuffle=shuffle,
                fletcher32=fletcher32, scaleoffset=scaleoffset, maxshape=maxshape, **kwds,
            )  # fmt: skip
        parent, leaf = self._parent_for(name, create=True)
        if parent is not self:
            return parent.create_dataset(
                leaf, shape, dtype, data, chunks=chunks, fillvalue=fillvalue,
                compression=compression, compression_opts=compression_opts, shuffle=shuffle,
                fletcher32=fletcher32, scaleoffset=scaleoffset, maxshape=maxshape, **kwds,
            )  # fmt: skip
        if leaf in self:
            raise ValueError(
                f"Unable to create dataset {leaf!r} in {self.name!r} (name already exists)"
            )
        _warn_ignored(maxshape=maxshape, **kwds)
        filters = filter_keywords.given(
            (compression, compression_opts, shuffle, fletcher32, scaleoffset)
        )
        dataset = _new_dataset(
            self._state, _join(self._path, leaf), shape, dtype, data, chunks, fillvalue,
            maxshape, filters,
        )  # fmt: skip
        self._add(leaf, dataset)
        return dataset

    def require_dataset(
        self, name: str, shape: Any, dtype: Any, exact: bool = False, **kwds: Any
    ) -> StagedDataset:
        if name not in self:
            return self.create_dataset(name, shape, dtype, **kwds)
        node = self[name]
        if not isinstance(node, StagedDataset):
            raise TypeError(f"Incompatible object ({type(node).__name__}) already exists")
        if tuple(shape) != node.shape:
            raise TypeError(f"Shapes do not match (existing {node.shape} vs new {tuple(shape)})")
        if exact and np.dtype(dtype) != node.dtype:
            raise TypeError(
                f"Datatypes do not exactly match (existing {node.dtype} vs new {dtype})"
            )
        return node

    def __setitem__(self, name: str, value: Any) -> None:
        """``group[name] = array``: a new dataset, or new contents for an existing one.

        Like versioned-hdf5, an existing dataset is replaced wholesale (its shape may
        change) and keeps its chunks, fill value, filters and attributes; its dtype
        cannot change.
        """
        self._check_writable()
        self._check_relative(name, "write dataset")
        parent, leaf = self._parent_for(name, create=True)
        old = parent.get(leaf)
        if not isinstance(old, StagedDataset):
            parent.create_dataset(leaf, data=value)
            return
        values = np.asarray(value, dtype=object if old.dtype.kind == "O" else None)
        if values.ndim == 0:
            raise NotSupportedError(
                f"Scalar datasets are not implemented: cannot replace {old.name!r} with a "
                f"0-d value."
            )
        if not _compatible_dtypes(values.dtype, old.dtype):
            raise MetadataMismatchError(
                f"Cannot replace dataset {old.name!r}: dtypes are not compatible "
                f"({values.dtype} != {old.dtype}); write data of dtype {old.dtype}."
            )
        attrs = dict(old.attrs.items())
        del parent[leaf]
        new = parent.create_dataset(
            leaf, data=values, dtype=old.dtype, chunks=old.chunks, fillvalue=old.fillvalue,
            **{key: old._filter(key) for key in filter_keywords.KEYWORDS},
        )  # fmt: skip
        for key, attr in attrs.items():
            new.attrs[key] = attr

    def __delitem__(self, path: str) -> None:
        self._check_writable()
        parent, leaf = self._parent_for(path, create=False)
        if leaf not in parent:
            raise KeyError(f"Couldn't delete link {path!r}: no such member")
        parent._loaded.pop(leaf, None)
        if parent._base is not None and leaf in parent._base:
            parent._deleted.add(leaf)
        parent._structure_changed = True

    # -- commit -------------------------------------------------------------------

    @property
    def changed(self) -> bool:
        if self._base is None or self._structure_changed or self.attrs.modified:
            return True
        if self._column is not None and self._column.pending:
            return True
        return any(node.changed for node in self._loaded.values())

    def to_commit(self) -> GroupCommit:
        from h5vc.versions import GroupCommit, Link

        if self._column is not None:
            self._column.flush()  # stores its new samples, edits its datasets
        children: dict[str, GroupCommit | DatasetCommit | Link] = {}
        for key in self.keys():
            node = self._loaded.get(key)
            if isinstance(node, StagedDataset):
                children[key] = node.to_commit(_join(self._path, key))
            elif node is not None and node.changed:
                children[key] = node.to_commit()
            elif self._base is not None:  # not loaded or unchanged: it is in the base
                children[key] = Link(self._base, key)
        return GroupCommit(attrs=self.attrs.to_dict(), children=children)

    def close_staging(self, reason: str) -> None:
        """Make this group and everything loaded below it read-only."""
        self._read_only_reason = reason
        self.attrs.read_only_reason = reason
        for node in self._loaded.values():
            node.close_staging(reason)


def _is_column(obj: Any) -> bool:
    """Whether ``obj`` is a sample column (staged or committed); none exists before
    ``h5vc.columns`` is imported, which opening a file does not do."""
    columns = sys.modules.get("h5vc.columns")
    return columns is not None and isinstance(obj, columns.StagedColumn | columns.CommittedColumn)


def member_names(group: h5py.Group) -> list[str]:
    """``list(group)`` in one HDF5 call (h5py asks for each name by its index, which
    HDF5 finds by walking the links again: about 40 us for a group of one member)."""
    names: list[str] = []
    tracked = group.id.get_create_plist().get_link_creation_order() & h5py.h5p.CRT_ORDER_TRACKED
    group.id.links.iterate(
        lambda name: names.append(name.decode("utf-8", "surrogateescape")),
        idx_type=h5py.h5.INDEX_CRT_ORDER if tracked else h5py.h5.INDEX_NAME,
        order=h5py.h5.ITER_INC,
    )
    return names


def _open_writable(parent: h5py.Group, name: str) -> h5py.HLObject:
    """``parent[name]`` of a file open for writing, as h5py opens it but without the
    File object h5py makes to look up the file's mode."""
    oid = h5py.h5o.open(parent.id, name.encode())
    if isinstance(oid, h5py.h5g.GroupID):
        return h5py.Group(oid)
    if isinstance(oid, h5py.h5d.DatasetID):
        return h5py.Dataset(oid)
    return h5py.Datatype(oid)


def _column_or(node: Node) -> Any:
    """``node``, or the column it holds (a group with a column schema)."""
    if not isinstance(node, StagedGroup):
        return node
    if node._column is None:
        if layout.ATTR_COLUMN not in node.attrs:
            return node
        from h5vc.columns import StagedColumn, column_schema

        schema = column_schema(node.attrs, f"Group {node.name!r}")
        if schema is None:
            return node
        node._column = StagedColumn(node._state, node, schema, node.name)
    return node._column


def _compatible_dtypes(new: np.dtype, old: np.dtype) -> bool:
    if old.kind == "O":  # variable-length strings take text of any kind
        return new.kind in "OSU"
    return new == old


def _warn_ignored(**kwds: Any) -> None:
    """Warn about create_dataset keywords versioned datasets ignore (as versioned-hdf5)."""
    for key, value in kwds.items():
        if value is None:
            continue
        if key == "maxshape" and isinstance(value, tuple) and set(value) == {None}:
            continue
        warnings.warn(
            f"The {key} parameter is currently ignored for versioned datasets.",
            UserWarning,
            stacklevel=4,
        )


def _new_dataset(
    state: FileState,
    path: str,
    shape: Any,
    dtype: Any,
    data: Any,
    chunks: Any,
    fillvalue: Any,
    maxshape: Any,
    filters: dict[str, Any],
) -> StagedDataset:
    """A brand-new staged dataset, validated like h5py validates create_dataset."""
    from h5vc.staging import StagedChangesArray  # the staging engine: loaded to write

    if data is not None and not isinstance(data, np.ndarray):
        data = np.asarray(
            data, dtype=None if dtype is None or np.dtype(dtype).kind == "O" else dtype
        )
    if dtype is None:
        # versioned-hdf5 makes float64 (h5py float32, with a deprecation warning): the
        # fill value's own type never decides it, so 0.1 keeps its precision.
        dtype = data.dtype if data is not None else np.dtype("f8")
    dtype = np.dtype(dtype)
    if data is not None and dtype.kind != "O" and data.dtype != dtype:
        data = data.astype(dtype)
    if dtype.kind == "U" or (data is not None and data.dtype.kind == "U"):
        dtype = h5py.string_dtype()
    if shape is None:
        if data is None:
            raise TypeError("One of data, shape or dtype must be specified")
        shape = data.shape
    shape = (int(shape),) if isinstance(shape, int | np.integer) else tuple(int(n) for n in shape)
    if data is not None and int(np.prod(data.shape)) != int(np.prod(shape)):
        raise ValueError(f"Shape tuple is incompatible with data: {shape} vs {data.shape}")
    chunks = _parse_chunks(chunks, shape, dtype, maxshape)
    check_storable(path, dtype, chunks, filters)
    existing = state.stores.compatible(path, dtype, chunks)
    fill = default_fill(dtype) if fillvalue is None else _cast_fill(path, fillvalue, dtype)
    stored_fill = fillvalue if dtype.kind == "O" else fill
    raw_data = existing.raw_data if existing is not None else None
    values = None
    if data is not None:
        values = np.asarray(coerce_value(data, dtype), dtype=dtype if dtype.kind != "O" else object)
        values = values.reshape(shape)
    # A large array is written now, as h5py would: no staged copy of it.
    write_now = values is not None and dtype.kind != "O" and values.nbytes >= WRITE_THROUGH_BYTES
    if values is None or write_now:
        array = StagedChangesArray(
            shape, chunks, dtype if dtype.kind != "O" else np.dtype(object), fill_value=fill
        )
    else:
        array = StagedChangesArray.from_array(values, chunks, fill_value=fill)
    dataset = StagedDataset(
        "/" + path,
        array,
        chunks=chunks,
        fillvalue=stored_fill,
        dtype=dtype,
        attrs=StagedAttributes(None, layout.DATASET_ATTRS),
        raw_data=raw_data,
        filters=filters,
        state=state,
    )
    if (
        values is not None
        and write_now
        and not dataset.write_through(tuple(slice(0, n) for n in shape), values)
    ):
        dataset[...] = values
    return dataset


def _cast_fill(path: str, fillvalue: Any, dtype: np.dtype) -> Any:
    """``fillvalue`` as a value of ``dtype``; a complex one for a real dtype is refused
    (its imaginary part would be dropped)."""
    if dtype.kind not in "cO" and np.iscomplexobj(fillvalue):
        raise InvalidFillValueError(
            f"Expected a real fill value for dataset {path!r} of dtype {dtype}. Got the "
            f"complex {fillvalue!r} instead; pass dtype=complex to keep it."
        )
    return np.asarray(fillvalue, dtype=dtype)[()]


def _parse_chunks(
    chunks: Any, shape: tuple[int, ...], dtype: np.dtype, maxshape: Any
) -> tuple[int, ...]:
    from h5vc.chunking import guess_chunks, parse_chunks  # loaded by the first new dataset

    if not shape:
        raise NotSupportedError(
            "Scalar datasets are not implemented: versioned datasets are chunked, so they "
            "need at least one dimension (store a shape (1,) dataset instead)."
        )
    if chunks is None or chunks is True:
        return guess_chunks(shape, dtype, maxshape)
    if chunks is False:
        raise ValueError(
            "Expected chunks=None, True or a tuple: versioned datasets are always chunked"
        )
    return parse_chunks(chunks, len(shape), f"a dataset of shape {shape}")
