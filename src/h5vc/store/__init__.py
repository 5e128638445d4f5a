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
"""

from h5vc.store import layout, legacy, refattrs, timeindex, tree
from h5vc.store.attributes import read_attributes
from h5vc.store.chunkmap import ChunkMap, grid_shape
from h5vc.store.compact import (
    COPY_BUDGET_BYTES,
    compact_store,
    erase_slots,
    move_slots,
    slot_windows,
)
from h5vc.store.copying import copy_compacted
from h5vc.store.legacy import RebuiltTables
from h5vc.store.objects import (
    create_subgroup,
    create_version_group,
    delete_version_group,
    first_missing_group,
    remove_created_store,
    remove_group,
    remove_new_store_tree,
    scratch_group,
)
from h5vc.store.rawdata import RawDataStore
from h5vc.store.reading import read_fill, staged_array
from h5vc.store.space import FILE_SPACE_OPTIONS, FileSpace, file_space
from h5vc.store.tree import (
    DatasetObject,
    collect_datasets,
    dataset_chunks,
    find,
    join_path,
    object_address,
    rebuild_virtual_dataset,
    store_paths,
)
from h5vc.store.vds import create_virtual_dataset, read_chunk_map, source_name

__all__ = [
    "COPY_BUDGET_BYTES",
    "FILE_SPACE_OPTIONS",
    "ChunkMap",
    "DatasetObject",
    "FileSpace",
    "RawDataStore",
    "RebuiltTables",
    "collect_datasets",
    "compact_store",
    "copy_compacted",
    "create_subgroup",
    "create_version_group",
    "create_virtual_dataset",
    "dataset_chunks",
    "delete_version_group",
    "erase_slots",
    "file_space",
    "find",
    "first_missing_group",
    "grid_shape",
    "join_path",
    "layout",
    "legacy",
    "move_slots",
    "object_address",
    "read_attributes",
    "read_chunk_map",
    "read_fill",
    "rebuild_virtual_dataset",
    "refattrs",
    "remove_created_store",
    "remove_group",
    "remove_new_store_tree",
    "scratch_group",
    "slot_windows",
    "source_name",
    "staged_array",
    "store_paths",
    "timeindex",
    "tree",
]
