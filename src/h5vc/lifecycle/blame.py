"""Blame: which version last changed each chunk region of a dataset.

Decided from chunk maps and SHA-256 digests alone; no array data is read.  The walk
starts at the asked version with every selected chunk *pending* and goes through the
history in topological order (every version after all its children).  At a version,
a pending chunk whose content and extent are the same in a parent (an equal
``raw_data`` slot, or equal digests of two slots) passes to that parent, first
parent first, as ``git blame`` passes lines; the chunks that no parent holds
unchanged were changed by that version.  A dataset that is the same HDF5 object in
a parent (h5vc hard-links unchanged datasets) passes every pending chunk without
looking at its chunk map.  The walk stops as soon as nothing is pending.

The unit is the chunk: a chunk region is blamed on the last version that changed
any element of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import h5py
import ndindex
import numpy as np

from h5vc.errors import DatasetNotFoundError
from h5vc.hdf5.mappings import stored_mappings, stored_shape
from h5vc.store import ChunkMap, find, grid_shape, object_address, read_chunk_map
from h5vc.versions import FileState

__all__ = ["Blame", "BlameRegion", "blame"]


@dataclass(frozen=True, slots=True)
class BlameRegion:
    """One chunk region (clipped to the dataset's shape) and the version that last
    changed it."""

    region: tuple[slice, ...]
    version: str

    def describe(self) -> str:
        return "[" + ", ".join(f"{s.start}:{s.stop}" for s in self.region) + "]"


@dataclass(frozen=True)
class Blame:
    """The result of :func:`blame` for dataset ``path`` of ``version``."""

    path: str
    version: str
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    #: The version that last changed each chunk (an object array over the chunk grid;
    #: None for chunks the selection does not touch).
    chunk_versions: np.ndarray
    #: Versions whose chunk maps were looked at (the walk stops when nothing is pending).
    versions_visited: int

    @property
    def regions(self) -> list[BlameRegion]:
        """The selected chunk regions, in C order of their chunks."""
        found = []
        for coords in np.argwhere(self.chunk_versions != None).tolist():  # noqa: E711
            region = tuple(
                slice(i * c, min((i + 1) * c, n))
                for i, c, n in zip(coords, self.chunks, self.shape)
            )
            found.append(BlameRegion(region, self.chunk_versions[tuple(coords)]))
        return found

    def version_of(self, *element: int) -> str | None:
        """The version that last changed the chunk holding ``element``."""
        coords = tuple(int(i) // c for i, c in zip(element, self.chunks))
        return self.chunk_versions[coords]


def selected_chunks(shape: tuple[int, ...], chunks: tuple[int, ...], index: Any) -> np.ndarray:
    """A boolean mask over the chunk grid: the chunks that ``index`` touches."""
    grid = grid_shape(shape, chunks)
    idx = ndindex.ndindex(index).expand(shape)
    args = idx.args
    if all(isinstance(a, ndindex.Slice | ndindex.Integer) for a in args) and len(args) == len(
        shape
    ):
        axes = []
        for arg, c, n in zip(args, chunks, shape):
            if isinstance(arg, ndindex.Integer):
                touched = np.array([arg.raw // c])
            else:
                start, stop, step = arg.raw.indices(n)
                if start == stop:
                    touched = np.zeros(0, dtype=np.int64)
                elif abs(step) <= c:  # every chunk between the ends
                    low, high = sorted((start, stop - step))
                    touched = np.arange(low // c, high // c + 1)
                else:
                    touched = np.unique(np.arange(start, stop, step) // c)
            axes.append(touched)
        mask = np.zeros(grid, dtype=bool)
        if all(len(a) for a in axes):
            mask[np.ix_(*axes)] = True
        return mask
    mask = np.zeros(grid, dtype=bool)
    for sub in ndindex.ChunkSize(chunks).as_subchunks(idx, shape):
        mask[tuple(s.start // c for s, c in zip(sub.args, chunks))] = True
    return mask


def _extents(shape: tuple[int, ...], chunks: tuple[int, ...], coords: np.ndarray) -> np.ndarray:
    """The extent of each chunk (rows of ``coords``) along each axis, within ``shape``."""
    starts = coords * np.asarray(chunks, dtype=np.int64)
    return np.clip(np.asarray(shape, dtype=np.int64) - starts, 0, np.asarray(chunks))


def _slots_at(chunk_map: ChunkMap, coords: np.ndarray) -> np.ndarray:
    """The slot of each chunk (rows of ``coords``); -2 outside the map's grid."""
    grid = np.asarray(chunk_map.slots.shape, dtype=np.int64)
    inside = (coords < grid).all(axis=1)
    out = np.full(len(coords), -2, dtype=np.int64)
    if inside.any():
        out[inside] = chunk_map.slots[tuple(coords[inside].T)]
    return out


@dataclass(frozen=True)
class _Stored:
    """What :func:`read_chunk_map` needs of a dataset, read from the file's bytes."""

    name: str
    shape: tuple[int, ...]


class _Walk:
    """Datasets and chunk maps of one path along the walk.

    In a file opened read-only a version's dataset is not opened: its address comes
    from its link, its shape and mappings from the file's bytes (HDF5 decodes every
    mapping when it opens a virtual dataset, which costs far more than the walk).
    """

    def __init__(self, state: FileState, path: str):
        self.state = state
        self.path = path
        parent_path, _, self.name = path.rpartition("/")
        self.parent_path = parent_path
        self.digests: dict[str, np.ndarray] = {}
        #: version -> (group holding the dataset, its address); dropped once done.
        self.found: dict[str, tuple[h5py.Group, int] | None] = {}
        self.maps: dict[int, ChunkMap] = {}

    def locate(self, version: str) -> tuple[h5py.Group, int] | None:
        """The group holding the dataset in ``version`` and the dataset's address."""
        if version in self.found:
            return self.found[version]
        group = self.state.versions[version]
        if self.parent_path:
            group = find(group, self.parent_path)
        found = None
        if isinstance(group, h5py.Group) and self.name in group:
            info = group.id.links.get_info(self.name.encode())
            if info.type == h5py.h5l.TYPE_HARD:
                found = (group, int(info.u))
            else:
                found = (group, object_address(group[self.name]))
        self.found[version] = found
        return found

    def chunk_map(self, version: str) -> ChunkMap | None:
        """The chunk map of the dataset in ``version`` (None: not a dataset there)."""
        found = self.locate(version)
        if found is None:
            return None
        group, address = found
        cached = self.maps.get(address)
        if cached is not None:
            return cached
        state = self.state
        mappings = stored_mappings(group, self.name)
        shape = None if mappings is None else stored_shape(group, self.name)
        store = None if shape is None else state.stores.get(state.stores.key(version, self.path))
        if mappings is not None and shape is not None and store is not None:
            stored = _Stored(f"{group.name}/{self.name}", shape)
            chunk_map = read_chunk_map(stored, store.chunks, mappings)  # type: ignore[arg-type]
        else:
            dataset = group[self.name]
            if not isinstance(dataset, h5py.Dataset):
                self.found[version] = None
                return None
            chunk_map = state.chunk_maps.get(version, self.path, dataset)
        self.maps[address] = chunk_map
        return chunk_map

    def digest_table(self, key: str) -> np.ndarray:
        table = self.digests.get(key)
        if table is None:
            store = self.state.stores.get(key)
            table = self.digests[key] = (
                np.zeros(0, dtype="V32") if store is None else store.slot_digests()
            )
        return table


def blame(state: FileState, version: str, path: str, index: Any = ...) -> Blame:
    """Which version last changed each chunk region of dataset ``path`` of ``version``
    that ``index`` touches (default: every chunk); see the module's description."""
    path = path.strip("/")
    walk = _Walk(state, path)
    start_map = walk.chunk_map(version)
    if start_map is None:
        raise DatasetNotFoundError(f"Expected a dataset {path!r} in version {version!r}. Got none.")
    shape, chunks = start_map.shape, start_map.chunks
    grid = grid_shape(shape, chunks)
    selected = selected_chunks(shape, chunks, index)
    owners = np.full(grid, None, dtype=object)
    flat_owners = owners.reshape(-1)
    pending: dict[str, np.ndarray] = {}
    first = np.flatnonzero(selected.reshape(-1))
    if len(first):
        pending[version] = first
    visited = 0
    for name in state.log.topological(version):
        here = pending.pop(name, None)
        if here is None:
            if not pending:
                break
            continue
        visited += 1
        found = walk.locate(name)
        assert found is not None  # a chunk is passed only to a version holding it
        address = found[1]
        key = state.stores.key(name, path)
        for parent in state.log.parents(name):
            if not len(here):
                break
            theirs = walk.locate(parent)
            if theirs is None:
                continue
            if theirs[1] == address:
                _pass(pending, parent, here)
                here = here[:0]
                break
            parent_map = walk.chunk_map(parent)
            if parent_map is None or state.stores.key(parent, path) != key:
                continue  # not a dataset, or created again with another dtype or chunks
            chunk_map = walk.chunk_map(name)
            assert chunk_map is not None
            same = _unchanged(walk, key, chunk_map, parent_map, here, grid)
            _pass(pending, parent, here[same])
            here = here[~same]
        walk.found.pop(name, None)
        flat_owners[here] = name
    return Blame(path, version, shape, chunks, owners, visited)


def _pass(pending: dict[str, np.ndarray], parent: str, chunks: np.ndarray) -> None:
    if not len(chunks):
        return
    known = pending.get(parent)
    pending[parent] = chunks if known is None else np.union1d(known, chunks)


def _unchanged(
    walk: _Walk,
    key: str,
    mine: ChunkMap,
    theirs: ChunkMap,
    here: np.ndarray,
    grid: tuple[int, ...],
) -> np.ndarray:
    """Whether each chunk of ``here`` (flat indices into ``grid``, the grid of the
    version blamed) has the same content and extent in ``theirs`` as in ``mine``."""
    if mine.shape == theirs.shape and mine.slots.shape == grid:
        # The usual case: compare whole maps (contiguous), then look at the few
        # chunks whose slot differs.
        a, b = mine.slots.reshape(-1), theirs.slots.reshape(-1)
        differ = np.flatnonzero(a != b)
        same = np.ones(len(here), dtype=bool)
        if len(differ):
            hit = np.flatnonzero(np.isin(here, differ))
            same[hit] = _same_content(walk, key, a[here[hit]], b[here[hit]])
        return same
    coords = np.stack(np.unravel_index(here, grid), axis=1).astype(np.int64)
    a, b = _slots_at(mine, coords), _slots_at(theirs, coords)
    same = _same_content(walk, key, a, b)
    same &= b != -2
    same &= (
        _extents(mine.shape, mine.chunks, coords) == _extents(theirs.shape, mine.chunks, coords)
    ).all(axis=1)
    return same


def _same_content(walk: _Walk, key: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Whether slots ``a`` and ``b`` hold the same chunk: equal slots, or equal digests."""
    same = a == b
    both = ~same & (a >= 0) & (b >= 0)
    if both.any():
        table = walk.digest_table(key)
        inside = both & (a < len(table)) & (b < len(table))
        same[inside] = table[a[inside]] == table[b[inside]]
    return same
