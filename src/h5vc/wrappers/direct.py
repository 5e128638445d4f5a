"""Direct reads of committed data: a basic selection inside one run of ``raw_data``.

Most small reads (``dset[i]``, ``dset[a:b]`` within a run of chunks) need exactly one
contiguous block of ``raw_data`` rows.  :class:`DirectReader` recognises them with a few
integer operations and hands them to h5py as one plain slice, which h5py serves through
its own fast path; every other selection returns ``None`` and goes through the staging
engine.  Both give the same result: this is a shortcut, not a second semantics.
"""

from __future__ import annotations

from typing import Any

import h5py
import numpy as np

from h5vc.store.chunkmap import ChunkMap

__all__ = ["DirectReader"]


class DirectReader:
    """Serve basic selections that fall in one run of one column of chunks."""

    __slots__ = ("_chunks", "_column_strides", "_raw_data", "_run_ids", "_shape", "_slots")

    def __init__(self, chunk_map: ChunkMap, raw_data: h5py.Dataset):
        self._shape = chunk_map.shape
        self._chunks = chunk_map.chunks
        self._raw_data = raw_data
        self._slots: np.ndarray | None = None
        self._run_ids: np.ndarray | None = None
        if chunk_map.slots.size:
            self._slots = chunk_map.slots.reshape(chunk_map.slots.shape[0], -1)
            self._run_ids = chunk_map.run_ids().reshape(self._slots.shape)
        grid = chunk_map.slots.shape[1:]
        strides = [1] * len(grid)
        for axis in range(len(grid) - 2, -1, -1):
            strides[axis] = strides[axis + 1] * grid[axis + 1]
        self._column_strides = strides

    def read(self, index: Any) -> Any:
        """``raw_data``-backed result of ``index``, or None if it needs the engine."""
        slots, run_ids = self._slots, self._run_ids
        if slots is None or run_ids is None:
            return None
        if type(index) is not tuple:
            index = (index,)
        shape = self._shape
        if len(index) > len(shape):
            return None
        raw_index: list[int | slice] = []
        column = 0
        first_row = last_row = 0
        for axis, size in enumerate(shape):
            item = index[axis] if axis < len(index) else slice(None)
            chunk = self._chunks[axis]
            if type(item) is int:
                if not -size <= item < size:
                    return None  # let the engine raise numpy's IndexError
                start = item + size if item < 0 else item
                stop = start + 1
            elif type(item) is slice:
                if item.step not in (None, 1):
                    return None
                start, stop, _ = item.indices(size)
                if stop <= start:
                    return None
            else:
                return None
            first, last = start // chunk, (stop - 1) // chunk
            if axis == 0:
                first_row, last_row = first, last
                offset = start - first * chunk
                raw_index.append(
                    offset if type(item) is int else slice(offset, offset + stop - start)
                )
                continue
            if first != last:
                return None  # spans chunks across a column: not one block of raw_data
            column += first * self._column_strides[axis - 1]
            local = start - first * chunk
            raw_index.append(local if type(item) is int else slice(local, local + stop - start))
        run = run_ids.item(first_row, column)
        if run < 0 or run_ids.item(last_row, column) != run:
            return None
        base = slots.item(first_row, column) * self._chunks[0]
        head = raw_index[0]
        if isinstance(head, slice):
            raw_index[0] = slice(base + head.start, base + head.stop)
        else:
            raw_index[0] = base + head
        return self._raw_data[tuple(raw_index)]
