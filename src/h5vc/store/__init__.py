"""The versioned store: the on-disk layout of every version in one HDF5 file.

This package is the only code that creates or deletes HDF5 objects of the layout
(version groups, the groups and virtual datasets of a version, hard links, chunk
stores, attributes of the layout).  The layers above it, :mod:`h5vc.versions` and
:mod:`h5vc.lifecycle`, use it through this face only: ``from h5vc.store import
...`` with the names of ``__all__`` below (tests/internals/test_store_face.py checks
that they import no submodule and call no ``create_group``, ``create_dataset`` or
``del`` on HDF5 objects themselves).

What the face offers, by module of the package:

* the layout itself: ``layout`` (names, attributes and ``data_version`` numbers of
  the format, constants only);
* the versioned tree: ``tree`` (version groups, links, attributes and their walks;
  the most used of its functions are also named here), ``timeindex`` (the time
  index of commits), ``refattrs`` (branches and tags as attributes), ``legacy``
  (repairs of versioned-hdf5's older layouts);
* creating and deleting objects: :mod:`~h5vc.store.objects` (version groups,
  subgroups, scratch groups, taking back a chunk store created since the last
  commit), :func:`create_virtual_dataset`, :func:`rebuild_virtual_dataset`,
  :meth:`RawDataStore.create`, :func:`copy_compacted` (a repacked copy);
* chunks: :class:`RawDataStore` (one dataset's deduplicated chunks and hash
  table), :class:`ChunkMap` (which slot each chunk of a version maps), the slot
  moves of deletes and compaction (:func:`compact_store`, :func:`move_slots`,
  :func:`erase_slots`, :func:`slot_windows`);
* reading: :func:`staged_array`, :func:`read_fill`, :func:`read_chunk_map`;
* file space: :data:`FILE_SPACE_OPTIONS`, :func:`file_space`.

The byte-level HDF5 mechanics live one floor down, in :mod:`h5vc.hdf5`.

Each name is imported from its module on first use (PEP 562), so that opening a file
and reading a version loads the reading modules only, not the writers, the compaction
or the repairs of older layouts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from h5vc.lazy import lazy_names

if TYPE_CHECKING:
    from h5vc.store import layout as layout
    from h5vc.store import legacy as legacy
    from h5vc.store import refattrs as refattrs
    from h5vc.store import timeindex as timeindex
    from h5vc.store import tree as tree
    from h5vc.store.attributes import read_attributes as read_attributes
    from h5vc.store.chunkmap import ChunkMap as ChunkMap
    from h5vc.store.chunkmap import grid_shape as grid_shape
    from h5vc.store.compact import COPY_BUDGET_BYTES as COPY_BUDGET_BYTES
    from h5vc.store.compact import compact_store as compact_store
    from h5vc.store.compact import erase_slots as erase_slots
    from h5vc.store.compact import move_slots as move_slots
    from h5vc.store.compact import slot_windows as slot_windows
    from h5vc.store.copying import copy_compacted as copy_compacted
    from h5vc.store.legacy import RebuiltTables as RebuiltTables
    from h5vc.store.objects import create_subgroup as create_subgroup
    from h5vc.store.objects import create_version_group as create_version_group
    from h5vc.store.objects import delete_version_group as delete_version_group
    from h5vc.store.objects import first_missing_group as first_missing_group
    from h5vc.store.objects import remove_created_store as remove_created_store
    from h5vc.store.objects import remove_group as remove_group
    from h5vc.store.objects import remove_new_store_tree as remove_new_store_tree
    from h5vc.store.objects import scratch_group as scratch_group
    from h5vc.store.rawdata import RawDataStore as RawDataStore
    from h5vc.store.reading import read_fill as read_fill
    from h5vc.store.reading import staged_array as staged_array
    from h5vc.store.space import FILE_SPACE_OPTIONS as FILE_SPACE_OPTIONS
    from h5vc.store.space import FileSpace as FileSpace
    from h5vc.store.space import file_space as file_space
    from h5vc.store.tree import DatasetObject as DatasetObject
    from h5vc.store.tree import collect_datasets as collect_datasets
    from h5vc.store.tree import dataset_chunks as dataset_chunks
    from h5vc.store.tree import find as find
    from h5vc.store.tree import join_path as join_path
    from h5vc.store.tree import object_address as object_address
    from h5vc.store.tree import rebuild_virtual_dataset as rebuild_virtual_dataset
    from h5vc.store.tree import store_paths as store_paths
    from h5vc.store.vds import create_virtual_dataset as create_virtual_dataset
    from h5vc.store.vds import read_chunk_map as read_chunk_map
    from h5vc.store.vds import source_name as source_name

#: The submodules named by the face (the package's own modules).
_SUBMODULES = frozenset({"layout", "legacy", "refattrs", "timeindex", "tree"})
#: The other names of the face, each with the module that defines it.
_NAMES: dict[str, str] = {
    "read_attributes": "h5vc.store.attributes",
    "ChunkMap": "h5vc.store.chunkmap",
    "grid_shape": "h5vc.store.chunkmap",
    "COPY_BUDGET_BYTES": "h5vc.store.compact",
    "compact_store": "h5vc.store.compact",
    "erase_slots": "h5vc.store.compact",
    "move_slots": "h5vc.store.compact",
    "slot_windows": "h5vc.store.compact",
    "copy_compacted": "h5vc.store.copying",
    "RebuiltTables": "h5vc.store.legacy",
    "create_subgroup": "h5vc.store.objects",
    "create_version_group": "h5vc.store.objects",
    "delete_version_group": "h5vc.store.objects",
    "first_missing_group": "h5vc.store.objects",
    "remove_created_store": "h5vc.store.objects",
    "remove_group": "h5vc.store.objects",
    "remove_new_store_tree": "h5vc.store.objects",
    "scratch_group": "h5vc.store.objects",
    "RawDataStore": "h5vc.store.rawdata",
    "read_fill": "h5vc.store.reading",
    "staged_array": "h5vc.store.reading",
    "FILE_SPACE_OPTIONS": "h5vc.store.space",
    "FileSpace": "h5vc.store.space",
    "file_space": "h5vc.store.space",
    "DatasetObject": "h5vc.store.tree",
    "collect_datasets": "h5vc.store.tree",
    "dataset_chunks": "h5vc.store.tree",
    "find": "h5vc.store.tree",
    "join_path": "h5vc.store.tree",
    "object_address": "h5vc.store.tree",
    "rebuild_virtual_dataset": "h5vc.store.tree",
    "store_paths": "h5vc.store.tree",
    "create_virtual_dataset": "h5vc.store.vds",
    "read_chunk_map": "h5vc.store.vds",
    "source_name": "h5vc.store.vds",
}

__all__ = sorted({*_SUBMODULES, *_NAMES})


__getattr__, __dir__ = lazy_names(__name__, _NAMES, _SUBMODULES)
