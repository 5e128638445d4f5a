"""The read planner of committed datasets: which way a read goes, and why.

Every read of a committed dataset (``vf[version][path][index]``) is planned here, once,
and carried out by :class:`h5vc.store.reading.CommittedReader`. A plan
(:class:`ReadPlan`) names its path, the reason it was chosen, and what the path needs:

``virtual``
    HDF5 reads the selection from the version's virtual dataset. Chosen for a small
    basic selection (at most :data:`HDF5_READ_BYTES`) of a numeric dataset whose
    virtual dataset maps few blocks (at most :data:`HDF5_READ_BLOCKS`) of its own
    store's ``raw_data``: for a few chunks, looking up file offsets and planning
    positioned reads costs more than HDF5's own read (about 0.1 ms for 16 chunks of
    8 KiB, against 0.2 ms warm). HDF5 looks at every block of every mapping on every
    read, so its cost grows with their number; at 64 blocks and 512 KiB both ways
    cost the same.
``block``
    The selection is a box inside one run of chunks (chunks consecutive along axis 0
    and in consecutive ``raw_data`` slots): one hyperslab of ``raw_data``, read by
    positioned reads (:mod:`h5vc.store.fastread`) when it holds at least
    :data:`FAST_READ_MIN_BYTES`, else by h5py (whose compiled reader and chunk cache
    serve a few chunks in 30-60 us, less than the positioned reads' fixed cost).
``pieces``
    A box across several runs or chunk columns: one piece per run and column (a
    :class:`Pieces`: source and destination corners and counts, fill pieces marked),
    planned with numpy and read together by positioned reads. At most
    :data:`MAX_PIECES` pieces.
``engine``
    Everything else goes through the staging engine (:mod:`h5vc.staging`), which
    handles any selection numpy does (steps, arrays, masks, variable-length data,
    indices out of range with numpy's errors). Every path returns what the engine
    returns: the other three are shortcuts, not second semantics.

Below a plan, positioned reads choose how bytes travel, with thresholds kept here too:
rows that land in stretches of the result of at least :data:`SCATTER_MIN_BYTES` are
read straight into it (:mod:`h5vc.hdf5.scatter`, whose calls bridge gaps of up to
:data:`SCATTER_MAX_GAP` bytes); other uncompressed rows are read in pieces of
:data:`PIECE_BYTES` into a buffer of the reading thread and copied into place;
compressed chunks are fetched in runs of about :data:`BUFFER_BYTES` and decoded on
every core. Threads keep buffers of up to :data:`KEEP_BYTES` for their next read.

The planner reads nothing: :meth:`ReadPlanner.plan` is pure, so tests inspect plans.
"""

from __future__ import annotations

from typing import Any, Literal

import h5py
import numpy as np

import h5vc.config as config
from h5vc.hdf5.header import Record
from h5vc.store.chunkmap import ChunkMap
from h5vc.store.vds import source_name

__all__ = [
    "BUFFER_BYTES",
    "FAST_READ_MIN_BYTES",
    "HDF5_READ_BLOCKS",
    "HDF5_READ_BYTES",
    "KEEP_BYTES",
    "MAX_PIECES",
    "PIECE_BYTES",
    "SCATTER_MAX_GAP",
    "SCATTER_MIN_BYTES",
    "Extent",
    "Pieces",
    "ReadPlan",
    "ReadPlanner",
    "positioned_reads_pay",
    "small_box",
]

# -- thresholds (every one the read path has; set in h5vc.config, H5VC_<NAME>) -------

#: Basic selections of at most this many bytes, of a virtual dataset whose mappings
#: hold at most HDF5_READ_BLOCKS blocks, are read by HDF5 from the virtual dataset.
HDF5_READ_BYTES = config.HDF5_READ_BYTES
HDF5_READ_BLOCKS = config.HDF5_READ_BLOCKS

#: Boxes cut into more pieces than this go through the staging engine.
MAX_PIECES = config.MAX_PIECES

#: Reads of fewer bytes than this go through h5py rather than positioned reads: from
#: about 16 chunks of 8 KiB on, positioned reads win (1.4x at 64 Ki float64, 3.6x at
#: 256 Ki).
FAST_READ_MIN_BYTES = config.FAST_READ_MIN_BYTES

#: Uncompressed bytes are read in pieces of at most this size into a buffer of the
#: reading thread, then copied into place; the pieces are shared out between threads
#: in the order of their place in the result. Full reads of 80 MB took the same time
#: with 1, 4 or 16 MiB pieces; 256 KiB and smaller pieces pay for their count in
#: Python overhead.
PIECE_BYTES = config.PIECE_BYTES

#: Stretches of the result at least this long are read straight into it by scatter
#: reads; shorter ones through a buffer and numpy's copy (a 100x100 float64 chunk of
#: a wide 2-D result is 100 stretches of 800 bytes: the kernel's copy per stretch
#: costs more than numpy's).
SCATTER_MIN_BYTES = config.SCATTER_MIN_BYTES

#: A scatter read bridges a gap of at most this many bytes between two stretches of
#: the file (reading it into a throw-away buffer); a longer one ends the call.
#: Copying 8 KiB costs about what one more call does.
SCATTER_MAX_GAP = config.SCATTER_MAX_GAP

#: Compressed chunks are fetched in runs of about this many stored bytes, each by the
#: thread that decodes them, into a buffer small enough to stay in its cache.
BUFFER_BYTES = config.BUFFER_BYTES

#: A thread keeps its read buffers up to this size for its next read (their pages are
#: then already mapped).
KEEP_BYTES = config.KEEP_BYTES


def positioned_reads_pay(nbytes: int) -> bool:
    """Whether a read of ``nbytes`` bytes of ``raw_data`` goes by positioned reads
    (where they can serve it) rather than through h5py."""
    return nbytes >= FAST_READ_MIN_BYTES


# -- plans ---------------------------------------------------------------------------

#: One axis of a box: ``start``, ``stop`` and whether an integer selected it (the
#: axis is then dropped from the result).
Extent = tuple[int, int, bool]

Path = Literal["virtual", "block", "pieces", "engine"]


class Pieces(Record):
    """Pieces of a box, one per run of chunks and chunk column, as parallel arrays:
    ``raw_data[src : src + count]`` goes to ``result[dst : dst + count]`` (rows of
    shape ``(n, ndim)``), or the fill value where ``fill`` is set."""

    src: np.ndarray
    dst: np.ndarray
    count: np.ndarray
    fill: np.ndarray

    __slots__ = ("count", "dst", "fill", "src")

    def __init__(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        count: np.ndarray,
        fill: np.ndarray,
    ) -> None:
        self.src = src
        self.dst = dst
        self.count = count
        self.fill = fill

    def __len__(self) -> int:
        return len(self.fill)


class ReadPlan(Record):
    """How one read is served: ``path``, ``reason`` (in words, for people and tests),
    the selected ``box`` (empty for the engine), the ``raw_data`` slot of the run a
    ``block`` lies in, and the ``pieces`` of a ``pieces`` read."""

    path: Path
    reason: str
    box: tuple[Extent, ...]
    slot: int
    pieces: Pieces | None

    __slots__ = ("box", "path", "pieces", "reason", "slot")

    def __init__(
        self,
        path: Path,
        reason: str,
        box: tuple[Extent, ...] = (),
        slot: int = -1,
        pieces: Pieces | None = None,
    ) -> None:
        self.path = path
        self.reason = reason
        self.box = box
        self.slot = slot
        self.pieces = pieces

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the box (integer-selected axes included)."""
        return tuple(stop - start for start, stop, _ in self.box)

    def selection(self) -> tuple[int | slice, ...]:
        """The box as an index of the dataset."""
        return tuple(start if by_int else slice(start, stop) for start, stop, by_int in self.box)

    def squeeze(self) -> tuple[int | slice, ...]:
        """The index that drops the integer-selected axes from an array of the box."""
        return tuple(0 if by_int else slice(None) for _, _, by_int in self.box)

    def raw_block(self, chunks: tuple[int, ...]) -> tuple[list[int], list[int]]:
        """Corner and counts in ``raw_data`` of a ``block`` plan."""
        starts = []
        for axis, ((start, _, _), chunk) in enumerate(zip(self.box, chunks)):
            local = start - (start // chunk) * chunk
            starts.append(local + self.slot * chunk if axis == 0 else local)
        return starts, list(self.shape)


def _engine(reason: str) -> ReadPlan:
    return ReadPlan("engine", reason)


class ReadPlanner:
    """Plans the reads of one committed dataset from its chunk map."""

    __slots__ = (
        "_chunk_map",
        "_chunks",
        "_grid_slots",
        "_itemsize",
        "_kind",
        "_run_ids",
        "virtual",
    )

    def __init__(
        self,
        chunk_map: ChunkMap,
        dtype: np.dtype,
        *,
        virtual: h5py.Dataset | None = None,
        raw_data: h5py.Dataset | None = None,
        fillvalue: Any = None,
    ):
        """``virtual``: the virtual dataset ``chunk_map`` was read from, and
        ``raw_data`` the store it maps; given, small reads may be planned on the
        virtual dataset (see the module's docstring)."""
        self._chunk_map = chunk_map
        self._chunks = chunk_map.chunks
        self._itemsize = dtype.itemsize
        self._kind = dtype.kind
        self._run_ids: np.ndarray | None = None
        self._grid_slots = chunk_map.slots if chunk_map.slots.size and chunk_map.shape else None
        #: Whether small reads go to the virtual dataset.
        self.virtual = (
            virtual is not None
            and raw_data is not None
            and _virtual_reads_serve(chunk_map, virtual, raw_data, dtype, fillvalue)
        )

    def plan(self, index: Any) -> ReadPlan:
        """The plan of ``dataset[index]``."""
        slots = self._grid_slots
        if slots is None:
            return _engine("the dataset has no chunks (empty or scalar)")
        box = _box(index, self._chunk_map.shape)
        if isinstance(box, str):
            return _engine(box)
        nbytes = self._itemsize * int(np.prod([stop - start for start, stop, _ in box]))
        if self.virtual and nbytes <= HDF5_READ_BYTES:
            return ReadPlan(
                "virtual",
                f"{nbytes} bytes <= HDF5_READ_BYTES, the virtual dataset maps "
                f"<= {HDF5_READ_BLOCKS} blocks",
                box,
            )
        run_ids = self._run_ids
        if run_ids is None:  # computed on the first read HDF5 does not serve
            run_ids = self._run_ids = self._chunk_map.run_ids()
        chunks = self._chunks
        low = tuple(start // chunk for (start, _, _), chunk in zip(box, chunks))
        high = tuple((stop - 1) // chunk + 1 for (_, stop, _), chunk in zip(box, chunks))
        grid = tuple(slice(a, b) for a, b in zip(low, high))
        ids = run_ids[grid]
        first = ids.reshape(ids.shape[0], -1)
        if first.shape[1] == 1 and first[0, 0] >= 0 and first[-1, 0] == first[0, 0]:
            return ReadPlan("block", "the box lies in one run of chunks", box, int(slots[low]))
        if self._kind == "O":
            return _engine("variable-length data across runs (the engine converts it)")
        pieces = _pieces(box, chunks, low, ids, slots[grid])
        if len(pieces) > MAX_PIECES:
            return _engine(f"{len(pieces)} pieces > MAX_PIECES")
        return ReadPlan("pieces", f"{len(pieces)} runs and chunk columns", box, pieces=pieces)


def small_box(index: Any, shape: tuple[int, ...], itemsize: int) -> tuple[Extent, ...] | None:
    """The box a basic ``index`` selects if it holds at most :data:`HDF5_READ_BYTES`
    (HDF5 reads it from a virtual dataset that maps few blocks); else None."""
    box = _box(index, shape)
    if isinstance(box, str):
        return None
    nbytes = itemsize
    for start, stop, _ in box:
        nbytes *= stop - start
    return box if nbytes <= HDF5_READ_BYTES else None


def _box(index: Any, shape: tuple[int, ...]) -> tuple[Extent, ...] | str:
    """The box a basic index selects, or why the index is not a box."""
    if type(index) is not tuple:
        index = (index,)
    ellipsis = any(item is Ellipsis for item in index)
    if ellipsis:
        at = next(i for i, item in enumerate(index) if item is Ellipsis)
        rest = index[at + 1 :]
        if any(item is Ellipsis for item in rest):
            return "more than one Ellipsis"
        index = (*index[:at], *[slice(None)] * (len(shape) - len(index) + 1), *rest)
    if len(index) > len(shape):
        return "more indices than axes"
    box: list[Extent] = []
    for axis, size in enumerate(shape):
        item = index[axis] if axis < len(index) else slice(None)
        if type(item) is int:
            if not -size <= item < size:
                return "an integer out of range (numpy's IndexError)"
            start = item + size if item < 0 else item
            box.append((start, start + 1, True))
        elif type(item) is slice:
            if item.step not in (None, 1):
                return "a slice with a step"
            start, stop, _ = item.indices(size)
            if stop <= start:
                return "an empty selection"
            box.append((start, stop, False))
        else:
            return f"an index of type {type(item).__name__}"
    if ellipsis and all(by_int for _, _, by_int in box):
        return "integers and an Ellipsis (numpy gives a 0-d array)"
    return tuple(box)


def _pieces(
    box: tuple[Extent, ...],
    chunks: tuple[int, ...],
    low: tuple[int, ...],
    ids: np.ndarray,
    slots: np.ndarray,
) -> Pieces:
    """One piece per run of chunks (or of fill chunks) and chunk column of ``box``;
    ``ids`` and ``slots`` are the run ids and slots of the chunks it touches, whose
    first chunk is at grid position ``low``. Pieces come out by chunk column (C
    order), then along axis 0."""
    rows = ids.shape[0]
    by_column = np.moveaxis(ids, 0, -1).reshape(-1, rows)
    starts = np.ones(by_column.shape, dtype=bool)
    starts[:, 1:] = by_column[:, 1:] != by_column[:, :-1]
    column, row = np.nonzero(starts)
    flat_starts = np.flatnonzero(starts.ravel())
    ends = np.append(flat_starts[1:], starts.size) - 1
    last_row = ends % rows  # the last chunk row of each piece (a column starts a piece)
    ndim = len(box)
    c0 = chunks[0]
    start0, stop0, _ = box[0]
    row_a = low[0] + row
    row_b = low[0] + last_row
    lo0 = np.maximum(start0, row_a * c0)
    hi0 = np.minimum(stop0, (row_b + 1) * c0)
    inner_grid = ids.shape[1:]
    coords = (
        np.stack(np.unravel_index(column, inner_grid), axis=1)
        if ndim > 1
        else np.zeros((len(column), 0), np.int64)
    )
    piece_ids = by_column[column, row]
    fill = piece_ids < 0
    piece_slots = np.moveaxis(slots, 0, -1).reshape(-1, rows)[column, row]
    src = np.empty((len(column), ndim), np.int64)
    dst = np.empty((len(column), ndim), np.int64)
    count = np.empty((len(column), ndim), np.int64)
    src[:, 0] = np.where(fill, 0, piece_slots * c0 + lo0 - row_a * c0)
    dst[:, 0] = lo0 - start0
    count[:, 0] = hi0 - lo0
    for axis in range(1, ndim):
        start, stop, _ = box[axis]
        chunk = chunks[axis]
        corner = (low[axis] + coords[:, axis - 1]) * chunk
        lo = np.maximum(start, corner)
        hi = np.minimum(stop, corner + chunk)
        src[:, axis] = lo - corner
        dst[:, axis] = lo - start
        count[:, axis] = hi - lo
    return Pieces(src, dst, count, fill)


def _virtual_reads_serve(
    chunk_map: ChunkMap,
    virtual: h5py.Dataset,
    raw_data: h5py.Dataset,
    dtype: np.dtype,
    fillvalue: Any,
) -> bool:
    """Whether HDF5 reads of ``virtual`` are cheap and give what ``raw_data`` gives:
    few blocks, a numeric dtype, every mapping on this store's ``raw_data`` (not a
    copied tree's) and, where chunks are unstored, the same fill value bit for bit."""
    blocks = chunk_map.blocks
    if blocks is None or blocks > HDF5_READ_BLOCKS or dtype.kind not in "biufc":
        return False
    if chunk_map.source != source_name(raw_data):
        return False
    if chunk_map.slots.min(initial=0) >= 0:
        return True
    expected = np.zeros((), dtype) if fillvalue is None else np.asarray(fillvalue, dtype)
    return bool(np.asarray(virtual.fillvalue, dtype).tobytes() == expected.tobytes())
