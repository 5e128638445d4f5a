"""The chunk maps of committed datasets, parsed once per open versioned root.

:class:`ChunkMapCache` is owned by :class:`~h5vc.versions.state.FileState`
(``state.chunk_maps``).  A map is found by ``(version, path)`` and, since a dataset
hard-linked into later versions is one object, by its object address: a dataset
edited every n-th commit is not parsed again.  Object addresses are reused once an
object is freed, so the cache is cleared whenever objects are deleted (the state's
``drop_caches``, the one place every cache is dropped).
"""

from __future__ import annotations

import h5py

import h5vc.config as config
from h5vc.errors import CorruptDataError
from h5vc.hdf5.damage import damaged
from h5vc.hdf5.mappings import Mappings, StoredVirtual, stored_virtual
from h5vc.store import ChunkMap, read_chunk_map, tree
from h5vc.versions.cache import LRUCache
from h5vc.versions.stores import ChunkStores

__all__ = ["CACHED_CHUNK_MAPS", "ChunkMapCache"]

#: Chunk maps kept per open file.
CACHED_CHUNK_MAPS = config.CACHED_CHUNK_MAPS


class ChunkMapCache:
    """Chunk maps by ``(version, path)`` and by object address; ``stores`` checks
    that a map's slots lie in its store."""

    def __init__(self, stores: ChunkStores, filename: str, size: int = CACHED_CHUNK_MAPS):
        self._stores = stores
        self.filename = filename
        self._by_name: LRUCache[tuple[str, str], ChunkMap] = LRUCache(size)
        self._by_address: LRUCache[int, ChunkMap] = LRUCache(size)
        #: ``(version, path)`` of datasets written here with no attribute but the
        #: layout's (a staged copy needs not look for others).
        self._plain: LRUCache[tuple[str, str], bool] = LRUCache(size)
        #: Global heap collections of mappings read (by address), while the file's
        #: bytes are what they were (see :func:`~h5vc.hdf5.mappings.header_mappings`).
        self._collections: dict[int, dict[int, bytes]] = {}

    def clear(self) -> None:
        self._by_name.clear()
        self._by_address.clear()
        self._plain.clear()
        self._collections.clear()

    def mappings_before_open(
        self, version: str, path: str, group: h5py.Group, name: str
    ) -> Mappings | None:
        """The mappings of dataset ``group[name]`` (``path`` in ``version``) read from
        the file before HDF5 opens it (see :mod:`h5vc.hdf5.mappings`), unless its
        chunk map is known already (then HDF5 has opened it before)."""
        stored = self.virtual_before_open(version, path, group, name)
        return None if stored is None else stored.mappings

    def virtual_before_open(
        self, version: str, path: str, group: h5py.Group, name: str
    ) -> StoredVirtual | None:
        """:meth:`mappings_before_open` with the dataset's shape and datatype message."""
        if self._by_name.get((version, path.strip("/"))) is not None:
            return None
        try:
            if not group.id.links.exists(name.encode()):
                return None  # the caller reports the missing member
            info = group.id.links.get_info(name.encode())
        except (KeyError, RuntimeError):  # a path through a missing or damaged group
            return None
        if info.type == h5py.h5l.TYPE_HARD and self._by_address.get(int(info.u)):
            return None
        return stored_virtual(group, name, self._collections)

    def known(self, version: str, path: str) -> ChunkMap | None:
        """The chunk map of dataset ``path`` of ``version`` if parsed (and checked)
        or written already, without opening the dataset; else None."""
        return self._by_name.get((version, path.strip("/")))

    def get(
        self, version: str, path: str, dataset: h5py.Dataset, mappings: Mappings | None = None
    ) -> ChunkMap:
        """The chunk map of ``dataset`` (``path`` in ``version``), parsed once (from
        ``mappings`` if given, see :meth:`mappings_before_open`)."""
        key = (version, path.strip("/"))
        cached = self._by_name.get(key)
        if cached is None:
            address = tree.object_address(dataset)
            cached = self._by_address.get(address)
            if cached is None:
                where = f"Dataset {path!r} of version {version!r} ({dataset.name})"
                with damaged(self.filename, where):
                    cached = read_chunk_map(dataset, tree.dataset_chunks(dataset), mappings)
                self._check_slots(version, path, cached, dataset)
                self._by_address[address] = cached
            self._by_name[key] = cached
        return cached

    def _check_slots(
        self, version: str, path: str, chunk_map: ChunkMap, dataset: h5py.Dataset
    ) -> None:
        """Raise unless every slot of ``chunk_map`` lies in the dataset's raw_data."""
        highest = int(chunk_map.slots.max(initial=-1))
        if highest < 0:
            return
        store = self._stores.require(path, version, dataset)
        rows = store.raw_data.shape[0]
        if highest * store.chunks[0] >= rows:
            raise CorruptDataError(
                f"Expected the virtual dataset {path!r} of version {version!r} in "
                f"{self.filename!r} to map rows of {store.raw_data.name!r} (it has "
                f"{rows}). Got a mapping of slot {highest}, rows from "
                f"{highest * store.chunks[0]}."
            )

    def remember(
        self,
        version: str,
        path: str,
        dataset: h5py.Dataset,
        chunk_map: ChunkMap,
        *,
        plain: bool = False,
    ) -> None:
        """Cache the chunk map of ``dataset``, just written as ``path`` of ``version``;
        ``plain``: it was written with no attribute but the layout's."""
        key = (version, path.strip("/"))
        self._by_name[key] = chunk_map
        self._by_address[tree.object_address(dataset)] = chunk_map
        if plain or key in self._plain:
            self._plain[key] = plain

    def plain(self, version: str, path: str) -> bool:
        """Whether dataset ``path`` of ``version`` was written here with no attribute
        but the layout's (see :meth:`remember`)."""
        return self._plain.get((version, path.strip("/"))) is True
