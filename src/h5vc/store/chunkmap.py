"""Chunk maps: where each chunk of a committed dataset lives in ``raw_data``.

A :class:`ChunkMap` holds one integer per chunk of the dataset's chunk grid: the
*slot* of the chunk in ``raw_data`` (slot ``s`` covers rows
``s * chunks[0] : (s + 1) * chunks[0]``), or ``-1`` when the chunk is entirely the
fill value and is not stored at all.

The virtual dataset of a version is built from *runs*: maximal sequences of chunks
that are consecutive along axis 0 (same chunk coordinates on every other axis)
and sit in consecutive slots.  One run becomes one virtual mapping, so a dataset
written in one go is a handful of mappings instead of one per chunk.
"""

from __future__ import annotations

import numpy as np

__all__ = ["unique_sorted", "ChunkMap", "Runs", "grid_shape"]

FILL = -1


def grid_shape(shape: tuple[int, ...], chunks: tuple[int, ...]) -> tuple[int, ...]:
    """Number of chunks along each axis (``ceil(shape / chunks)``)."""
    return tuple(-(-n // c) for n, c in zip(shape, chunks))


class Runs:
    """Runs of a chunk map, as parallel arrays.

    ``coords[i]`` is the chunk coordinate of the first chunk of run ``i``,
    ``length[i]`` the number of chunks it spans along axis 0 and ``slot[i]`` the
    ``raw_data`` slot of its first chunk.
    """

    coords: np.ndarray  # (n_runs, ndim) int64
    length: np.ndarray  # (n_runs,) int64
    slot: np.ndarray  # (n_runs,) int64

    __slots__ = ("coords", "length", "slot")

    def __init__(self, coords: np.ndarray, length: np.ndarray, slot: np.ndarray) -> None:
        self.coords = coords
        self.length = length
        self.slot = slot

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"

    def __len__(self) -> int:
        return len(self.length)


def unique_sorted(values: np.ndarray) -> np.ndarray:
    """The distinct values of a 1-d integer array, sorted: ``np.unique`` without its
    check for masked arrays, whose first call imports ``numpy.ma`` (20-40 ms of a
    first read or commit)."""
    flat = np.sort(values, axis=None)
    if len(flat) < 2:
        return flat
    keep = np.empty(len(flat), dtype=bool)
    keep[0] = True
    np.not_equal(flat[1:], flat[:-1], out=keep[1:])
    return flat[keep]


class ChunkMap:
    """The ``raw_data`` slot of every chunk of one dataset in one version."""

    __slots__ = ("_run_ids", "blocks", "chunks", "shape", "slots", "source")

    def __init__(self, shape: tuple[int, ...], chunks: tuple[int, ...], slots: np.ndarray):
        expected = grid_shape(shape, chunks)
        if slots.shape != expected:
            raise ValueError(
                f"Expected a chunk map of shape {expected} for a dataset of shape {shape} "
                f"with chunks {chunks}. Got {slots.shape} instead."
            )
        self.shape = tuple(shape)
        self.chunks = tuple(chunks)
        self.slots = slots
        self._run_ids: np.ndarray | None = None
        #: The number of blocks in the mappings of the virtual dataset the map was read
        #: from, and the source file and dataset names they all read, as stored (None:
        #: not read from one, or more than one source).
        self.blocks: int | None = None
        self.source: tuple[bytes, bytes] | None = None

    @classmethod
    def empty(cls, shape: tuple[int, ...], chunks: tuple[int, ...]) -> ChunkMap:
        """A chunk map where every chunk is the fill value."""
        return cls(shape, chunks, np.full(grid_shape(shape, chunks), FILL, dtype=np.int64))

    @classmethod
    def from_runs(cls, shape: tuple[int, ...], chunks: tuple[int, ...], runs: Runs) -> ChunkMap:
        """Expand runs back into one slot per chunk."""
        chunk_map = cls.empty(shape, chunks)
        if not len(runs):
            return chunk_map
        flat = chunk_map.slots.reshape(chunk_map.slots.shape[0], -1)
        rest = runs.coords[:, 1:]
        col = (
            np.ravel_multi_index(tuple(rest.T), chunk_map.slots.shape[1:])
            if rest.shape[1]
            else np.zeros(len(runs), dtype=np.int64)
        )
        total = int(runs.length.sum())
        # Row and slot of every chunk covered by a run, without a Python loop.
        starts = np.repeat(np.cumsum(runs.length) - runs.length, runs.length)
        step = np.arange(total, dtype=np.int64) - starts
        rows = np.repeat(runs.coords[:, 0], runs.length) + step
        cols = np.repeat(col, runs.length)
        flat[rows, cols] = np.repeat(runs.slot, runs.length) + step
        return chunk_map

    def runs(self) -> Runs:
        """Split the map into maximal runs of consecutive slots along axis 0.

        Runs come out ordered by the coordinates of the other axes, then axis 0.
        Fill chunks (slot -1) belong to no run.
        """
        ndim = len(self.shape)
        if self.slots.size == 0:
            empty = np.zeros((0, ndim), dtype=np.int64)
            return Runs(empty, np.zeros(0, np.int64), np.zeros(0, np.int64))
        by_column, stored, starts = self._run_starts()
        # A run ends at a stored chunk the next one of its column does not follow: the
        # k-th end (in the same column-then-row order) closes the k-th start.
        ends = stored.copy()
        ends[:, :-1] &= starts[:, 1:] | ~stored[:, 1:]
        col_idx, row_idx = np.nonzero(starts)
        lengths = np.nonzero(ends)[1] - row_idx + 1
        slots = by_column[col_idx, row_idx].astype(np.int64)
        if ndim > 1:
            other = np.stack(np.unravel_index(col_idx, self.slots.shape[1:]), axis=1)
            coords = np.concatenate([row_idx[:, None], other], axis=1).astype(np.int64)
        else:
            coords = row_idx.astype(np.int64).reshape(-1, 1)
        return Runs(coords, lengths.astype(np.int64), slots)

    def run_ids(self) -> np.ndarray:
        """For every chunk, the number of the run it belongs to (-1 for fill chunks).

        Two chunks of one column (same coordinates past axis 0) are in the same run
        exactly when they have the same run id; run numbers follow :meth:`runs`.
        Computed once (a chunk map does not change after it is built).
        """
        if self._run_ids is None:
            self._run_ids = self._compute_run_ids()
        return self._run_ids

    def _compute_run_ids(self) -> np.ndarray:
        ids = np.full(self.slots.shape, -1, dtype=np.int64)
        if self.slots.size == 0:
            return ids
        _, stored, starts = self._run_starts()
        run_id = np.cumsum(starts.ravel()).reshape(stored.shape) - 1
        ids.reshape(self.slots.shape[0], -1).T[stored] = run_id[stored]
        return ids

    def _run_starts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Slots by chunk column (``(n_columns, n0)``: every chunk coordinate past axis
        0, then axis 0), which of them are stored and which start a run."""
        by_column = self.slots.reshape(self.slots.shape[0], -1).T
        stored = by_column >= 0
        # A stored chunk starts a run unless the one above it holds the slot before
        # its own (then both are stored: slots below -1 there are none).
        starts = stored.copy()
        starts[:, 1:] &= (by_column[:, 1:] != by_column[:, :-1] + 1) | ~stored[:, :-1]
        return by_column, stored, starts

    def single_chunk_runs(self) -> Runs:
        """One run per stored chunk, in C order over the chunk grid."""
        coords = np.argwhere(self.slots >= 0).astype(np.int64)
        slots = self.slots[tuple(coords.T)].astype(np.int64)
        return Runs(coords, np.ones(len(coords), dtype=np.int64), slots)

    def resized(self, shape: tuple[int, ...]) -> ChunkMap:
        """The chunk map after a resize: kept chunks keep their slot, new ones are fill."""
        new = ChunkMap.empty(shape, self.chunks)
        common = tuple(slice(0, min(a, b)) for a, b in zip(new.slots.shape, self.slots.shape))
        new.slots[common] = self.slots[common]
        return new

    def used_slots(self) -> np.ndarray:
        """Sorted unique slots referenced by this map."""
        return unique_sorted(self.slots[self.slots >= 0])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChunkMap):
            return NotImplemented
        return (
            self.shape == other.shape
            and self.chunks == other.chunks
            and np.array_equal(self.slots, other.slots)
        )

    def __repr__(self) -> str:
        return f"ChunkMap(shape={self.shape}, chunks={self.chunks}, runs={len(self.runs())})"
