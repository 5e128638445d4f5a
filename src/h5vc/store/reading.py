"""Reading committed data: the plans of :mod:`h5vc.store.planner` carried out.

:class:`CommittedReader` serves every read of one committed dataset: it asks its
:class:`~h5vc.store.planner.ReadPlanner` for a plan and carries it out (the virtual
dataset through h5py, a block or pieces of ``raw_data`` through :class:`RawDataSlab`,
anything else through the staging engine).

The staging engine is pure numpy: it reads its base slabs through a small protocol
(:class:`~h5vc.staging.transfer.HyperslabReader`).  :class:`RawDataSlab` implements it
for an ``h5py.Dataset``: positioned reads of the chunks' bytes where
:mod:`h5vc.store.fastread` can serve them (and the planner says they pay), else one
low-level ``H5Dread`` per slice pair, hyperslab to hyperslab, with no temporary array
and none of the selection parsing h5py's high-level API does on every call (which
dominates when a read is split into many runs of chunks).
"""

from __future__ import annotations

import bisect
import math
import struct
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

import h5py
import numpy as np

from h5vc.errors import CorruptDataError
from h5vc.hdf5.chunkbytes import ChunkLocator, numeric_dtype
from h5vc.hdf5.damage import damaged
from h5vc.hdf5.filebytes import FileBytes, Header, Unreadable
from h5vc.hdf5.header import (
    DATASPACE,
    DATATYPE,
    FILL,
    LAYOUT,
    PIPELINE,
    HeaderDamage,
    PositionedReader,
    Record,
    check_header_bytes,
    checked_messages,
    checksum,
    chunk_dims,
    fill_value,
    same_datatype,
)
from h5vc.hdf5.mappings import (
    Mappings,
    StoredVirtual,
    decode_mappings,
    keep_by_bytes,
    stored_dims,
)
from h5vc.store import planner, results
from h5vc.store.chunkmap import ChunkMap, unique_sorted

if TYPE_CHECKING:
    from h5vc.staging import StagedChangesArray

#: Datatype classes of numbers (fixed-point and floating-point: the low bits of a
#: datatype message's first byte).
_NUMBER_CLASSES = frozenset((0, 1))
#: A dataset mapped in at most this many blocks has its first small read served by
#: HDF5 from its virtual dataset (an appended table has one block per rewritten
#: chunk): HDF5's look at every block costs less than making the chunk map.
FIRST_READ_BLOCKS = 1024
#: Up to this many mapping blocks :func:`first_read` looks at each in Python.
_LISTED_BLOCKS = 16
#: The header messages of ``raw_data`` :func:`small_reads` looks at.
_SOURCE_MESSAGES = frozenset((DATASPACE, DATATYPE, LAYOUT, PIPELINE))

__all__ = [
    "CommittedReader",
    "FileView",
    "first_read",
    "RawDataSlab",
    "SmallReads",
    "read_fill",
    "small_read",
    "small_reads",
    "staged_array",
]


class RawDataSlab:
    """An ``h5py.Dataset`` as a base slab of the staging engine."""

    __slots__ = ("_dtype", "dataset")

    def __init__(self, dataset: h5py.Dataset):
        self.dataset = dataset
        self._dtype: np.dtype | None = None

    @property
    def dtype(self) -> np.dtype:
        """The dataset's dtype, read once (h5py builds it anew on every access)."""
        if self._dtype is None:
            self._dtype = self.dataset.dtype
        return self._dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.dataset.shape)

    def _filename(self) -> str:
        return str(self.dataset.file.filename)

    def _chunk_of(self) -> str:
        return f"A chunk of {self.dataset.name}"

    def __getitem__(self, index: Any) -> Any:
        with damaged(self._filename, self._chunk_of):
            return self.dataset[index]

    def __len__(self) -> int:
        return len(self.dataset)

    def read_box(self, starts: list[int], counts: list[int]) -> np.ndarray | None:
        """``dataset[starts : starts + counts]`` as a new array, read by positioned
        reads; None when :mod:`h5vc.store.fastread` cannot serve it or the box is too
        small for positioned reads to pay (:func:`~h5vc.store.planner.positioned_reads_pay`)."""
        if not planner.positioned_reads_pay(math.prod(counts) * self.dtype.itemsize):
            return None
        from h5vc.store.fastread import fast_reader  # loaded by the first large read

        reader = fast_reader(self.dataset)
        if reader is None:
            return None
        out = results.empty(tuple(counts), self.dtype)  # (large: on a dropped result's memory)
        if reader.read(out, [starts], [[0] * len(counts)], [counts]):
            return None
        return out

    def read_pieces(
        self, destination: np.ndarray, src: np.ndarray, dst: np.ndarray, count: np.ndarray
    ) -> None:
        """``destination[dst : dst + count] = dataset[src : src + count]`` for every row
        of the ``(n, ndim)`` arrays: by positioned reads, which plan from the arrays as
        they are, where they serve and pay; the rest through :meth:`read_hyperslabs`."""
        nbytes = int(count.prod(axis=1).sum()) * self.dtype.itemsize
        if (
            destination.flags.c_contiguous
            and destination.dtype == self.dtype
            and planner.positioned_reads_pay(nbytes)
        ):
            from h5vc.store.fastread import fast_reader

            reader = fast_reader(self.dataset)
            if reader is not None:
                left = reader.read(destination, src, dst, count)
                if not left:
                    return
                src, dst, count = src[left], dst[left], count[left]
        ones = (1,) * destination.ndim
        if not self.read_hyperslabs(
            destination, src.tolist(), dst.tolist(), count.tolist(), ones, ones
        ):
            for src_row, dst_row, count_row in zip(src.tolist(), dst.tolist(), count.tolist()):
                destination[tuple(slice(d, d + n) for d, n in zip(dst_row, count_row))] = self[
                    tuple(slice(s, s + n) for s, n in zip(src_row, count_row))
                ]

    def read_hyperslabs(
        self,
        destination: np.ndarray,
        src_starts: list[list[int]],
        dst_starts: list[list[int]],
        counts: list[list[int]],
        src_step: tuple[int, ...],
        dst_step: tuple[int, ...],
    ) -> bool:
        """``destination[dst] = dataset[src]`` for every slice pair; False if ``destination``
        cannot be filled in place (the caller then copies through ``__getitem__``)."""
        if (
            not destination.flags.c_contiguous
            or destination.dtype.kind == "O"
            or self.dtype != destination.dtype
        ):
            return False
        if (
            all(step == 1 for step in src_step)
            and all(step == 1 for step in dst_step)
            and planner.positioned_reads_pay(sum(map(math.prod, counts)) * self.dtype.itemsize)
        ):
            from h5vc.store.fastread import fast_reader

            reader = fast_reader(self.dataset)
            if reader is not None:
                left = reader.read(destination, src_starts, dst_starts, counts)
                if not left:
                    return True
                src_starts = [src_starts[i] for i in left]
                dst_starts = [dst_starts[i] for i in left]
                counts = [counts[i] for i in left]
        dataset_id = self.dataset.id
        file_space = dataset_id.get_space()
        memory_space = file_space.copy()
        memory_space.set_extent_simple(destination.shape if destination.ndim else (1,))
        read = dataset_id.read
        select_file = file_space.select_hyperslab
        select_memory = memory_space.select_hyperslab
        src_stride = tuple(src_step)
        dst_stride = tuple(dst_step)
        with damaged(self._filename, self._chunk_of):
            for src_row, dst_row, counts_row in zip(src_starts, dst_starts, counts):
                count = tuple(counts_row)
                select_file(tuple(src_row), count, src_stride)
                select_memory(tuple(dst_row), count, dst_stride)
                read(memory_space, file_space, destination)
        return True


def read_fill(dtype: np.dtype, fillvalue: Any) -> Any:
    """The value unstored chunks read as: the fill value, or ``b""`` for strings
    (HDF5 has no fill value for variable-length data)."""
    if dtype.kind == "O":
        return b""
    if fillvalue is None:
        return np.zeros((), dtype=dtype)[()]
    return fillvalue


def staged_array(
    chunk_map: ChunkMap, raw_data: h5py.Dataset, dtype: np.dtype, fillvalue: Any
) -> StagedChangesArray:
    """A staging array whose chunks sit on ``raw_data`` per ``chunk_map``."""
    from h5vc.staging import StagedChangesArray  # loaded on the first staged array

    slots = chunk_map.slots
    stored = slots >= 0
    return StagedChangesArray(
        shape=chunk_map.shape,
        chunk_size=chunk_map.chunks,
        dtype=dtype,
        fill_value=fillvalue,
        base_slabs=[RawDataSlab(raw_data)],
        slab_indices=stored.astype(np.intp),
        slab_offsets=np.where(stored, slots * chunk_map.chunks[0], 0).astype(np.intp),
    )


class CommittedReader:
    """Every read of one committed dataset: planned, then carried out."""

    __slots__ = (
        "_array",
        "_chunk_map",
        "_dtype",
        "_fill",
        "_raw_data",
        "_slab",
        "_virtual",
        "planner",
    )

    def __init__(
        self,
        chunk_map: ChunkMap,
        raw_data: h5py.Dataset,
        fillvalue: Any,
        *,
        virtual: h5py.Dataset | None = None,
    ):
        """``fillvalue``: the dataset's (None: zeros); ``virtual``: the virtual dataset
        ``chunk_map`` was read from, which serves small reads when it maps few blocks."""
        dtype = raw_data.dtype
        self._chunk_map = chunk_map
        self._raw_data = raw_data
        self._dtype = dtype
        self._fill = read_fill(dtype, fillvalue)
        self._virtual = virtual
        self.planner = planner.ReadPlanner(
            chunk_map, dtype, virtual=virtual, raw_data=raw_data, fillvalue=self._fill
        )
        self._slab: RawDataSlab | None = None
        self._array: StagedChangesArray | None = None

    def engine(self) -> StagedChangesArray:
        """The staging engine's array of the dataset (made on first use)."""
        if self._array is None:
            self._array = staged_array(self._chunk_map, self._raw_data, self._dtype, self._fill)
        return self._array

    def read(self, index: Any) -> Any:
        """``dataset[index]``, as numpy gives it."""
        plan = self.planner.plan(index)
        if plan.path == "engine":
            return self.engine()[index]
        try:
            if plan.path == "virtual":
                assert self._virtual is not None
                return self._virtual[plan.selection()]
            if plan.path == "block":
                return self._read_block(plan)
            return self._read_pieces(plan)
        except OSError:
            raw_data = self._raw_data
            with damaged(str(raw_data.file.filename), f"A chunk of {raw_data.name}"):
                raise

    def _slab_of_raw_data(self) -> RawDataSlab:
        if self._slab is None:
            self._slab = RawDataSlab(self._raw_data)
        return self._slab

    def _read_block(self, plan: planner.ReadPlan) -> Any:
        """A box inside one run: one hyperslab of ``raw_data``."""
        starts, counts = plan.raw_block(self._chunk_map.chunks)
        out = self._slab_of_raw_data().read_box(starts, counts)
        if out is None:
            selection = tuple(
                start if by_int else slice(start, start + count)
                for start, count, (_, _, by_int) in zip(starts, counts, plan.box)
            )
            return self._raw_data[selection]
        return out[plan.squeeze()]

    def _read_pieces(self, plan: planner.ReadPlan) -> Any:
        """One piece per run and chunk column, read together; fill pieces filled."""
        pieces = plan.pieces
        assert pieces is not None
        out = results.empty(plan.shape, self._dtype)  # (large: on a dropped result's memory)
        for dst, count in zip(pieces.dst[pieces.fill].tolist(), pieces.count[pieces.fill].tolist()):
            out[tuple(slice(d, d + n) for d, n in zip(dst, count))] = self._fill
        stored = ~pieces.fill
        if stored.any():
            self._slab_of_raw_data().read_pieces(
                out, pieces.src[stored], pieces.dst[stored], pieces.count[stored]
            )
        if any(by_int for _, _, by_int in plan.box):
            return out[plan.squeeze()]
        return out


class SmallReads(Record):
    """A committed dataset whose small reads HDF5 serves as its chunk map would (see
    :func:`small_reads`): its shape, item size, the name of the ``raw_data`` it maps
    and, for a dataset mapped as one block from a mapping list whose checksum was
    verified, that ``raw_data`` and where the block starts in it (read directly,
    without opening the virtual dataset)."""

    shape: tuple[int, ...]
    itemsize: int
    source: str
    raw_data: h5py.h5d.DatasetID | None
    dtype: np.dtype | None
    offset: tuple[int, ...]
    #: Mapped in more than :data:`~h5vc.store.planner.HDF5_READ_BLOCKS` blocks: HDF5
    #: serves the first read only (it looks at every block on every read; later
    #: reads go through the chunk map).
    once: bool

    __slots__ = ("dtype", "itemsize", "offset", "once", "raw_data", "shape", "source")

    def __init__(
        self,
        shape: tuple[int, ...],
        itemsize: int,
        source: str,
        raw_data: h5py.h5d.DatasetID | None = None,
        dtype: np.dtype | None = None,
        offset: tuple[int, ...] = (),
        once: bool = False,
    ) -> None:
        self.shape = shape
        self.itemsize = itemsize
        self.source = source
        self.raw_data = raw_data
        self.dtype = dtype
        self.offset = offset
        self.once = once


def small_reads(
    stored: StoredVirtual, file_id: h5py.h5f.FileID, filename: str, where: str
) -> SmallReads | None:
    """Whether HDF5's small reads of a virtual dataset (``where``, in the file of
    ``file_id``) give what its chunk map would, so that they need neither the chunk
    map nor the chunk store (:func:`small_read`); None where not, and reads go through
    the chunk map (whose checks report damage).

    ``stored`` is what the virtual dataset's header says (read from the file's bytes
    before HDF5 opens it). It must map every element (no fill value involved) of
    numbers in at most :data:`FIRST_READ_BLOCKS` blocks of one
    ``raw_data`` of this file, which must be laid out as a chunk store is
    (``(slots * c0, *chunks[1:])``, blocks starting on slots), hold the same datatype
    message and have no filters. Its header is checked
    (:func:`~h5vc.hdf5.header.check_dataset_header`) before HDF5 opens it. Raises
    :class:`~h5vc.errors.CorruptDataError` if it is damaged."""
    mappings, shape, datatype = stored.mappings, stored.shape, stored.datatype
    blocks = max(len(mappings.virtual), len(mappings.source))
    if not shape or not blocks or blocks > FIRST_READ_BLOCKS or datatype is None:
        return None
    if len(datatype) < 8 or datatype[0] & 0x0F not in _NUMBER_CLASSES:
        return None
    if len(mappings.sources) != 1:
        return None
    ((source_file, source_dataset),) = mappings.sources
    # A few blocks: plain Python on lists costs less than numpy on tiny arrays.
    virtual_blocks, source_blocks = mappings.virtual.tolist(), mappings.source.tolist()
    extents = [[end - start + 1 for start, end in zip(*block)] for block in virtual_blocks]
    source_extents = [[end - start + 1 for start, end in zip(*block)] for block in source_blocks]
    size = math.prod(shape)
    if source_file != b"." or sum(map(math.prod, extents)) != size:
        return None
    if sum(map(math.prod, source_extents)) != size:
        return None
    name = source_dataset.replace(b"%%", b"%")
    parent, _, member = name.rpartition(b"/")
    if not parent.startswith(b"/") or not member:
        return None
    text = member.decode()
    try:
        with damaged(filename, f"The chunk store {parent.decode()}"):
            group = h5py.Group(h5py.h5g.open(file_id, parent))
            held = checked_messages(group, text, _SOURCE_MESSAGES)  # before HDF5 opens it
    except (KeyError, ValueError):  # h5py's words for a missing object
        return None  # the chunk map's way reports a missing store
    if (
        held is None
        or PIPELINE in held.messages
        or not same_datatype(held.messages.get(DATATYPE), datatype)
    ):
        return None
    rows = stored_dims(held)
    layout = held.messages.get(LAYOUT)
    chunks = None if layout is None else chunk_dims(layout, held.sizeof_addr)
    if rows is None or chunks is None or not len(rows) == len(chunks) == len(shape):
        return None
    if rows[1:] != chunks[1:] or rows[0] % chunks[0]:
        return None
    for start, end in source_blocks:
        if start[0] % chunks[0] or any(start[1:]):
            return None  # not on slots: the chunk map's way tells
        if any(stop >= n for stop, n in zip(end, rows)):
            return None  # past the end of raw_data: the chunk map's checks report it
    itemsize = int.from_bytes(datatype[4:8], "little")
    if blocks == 1 and stored.checksum_verified:
        (start, _), (virtual_start, _) = source_blocks[0], virtual_blocks[0]
        if source_extents[0] == extents[0]:
            with damaged(filename, f"Object {name.decode()}"):
                raw_data = h5py.h5d.open(group.id, member)
                dtype = raw_data.dtype
            offset = tuple(a - b for a, b in zip(start, virtual_start))
            return SmallReads(tuple(shape), itemsize, name.decode(), raw_data, dtype, offset)
    once = blocks > planner.HDF5_READ_BLOCKS
    return SmallReads(tuple(shape), itemsize, name.decode(), once=once)


def small_read(
    small: SmallReads, index: Any, filename: str, virtual: Callable[[], h5py.Dataset]
) -> Any:
    """``dataset[index]`` read by HDF5, from ``raw_data`` directly or from the virtual
    dataset (``virtual()`` opens it), where ``index`` is a basic selection of at most
    :data:`~h5vc.store.planner.HDF5_READ_BYTES` (``small``: what :func:`small_reads`
    found); ``NotImplemented`` for any other index (the chunk map's way reads it)."""
    box = planner.small_box(index, small.shape, small.itemsize)
    if box is None:
        return NotImplemented
    raw_data, dtype = small.raw_data, small.dtype
    if raw_data is None or dtype is None:
        dataset = virtual()
        with damaged(filename, f"A chunk of {small.source}"):
            return dataset[tuple(a if by_int else slice(a, b) for a, b, by_int in box)]
    # One hyperslab of raw_data, read by HDF5 into a new array (h5py's selection
    # machinery costs more than the read of a small box).
    counts = tuple(b - a for a, b, _ in box)
    out = np.empty(counts, dtype=dtype)
    with damaged(filename, f"A chunk of {small.source}"):
        file_space = raw_data.get_space()
        file_space.select_hyperslab(tuple(a + s for (a, _, _), s in zip(box, small.offset)), counts)
        raw_data.read(h5py.h5s.create_simple(counts), file_space, out)
    return out[tuple(0 if by_int else slice(None) for _, _, by_int in box)]


# First reads from the file's bytes ---------------------------------------------------


class _Placed:
    """The mappings of a virtual dataset as :class:`_Dataset` reads them, for one shape
    of it and of its ``raw_data``: a function of their bytes and these shapes only
    (see :class:`_Decoded`). Shared between datasets: never changed."""

    __slots__ = ("blocks", "listed", "reach", "rows", "starts", "unmapped")

    def __init__(self, blocks: np.ndarray | list[list[int]], ndim: int, elements: int):
        if isinstance(blocks, list):
            blocks = np.array(blocks, dtype=np.int64).reshape(-1, 3 * ndim)
        #: Whether some of the ``elements`` no block maps (read as the fill value).
        self.unmapped = len(blocks) == 0 or _mapped(blocks, ndim) < elements
        #: The blocks sorted by their first coordinate (:attr:`starts`): a read looks
        #: only at those that may reach its box (see :meth:`_Dataset.near`).
        blocks = blocks[np.argsort(blocks[:, 0], kind="stable")]
        blocks.flags.writeable = False
        self.blocks = blocks
        self.starts = blocks[:, 0]
        #: How far before a box's first row a block may start and still reach it:
        #: the longest extent along the first axis; 0 where the blocks follow one
        #: another along it (one dimension, or blocks of whole rows).
        self.reach = block_reach(blocks, ndim)
        #: The rows as Python lists, for a few blocks (plain Python reads them faster).
        self.listed: list[tuple[list[int], list[int], list[int]]] | None = None
        if len(blocks) <= _LISTED_BLOCKS:
            self.listed = [
                (row[:ndim], row[ndim : 2 * ndim], row[2 * ndim :]) for row in blocks.tolist()
            ]
        #: One dimension: the blocks as (first row, source row, rows) in order, and
        #: their first rows (see :func:`_read_rows`).
        self.rows: tuple[list[int], list[tuple[int, int, int]]] | None = None
        if ndim == 1:
            every = [(v, s, e) for v, s, e in blocks.tolist()]
            self.rows = [v for v, _, _ in every], every


class _Decoded:
    """A virtual dataset's mapping list decoded, its checksum found right: a function
    of its bytes alone, so kept by them (:func:`_decoded`) for every handle and file
    that holds the same bytes, whatever was written since (bytes that differ are
    another key)."""

    __slots__ = ("_placed", "many", "ndim", "pairs", "sources")

    def __init__(
        self,
        ndim: int,
        sources: frozenset[tuple[bytes, bytes]],
        pairs: list[tuple[list[int], list[list[int]]]],
        many: tuple[np.ndarray, np.ndarray] | None,
    ):
        self.ndim = ndim
        self.sources = sources
        self.pairs = pairs
        self.many = many
        self._placed: dict[tuple[tuple[int, ...], tuple[int, ...]], _Placed | None] = {}

    def placed(self, shape: tuple[int, ...], rows: tuple[int, ...]) -> _Placed | None:
        """The blocks in a dataset of ``shape`` over a ``raw_data`` of ``rows``; None
        unless they fit (see :func:`_blocks`)."""
        key = (shape, rows)
        if key in self._placed:
            return self._placed[key]
        blocks: np.ndarray | list[list[int]] | None
        if self.many is not None:
            blocks = _many_blocks(*self.many, shape, rows)
        else:
            blocks = _blocks(self.pairs, shape, rows)
        found = None if blocks is None else _Placed(blocks, self.ndim, math.prod(shape))
        self._placed[key] = found
        return found


#: Mapping lists decoded, by (bytes, rank, size of lengths): see :class:`_Decoded`.
_DECODED: dict[tuple[bytes, int, int], _Decoded | None] = {}
_DECODED_MUTEX = threading.Lock()
#: Bytes of the mapping lists :data:`_DECODED` keeps at most (the oldest go first);
#: a longer list is decoded each time.
DECODED_BYTES = 4 << 20
_decoded_bytes = 0


def _decoded(
    fb: FileBytes, blob: bytes, ndim: int, damage: Callable[[], Exception]
) -> _Decoded | None:
    """The mapping list ``blob`` of a virtual dataset of rank ``ndim`` decoded (None
    where it is not read here): found by its bytes if they were decoded before.
    Raises ``damage()`` where its checksum disagrees."""
    global _decoded_bytes
    key = (blob, ndim, fb.sizeof_size)
    kept = len(blob) <= DECODED_BYTES  # (a longer list is not hashed either)
    if kept:
        try:
            return _DECODED[key]
        except KeyError:
            pass
    if checksum(blob[:-4]) != int.from_bytes(blob[-4:], "little"):
        raise damage()
    found = _decode(fb, blob, ndim)
    if kept:
        with _DECODED_MUTEX:
            _decoded_bytes = keep_by_bytes(_DECODED, key, found, _decoded_bytes, DECODED_BYTES)
    return found


def _decode(fb: FileBytes, blob: bytes, ndim: int) -> _Decoded | None:
    count = int.from_bytes(blob[1 : 1 + fb.sizeof_size], "little")
    # A few mappings are decoded in Python, many at once with numpy.
    mappings = fb.decode_mappings(blob, ndim) if count <= _LISTED_BLOCKS else None
    if mappings is not None and len(mappings.virtual) == len(mappings.source) == count * 2 * ndim:
        step = 2 * ndim
        flat_v, flat_s = mappings.virtual, mappings.source
        pairs = [
            (flat_v[i : i + step], [flat_s[i : i + step]]) for i in range(0, len(flat_v), step)
        ]
        return _Decoded(ndim, frozenset(mappings.sources), pairs, None)
    # Names shared between entries, several blocks a mapping: the general decoder.
    try:
        decoded = decode_mappings(blob, ndim, fb.sizeof_size)
    except Exception:  # its damage and its "unknown" encodings alike
        return None
    many = _paired(decoded, ndim)
    if many is None:
        return None
    return _Decoded(ndim, frozenset(decoded.sources), [], many)


class _Dataset:
    """What a first read of one committed dataset needs, read from the file's bytes:
    its shape and dtype, its ``raw_data``'s chunk locator and row size, its mappings
    as ``(virtual start, source start, extent)`` rows, and the value of the elements
    they leave unmapped."""

    __slots__ = (
        "blocks",
        "dtype",
        "fill",
        "listed",
        "locator",
        "reach",
        "row_bytes",
        "rows",
        "shape",
        "source",
        "starts",
    )

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: np.dtype,
        locator: ChunkLocator,
        row_bytes: int,
        placed: _Placed,
        source: str = "",
        fill: Any = None,
    ):
        """``fill``: the value of elements no block maps, where some are (the caller
        checked that the blocks do not overlap)."""
        #: The path of the ``raw_data`` the mappings name.
        self.source = source
        self.shape = shape
        self.dtype = dtype
        self.locator = locator
        self.row_bytes = row_bytes
        #: The value of the elements no block maps; None where every element is mapped.
        self.fill = fill
        self.blocks = placed.blocks
        self.starts = placed.starts
        self.reach = placed.reach
        self.listed = placed.listed
        self.rows = placed.rows

    def near(self, first: int, stop: int) -> np.ndarray:
        """The blocks that may meet rows ``first`` up to ``stop`` of the first axis."""
        starts = self.starts
        low = int(starts.searchsorted(first - self.reach, "right"))
        high = int(starts.searchsorted(stop, "left"))
        if not self.reach:  # the block holding row ``first`` starts at or before it
            low = max(0, int(starts.searchsorted(first, "right")) - 1)
        return self.blocks[low:high]


class FileView:
    """A read-only file's bytes, read for first reads of committed datasets (see
    :func:`first_read`): the links of the groups walked, the chunk stores and the
    datasets found, by address. Valid while the file's bytes are what they were when
    it was made: one per handle and generation of a :class:`~h5vc.versions.FileState`
    (read under the file's read lock)."""

    def __init__(self, file_bytes: FileBytes, root: int, filename: str):
        self.bytes = file_bytes
        self.root = root
        self.filename = filename
        self._links: dict[int, dict[str, int] | None] = {}
        self._paths: dict[str, int | None] = {"/": root}
        #: The file's root group (HDF5 looks up links of groups not read here),
        #: opened from :attr:`_file` when first needed.
        self._root_group: h5py.h5g.GroupID | None = None
        self._file: h5py.h5f.FileID | None = None
        self._stores: dict[bytes, tuple[int, ChunkLocator, bytes, tuple[int, ...]] | None] = {}
        self._datasets: dict[int, _Dataset | None] = {}
        self._headers: dict[int, Header] = {}
        self._kinds: dict[str, dict[str, bool] | None] = {}

    @classmethod
    def of(cls, file: h5py.File, filename: str) -> FileView | None:
        """The view of ``file`` if it is open read-only through an OS file descriptor
        and HDF5's checksum function can be called; else None."""
        from h5vc.hdf5.clib import lookup3

        if lookup3() is None:
            return None
        file_bytes = FileBytes.of(file)
        if file_bytes is None:
            return None
        root_group = h5py.h5g.open(file.id, b"/")
        view = cls(file_bytes, int(h5py.h5o.get_info(root_group).addr), filename)
        view._root_group = root_group
        return view

    def over(self, file: h5py.File | None) -> FileView:
        """This view for another handle of the same bytes (opened since, read-only):
        what was read is shared, HDF5's lookups go through ``file`` (None: no
        handle; such a view is only copied)."""
        view = object.__new__(type(self))  # the same map and dictionaries
        view.__dict__.update(self.__dict__)  # (what copy.copy does, at a third the cost)
        view._root_group, view._file = None, None if file is None else file.id
        return view

    def apart(self) -> FileView:
        """A copy of this view (with no handle) whose findings from now on are its
        own: what was read is copied, not shared (the map is)."""
        view = FileView(self.bytes, self.root, self.filename)
        view._links = dict(self._links)
        view._paths = dict(self._paths)
        view._stores = dict(self._stores)
        view._datasets = dict(self._datasets)
        view._headers = dict(self._headers)
        view._kinds = dict(self._kinds)
        return view

    def close(self) -> None:
        self.bytes.close()

    def links(self, address: int) -> dict[str, int] | None:
        """The hard links of the group at ``address`` by name; None where they cannot
        be read here (not a group, dense storage, soft links: HDF5 reads them)."""
        if address in self._links:
            return self._links[address]
        fb = self.bytes
        try:
            found = fb.links(fb.header(address))
            links = None if found is None else dict(found)
        except Unreadable:
            links = None
        self._links[address] = links
        return links

    def address(self, path: str) -> int | None:
        """The header address of the object at absolute ``path``; None where the links
        leading to it cannot be read here or it is not there."""
        if path in self._paths:
            return self._paths[path]
        parent, _, name = path.rstrip("/").rpartition("/")
        found: int | None = self.root
        if name:
            above = self._paths.get(parent or "/")
            links = None if above is None else self._links.get(above)
            if links is not None:  # the group's links were read: a member of them
                found = links.get(name)
            else:  # one link lookup by HDF5 (reading a large group's links costs more)
                try:
                    root_group = self._root_group
                    if root_group is None:
                        assert self._file is not None
                        root_group = self._root_group = h5py.h5g.open(self._file, b"/")
                    info = root_group.links.get_info(path.encode())
                    found = int(info.u) if info.type == h5py.h5l.TYPE_HARD else None
                except (KeyError, RuntimeError, ValueError):
                    found = None
        self._paths[path] = found
        return found

    def header(self, address: int) -> Header:
        """The header at ``address`` (see :meth:`FileBytes.header`), read once."""
        found = self._headers.get(address)
        if found is None:
            found = self._headers[address] = self.bytes.header(address)
        return found

    def is_dataset(self, path: str) -> bool | None:
        """Whether the object at absolute ``path`` is a dataset; None where that is not
        known here (HDF5 is asked)."""
        parent, _, name = path.rpartition("/")
        kinds = self.kinds(parent)
        return None if kinds is None else kinds.get(name)

    def kinds(self, path: str) -> dict[str, bool] | None:
        """Whether each member of the group at absolute ``path`` is a dataset (read
        for every member at once: the first read of a version reads its datasets'
        headers, which its reads need next); None where not known here."""
        if path in self._kinds:
            return self._kinds[path]
        address = self.address(path)
        links = None if address is None else self.links(address)
        kinds: dict[str, bool] | None = None
        if links is not None:
            is_dataset, header = self.bytes.is_dataset, self.header
            try:
                kinds = {name: is_dataset(header(member)) for name, member in links.items()}
            except Unreadable:
                kinds = None
        self._kinds[path] = kinds
        return kinds

    def known_kinds(self, path: str) -> dict[str, bool] | None:
        """:meth:`kinds` of ``path`` if they were read already (nothing is read)."""
        return self._kinds.get(path)

    def dataset(self, address: int, where: str) -> _Dataset | None:
        """What a first read of the virtual dataset at ``address`` (``where`` names
        it) needs; None where it cannot be read from the bytes (then HDF5 reads it).
        Raises :class:`~h5vc.errors.CorruptDataError` where a checksum disagrees."""
        if address in self._datasets:
            return self._datasets[address]
        try:
            found = self._dataset(address, where)
        except (Unreadable, struct.error, ValueError, IndexError, OverflowError):
            found = None
        self._datasets[address] = found
        return found

    def _dataset(self, address: int, where: str) -> _Dataset | None:
        fb = self.bytes
        header = self.header(address)
        shape = fb.dims(header)
        datatype = header.messages.get(DATATYPE)
        if not shape or datatype is None or not all(shape):
            return None
        datatype_bytes = fb.map[datatype[0] : datatype[0] + datatype[1]]
        dtype = numeric_dtype(datatype_bytes)
        if dtype is None:
            return None
        blob = fb.mapping_list(header)
        if not blob:
            return None
        ndim = len(shape)

        def damage() -> CorruptDataError:
            return CorruptDataError(
                f"The virtual mappings of {where} in {self.filename!r} are damaged: their "
                f"checksum disagrees. Run h5vc.verify on the file; restore it from a copy "
                f"if it was written."
            )

        decoded = _decoded(fb, blob, ndim, damage)
        if decoded is None or len(decoded.sources) != 1:
            return None
        ((source_file, source_name),) = decoded.sources
        if source_file != b".":
            return None
        store = self._store(source_name)
        if store is None:
            return None
        _, locator, store_type, rows = store
        if not same_datatype(store_type, datatype_bytes) or len(rows) != ndim:
            return None
        chunks = locator.chunks
        if rows[1:] != chunks[1:] or rows[0] % chunks[0]:
            return None
        placed = decoded.placed(tuple(shape), rows)
        if placed is None:
            return None
        fill = None
        if placed.unmapped:
            # Elements no block maps read as the fill value: known, and with blocks
            # that cannot overlap (one after another along the first axis).
            fill = self._fill_value(header, dtype)
            if fill is None or placed.reach:
                return None
        row_bytes = dtype.itemsize * math.prod(rows[1:])
        source = source_name.replace(b"%%", b"%").decode()
        return _Dataset(tuple(shape), dtype, locator, row_bytes, placed, source, fill)

    def _fill_value(self, header: Header, dtype: np.dtype) -> Any:
        """The fill value the virtual dataset's header gives (a numpy scalar of
        ``dtype``); None where it has none read here."""
        found = header.messages.get(FILL)
        if found is None:
            return None
        stored = fill_value(self.bytes.map[found[0] : found[0] + found[1]])
        if stored is None or len(stored) not in (0, dtype.itemsize):
            return None
        if not stored:
            return dtype.type(0)
        return np.frombuffer(stored, dtype=dtype)[0]

    def _store(self, name: bytes) -> tuple[int, ChunkLocator, bytes, tuple[int, ...]] | None:
        """The ``raw_data`` named ``name``: (address, chunk locator, datatype message,
        dimensions), if it is an unfiltered chunked dataset of numbers read here."""
        if name in self._stores:
            return self._stores[name]
        found = None
        path = name.replace(b"%%", b"%").decode()
        address = self.address(path) if path.startswith("/") else None
        if address is not None:
            fb = self.bytes
            try:
                self._check_header(address, path)
                header = fb.header(address, whole=True)
                messages = header.messages
                rows = fb.dims(header)
                if PIPELINE not in messages and LAYOUT in messages and DATATYPE in messages:
                    pos, length = messages[LAYOUT]
                    locator = ChunkLocator(fb, fb.map[pos : pos + length], path, self.filename)
                    pos, length = messages[DATATYPE]
                    datatype = fb.map[pos : pos + length]
                    if rows and locator.element == numeric_dtype(datatype).itemsize:  # type: ignore[union-attr]
                        found = (address, locator, datatype, tuple(rows))
            except (Unreadable, AttributeError, ValueError, struct.error):
                found = None
        self._stores[name] = found
        return found

    def _check_header(self, address: int, path: str) -> None:
        """Raise :class:`~h5vc.errors.CorruptDataError` if the version-1 header at
        ``address`` is damaged in a way HDF5 would not survive decoding (as HDF5 is
        not asked here, the next writer would open it: see
        :func:`~h5vc.hdf5.header.check_dataset_header`). A version-2 header's checksum
        is checked as it is read."""
        fb = self.bytes
        pos = fb._at(address, 4)
        if fb.map[pos : pos + 4] == b"OHDR":
            return
        try:
            check_header_bytes(
                cast(PositionedReader, _MapReader(fb)), address, fb.sizeof_addr, fb.sizeof_size
            )
        except HeaderDamage as damage:
            raise CorruptDataError(
                f"The object header of {path} in {self.filename!r} is damaged and cannot "
                f"be read: {damage}. Run h5vc.verify on the file; restore it from a copy "
                f"if it was written."
            ) from None


def _paired(mappings: Mappings, ndim: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``mappings`` as pairs of one virtual and one source block of the same extent,
    ``(n, 2, ndim)`` first and last coordinates a side; None where HDF5's pairing of
    their elements is not one of whole rows.

    HDF5 walks each side of a mapping in row-major order and pairs the elements in
    turn. Where every block of a side spans the same range in each axis but the first
    (and these ranges are as long on both sides), that walk takes whole rows of the
    first axis, block after block: the k-th row of the virtual side is the k-th row
    of the source side. A mapping of several blocks (h5vc's merged runs) is cut
    where a block of either side ends."""
    virtual, source = mappings.virtual, mappings.source
    v_counts, s_counts = mappings.counts, mappings.source_counts
    if (v_counts == 1).all() and (s_counts == 1).all():
        return virtual, source
    if len(v_counts) != len(s_counts) or (v_counts < 1).any() or (s_counts < 1).any():
        return None
    sides = []
    for blocks, counts in ((virtual, v_counts), (source, s_counts)):
        if len(blocks) != int(counts.sum()):
            return None
        owner = np.repeat(np.arange(len(counts)), counts)
        lead = blocks[(np.cumsum(counts) - counts)[owner]]  # each block's mapping's first
        if ndim > 1 and (blocks[:, :, 1:] != lead[:, :, 1:]).any():
            return None
        rows = blocks[:, 1, 0] - blocks[:, 0, 0] + 1
        within = owner[1:] == owner[:-1]
        if (rows <= 0).any() or (blocks[1:, 0, 0][within] <= blocks[:-1, 1, 0][within]).any():
            return None  # not in HDF5's order: leave it to HDF5
        ends = np.cumsum(rows)
        sides.append((blocks, ends, ends[np.cumsum(counts) - 1], lead))
    (v_blocks, v_ends, v_totals, v_lead), (s_blocks, s_ends, s_totals, s_lead) = sides
    if (v_totals != s_totals).any():
        return None  # a mapping's sides of different sizes
    if ndim > 1:
        v_width = v_lead[:, 1, 1:] - v_lead[:, 0, 1:]
        s_width = s_lead[:, 1, 1:] - s_lead[:, 0, 1:]
        if (v_width[v_counts.cumsum() - v_counts] != s_width[s_counts.cumsum() - s_counts]).any():
            return None
    starts = unique_sorted(
        np.concatenate((v_ends - (v_blocks[:, 1, 0] - v_blocks[:, 0, 0] + 1), s_ends[:-1]))
    )
    stops = np.append(starts[1:], v_ends[-1])
    pieces = []
    for blocks, ends in ((v_blocks, v_ends), (s_blocks, s_ends)):
        at = np.searchsorted(ends, starts, side="right")
        rows = blocks[at, 1, 0] - blocks[at, 0, 0] + 1
        piece = blocks[at].copy()
        piece[:, 0, 0] += starts - (ends[at] - rows)
        piece[:, 1, 0] = piece[:, 0, 0] + (stops - starts) - 1
        pieces.append(piece)
    return pieces[0], pieces[1]


def _many_blocks(
    virtual: np.ndarray, source: np.ndarray, shape: tuple[int, ...], rows: tuple[int, ...]
) -> np.ndarray | None:
    """:func:`_blocks` of mappings of one block a side, ``(n, 2, ndim)`` first and
    last coordinates each, checked at once."""
    extent = virtual[:, 1] - virtual[:, 0] + 1
    if (extent <= 0).any() or (extent != source[:, 1] - source[:, 0] + 1).any():
        return None
    if (virtual[:, 1] >= np.array(shape)).any() or (source[:, 1] >= np.array(rows)).any():
        return None
    if (source[:, 0] < 0).any() or int(extent.prod(axis=1).sum()) > math.prod(shape):
        return None
    return np.concatenate([virtual[:, 0], source[:, 0], extent], axis=1).astype(np.int64)


def _blocks(
    pairs: list[tuple[list[int], list[list[int]]]],
    shape: tuple[int, ...],
    rows: tuple[int, ...],
) -> list[list[int]] | None:
    """The mappings ``pairs`` (a virtual block's first and last coordinates, and those
    of its source blocks) as ``(virtual start, source start, extent)`` rows of
    ``3 * ndim`` numbers, one per block of the same extent on both sides; None unless
    they map elements of ``shape`` (at most as many as it has) from inside ``rows``
    (where they leave some unmapped, see :meth:`FileView._dataset`). A virtual block
    of several source blocks is cut where they meet, when all span whole rows (then
    HDF5's element order, row-major on both sides, pairs row with row)."""
    ndim = len(shape)
    out: list[list[int]] = []
    total = 0
    whole = list(shape[1:]) == list(rows[1:])
    for virtual, sources in pairs:
        v_first, v_last = virtual[:ndim], virtual[ndim:]
        extent = [b - a + 1 for a, b in zip(v_first, v_last)]
        if min(extent) <= 0 or any(b >= n for b, n in zip(v_last, shape)):
            return None
        if len(sources) > 1 and (
            not whole or any(v_first[1:]) or any(b + 1 != n for b, n in zip(v_last[1:], shape[1:]))
        ):
            return None
        at = v_first[0]
        for source in sources:
            s_first, s_last = source[:ndim], source[ndim:]
            s_extent = [b - a + 1 for a, b in zip(s_first, s_last)]
            if min(s_extent) <= 0 or any(b >= n for b, n in zip(s_last, rows)):
                return None
            if s_extent[1:] != extent[1:] or (len(sources) == 1 and s_extent != extent):
                return None
            out.append([at, *v_first[1:], *s_first, *s_extent])
            total += math.prod(s_extent)
            at += s_extent[0]
        if at != v_last[0] + 1:
            return None
    if not out or total > math.prod(shape):
        return None  # an element mapped twice
    return out


def _mapped(blocks: np.ndarray | list[list[int]], ndim: int) -> int:
    """How many elements ``blocks`` (rows of ``3 * ndim`` numbers) map."""
    if isinstance(blocks, list):
        return sum(math.prod(row[2 * ndim :]) for row in blocks)
    return int(blocks[:, 2 * ndim :].prod(axis=1).sum())


def block_reach(blocks: np.ndarray, ndim: int) -> int:
    """:attr:`_Dataset.reach` of ``blocks`` (rows of ``3 * ndim`` numbers, sorted by
    their first): 0 where each block ends before the next starts along the first axis
    (so no two overlap), else the longest extent along it."""
    starts, extent = blocks[:, 0], blocks[:, 2 * ndim]
    if len(blocks) <= 1 or (starts[1:] >= starts[:-1] + extent[:-1]).all():
        return 0
    return int(extent.max())


def _source_pieces(
    locator: ChunkLocator, row: int, stop: int
) -> Iterator[tuple[int | None, int, int]]:
    """Source rows ``row`` up to ``stop``, chunk by chunk: the chunk's address (None
    where it is not found here), the first row in it and the number of rows."""
    c0 = locator.chunks[0]
    while row < stop:
        slot, offset = divmod(row, c0)
        count = min(stop - row, c0 - offset)
        yield locator.address(slot), offset, count
        row += count


def _read_rows(
    view: FileView,
    dataset: _Dataset,
    rows: tuple[list[int], list[tuple[int, int, int]]],
    first: int,
    stop: int,
) -> Any:
    """Elements ``first`` up to ``stop`` of the one-dimensional ``dataset``;
    ``NotImplemented`` where a block or chunk is not found here."""
    firsts, blocks = rows
    number = max(0, bisect.bisect_right(firsts, first) - 1)
    if view.bytes.cut():
        return NotImplemented
    dtype = dataset.dtype
    fill = dataset.fill
    out = np.empty(stop - first, dtype=dtype)
    locator, itemsize = dataset.locator, dataset.row_bytes
    data, base = view.bytes.map, view.bytes.base
    at = first
    while at < stop:
        if number < len(blocks) and blocks[number][0] + blocks[number][2] <= at:
            number += 1  # the block before ``first`` ends before it
            continue
        gap_end = stop if number >= len(blocks) else min(stop, blocks[number][0])
        if at < gap_end:  # elements no block maps
            if fill is None:
                return NotImplemented
            out[at - first : gap_end - first] = fill
            at = gap_end
            continue
        v_start, s_start, extent = blocks[number]
        end = min(stop, v_start + extent)
        row = s_start + at - v_start
        for address, offset, count in _source_pieces(locator, row, row + end - at):
            if address is None:
                return NotImplemented
            start = base + address + offset * itemsize
            out[at - first : at - first + count] = np.frombuffer(
                data[start : start + count * itemsize], dtype=dtype
            )
            at += count
        number += 1
    return out


class _MapReader:
    """:class:`~h5vc.hdf5.header.PositionedReader`'s reads, from a file's map."""

    def __init__(self, file_bytes: FileBytes):
        self._bytes = file_bytes

    def read(self, address: int, nbytes: int) -> bytes:
        fb = self._bytes
        if address < 0 or address >= fb.size:
            raise HeaderDamage(f"address {address} lies beyond the end of the file")
        start = fb.base + address
        return fb.map[start : start + min(nbytes, fb.size - address)]

    def within(self, address: int, nbytes: int) -> bool:
        return address >= 0 and address + nbytes <= self._bytes.size


def first_read(view: FileView, dataset: _Dataset, index: Any) -> Any:
    """``dataset[index]`` read from the file's bytes, where ``index`` is a basic
    selection of at most :data:`~h5vc.store.planner.HDF5_READ_BYTES`;
    ``NotImplemented`` for any other index or a chunk not found here."""
    dtype = dataset.dtype
    rows = dataset.rows
    if rows is not None:
        # One dimension, one slice or position: the blocks in order, in plain Python.
        size = dataset.shape[0]
        if type(index) is int:
            position = index + size if index < 0 else index
            if 0 <= position < size:
                found = _read_rows(view, dataset, rows, position, position + 1)
                return found if found is NotImplemented else found[0]
        elif isinstance(index, slice) and (index.step is None or index.step == 1):
            begin, end, _ = index.indices(size)
            if begin < end and (end - begin) * dtype.itemsize <= planner.HDF5_READ_BYTES:
                return _read_rows(view, dataset, rows, begin, end)
    box = planner.small_box(index, dataset.shape, dtype.itemsize)
    if box is None:
        return NotImplemented
    low = [a for a, _, _ in box]
    high = [b for _, b, _ in box]
    ndim = len(low)
    hits: list[tuple[list[int], list[int], list[int], list[int]]] = []
    listed = dataset.listed
    near = None
    if listed is None:
        near = dataset.near(low[0], high[0])
        if len(near) <= _LISTED_BLOCKS:
            listed = [(r[:ndim], r[ndim : 2 * ndim], r[2 * ndim :]) for r in near.tolist()]
    if listed is not None:  # a few blocks: plain Python costs less than numpy
        for v_start, s_start, extent in listed:
            first = [max(v, lo) for v, lo in zip(v_start, low)]
            last = [min(v + e, hi) for v, e, hi in zip(v_start, extent, high)]
            if all(f < t for f, t in zip(first, last)):
                hits.append((first, last, v_start, s_start))
    else:
        blocks = cast(np.ndarray, near)
        starts, sources = blocks[:, :ndim], blocks[:, ndim : 2 * ndim]
        firsts = np.maximum(starts, low)
        lasts = np.minimum(starts + blocks[:, 2 * ndim :], high)
        hit = (firsts < lasts).all(axis=1)
        hits = list(
            zip(
                firsts[hit].tolist(),
                lasts[hit].tolist(),
                starts[hit].tolist(),
                sources[hit].tolist(),
            )
        )
    if view.bytes.cut():  # HDF5 reads it instead, and reports the bytes missing
        return NotImplemented
    counts = tuple(b - a for a, b in zip(low, high))
    fill = dataset.fill
    out = np.empty(counts, dtype=dtype) if fill is None else np.full(counts, fill, dtype=dtype)
    locator, row_bytes = dataset.locator, dataset.row_bytes
    data = view.bytes.map
    base = view.bytes.base
    for v_first, v_last, v_start, s_start in hits:
        # The source rows of this block's part of the box, chunk by chunk along axis 0.
        row = s_start[0] + v_first[0] - v_start[0]
        stop = row + v_last[0] - v_first[0]
        rest_src = tuple(
            slice(s + a - v, s + b - v)
            for s, a, b, v in zip(s_start[1:], v_first[1:], v_last[1:], v_start[1:])
        )
        rest_dst = tuple(
            slice(a - lo, b - lo) for a, b, lo in zip(v_first[1:], v_last[1:], low[1:])
        )
        at = v_first[0] - low[0]
        for address, offset, count in _source_pieces(locator, row, stop):
            if address is None:
                return NotImplemented
            start = base + address + offset * row_bytes
            piece = np.frombuffer(data[start : start + count * row_bytes], dtype=dtype)
            piece = piece.reshape((count, *locator.chunks[1:]))
            target = (slice(at, at + count), *rest_dst)
            source = (slice(None), *rest_src)
            out[target] = piece[source]
            at += count
    return out[tuple(0 if by_int else slice(None) for _, _, by_int in box)]
