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

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np

from h5vc.hdf5.damage import damaged
from h5vc.hdf5.header import (
    DATASPACE,
    DATATYPE,
    LAYOUT,
    PIPELINE,
    checked_messages,
    chunk_dims,
    same_datatype,
)
from h5vc.hdf5.mappings import StoredVirtual, stored_dims
from h5vc.store import planner
from h5vc.store.chunkmap import ChunkMap

if TYPE_CHECKING:
    from h5vc.staging import StagedChangesArray

#: Datatype classes of numbers (fixed-point and floating-point: the low bits of a
#: datatype message's first byte).
_NUMBER_CLASSES = frozenset((0, 1))
#: A dataset mapped in at most this many blocks has its first small read served by
#: HDF5 from its virtual dataset (an appended table has one block per rewritten
#: chunk): HDF5's look at every block costs less than making the chunk map.
FIRST_READ_BLOCKS = 1024
#: The header messages of ``raw_data`` :func:`small_reads` looks at.
_SOURCE_MESSAGES = frozenset((DATASPACE, DATATYPE, LAYOUT, PIPELINE))

__all__ = [
    "CommittedReader",
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

    def __getitem__(self, index: Any) -> Any:
        with damaged(str(self.dataset.file.filename), f"A chunk of {self.dataset.name}"):
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
        out = np.empty(tuple(counts), dtype=self.dtype)
        if reader.read(out, [starts], [[0] * len(counts)], [counts]):
            return None
        return out

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
        with damaged(str(self.dataset.file.filename), f"A chunk of {self.dataset.name}"):
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
        out = np.empty(plan.shape, dtype=self._dtype)
        for dst, count in zip(pieces.dst[pieces.fill].tolist(), pieces.count[pieces.fill].tolist()):
            out[tuple(slice(d, d + n) for d, n in zip(dst, count))] = self._fill
        stored = ~pieces.fill
        if stored.any():
            from h5vc.staging.transfer import read_many_slices  # loaded by the first such read

            ones = (1,) * out.ndim
            read_many_slices(
                self._slab_of_raw_data(),
                out,
                pieces.src[stored],
                pieces.dst[stored],
                pieces.count[stored],
                ones,
                ones,
            )
        if any(by_int for _, _, by_int in plan.box):
            return out[plan.squeeze()]
        return out


@dataclass(frozen=True, slots=True)
class SmallReads:
    """A committed dataset whose small reads HDF5 serves as its chunk map would (see
    :func:`small_reads`): its shape, item size, the name of the ``raw_data`` it maps
    and, for a dataset mapped as one block from a mapping list whose checksum was
    verified, that ``raw_data`` and where the block starts in it (read directly,
    without opening the virtual dataset)."""

    shape: tuple[int, ...]
    itemsize: int
    source: str
    raw_data: h5py.h5d.DatasetID | None = None
    dtype: np.dtype | None = None
    offset: tuple[int, ...] = ()
    #: Mapped in more than :data:`~h5vc.store.planner.HDF5_READ_BLOCKS` blocks: HDF5
    #: serves the first read only (it looks at every block on every read; later
    #: reads go through the chunk map).
    once: bool = False


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
