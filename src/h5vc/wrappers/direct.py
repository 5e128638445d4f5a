"""Direct reads of committed data: basic selections served straight from ``raw_data``.

A basic index (integers and slices with step 1) selects a box of the dataset. Inside one
run of chunks the box is one contiguous block of ``raw_data`` rows, which h5py serves
through its own fast path. A box that spans several runs or chunk columns is cut into
one piece per run and column, and each piece is one low-level ``H5Dread`` (the staging
engine's :func:`~h5vc.staging.transfer.read_many_slices`) from its ``raw_data`` rows into
its place in the output (fill chunks are filled in). Every other
selection returns ``None`` and goes through the staging engine. Both give the same
result: this is a shortcut, not a second semantics.

A small selection (at most :data:`HDF5_READ_BYTES`) of a dataset whose virtual dataset
maps few blocks (at most :data:`HDF5_READ_BLOCKS`) is read by HDF5 from the virtual
dataset itself: for a few chunks, planning positioned reads and looking up the chunks'
file offsets costs more than HDF5's own read (about 0.1 ms for 16 chunks of 8 KiB,
against 0.2 ms warm and 0.6 ms on a dataset's first read).
"""

from __future__ import annotations

import itertools
from typing import Any

import h5py
import numpy as np

import h5vc.config as config
from h5vc.hdf5.damage import damaged
from h5vc.staging.transfer import read_many_slices
from h5vc.store.chunkmap import ChunkMap
from h5vc.store.reading import RawDataSlab
from h5vc.store.vds import source_name

__all__ = ["HDF5_READ_BLOCKS", "HDF5_READ_BYTES", "MAX_PIECES", "DirectReader"]

#: Boxes cut into more pieces than this go through the staging engine, whose plans
#: handle any number of runs without a Python loop per chunk column.
MAX_PIECES = config.MAX_PIECES

#: Selections of at most this many bytes, of a virtual dataset whose mappings hold at
#: most HDF5_READ_BLOCKS blocks, are read by HDF5 from the virtual dataset. HDF5 looks
#: at every block of every mapping on every read, so the cost of its reads grows with
#: their number; at 64 blocks and 512 KiB both ways cost the same.
HDF5_READ_BYTES = config.HDF5_READ_BYTES
HDF5_READ_BLOCKS = config.HDF5_READ_BLOCKS


class DirectReader:
    """Serve basic selections of a committed dataset from ``raw_data``."""

    __slots__ = (
        "_chunk_map",
        "_chunks",
        "_column_strides",
        "_fill",
        "_itemsize",
        "_raw_data",
        "_run_ids",
        "_shape",
        "_slab",
        "_slots",
        "_virtual",
    )

    def __init__(
        self,
        chunk_map: ChunkMap,
        raw_data: h5py.Dataset,
        fillvalue: Any = None,
        *,
        virtual: h5py.Dataset | None = None,
    ):
        """``virtual``: the virtual dataset ``chunk_map`` was read from; given, HDF5
        reads small selections from it (if its mappings hold few blocks)."""
        self._chunk_map = chunk_map
        self._shape = chunk_map.shape
        self._chunks = chunk_map.chunks
        self._raw_data = raw_data
        self._slab: RawDataSlab | None = None
        self._fill = fillvalue
        self._slots: np.ndarray | None = None
        self._run_ids: np.ndarray | None = None
        dtype = raw_data.dtype
        self._itemsize = dtype.itemsize
        self._virtual: h5py.Dataset | None = None
        blocks = chunk_map.blocks
        if (
            virtual is not None
            and blocks is not None
            and blocks <= HDF5_READ_BLOCKS
            and dtype.kind in "biufc"
            and chunk_map.source == source_name(raw_data)  # not a copied tree's
            and (chunk_map.slots.min(initial=0) >= 0 or _same_fill(virtual, dtype, fillvalue))
        ):
            self._virtual = virtual
        if chunk_map.slots.size:
            self._slots = chunk_map.slots.reshape(chunk_map.slots.shape[0], -1)
        grid = chunk_map.slots.shape[1:]
        strides = [1] * len(grid)
        for axis in range(len(grid) - 2, -1, -1):
            strides[axis] = strides[axis + 1] * grid[axis + 1]
        self._column_strides = strides

    def read(self, index: Any) -> Any:
        """``raw_data``-backed result of ``index``, or None if it needs the engine."""
        slots = self._slots
        if slots is None:
            return None
        if type(index) is not tuple:
            index = (index,)
        shape = self._shape
        if len(index) > len(shape):
            return None
        box: list[tuple[int, int, bool]] = []  # start, stop, indexed by an integer
        for axis, size in enumerate(shape):
            item = index[axis] if axis < len(index) else slice(None)
            if type(item) is int:
                if not -size <= item < size:
                    return None  # let the engine raise numpy's IndexError
                start = item + size if item < 0 else item
                box.append((start, start + 1, True))
            elif type(item) is slice:
                if item.step not in (None, 1):
                    return None
                start, stop, _ = item.indices(size)
                if stop <= start:
                    return None
                box.append((start, stop, False))
            else:
                return None
        try:
            if self._virtual is not None:
                nbytes = self._itemsize
                for start, stop, _ in box:
                    nbytes *= stop - start
                if nbytes <= HDF5_READ_BYTES:
                    return self._virtual[
                        tuple(
                            start if is_int else slice(start, stop) for start, stop, is_int in box
                        )
                    ]
            run_ids = self._run_ids
            if run_ids is None:  # computed on the first read HDF5 does not serve
                run_ids = self._run_ids = self._chunk_map.run_ids().reshape(slots.shape)
            return self._read_box(box, slots, run_ids)
        except OSError:
            raw_data = self._raw_data
            with damaged(str(raw_data.file.filename), f"A chunk of {raw_data.name}"):
                raise

    def _read_box(
        self, box: list[tuple[int, int, bool]], slots: np.ndarray, run_ids: np.ndarray
    ) -> Any:
        chunks = self._chunks
        first_row, last_row = box[0][0] // chunks[0], (box[0][1] - 1) // chunks[0]
        # Chunk ranges on the other axes, and the flat column number of each combination.
        ranges = [
            range(start // chunk, (stop - 1) // chunk + 1)
            for (start, stop, _), chunk in zip(box[1:], chunks[1:])
        ]
        strides = self._column_strides
        if all(len(r) == 1 for r in ranges):
            column = sum(r[0] * stride for r, stride in zip(ranges, strides))
            run = run_ids.item(first_row, column)
            if run >= 0 and run_ids.item(last_row, column) == run:
                return self._read_one_block(box, slots.item(first_row, column))
        return self._read_pieces(box, slots, run_ids, first_row, last_row, ranges)

    def _read_one_block(self, box: list[tuple[int, int, bool]], slot: int) -> Any:
        """The box lies in one run: one slice of ``raw_data``, through h5py."""
        raw_index: list[int | slice] = []
        starts: list[int] = []
        for axis, ((start, stop, is_int), chunk) in enumerate(zip(box, self._chunks)):
            base = slot * chunk if axis == 0 else 0
            local = start - (start // chunk) * chunk + base
            starts.append(local)
            raw_index.append(local if is_int else slice(local, local + stop - start))
        if self._slab is None:
            self._slab = RawDataSlab(self._raw_data)
        out = self._slab.read_box(starts, [stop - start for start, stop, _ in box])
        if out is None:
            return self._raw_data[tuple(raw_index)]
        return out[tuple(0 if is_int else slice(None) for _, _, is_int in box)]

    def _read_pieces(
        self,
        box: list[tuple[int, int, bool]],
        slots: np.ndarray,
        run_ids: np.ndarray,
        first_row: int,
        last_row: int,
        ranges: list[range],
    ) -> Any:
        raw_data = self._raw_data
        if raw_data.dtype.kind == "O":
            return None  # variable-length data: the engine converts it
        chunks = self._chunks
        strides = self._column_strides
        row_start, row_stop, _ = box[0]
        pieces: list[tuple[list[int], list[int], list[int], bool]] = []  # src, dst, count, fill
        for chunk_coords in itertools.product(*ranges):
            column = sum(c * stride for c, stride in zip(chunk_coords, strides))
            src_rest, dst_rest, count_rest = [], [], []
            for (start, stop, _), c, chunk in zip(box[1:], chunk_coords, chunks[1:]):
                low, high = max(start, c * chunk), min(stop, (c + 1) * chunk)
                src_rest.append(low - c * chunk)
                dst_rest.append(low - start)
                count_rest.append(high - low)
            ids = run_ids[first_row : last_row + 1, column]
            cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
            for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(ids)]):
                row_a, row_b = first_row + a, first_row + b - 1
                low = max(row_start, row_a * chunks[0])
                high = min(row_stop, (row_b + 1) * chunks[0])
                is_fill = ids.item(a) < 0
                slot = 0 if is_fill else slots.item(row_a, column)
                src = [slot * chunks[0] + low - row_a * chunks[0], *src_rest]
                pieces.append(
                    (src, [low - row_start, *dst_rest], [high - low, *count_rest], is_fill)
                )
            if len(pieces) > MAX_PIECES:
                return None
        out = np.empty(tuple(stop - start for start, stop, _ in box), dtype=raw_data.dtype)
        fill = np.zeros((), out.dtype) if self._fill is None else self._fill
        stored = [piece for piece in pieces if not piece[3]]
        for _, dst, count, is_fill in pieces:
            if is_fill:
                out[tuple(slice(d, d + n) for d, n in zip(dst, count))] = fill
        if stored:
            src_starts, dst_starts, counts, _ = (np.asarray(c) for c in zip(*stored))
            ones = (1,) * out.ndim
            if self._slab is None:
                self._slab = RawDataSlab(raw_data)
            read_many_slices(self._slab, out, src_starts, dst_starts, counts, ones, ones)
        if any(is_int for _, _, is_int in box):
            return out[tuple(0 if is_int else slice(None) for _, _, is_int in box)]
        return out


def _same_fill(virtual: h5py.Dataset, dtype: np.dtype, fillvalue: Any) -> bool:
    """Whether HDF5 fills the unmapped chunks of ``virtual`` with ``fillvalue`` (None:
    zeros), bit for bit."""
    expected = np.zeros((), dtype) if fillvalue is None else np.asarray(fillvalue, dtype)
    return bool(np.asarray(virtual.fillvalue, dtype).tobytes() == expected.tobytes())
