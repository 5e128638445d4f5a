"""The chunk stores of one open versioned root: which exist, which one a dataset
writes to, and what was written to them since the last commit.

:class:`ChunkStores` is owned by :class:`~h5vc.versions.state.FileState`
(``state.stores``).  It opens each :class:`~h5vc.store.rawdata.RawDataStore` once
(its hash index is loaded once), chooses the store a new dataset goes to (a name
created again with another dtype or chunk shape gets an alternate store in h5vc's
layout), and keeps the undo list: every store written since the last commit, with
what takes the writes back.  The transaction (:class:`~h5vc.versions.state.Operation`)
alone takes the writes back; a commit ends them (:meth:`ChunkStores.end_writes`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import h5py
import numpy as np

from h5vc.errors import CorruptDataError
from h5vc.hdf5.damage import damaged
from h5vc.store import (
    RawDataStore,
    first_missing_group,
    layout,
    remove_created_store,
    remove_new_store_tree,
    tree,
)

__all__ = ["ChunkStores"]


class ChunkStores:
    """The chunk stores under ``version_data``, opened on first use.

    ``version_group()`` gives the function that opens a committed version group by
    name (to tell which store a dataset maps; a weak reference, so the owner holding
    these stores is freed as soon as it is unused); ``one_per_name`` is True in
    versioned-hdf5's layout, where a dataset name has one store only (upgrades and
    repairs keep a file in its layout family).
    """

    def __init__(
        self,
        version_data: h5py.Group,
        filename: str,
        *,
        version_group: Callable[[], Callable[[str], h5py.Group] | None],
        one_per_name: bool,
    ):
        self.version_data = version_data
        self.filename = filename
        self._version_group = version_group
        self._one_per_name = one_per_name
        self._stores: dict[str, RawDataStore] = {}
        #: ``version_data``'s name and a slash (read once).
        self._prefix: str | None = None
        #: Dataset path -> keys of its alternate stores (see :meth:`of`).
        self._alternate_keys: dict[str, list[str]] = {}
        #: The undo list: stores written since the last commit (or abort), with what
        #: undoes the writes: a checkpoint, or for a store created meanwhile the
        #: topmost group created ("" when only the store's datasets were).
        self._written: dict[str, tuple[RawDataStore, tuple[int, int, int] | str]] = {}

    def clear(self) -> None:
        """Close every store opened (they hold HDF5 objects open); the undo list stays."""
        self._stores.clear()
        self._alternate_keys.clear()

    def get(self, key: str) -> RawDataStore | None:
        """The chunk store of dataset ``key`` (relative to the version root), if any."""
        key = key.strip("/")
        cached = self._stores.get(key)
        if cached is not None:
            return cached
        where = f"The chunk store {self.version_data.name}/{key}"
        with damaged(self.filename, where):
            group = tree.find_group(self.version_data, key)
            if group is None or not (layout.RAW_DATA in group or layout.HASH_TABLE in group):
                return None
            store = RawDataStore(group)
        self._stores[key] = store
        return store

    def holding(self, path: str, raw_data: h5py.Dataset) -> RawDataStore | None:
        """The store whose raw_data is ``raw_data`` (of dataset ``path``), if open or
        found, without putting it on the undo list."""
        return self.get(self._key_of_raw_data(path.strip("/"), raw_data))

    def of(self, path: str) -> list[tuple[str, RawDataStore]]:
        """``(store key, store)`` of every chunk store of dataset ``path``: its own
        (key ``path``) first, then those of the times it was created again with a
        dtype or chunks the earlier stores could not hold."""
        path = path.strip("/")
        found = []
        for key in [path, *self._alternates(path)]:
            store = self.get(key)
            if store is not None:
                found.append((key, store))
        return found

    def compatible(
        self, path: str, dtype: np.dtype, chunks: tuple[int, ...]
    ) -> RawDataStore | None:
        """The store a new dataset ``path`` of ``dtype`` and ``chunks`` goes to, if one
        exists (None: a new store will be created).

        In h5vc's layout a name is free after a delete: a dataset created again with
        another dtype or chunk shape gets a store of its own.  versioned-hdf5's
        layout (data_version 4) has one store per name, so there it raises
        :class:`~h5vc.errors.MetadataMismatchError`, as versioned-hdf5 does.
        """
        stores = self.of(path)
        for _, store in stores:
            if _compatible(store, dtype, chunks):
                return store
        if stores and self._one_per_name:
            stores[0][1].check_compatible(path, dtype, chunks)  # raises
        return None

    def writable(
        self,
        path: str,
        *,
        dtype: np.dtype,
        chunks: tuple[int, ...],
        fillvalue: Any,
        filters: dict[str, Any],
        raw_data: h5py.Dataset | None = None,
    ) -> RawDataStore:
        """The store of dataset ``path`` to write chunks to, created if there is none.

        ``raw_data`` is the store the staged dataset's chunks already sit on (it was
        opened from a version, or written through); otherwise the store is chosen
        by :meth:`compatible`.  Every store returned goes on the undo list until
        :meth:`end_writes`, so a failed operation can take back what was written.
        """
        path = path.strip("/")
        if raw_data is not None:
            key = self._key_of_raw_data(path, raw_data)
            store = self.get(key)
        else:
            store = self.compatible(path, dtype, chunks)
            key = path if store is None else self._key_of_raw_data(path, store.raw_data)
        if store is not None:
            store.check_compatible(path, dtype, chunks)
            if key not in self._written:
                self._written[key] = (store, store.checkpoint())
            return store
        if self.get(path) is not None or key in self._written:
            key = tree.new_alternate_store(self.version_data, path)
            self._alternate_keys.pop(path, None)
        # What undo removes: the topmost group created with the store, or (when the
        # group exists already, e.g. it held the stores of a replaced subgroup's
        # datasets) the store's own raw_data and hash_table.
        created = first_missing_group(self.version_data, key)
        try:
            store = RawDataStore.create(
                self.version_data,
                key,
                dtype=dtype,
                chunks=chunks,
                fillvalue=fillvalue,
                filters=filters,
            )
        except BaseException:
            remove_created_store(self.version_data, key, created)
            raise
        self._stores[key] = store
        self._written[key] = (store, created)
        return store

    def _alternates(self, path: str) -> list[str]:
        """Keys of the alternate stores of dataset ``path`` (cached)."""
        found = self._alternate_keys.get(path)
        if found is None:
            found = self._alternate_keys[path] = tree.alternate_stores(self.version_data, path)
        return found

    def _key_of_raw_data(self, path: str, raw_data: h5py.Dataset) -> str:
        """The store key of the store holding ``raw_data``."""
        prefix = self._prefix
        if prefix is None:
            prefix = self._prefix = (self.version_data.name or "").rstrip("/") + "/"
        name = raw_data.name or ""
        suffix = "/" + layout.RAW_DATA
        if name.startswith(prefix) and name.endswith(suffix):
            return name[len(prefix) : -len(suffix)]
        raise CorruptDataError(
            f"Expected the chunks of dataset {path!r} in a store under "
            f"{self.version_data.name!r} of {self.filename!r}. Got {name!r}."
        )

    def key(self, version: str, path: str, dataset: h5py.Dataset | None = None) -> str:
        """The key of the store that dataset ``path`` of committed ``version`` maps."""
        path = path.strip("/")
        if not self._alternates(path):
            return path
        if dataset is None:
            open_version = self._version_group()
            assert open_version is not None, "the stores outlived their file state"
            dataset = open_version(version)[path]
        return tree.store_key(self.version_data, path, dataset)

    def require(self, path: str, version: str, dataset: h5py.Dataset | None = None) -> RawDataStore:
        """The chunk store of dataset ``path`` (``dataset``, if given), which ``version``
        holds: it must exist."""
        store = self.get(self.key(version, path, dataset))
        if store is None:
            raise CorruptDataError(
                f"Expected a chunk store ({layout.RAW_DATA!r} and {layout.HASH_TABLE!r}) "
                f"at {self.version_data.name}/{path.strip('/')} of {self.filename!r} for "
                f"dataset {path!r} of version {version!r}. Got none."
            )
        if dataset is not None:
            _check_same_numbers(dataset, store)
        return store

    def end_writes(self, used: set[str] | None = None) -> None:
        """The writes since the last call are committed: nothing to undo any more.

        Stores created meanwhile for a dataset that is not committed after all (it
        was deleted again before the commit) are removed; ``used`` lists the dataset
        paths the commit wrote.
        """
        written, self._written = self._written, {}
        if used is None:
            return
        for key, (_, undo) in written.items():
            if isinstance(undo, str) and _dataset_path(key) not in used:
                self._stores.pop(key, None)
                self._alternate_keys.pop(_dataset_path(key), None)
                remove_new_store_tree(self.version_data, key, undo)

    def undo_writes(self) -> None:
        """Take back every chunk stored since the last commit (the operation failed
        and the file has no journal to roll back): stores created meanwhile are
        removed, the others cut back.  The caller then drops the caches."""
        written, self._written = self._written, {}
        for key, (store, undo) in reversed(written.items()):
            if isinstance(undo, str):
                remove_created_store(self.version_data, key, undo)
            else:
                store.rollback(undo)


def _compatible(store: RawDataStore, dtype: np.dtype, chunks: tuple[int, ...]) -> bool:
    """True if a dataset of ``dtype`` and ``chunks`` can share ``store``."""
    stored = store.raw_data.dtype
    same_dtype = np.dtype(dtype) == stored or (np.dtype(dtype).kind == "O" and stored.kind == "O")
    return tuple(chunks) == store.chunks and same_dtype


def _dataset_path(key: str) -> str:
    """The dataset path a store key belongs to (``ALT_STORES/p/@n`` belongs to ``p``)."""
    if key.startswith(layout.ALT_STORES + "/"):
        return key[len(layout.ALT_STORES) + 1 :].rpartition("/")[0]
    return key


def _check_same_numbers(dataset: h5py.Dataset, store: RawDataStore) -> None:
    """A committed dataset maps its store with the store's own datatype: a number type
    that differs (say in byte order) is a damaged header, which would read wrong values."""
    mine, stored = dataset.dtype, store.dtype
    if mine != stored and mine.kind in "biufc" and stored.kind in "biufc":
        raise CorruptDataError(
            f"{store.raw_data.name} in {store.filename!r} is damaged: its datatype "
            f"{stored} differs from {mine}, the datatype of {dataset.name}, which maps "
            f"it. Run h5vc.verify on the file; restore it from a copy if it was written."
        )
