"""The chunk store of one dataset path: ``raw_data`` plus its ``hash_table``.

``raw_data`` holds every distinct chunk committed for the dataset (and not
released by ``delete_versions``), stacked along axis 0 (slot ``s`` is rows
``s*c0 : (s+1)*c0``).  ``hash_table`` maps each chunk's SHA-256 to its rows; its
``largest_index`` attribute (the number of valid rows) is written after the rows, so
an interrupted commit leaves rows past it that are simply ignored.

The slots past the last one with a valid row are *free*: ``delete_versions`` leaves
the chunks it released there (raw_data keeps its extent, so HDF5 keeps their file
space), and so does an interrupted commit.  New chunks go to the first free slot and
raw_data grows only past the free ones: HDF5 then rewrites the chunk at its place in
the file instead of allocating new space, in every file, however it was created
(HDF5 forgets its own record of freed space at close unless the file was created to
keep it).  The free slots need no record of their own: nothing maps them, and a
commit interrupted anywhere leaves them free.

The hash index is read once per open store and then kept in memory and appended
to, so a commit costs O(chunks written), not O(chunks ever stored).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import math
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import h5py
import numpy as np

from h5vc.errors import (
    CorruptDataError,
    InvalidOptionError,
    MetadataMismatchError,
    UnsupportedDtypeError,
)
from h5vc.hashing import (
    HASH_BATCH_BYTES,
    Base,
    chunk_hash,
    extendable,
    fill_chunk_hash,
    fill_item,
    hash_in_batches,
    may_be_fill,
    resumable,
    run_ahead,
)
from h5vc.hdf5 import codecs
from h5vc.hdf5 import filters as filter_keywords
from h5vc.hdf5.damage import damaged, slot_count
from h5vc.hdf5.header import check_dataset_header, trust_dataset_header
from h5vc.store import fastattrs
from h5vc.store.groups import compact_chunk_index, require_groups
from h5vc.store.layout import (
    ATTR_CHUNKS,
    ATTR_LARGEST_INDEX,
    HASH_TABLE,
    HASH_TABLE_DTYPE,
    RAW_DATA,
    hash_table_rows,
    small_chunks,
)

__all__ = ["RawDataStore", "check_storable", "first_free_slot", "slots_in_use"]


def check_storable(
    path: str, dtype: np.dtype, chunks: tuple[int, ...], filters: dict[str, Any]
) -> None:
    """Raise unless HDF5 can store a dataset of ``dtype`` with ``filters``.

    Checked when a dataset is staged, so a bad option is refused at once and never
    reaches the commit: HDF5 stores numbers, booleans, fixed-length bytes, opaque
    (``V``) and compound types of those, and (as ``object``) variable-length strings;
    it has no type for ``datetime64``, ``timedelta64`` or arbitrary Python objects.
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "O" and h5py.check_string_dtype(dtype) is None:
        raise UnsupportedDtypeError(
            f"Cannot store dataset {path!r}: HDF5 has no type for dtype {dtype!r} "
            f"(Python objects). Use h5py.string_dtype() for text."
        )
    if dtype.kind != "O":
        try:
            h5py.h5t.py_create(dtype, logical=True)
        except TypeError:
            hint = " Store it as int64 (e.g. values.view('i8'))." if dtype.kind in "mM" else ""
            raise UnsupportedDtypeError(
                f"Cannot store dataset {path!r}: HDF5 has no type for dtype {dtype!r}.{hint}"
            ) from None
    try:
        filter_keywords.check(chunks, dtype, filters)
    except (ValueError, TypeError) as error:
        raise InvalidOptionError(
            f"Cannot store dataset {path!r} with the filter options "
            f"{ {k: v for k, v in filters.items()} }: {error}."
        ) from None


def first_free_slot(starts: np.ndarray, c0: int) -> int:
    """The first free slot of a store whose valid hash-table rows start at rows
    ``starts`` of raw_data: the one past every slot with a row (``largest_index`` in a
    table sorted by slot, as both writers of the format leave it)."""
    return int(starts.max(initial=-1)) // c0 + 1


def slots_in_use(hash_table: h5py.Dataset, c0: int) -> int:
    """:func:`first_free_slot` read from a store's ``hash_table``."""
    n_rows = int(hash_table.attrs.get(ATTR_LARGEST_INDEX, 0))
    if not n_rows:
        return 0
    return first_free_slot(hash_table[:n_rows]["shape"][:, 0], c0)


class RawDataStore:
    """``raw_data`` + ``hash_table`` of one dataset path, with an in-memory hash index."""

    #: Compare a stored chunk with a new one of the same digest before sharing it, so
    #: a chunk altered on disk is never shared by a new version (each slot once per
    #: open store).  Set to False on the class or a store to skip the read.
    check_reused: bool = True

    def __init__(self, group: h5py.Group):
        self.group = group
        self.raw_data: h5py.Dataset = self._open_member(RAW_DATA)
        # The hash table is opened (and its header checked) when it is first needed: to
        # write, verify or list digests.  Reads need only raw_data.
        self._hash_table: h5py.Dataset | None = None
        codecs.load_plugin_filters(self.raw_data.id.get_create_plist())
        try:
            #: raw_data's dtype, read once (h5py builds it anew on every access).
            self.dtype: np.dtype = self.raw_data.dtype
        except (TypeError, ValueError) as error:  # a type numpy has no dtype for
            raise CorruptDataError(
                f"{self.raw_data.name} in {group.file.filename!r} is damaged: its "
                f"datatype does not decode ({error}). Run h5vc.verify on the file; "
                f"restore it from a copy if it was written."
            ) from error
        chunks_attr = self.raw_data.attrs.get(ATTR_CHUNKS)
        stored = self.raw_data.chunks
        self.chunks: tuple[int, ...] = (
            tuple(int(c) for c in np.atleast_1d(chunks_attr))
            if chunks_attr is not None
            else tuple(stored or ())
        )
        if stored is None or tuple(stored) != self.chunks:
            raise CorruptDataError(
                f"{self.raw_data.name} in {group.file.filename!r} is damaged: its "
                f"{ATTR_CHUNKS!r} attribute gives chunks {self.chunks}, its layout "
                f"{'none' if stored is None else tuple(stored)}. Run h5vc.verify on the "
                f"file; restore it from a copy if it was written."
            )
        self._index: dict[bytes, int] | None = None
        #: slot -> digest, the index turned around (built when first asked for).
        self._by_slot: dict[int, bytes] | None = None
        #: The first free slot (past every slot with a valid row), set with the index.
        self._first_free: int = 0
        #: Slots found to hold their digest's bytes since the index was loaded.
        self.verified_slots: set[int] = set()
        self._n_slots: int | None = None
        #: raw_data's shape and hash_table's length, read once and then kept as the
        #: store changes them (h5py asks HDF5 for a new dataspace on every access).
        self._shape: tuple[int, ...] | None = None
        self._table_length: int | None = None
        #: raw_data's name in the file (read once).
        self._name: str | None = None
        self._type_id: h5py.h5t.TypeID | None = None
        self._fillvalue: Any = None
        self._pipeline: codecs.Pipeline | bool | None = False
        #: Appended chunks still being encoded: (first row, their stored bytes in order).
        self._unwritten: list[tuple[int, Iterator[bytes]]] = []
        self._n_rows_read: int | None = None
        #: Whether raw_data stores chunks as their bytes in memory: no filters, and
        #: its file type is its dtype's own (found on the first write).
        self._stores_raw_bytes: bool | None = None
        #: The chunks the last :meth:`store_chunks` wrote, by slot (copies of their
        #: rows; a short last chunk keeps the rows written): read back from memory by
        #: the next commit (:mod:`h5vc.store.recent`).
        self.recent: dict[int, np.ndarray] = {}
        self._keep_recent = False
        self._lossless_filters: bool | None = None
        #: Whether the hash table is one-dimensional, of the format's row type (found
        #: on the first write): rows are then written with HDF5's calls alone.
        self._plain_table: bool | None = None

    def _open_member(self, name: str) -> h5py.Dataset:
        """The dataset ``name`` of the store's group, its header checked before HDF5
        decodes it."""
        group = self.group
        check_dataset_header(group, name)
        obj = group.get(name)
        if not isinstance(obj, h5py.Dataset):
            raise CorruptDataError(
                f"Expected a dataset {group.name}/{name} in {group.file.filename!r} "
                f"(a chunk store holds {RAW_DATA!r} and {HASH_TABLE!r}). Got "
                f"{'none' if obj is None else type(obj).__name__}."
            )
        return obj

    @property
    def hash_table(self) -> h5py.Dataset:
        """The store's hash table, opened on first use."""
        if self._hash_table is None:
            self._hash_table = self._open_member(HASH_TABLE)
        return self._hash_table

    @property
    def _n_rows(self) -> int:
        if self._n_rows_read is None:
            self._n_rows_read = int(self.hash_table.attrs.get(ATTR_LARGEST_INDEX, 0))
        return self._n_rows_read

    @_n_rows.setter
    def _n_rows(self, value: int) -> None:
        self._n_rows_read = value

    # -- creation -----------------------------------------------------------------

    @classmethod
    def create(
        cls,
        parent: h5py.Group,
        path: str,
        *,
        dtype: np.dtype,
        chunks: tuple[int, ...],
        fillvalue: Any = None,
        filters: dict[str, Any] | None = None,
    ) -> RawDataStore:
        """Create the group ``parent/path`` with an empty raw_data and hash_table."""
        group = require_groups(parent, path)
        create_kwargs: dict[str, Any] = dict(filters or {})
        if fillvalue is not None and dtype.kind != "O":
            create_kwargs["fillvalue"] = fillvalue
        with contextlib.ExitStack() as bounds:
            if small_chunks(dtype, chunks):
                bounds.enter_context(compact_chunk_index(group.file))
            raw_data = group.create_dataset(
                RAW_DATA,
                shape=(0, *tuple(chunks[1:])),
                dtype=dtype,
                chunks=tuple(chunks),
                maxshape=(None, *tuple(chunks[1:])),
                **create_kwargs,
            )
            # One zeroed row to start with, as the format's other writer does; rows
            # past largest_index are never read.  Uncompressed: a compressed chunk
            # changes size when rows are appended and is rewritten to new file space
            # at every commit, which the file never gets back.
            hash_table = group.create_dataset(
                HASH_TABLE,
                shape=(1,),
                dtype=HASH_TABLE_DTYPE,
                chunks=(hash_table_rows(dtype, chunks),),
                maxshape=(None,),
            )
        raw_data.attrs[ATTR_CHUNKS] = np.asarray(chunks, dtype=np.int64)
        hash_table.attrs[ATTR_LARGEST_INDEX] = np.int64(0)
        for name in (RAW_DATA, HASH_TABLE):
            trust_dataset_header(group, name)  # maybe not in the file yet
        return cls(group)

    def check_compatible(self, name: str, dtype: np.dtype, chunks: tuple[int, ...]) -> None:
        """Raise if a dataset of this dtype and chunking cannot share this store."""
        if tuple(chunks) != self.chunks:
            raise MetadataMismatchError(
                f"Dataset {name!r} is stored with chunks {self.chunks}; its chunks cannot "
                f"change between versions. Got chunks={tuple(chunks)} instead."
            )
        if np.dtype(dtype) != self.dtype and not (
            np.dtype(dtype).kind == "O" and self.dtype.kind == "O"
        ):
            raise MetadataMismatchError(
                f"Dataset {name!r} is stored with dtype {self.dtype}; its dtype "
                f"cannot change between versions. Got dtype={np.dtype(dtype)} instead."
            )

    # -- reading --------------------------------------------------------------------

    @property
    def filename(self) -> str:
        return str(self.group.file.filename)

    @property
    def n_rows(self) -> int:
        """Number of valid hash-table rows (its ``largest_index``)."""
        return self._n_rows

    def rows(self) -> np.ndarray:
        """The valid hash-table rows."""
        with damaged(self.filename, f"The hash table {self.hash_table.name}"):
            return self.hash_table[: self._n_rows]

    def slot_digests(self) -> np.ndarray:
        """SHA-256 digest of the chunk in each slot, as ``V32`` scalars."""
        rows = self.rows()
        slots = rows["shape"][:, 0] // self.chunks[0]
        # Slots written by an interrupted commit have no row: their digest stays zero.
        size = max(self.n_slots, int(slots.max(initial=-1)) + 1)
        digests = np.zeros(size, dtype="V32")
        digests[slots] = np.ascontiguousarray(rows["hash"]).view("V32").ravel()
        return digests

    def filters(self) -> dict[str, Any]:
        """The filter pipeline of raw_data as ``create_dataset`` keywords."""
        return filter_keywords.keywords_of(self.raw_data)

    def reload(self) -> None:
        """Forget what was read (the store was rewritten in place)."""
        self.recent = {}
        self._n_rows_read = None
        self._n_slots = None
        self._shape = None
        self._table_length = None
        self._index = None
        self._by_slot = None
        self._first_free = 0
        self.verified_slots = set()
        from h5vc.store import fastread  # the positioned reader: loaded by the first large read

        fastread.forget(self.raw_data)

    def replace_with(self, new: RawDataStore) -> None:
        """Move ``new``'s raw_data and hash_table in place of this store's."""
        from h5vc.store import fastread

        fastread.forget(self.raw_data)
        for name in (RAW_DATA, HASH_TABLE):
            del self.group[name]
            self.group.file.move(f"{new.group.name}/{name}", f"{self.group.name}/{name}")
        self.raw_data = self.group[RAW_DATA]
        self._hash_table = self.group[HASH_TABLE]
        self._name = None
        self._type_id = None
        self._plain_table = None
        self._n_rows_read = None
        self.chunks = new.chunks
        self.dtype = new.dtype
        self._fillvalue = None
        self._pipeline = False
        self._lossless_filters = None
        self.reload()

    @property
    def pipeline(self) -> codecs.Pipeline | None:
        """The filter pipeline h5vc runs itself on all cores when it writes chunks
        (None: no filter, one only HDF5 runs, or a single core where HDF5's own
        filters are as fast or faster: all but deflate)."""
        if self._pipeline is False:
            dtype = self.raw_data.dtype
            self._pipeline = None
            if dtype.kind in "biufc" and dtype.isnative:
                chunk_bytes = math.prod(self.chunks) * dtype.itemsize
                dcpl = self.raw_data.id.get_create_plist()
                pipeline = codecs.pipeline_of(dcpl, dtype.itemsize, chunk_bytes)
                if pipeline is not None and (codecs.workers() > 1 or pipeline.faster_than_hdf5):
                    self._pipeline = pipeline
        return self._pipeline if isinstance(self._pipeline, codecs.Pipeline) else None

    # -- the hash index -------------------------------------------------------------

    @property
    def fillvalue(self) -> Any:
        """The dataset's fill value (raw_data carries it)."""
        if self._fillvalue is None:
            self._fillvalue = self.raw_data.fillvalue
        return self._fillvalue

    @property
    def shape(self) -> tuple[int, ...]:
        """raw_data's shape."""
        if self._shape is None:
            self._shape = tuple(self.raw_data.shape)
        return self._shape

    @property
    def type_id(self) -> h5py.h5t.TypeID:
        """raw_data's HDF5 datatype (a copy, read once): what the virtual datasets over
        it are made with."""
        if self._type_id is None:
            self._type_id = self.raw_data.id.get_type()
        return self._type_id

    @property
    def name(self) -> str:
        """raw_data's name (path in the file)."""
        if self._name is None:
            self._name = self.raw_data.name or ""
        return self._name

    @property
    def n_slots(self) -> int:
        """Number of chunk slots in raw_data, free ones included."""
        if self._n_slots is None:
            self._n_slots = slot_count(self.raw_data.id, self.chunks[0])
        return self._n_slots

    @property
    def index(self) -> dict[bytes, int]:
        """SHA-256 digest -> slot, loaded from hash_table on first use."""
        if self._index is None:
            self._index = self._load_index()
        return self._index

    @property
    def first_free_slot(self) -> int:
        """The slot the next new chunk is written to (:func:`first_free_slot`).  Slots
        from here to :attr:`n_slots` are free."""
        _ = self.index
        return self._first_free

    def _load_index(self) -> dict[bytes, int]:
        self._first_free = 0
        if self._n_rows == 0:
            return {}
        rows = self.rows()
        c0 = self.chunks[0]
        starts = rows["shape"][:, 0]
        if starts.min() < 0 or starts.max() >= self.raw_data.shape[0] or np.any(starts % c0):
            raise CorruptDataError(
                f"Expected every row of {self.hash_table.name!r} in {self.filename!r} to "
                f"start on a slot of {self.raw_data.name!r} (a multiple of {c0} below "
                f"{self.raw_data.shape[0]}). Got starts from {int(starts.min())} to "
                f"{int(starts.max())}."
            )
        digests = np.ascontiguousarray(rows["hash"]).tobytes()
        self._first_free = first_free_slot(starts, c0)
        slots = (starts // c0).tolist()
        return {digests[32 * i : 32 * (i + 1)]: slot for i, slot in enumerate(slots)}

    # -- writing --------------------------------------------------------------------

    def store_chunks(
        self,
        chunks: Sequence[np.ndarray],
        *,
        fillvalue: Any = None,
        skip_fill: bool = True,
        bases: Sequence[Base] | None = None,
    ) -> np.ndarray:
        """Store chunks not stored yet; return the slot of each (-1: all fill value).

        Identical chunks (same bytes and shape) share one slot, within this call and
        across everything stored before.  With ``skip_fill``, chunks whose bytes are
        exactly those of the fill value are not stored at all: their digest is
        compared with the digest of a fill chunk of the same shape.

        Large writes go in batches: while one batch is deduplicated and written,
        the next is hashed on another thread.  Hash-table rows, then the row
        count, are written after all the chunks.  ``bases`` (see :meth:`bases_of`):
        the chunk each was staged from, to hash on from.
        """
        batches = hash_in_batches(chunks, ahead=codecs.workers(), bases=bases)
        return self._place_batches(batches, len(chunks), fillvalue, skip_fill)

    def place_chunks(
        self,
        chunks: Sequence[np.ndarray],
        digests: list[bytes],
        *,
        fillvalue: Any = None,
        skip_fill: bool = True,
        owned: bool = False,
    ) -> np.ndarray:
        """:meth:`store_chunks` for chunks hashed already (``digests[i]`` is
        :func:`~h5vc.hashing.chunk_hash` of ``chunks[i]``): the same slots, written the
        same way, in one batch.  ``owned``: the chunks are copies nobody else holds, so
        those kept for the next commit (:attr:`recent`) are kept as they are, not
        copied again."""
        if len(digests) != len(chunks):
            raise ValueError(f"Expected {len(chunks)} digests. Got {len(digests)}.")
        batches = iter([(chunks, digests)] if len(chunks) else [])
        whole = owned and all(
            chunk.shape == self.chunks and chunk.dtype == self.dtype and chunk.flags.c_contiguous
            for chunk in chunks
        )
        if not whole:
            return self._place_batches(batches, len(chunks), fillvalue, skip_fill)
        first_new = self.first_free_slot
        slots = self._place_batches(batches, len(chunks), fillvalue, skip_fill, remember=False)
        self._remember_placed(chunks, slots, first_new)
        return slots

    def bases_of(
        self,
        coords: Sequence[tuple[int, ...]],
        chunks: Sequence[np.ndarray],
        base_slots: np.ndarray,
        base_shape: tuple[int, ...],
        fd: int | None,
    ) -> list[Base] | None:
        """For staged chunks ``chunks`` at ``coords`` of a dataset whose base version
        maps its chunks to ``base_slots`` (its shape ``base_shape``), the chunk each
        was staged from, as :func:`~h5vc.hashing.chunk_hash_from` takes it: its bytes
        as stored (kept from the last commit, or read from the file's descriptor
        ``fd`` where it is stored as it is, on the thread that hashes), cut to the
        shape it was hashed at, and its digest. None for a chunk too small to hash on
        from, or with no such chunk, or one stored filtered; None in all for chunks of
        variable-length strings. A chunk too small to keep its hash states
        (:func:`~h5vc.hashing.resumable`) has a base only where it is the old chunk
        with rows appended (:func:`~h5vc.hashing.extendable`): the short last chunk
        along axis 0 grown."""
        if not chunks or chunks[0].dtype.kind == "O":
            return None
        full = math.prod(self.chunks) * chunks[0].itemsize
        if not extendable(full):
            return None
        grid = base_slots.shape
        c0 = self.chunks[0]
        # The base's last chunk row along axis 0, if short: appends grow its chunks.
        last_row = len(grid) and grid[0] - 1
        grown = len(grid) > 0 and grid[0] > 0 and base_shape[0] - last_row * c0 < c0
        if not grown and not resumable(full):
            return None
        by_slot = self._by_slot
        if by_slot is None:
            by_slot = self._by_slot = {slot: digest for digest, slot in self.index.items()}
        bases: list[Base] = []
        found = False
        for coord, chunk in zip(coords, chunks, strict=True):
            nbytes = chunk.nbytes
            inside = len(coord) == len(grid) and all(c < n for c, n in zip(coord, grid))
            if not inside or not (
                resumable(nbytes) or (grown and coord[0] == last_row and extendable(nbytes))
            ):
                bases.append(None)
                continue
            shape = tuple(min(c, n - i * c) for i, c, n in zip(coord, self.chunks, base_shape))
            if not resumable(nbytes) and not (
                shape[0] < chunk.shape[0] and shape[1:] == chunk.shape[1:]
            ):
                bases.append(None)  # not the old chunk with rows appended
                continue
            slot = int(base_slots[coord])
            digest = by_slot.get(slot) if slot >= 0 else None
            reader = None if digest is None else self._stored_chunk(slot, shape, fd)
            if reader is None or digest is None:
                bases.append(None)
                continue
            bases.append((reader, digest))
            found = True
        return bases if found else None

    def _stored_chunk(
        self, slot: int, shape: tuple[int, ...], fd: int | None
    ) -> np.ndarray | Callable[[], np.ndarray] | None:
        """The chunk in ``slot`` cut to ``shape``: kept from the last commit, or a
        function reading its stored bytes from ``fd``; None where it is stored
        filtered (or not at all)."""
        cut = tuple(slice(0, n) for n in shape)
        kept = self.recent.get(slot)
        if kept is not None and len(kept) >= shape[0]:
            return kept[cut]
        if fd is None or not self._stores_raw():
            return None
        start = (slot * self.chunks[0],) + (0,) * (len(shape) - 1)
        try:
            info = self.raw_data.id.get_chunk_info_by_coord(start)
        except (KeyError, ValueError, RuntimeError):
            return None
        nbytes = math.prod(self.chunks) * self.dtype.itemsize
        if info.byte_offset is None or info.filter_mask or info.size != nbytes:
            return None
        offset, dtype, chunks = int(info.byte_offset), self.dtype, self.chunks

        def read() -> np.ndarray:
            stored = os.pread(fd, nbytes, offset)
            if len(stored) != nbytes:
                raise OSError(f"{len(stored)} of {nbytes} bytes of slot {slot} read")
            return np.frombuffer(stored, dtype=dtype).reshape(chunks)[cut]

        return read

    @staticmethod
    def keeps_written(nbytes: int) -> bool:
        """Whether a store keeps ``nbytes`` of new chunks that one :meth:`store_chunks`
        or :meth:`place_chunks` wrote in memory for the next commit (:attr:`recent`)."""
        from h5vc.store.recent import RECENT_CHUNK_BYTES

        return nbytes <= RECENT_CHUNK_BYTES

    def predicted_slots(self, count: int, after: int = 0) -> np.ndarray:
        """The slots :meth:`store_chunks` gives ``count`` chunks when none of them is
        stored already, equal to another or all fill value, and ``after`` new chunks
        went before them: the next free slots, in order."""
        return np.arange(count, dtype=np.int64) + (self.first_free_slot + after)

    def _place_batches(
        self,
        batches: Iterator[tuple[Sequence[np.ndarray], list[bytes]]],
        count: int,
        fillvalue: Any,
        skip_fill: bool,
        *,
        remember: bool = True,
    ) -> np.ndarray:
        """Deduplicate and write hashed ``batches`` of ``count`` chunks in all (keeping
        copies of the new ones in :attr:`recent` when ``remember``)."""
        slots = np.empty(count, dtype=np.int64)
        writer = _BatchWriter(self, fillvalue, skip_fill)
        offset = 0
        self.recent = {}
        self._keep_recent = remember and self._lossless()
        try:
            for batch, digests in batches:
                writer.place(batch, digests, None, slots[offset : offset + len(batch)])
                offset += len(batch)
            writer.finish()
        except BaseException:
            self.recent = {}
            raise
        finally:
            self._keep_recent = False
            self._unwritten.clear()  # written by finish(); else dropped with the failure
        return slots

    def _remember_placed(
        self, chunks: Sequence[np.ndarray], slots: np.ndarray, first_new: int
    ) -> None:
        """Keep in :attr:`recent` the chunks just written to new slots (from
        ``first_new``), whole chunks nobody else holds, as :meth:`_remember` keeps the
        copies it makes: all of them, or none if they hold more than
        :data:`~h5vc.store.recent.RECENT_CHUNK_BYTES`."""
        if not self._lossless():
            return
        from h5vc.store.recent import RECENT_CHUNK_BYTES

        kept: dict[int, np.ndarray] = {}
        for chunk, slot in zip(chunks, slots.tolist()):
            if slot >= first_new and slot not in kept:
                kept[slot] = chunk
        if sum(chunk.nbytes for chunk in kept.values()) <= RECENT_CHUNK_BYTES:
            self.recent = kept

    def store_array(self, values: np.ndarray, *, fillvalue: Any = None) -> np.ndarray:
        """Store every chunk of ``values`` (chunked like this store) as :meth:`store_chunks`
        does; return the slots as an array shaped like the chunk grid.

        The chunks are taken from ``values`` batch by batch, down one chunk column
        (axis 0) after the other, and gathered and hashed on every core
        (:func:`~h5vc.hashing.run_ahead`: a pool thread per core but one, and this
        thread between its writes), a few batches ahead of the writes, so the cores
        keep hashing while this thread writes (HDF5's calls hold the GIL).  A
        C-contiguous array whose chunks span whole rows (any 1-d array) is written
        without copying; otherwise each batch is copied once into a buffer of at most
        :data:`~h5vc.hashing.HASH_BATCH_BYTES`.
        """
        shape, chunks = values.shape, self.chunks
        grid = tuple(-(-n // c) for n, c in zip(shape, chunks))
        slots = np.empty(grid, dtype=np.int64)
        writer = _BatchWriter(self, fillvalue, skip_fill=True)
        fill = writer.fill
        chunk_bytes = max(1, math.prod(chunks) * values.dtype.itemsize)
        workers = codecs.workers()
        # Batches of at most HASH_BATCH_BYTES, and at least a few per core, so the
        # cores finish their last batches close together.
        per_batch = min(
            HASH_BATCH_BYTES // chunk_bytes, -(-math.prod(grid) // (_BATCHES_PER_CORE * workers))
        )
        jobs = _column_blocks(grid, max(1, per_batch))
        # Buffers of batches already written (unfiltered chunks are written before
        # place() returns), gathered into again: faulting fresh pages in costs more
        # than the copy into them.
        spare: collections.deque[np.ndarray] = collections.deque()
        recycle = self.pipeline is None
        gathered = run_ahead(
            lambda blocks: _gather(values, chunks, fill, blocks, spare),
            jobs,
            threads=workers - 1,
            limit=workers + 2,
        )
        try:
            # Closed however the loop is left: no batch is gathered once this returns.
            with contextlib.closing(gathered):
                for blocks, batch, stacked, digests, buffer in gathered:
                    placed = np.empty(len(batch), dtype=np.int64)
                    writer.place(batch, digests, stacked, placed)
                    if recycle and buffer is not None:
                        spare.append(buffer)
                    del batch, stacked
                    offset = 0
                    for column, first, last in blocks:
                        where: tuple[slice | int, ...] = (slice(first, last), *column)
                        slots[where] = placed[offset : offset + last - first]
                        offset += last - first
            writer.finish()
        finally:
            self._unwritten.clear()  # written by finish(); else dropped with the failure
        return slots

    def _append(self, data: np.ndarray, count: int, *, owned: bool = False) -> None:
        """Write ``count`` chunks, back to back along axis 0 in ``data``, to the first
        free slots, growing raw_data only past the free slots it has.

        The last chunk may be short along axis 0; the rest of its slot is written with
        the fill value, so every slot is written whole: HDF5 never reads the stale (or
        erased) chunk a free slot holds.
        """
        c0 = self.chunks[0]
        first = self.first_free_slot
        held = self.n_slots
        if first + count > held:
            # HDF5's call: h5py's resize checks and builds the shape
            shape = ((first + count) * c0, *self.shape[1:])
            self._shape = None  # should the call fail
            self.raw_data.id.set_extent(shape)
            self._shape = shape
            self._n_slots = first + count
        self._first_free = first + count
        self._remember(data, first, count, owned=owned)
        pipeline = self.pipeline
        if pipeline is None:
            whole = len(data) // c0 * c0
            if whole == len(data) and self._writes_raw_bytes(data):
                # Whole chunks, laid out as stored: their bytes go to the file as they
                # are, with no pass through HDF5's selections.
                write = self.raw_data.id.write_direct_chunk
                corner = (0,) * (len(self.chunks) - 1)
                flat = data.reshape(-1).view(np.uint8)
                for i, stored in enumerate(np.split(flat, count) if count > 1 else [flat]):
                    write(((first + i) * c0, *corner), stored, 0)
            elif whole == len(data) or first + count > held:
                # A short last chunk in a new slot: HDF5 fills the rest of it.
                self.raw_data[first * c0 : first * c0 + len(data)] = data
            else:
                if whole:
                    self.raw_data[first * c0 : first * c0 + whole] = data[:whole]
                fill = _fill_scalar(self.raw_data.dtype, self.fillvalue)
                last = np.empty((c0, *data.shape[1:]), dtype=self.raw_data.dtype)
                last[...] = fill
                last[: len(data) - whole] = data[whole:]
                self.raw_data[first * c0 + whole : (first + count) * c0] = last
        else:
            # Queued on the pool behind the batch before, which is then written: the
            # pool encodes this batch meanwhile and never waits for the writes.
            fill = _fill_scalar(self.raw_data.dtype, self.fillvalue)
            encoded = codecs.encode_chunks(pipeline, data, self.chunks, fill)
            self._unwritten.append((first * c0, encoded))
            while len(self._unwritten) > 1:
                self._write_unwritten()
        # Chunks written over free slots may have moved in the file (compressed ones
        # of another size): those are looked up again.
        from h5vc.store import fastread

        fastread.forget(self.raw_data, appended=first >= held)

    def _lossless(self) -> bool:
        """Whether raw_data gives back the bytes of the chunks written to it: numbers or
        fixed-size types with no filter, or only the (lossless) ones h5vc runs itself.
        HDF5's scale-offset filter, for one, can round what it stores."""
        if self._lossless_filters is None:
            plain = self.raw_data.id.get_create_plist().get_nfilters() == 0
            self._lossless_filters = plain or self.pipeline is not None
        return self._lossless_filters and self.dtype.kind != "O"

    def _remember(self, data: np.ndarray, first: int, count: int, *, owned: bool = False) -> None:
        """Keep a copy of ``count`` chunks written to slots from ``first`` in
        :attr:`recent` while :meth:`store_chunks` writes (up to
        :data:`~h5vc.store.recent.RECENT_CHUNK_BYTES` in all); forget what was kept of
        those slots otherwise."""
        recent = self.recent
        if recent:
            for slot in range(first, first + count):
                recent.pop(slot, None)
        if not self._keep_recent or data.dtype != self.dtype:
            return
        from h5vc.store.recent import RECENT_CHUNK_BYTES

        kept = sum(chunk.nbytes for chunk in recent.values())
        if kept + data.nbytes > RECENT_CHUNK_BYTES:
            return
        # A buffer made for this write (``owned``) is kept as it is: nothing else
        # holds it; anything else may be the caller's or a staged slab, so is copied.
        copy = data if owned and data.flags.c_contiguous else np.array(data, order="C")
        c0 = self.chunks[0]
        for i in range(count):
            recent[first + i] = copy[i * c0 : (i + 1) * c0]

    def _writes_raw_bytes(self, data: np.ndarray) -> bool:
        """Whether ``data`` (chunks back to back along axis 0) holds exactly the bytes
        raw_data stores for them: raw_data has no filters, and ``data`` is C-contiguous,
        of raw_data's own numeric type."""
        if not data.flags.c_contiguous or data.dtype.kind not in "biufc":
            return False
        return self._stores_raw() and data.dtype == self.dtype

    def _stores_raw(self) -> bool:
        """Whether raw_data stores a chunk as its bytes in memory: no filters, and its
        file type is its numeric dtype's own."""
        if self._stores_raw_bytes is None:
            dataset_id = self.raw_data.id
            self._stores_raw_bytes = bool(
                self.dtype.kind in "biufc"
                and dataset_id.get_create_plist().get_nfilters() == 0
                and h5py.h5t.py_create(self.dtype) == dataset_id.get_type()
            )
        return self._stores_raw_bytes

    def _write_unwritten(self) -> None:
        """Store the oldest batch of encoded chunks still unwritten."""
        first_row, encoded = self._unwritten.pop(0)
        codecs.write_encoded(self.raw_data.id, encoded, first_row, self.chunks)

    def write_pending(self) -> None:
        """Store every appended chunk still being encoded."""
        while self._unwritten:
            self._write_unwritten()

    def _write_rows(self, digests: list[bytes], rows_used: list[int]) -> None:
        """Append hash-table rows for the newest chunks, then the row count."""
        c0 = self.chunks[0]
        n_new = len(digests)
        first = self.first_free_slot - n_new
        # The rows' bytes, packed here (a row is a digest and two little-endian int64):
        # numpy's assignments to the fields of a structured array cost more for a few.
        packed = b"".join(
            digest + _ROW_BOUNDS.pack(start, start + used)
            for digest, start, used in zip(
                digests, range(first * c0, (first + n_new) * c0, c0), rows_used, strict=True
            )
        )
        rows = np.frombuffer(packed, dtype=HASH_TABLE_DTYPE)
        n_rows = self._n_rows
        table = self.hash_table
        if self._plain_table is None:
            self._plain_table = table.dtype == HASH_TABLE_DTYPE and table.ndim == 1
        if self._plain_table:
            # HDF5's calls, with the memory type made once: h5py's resize and slice
            # assignment work out selections and the compound type on every call.
            table_id = table.id
            self._table_length = None  # should the call fail
            table_id.set_extent((n_rows + n_new,))
            self._table_length = n_rows + n_new
            file_space = table_id.get_space()
            file_space.select_hyperslab((n_rows,), (n_new,))
            table_id.write(_memory_space(n_new), file_space, rows, mtype=_hash_table_type())
        else:
            self._table_length = None
            table.resize((n_rows + n_new,))
            table[n_rows:] = rows
        # Written last: readers trust rows up to this count only.
        count = np.int64(n_rows + n_new)
        if not fastattrs.write(table, ATTR_LARGEST_INDEX, count):
            table.attrs[ATTR_LARGEST_INDEX] = count
        self._n_rows = n_rows + n_new

    # -- undoing writes -------------------------------------------------------------

    def checkpoint(self) -> tuple[int, int, int]:
        """What :meth:`rollback` returns to: raw_data, hash_table and valid-row lengths."""
        if self._table_length is None:
            self._table_length = self.hash_table.shape[0]
        return self.shape[0], self._table_length, self._n_rows

    def rollback(self, checkpoint: tuple[int, int, int]) -> None:
        """Forget every chunk stored since ``checkpoint`` was taken."""
        raw_rows, table_rows, n_rows = checkpoint
        self.recent = {}
        self._unwritten.clear()
        self._shape = None
        self._table_length = None
        self.raw_data.resize(raw_rows, axis=0)
        from h5vc.store import fastread

        fastread.forget(self.raw_data)
        self._n_slots = None
        self.hash_table.resize((table_rows,))
        self.hash_table.attrs[ATTR_LARGEST_INDEX] = np.int64(n_rows)
        self._n_rows = n_rows
        self._index = None  # reloaded from the file on next use
        self._by_slot = None
        self.verified_slots = set()


class _BatchWriter:
    """Deduplicates batches of hashed chunks, appends the new ones to raw_data and
    finally writes their hash-table rows."""

    def __init__(self, store: RawDataStore, fillvalue: Any, skip_fill: bool):
        self.store = store
        self.fill = _fill_scalar(store.dtype, fillvalue)
        self.fill_item = fill_item(store.dtype, self.fill)
        self.skip_fill = skip_fill
        self.pending: dict[bytes, int] = {}
        self.fill_digests: dict[tuple[int, ...], bytes] = {}
        self.new_digests: list[bytes] = []
        self.new_rows: list[int] = []

    def _fill_digests(self, batch: Sequence[np.ndarray]) -> set[bytes]:
        """Digests of all-fill chunks of every shape in ``batch`` that a chunk of it
        may hold only the fill value in (:func:`~h5vc.hashing.may_be_fill`)."""
        if not self.skip_fill or not batch:
            return set()
        known, item = self.fill_digests, self.fill_item
        for chunk in batch:
            if chunk.shape not in known and may_be_fill(chunk, item):
                known[chunk.shape] = fill_chunk_hash(chunk.shape, batch[0].dtype, self.fill)
        return set(known.values())

    def place(
        self,
        batch: Sequence[np.ndarray],
        digests: list[bytes],
        stacked: np.ndarray | None,
        slots: np.ndarray,
    ) -> None:
        """Put the slot of each chunk of ``batch`` in ``slots``, writing new chunks.

        ``stacked``, if given, holds the batch's chunks back to back along axis 0,
        each padded to the full chunk shape except possibly the last one.
        """
        index, pending = self.store.index, self.pending
        fill_digests = self._fill_digests(batch)
        if self.store.check_reused and index:
            self._drop_altered(batch, digests, fill_digests)
        next_slot = self.store.first_free_slot
        new: list[int] = []
        for i, digest in enumerate(digests):
            if digest in fill_digests:
                slots[i] = -1
                continue
            slot = index.get(digest)
            if slot is None:
                slot = pending.get(digest)
            if slot is None:
                slot = pending[digest] = next_slot
                next_slot += 1
                new.append(i)
                self.new_digests.append(digest)
                self.new_rows.append(batch[i].shape[0])
            slots[i] = slot
        if not new:
            return
        chunk_shape = self.store.chunks
        owned = False  # whether ``data`` is a buffer made here
        if stacked is None:
            dtype = self.store.dtype
            chunks = [batch[i] for i in new]
            data = _stack_chunks(chunks, chunk_shape, dtype, self.fill)
            owned = len(chunks) > 1 or chunks[0].shape != chunk_shape
        elif len(new) == len(batch):
            data = stacked
        else:
            rows = (np.asarray(new)[:, None] * chunk_shape[0] + np.arange(chunk_shape[0])).ravel()
            data = stacked[rows[rows < len(stacked)]]
        self.store._append(data, len(new), owned=owned)

    def _drop_altered(
        self, batch: Sequence[np.ndarray], digests: list[bytes], fill_digests: set[bytes]
    ) -> None:
        """Forget index entries whose stored chunk no longer holds the bytes its digest
        stands for, so the chunk is stored afresh instead of shared with altered data.

        The stored chunk is compared with the new one (equal digests mean equal
        bytes), in one read per run of consecutive slots.
        """
        index, verified = self.store.index, self.store.verified_slots
        reused: dict[int, int] = {}
        for i, digest in enumerate(digests):
            slot = index.get(digest)
            if slot is not None and digest not in fill_digests and slot not in verified:
                reused.setdefault(slot, i)
        if not reused:
            return
        c0 = self.store.chunks[0]
        ordered = sorted(reused)
        start = 0
        for k in range(1, len(ordered) + 1):
            if k < len(ordered) and ordered[k] == ordered[k - 1] + 1:
                continue
            first, last = ordered[start], ordered[k - 1]
            stored = self.store.raw_data[first * c0 : (last + 1) * c0]
            for slot in ordered[start:k]:
                chunk = batch[reused[slot]]
                rows = stored[(slot - first) * c0 : (slot - first) * c0 + chunk.shape[0]]
                trim = [slice(None), *(slice(0, n) for n in chunk.shape[1:])]
                region = rows[tuple(trim)]
                if region.shape == chunk.shape and np.array_equal(region, chunk):
                    verified.add(slot)
                else:
                    del index[digests[reused[slot]]]
                    self.store._by_slot = None
            start = k

    def finish(self) -> None:
        """Write the chunks still being encoded, the hash-table rows of the chunks
        written, then the row count."""
        self.store.write_pending()
        if self.new_digests:
            self.store._write_rows(self.new_digests, self.new_rows)
            self.store.index.update(self.pending)
            by_slot = self.store._by_slot
            if by_slot is not None:
                by_slot.update((slot, digest) for digest, slot in self.pending.items())


#: The two bounds (first row, row past the last) of a hash-table row, as stored.
_ROW_BOUNDS = struct.Struct("=qq")  # native, as HASH_TABLE_DTYPE's int64


@functools.lru_cache(maxsize=8)
def _memory_space(count: int) -> h5py.h5s.SpaceID:
    """The memory dataspace of ``count`` hash-table rows (never selected otherwise)."""
    return h5py.h5s.create_simple((count,))


@functools.cache
def _hash_table_type() -> h5py.h5t.TypeID:
    """The HDF5 memory type of hash-table rows."""
    return h5py.h5t.py_create(HASH_TABLE_DTYPE)


def _fill_scalar(dtype: np.dtype, fillvalue: Any) -> Any:
    if fillvalue is not None:
        return fillvalue
    return b"" if dtype.kind == "O" else np.zeros((), dtype=dtype)[()]


#: :meth:`RawDataStore.store_array` cuts an array into at least this many batches per
#: core (of at most HASH_BATCH_BYTES, and at least one chunk).
_BATCHES_PER_CORE = 4

#: Chunks ``first:last`` along axis 0 of the chunk column at ``column`` (grid
#: coordinates of the other axes).
_Block = tuple[tuple[int, ...], int, int]


def _column_blocks(grid: tuple[int, ...], per_batch: int) -> Iterator[list[_Block]]:
    """Batches of at most ``per_batch`` chunks: every chunk column (axis 0) of ``grid``
    top to bottom, columns with the axis after 0 varying fastest."""
    batch: list[_Block] = []
    count = 0
    for reversed_column in np.ndindex(*grid[:0:-1]):
        column = tuple(reversed_column[::-1])
        first = 0
        while first < grid[0]:
            last = min(grid[0], first + per_batch - count)
            batch.append((column, first, last))
            count += last - first
            first = last
            if count == per_batch:
                yield batch
                batch, count = [], 0
    if batch:
        yield batch


def _gather(
    values: np.ndarray,
    chunks: tuple[int, ...],
    fill: Any,
    blocks: list[_Block],
    spare: collections.deque[np.ndarray],
) -> tuple[list[_Block], list[np.ndarray], np.ndarray, list[bytes], np.ndarray | None]:
    """The chunks of ``blocks`` of ``values`` (trimmed to its edge), stacked along axis 0,
    their digests, and the byte buffer they were copied into (taken from ``spare`` if
    one there is large enough; None when no copy was made)."""
    c0 = chunks[0]
    regions = []
    for column, first, last in blocks:
        across = tuple(slice(j * c, (j + 1) * c) for j, c in zip(column, chunks[1:]))
        where = (slice(first * c0, last * c0), *across)
        regions.append(values[where])
    if len(regions) == 1 and regions[0].flags.c_contiguous and regions[0].shape[1:] == chunks[1:]:
        stacked = regions[0]  # already the stored layout: no copy
        batch = [stacked[i : i + c0] for i in range(0, len(stacked), c0)]
        return blocks, batch, stacked, [chunk_hash(chunk) for chunk in batch], None
    count = sum(last - first for _, first, last in blocks)
    stacked_shape = (count * c0, *chunks[1:])
    buffer = None
    if values.dtype.hasobject:
        stacked = np.empty(stacked_shape, dtype=values.dtype)
    else:
        nbytes = math.prod(stacked_shape) * values.dtype.itemsize
        buffer = _take(spare, nbytes)
        stacked = buffer[:nbytes].view(values.dtype).reshape(stacked_shape)
    batch = []
    row = 0
    for region, (_, first, last) in zip(regions, blocks):
        target = stacked[row : row + (last - first) * c0]
        if region.shape != target.shape:
            target[...] = fill
        target[tuple(slice(0, n) for n in region.shape)] = region
        across = tuple(slice(0, n) for n in region.shape[1:])
        for start in range(0, len(region), c0):
            where = (slice(start, min(start + c0, len(region))), *across)
            batch.append(target[where])
        row += len(target)
    return blocks, batch, stacked, [chunk_hash(chunk) for chunk in batch], buffer


def _take(spare: collections.deque[np.ndarray], nbytes: int) -> np.ndarray:
    """A byte buffer of at least ``nbytes``: one of ``spare`` if it is large enough, else
    a new one."""
    try:
        buffer = spare.popleft()
    except IndexError:  # none spare
        return np.empty(nbytes, dtype=np.uint8)
    return buffer if len(buffer) >= nbytes else np.empty(nbytes, dtype=np.uint8)


def _stack_chunks(
    chunks: list[np.ndarray], chunk_shape: tuple[int, ...], dtype: np.dtype, fill: Any
) -> np.ndarray:
    """Place chunks (possibly trimmed at the edge) in one full-size slab, padded."""
    c0 = chunk_shape[0]
    if len(chunks) == 1 and chunks[0].shape == chunk_shape:
        return np.asarray(chunks[0], dtype=dtype)
    buffer = np.empty((len(chunks) * c0, *tuple(chunk_shape[1:])), dtype=dtype)
    full = [chunk.shape == chunk_shape for chunk in chunks]
    i = 0
    while i < len(chunks):
        if full[i]:
            j = i
            while j < len(chunks) and full[j]:
                j += 1
            if j - i == 1:
                buffer[i * c0 : j * c0] = chunks[i]
            else:
                np.concatenate(chunks[i:j], axis=0, out=buffer[i * c0 : j * c0])
            i = j
            continue
        slot = buffer[i * c0 : (i + 1) * c0]
        rows = len(chunks[i])
        if chunks[i].shape[1:] == chunk_shape[1:]:  # short along axis 0 only
            slot[:rows] = chunks[i]
            slot[rows:] = fill
        else:
            slot[...] = fill
            slot[tuple(slice(0, n) for n in chunks[i].shape)] = chunks[i]
        i += 1
    return buffer
