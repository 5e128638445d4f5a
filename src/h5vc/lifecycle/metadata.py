"""Rewriting one dataset's storage settings across every version.

``modify_metadata`` builds a new ``raw_data`` + ``hash_table`` for the dataset
in a scratch group, then swaps them in and rebuilds the dataset's virtual
dataset in every version (once per object; hard links are relinked), keeping
its user attributes with their exact HDF5 types.

* Same chunk shape: each stored slot is read once (in windows of at most
  ``COPY_BUDGET_BYTES``), converted, hashed and stored; every version's chunk
  map is renumbered with a numpy lookup.  Work is O(stored chunks).
* New chunk shape: each version's new chunk grid is filled chunk by chunk.  A
  new chunk is identified by its position, extent and the old slots it covers,
  so a chunk shared by many versions is read, hashed and stored only once.

Values are converted with a round-trip check, so a ``dtype`` that cannot hold
the data raises :class:`~h5vc.errors.MetadataMismatchError`; every check runs
before the swap, so a failing call leaves the file as it was.  Chunks that were
never written (unmapped fill) read as the new fill value; stored values are
kept as they are.
"""

from __future__ import annotations

import itertools
from typing import Any

import h5py
import numpy as np

from h5vc.chunking import guess_chunks, parse_chunks
from h5vc.errors import (
    DatasetNotFoundError,
    InvalidOptionError,
    MetadataMismatchError,
    MissingOptionError,
)
from h5vc.hdf5 import filters as filter_keywords
from h5vc.store import (
    COPY_BUDGET_BYTES,
    ChunkMap,
    DatasetObject,
    RawDataStore,
    collect_datasets,
    grid_shape,
    layout,
    rebuild_virtual_dataset,
    remove_group,
    scratch_group,
    slot_windows,
    staged_array,
)
from h5vc.versions import FileState, resolve_state

__all__ = ["modify_metadata"]

SCRATCH = "__h5vc_rewrite__"


class _Keep:
    """Default of a filter keyword: keep the setting as it is."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()


def modify_metadata(
    f: Any,
    dataset_name: str,
    chunks: tuple[int, ...] | int | bool | None = None,
    compression: Any = KEEP,
    compression_opts: Any = KEEP,
    dtype: Any = None,
    fillvalue: Any = None,
    *,
    scaleoffset: Any = KEEP,
    shuffle: Any = KEEP,
    fletcher32: Any = KEEP,
) -> None:
    """Rewrite dataset ``dataset_name`` in every version with new storage settings.

    ``chunks``, ``dtype`` and ``fillvalue`` left at ``None`` and filter keywords
    left out keep a setting as it is; ``compression=None`` removes compression
    (``chunks=True`` picks a chunk shape).  A new fill value also replaces stored
    values equal to the old one, as versioned-hdf5 does.  Raises
    :class:`~h5vc.lifecycle.DatasetNotFoundError` (a ``KeyError``) if no version
    has the dataset, :class:`~h5vc.errors.InvalidOptionError` for a bad chunk
    shape or compression, and :class:`~h5vc.errors.MetadataMismatchError` if
    the data does not fit ``dtype``.  On error the file is unchanged.
    """
    state = resolve_state(f)
    state.check_writable(f"modify the metadata of {dataset_name!r}")
    path = str(dataset_name).strip("/")
    # One group of objects per chunk store: a dataset created again with another
    # dtype or chunks has a store of its own; each is rewritten.
    found = collect_datasets(state.versions, state.log.names(), only_path=path)
    groups = [
        (key, store, list(objects.values()))
        for key, objects in found.items()
        if objects and (store := state.stores.get(key)) is not None
    ]
    if not groups:
        raise DatasetNotFoundError(
            f"Cannot modify dataset {dataset_name!r}: expected a dataset path present in "
            f"at least one version. Got a path that no version of "
            f"{state.root.file.filename!r} has."
        )
    given = (compression, compression_opts, shuffle, fletcher32, scaleoffset)
    filters = dict(zip(filter_keywords.KEYWORDS, given, strict=True))
    changes = []
    for key, store, objects in groups:
        old = _Settings.of(store, objects[0].open())
        wanted = chunks
        if chunks is True:
            shape = tuple(max(n) for n in zip(*(obj.chunk_map().shape for obj in objects)))
            wanted = guess_chunks(shape, old.dtype)
        new = old.updated(path, wanted, filters, dtype, fillvalue)
        if new != old:
            changes.append((key, store, objects, old, new))
    if not changes:
        return
    with state.operation(moves_chunks=True):  # stores and virtual datasets are replaced
        for key, store, objects, old, new in changes:
            _modify_store(state, path, key, store, objects, old, new)


def _modify_store(
    state: FileState,
    path: str,
    key: str,
    store: RawDataStore,
    objects: list[DatasetObject],
    old: _Settings,
    new: _Settings,
) -> None:
    """Rewrite one chunk store of ``path`` (key ``key``) and its objects with ``new``."""
    scratch = scratch_group(state.version_data, SCRATCH)
    try:
        new_store = _create_store(scratch, key, new)
        maps = _rewrite(state, store, new_store, objects, old, new)
    except BaseException:
        if state.root.id.valid:
            remove_group(state.version_data, SCRATCH)
        raise
    _swap(state, path, new_store, objects, maps, new)
    remove_group(state.version_data, SCRATCH)


class _Settings:
    """Storage settings of one dataset: chunks, dtype, fill value and filters."""

    def __init__(self, chunks: tuple[int, ...], dtype: np.dtype, fill: Any, filters: dict):
        self.chunks = chunks
        self.dtype = dtype
        self.fill = fill
        self.filters = filters

    @classmethod
    def of(cls, store: RawDataStore, dataset: h5py.Dataset) -> _Settings:
        return cls(store.chunks, store.raw_data.dtype, dataset.fillvalue, store.filters())

    def same_fill(self, other: _Settings) -> bool:
        return self.dtype.kind == "O" or np.array_equal(
            np.asarray(self.fill), np.asarray(other.fill), equal_nan=self.dtype.kind in "fc"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Settings):
            return NotImplemented
        return (
            self.chunks == other.chunks
            and self.dtype == other.dtype
            and self.same_fill(other)
            and self.filters == other.filters
        )

    def updated(
        self, path: str, chunks: Any, changes: dict[str, Any], dtype: Any, fill: Any
    ) -> _Settings:
        new_chunks = (
            self.chunks
            if chunks is None
            else parse_chunks(
                chunks, len(self.chunks), f"dataset {path!r} (stored with chunks {self.chunks})"
            )
        )
        new_dtype = self.dtype if dtype is None else _parse_dtype(path, dtype)
        filters = _updated_filters(self.filters, changes)
        source_fill = self.fill if fill is None else fill
        new_fill = None if new_dtype.kind == "O" else _convert_fill(path, source_fill, new_dtype)
        return _Settings(new_chunks, new_dtype, new_fill, filters)


def _updated_filters(filters: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """The filter keywords after ``changes`` (``KEEP``: as it is; None/False: removed)."""
    result = dict(filters)
    compression = changes["compression"]
    if compression is not KEEP and compression != result.get("compression"):
        result.pop("compression_opts", None)  # the options of another filter
    for key, value in changes.items():
        if value is KEEP:
            continue
        if value is None or value is False:
            result.pop(key, None)
        else:
            result[key] = value
    if "compression" not in result and "compression_opts" in result:
        raise MissingOptionError(
            f"Expected compression= with compression_opts={result['compression_opts']!r}: "
            f"the dataset is not compressed. Got no compression method."
        )
    return result


def _parse_dtype(path: str, dtype: Any) -> np.dtype:
    try:
        parsed = np.dtype(dtype)
    except TypeError as err:
        raise InvalidOptionError(f"Expected a dtype for {path!r}. Got {dtype!r} instead.") from err
    if parsed.kind == "U":
        return h5py.string_dtype()
    if parsed.kind == "O" and h5py.check_string_dtype(parsed) is None:
        raise InvalidOptionError(
            f"Expected a numeric, fixed-length string or h5py.string_dtype() dtype for "
            f"{path!r}. Got {parsed} instead."
        )
    return parsed


def _convert_fill(path: str, fill: Any, dtype: np.dtype) -> Any:
    value = np.asarray(b"" if fill is None else fill)
    try:
        converted = _convert(value, dtype)
    except MetadataMismatchError as err:
        raise MetadataMismatchError(
            f"The fill value of dataset {path!r} does not fit dtype {dtype}: expected a "
            f"value it holds exactly. Got {fill!r} instead."
        ) from err
    return converted[()]


def _convert(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``values`` as ``dtype``; raise unless they convert back to the same values."""
    if values.dtype == dtype:
        return values
    target = np.dtype(object) if dtype.kind == "O" else dtype
    with np.errstate(all="ignore"):
        try:
            converted = values.astype(target)
            back = converted.astype(values.dtype) if values.dtype.kind != "O" else converted
        except (TypeError, ValueError, UnicodeError, OverflowError) as err:
            raise MetadataMismatchError(
                f"Expected values that dtype {dtype} can hold. Got values of dtype "
                f"{values.dtype} that do not convert ({err})."
            ) from err
    if values.dtype.kind == "O" and dtype.kind == "S":
        back = converted.astype(object)
    nan = values.dtype.kind in "fc"
    outside = _out_of_range(values, dtype)
    if not np.array_equal(back, values, equal_nan=nan) or outside.any():
        wrong = (back.ravel() != values.ravel()) | outside.ravel()
        bad = values.ravel()[np.flatnonzero(wrong)[:3]]
        raise MetadataMismatchError(
            f"Expected values that dtype {dtype} can hold exactly. Got values such as "
            f"{bad.tolist()} (dtype {values.dtype}) that it cannot."
        )
    return converted


def _out_of_range(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Which integers do not fit an integer ``dtype`` (a round trip alone misses
    wrap-around: 200 as uint8 -> -56 as int8 -> 200)."""
    if values.dtype.kind not in "iu" or dtype.kind not in "iu":
        return np.zeros(values.shape, dtype=bool)
    info = np.iinfo(dtype)
    wide = values.astype(object) if values.dtype.itemsize >= 8 else values.astype(np.int64)
    return np.asarray((wide < info.min) | (wide > info.max), dtype=bool)


def _create_store(scratch: h5py.Group, path: str, new: _Settings) -> RawDataStore:
    try:
        return RawDataStore.create(
            scratch,
            path,
            dtype=new.dtype,
            chunks=new.chunks,
            fillvalue=new.fill,
            filters=new.filters,
        )
    except (ValueError, TypeError) as err:
        raise InvalidOptionError(
            f"Cannot store dataset {path!r} with chunks {new.chunks}, dtype {new.dtype} "
            f"and filters {new.filters}: {err}"
        ) from err


def _rewrite(
    state: FileState,
    old_store: RawDataStore,
    new_store: RawDataStore,
    objects: list[DatasetObject],
    old: _Settings,
    new: _Settings,
) -> list[ChunkMap]:
    """Fill ``new_store``; return the new chunk map of each object."""
    maps = [obj.chunk_map() for obj in objects]
    if new.chunks == old.chunks:
        slot_map = _convert_slots(old_store, new_store, maps, old, new)
        return [
            ChunkMap(m.shape, m.chunks, np.where(m.slots >= 0, slot_map[m.slots], -1)) for m in maps
        ]
    known: dict[tuple, int] = {}
    return [_rechunk(old_store, new_store, m, old, new, known) for m in maps]


def _slot_extents(maps: list[ChunkMap], n_slots: int) -> np.ndarray:
    """The trimmed extent of the chunk stored in each slot (from where it is used)."""
    extents = np.zeros((n_slots, len(maps[0].chunks)), dtype=np.int64)
    for m in maps:
        coords = np.argwhere(m.slots >= 0)
        if not len(coords):
            continue
        origin = coords * np.asarray(m.chunks)
        extent = np.minimum(np.asarray(m.chunks), np.asarray(m.shape) - origin)
        # A slot shared by versions of different lengths keeps what the longest reads.
        np.maximum.at(extents, m.slots[tuple(coords.T)], extent)
    return extents


def _convert_slots(
    old_store: RawDataStore,
    new_store: RawDataStore,
    maps: list[ChunkMap],
    old: _Settings,
    new: _Settings,
) -> np.ndarray:
    """Convert every used slot once; return old slot -> new slot (-1: now fill)."""
    n_slots = max((int(m.slots.max(initial=-1)) for m in maps), default=-1) + 1
    extents = _slot_extents(maps, n_slots)
    used = np.flatnonzero(extents[:, 0] > 0) if n_slots else np.zeros(0, dtype=np.int64)
    slot_map = np.full(max(n_slots, 1), -1, dtype=np.int64)
    c0 = old_store.chunks[0]
    for batch in slot_windows(old_store.raw_data, used, c0):
        window = old_store.raw_data[int(batch[0]) * c0 : (int(batch[-1]) + 1) * c0]
        chunks = []
        for slot in batch.tolist():
            region = (
                slice((slot - int(batch[0])) * c0, None),
                *tuple(slice(0, int(n)) for n in extents[slot][1:]),
            )
            chunk = window[region][: extents[slot][0]]
            chunks.append(_to_new(chunk, old, new))
        slot_map[batch] = new_store.store_chunks(chunks, fillvalue=new.fill)
    return slot_map


def _rechunk(
    old_store: RawDataStore,
    new_store: RawDataStore,
    chunk_map: ChunkMap,
    old: _Settings,
    new: _Settings,
    known: dict[tuple, int],
) -> ChunkMap:
    """The chunk map of one version in the new chunk shape, storing unseen chunks."""
    new_map = ChunkMap.empty(chunk_map.shape, new.chunks)
    source = staged_array(chunk_map, old_store.raw_data, old.dtype, _source_fill(old, new))
    pending: list[tuple[tuple, tuple[int, ...]]] = []
    arrays: list[np.ndarray] = []
    pending_bytes = 0
    for coords in itertools.product(*(range(n) for n in grid_shape(chunk_map.shape, new.chunks))):
        region = tuple(
            slice(i * c, min((i + 1) * c, n))
            for i, c, n in zip(coords, new.chunks, chunk_map.shape)
        )
        covered = chunk_map.slots[
            tuple(slice(r.start // c, (r.stop - 1) // c + 1) for r, c in zip(region, old.chunks))
        ]
        key = (coords, tuple(r.stop - r.start for r in region), covered.tobytes())
        slot = known.get(key)
        if slot is None and bool(np.all(covered < 0)):
            slot = -1  # never written: stays unmapped and reads as the new fill value
        if slot is not None:
            new_map.slots[coords] = slot
            continue
        arrays.append(_to_new(np.asarray(source[region]), old, new))
        pending.append((key, coords))
        pending_bytes += arrays[-1].nbytes
        if pending_bytes >= COPY_BUDGET_BYTES:
            _store_pending(new_store, new_map, pending, arrays, new, known)
            pending_bytes = 0
    _store_pending(new_store, new_map, pending, arrays, new, known)
    return new_map


def _to_new(values: np.ndarray, old: _Settings, new: _Settings) -> np.ndarray:
    """``values`` in the new dtype; values equal to the old fill take the new fill."""
    converted = _convert(values, new.dtype)
    if old.dtype.kind == "O" or new.dtype.kind == "O" or old.same_fill(new):
        return converted
    if old.dtype.kind in "fc" and np.isnan(old.fill):
        refill = np.isnan(values)
    else:
        refill = values == old.fill
    if refill.any():
        converted = converted.copy() if converted is values else converted
        converted[refill] = new.fill
    return converted


def _source_fill(old: _Settings, new: _Settings) -> Any:
    """Fill for unwritten parts of a new chunk: the new fill value, read in the old dtype."""
    if old.dtype.kind == "O" or new.fill is None:
        return old.fill
    try:
        return _convert(np.asarray(new.fill, dtype=new.dtype), old.dtype)[()]
    except MetadataMismatchError:
        return old.fill


def _store_pending(
    new_store: RawDataStore,
    new_map: ChunkMap,
    pending: list[tuple[tuple, tuple[int, ...]]],
    arrays: list[np.ndarray],
    new: _Settings,
    known: dict[tuple, int],
) -> None:
    if not arrays:
        return
    slots = new_store.store_chunks(arrays, fillvalue=new.fill)
    for (key, coords), slot in zip(pending, slots.tolist()):
        known[key] = slot
        new_map.slots[coords] = slot
    pending.clear()
    arrays.clear()


def _swap(
    state: FileState,
    path: str,
    new_store: RawDataStore,
    objects: list[DatasetObject],
    maps: list[ChunkMap],
    new: _Settings,
) -> None:
    """Move the new raw_data and hash_table in place; rebuild every virtual dataset."""
    store = state.stores.require(path, objects[0].versions[0])
    store.replace_with(new_store)
    raw_data = store.raw_data
    chunks_attr = {layout.ATTR_CHUNKS: np.asarray(new.chunks, dtype=np.int64)}
    for obj, chunk_map in zip(objects, maps):
        rebuild_virtual_dataset(
            obj,
            raw_data,
            chunk_map,
            merge=state.h5vc_layout,
            dtype=new.dtype,
            fillvalue=new.fill,
            attrs=chunks_attr,
        )
