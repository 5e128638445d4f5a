"""Per-axis mapping of a canonical index onto a chunk grid.

Every index the engine handles is first reduced to an *orthogonal* selection:
one :class:`SliceSelection` (positive step) or :class:`PointsSelection` (sorted,
unique points) per axis of the array. Each of them splits into *slice pairs*: a
1-dimensional run of points inside one chunk, with its position in the dense
orthogonal buffer that holds the selected points.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["AxisChunkPairs", "AxisSelection", "PointsSelection", "SliceSelection"]

_EMPTY = np.empty(0, dtype=np.intp)
_EMPTY.flags.writeable = False


class AxisChunkPairs(NamedTuple):
    """The slice pairs of one axis, grouped by chunk (chunks ascending).

    ``chunks`` lists the distinct chunks touched, ``points_per_chunk`` how many
    selected points each holds. Then, one entry per pair: ``chunk_pos`` (index
    into ``chunks``), ``in_chunk_start`` and ``counts`` (length) of the run inside the
    chunk, and ``buffer_start``, its first position in the dense buffer. Inside
    the chunk, a run advances by ``step``; in the buffer it advances by one.
    """

    chunks: np.ndarray
    points_per_chunk: np.ndarray
    chunk_pos: np.ndarray
    in_chunk_start: np.ndarray
    counts: np.ndarray
    buffer_start: np.ndarray
    step: int

    def whole_chunks(self, chunk_len: int, axis_size: int) -> np.ndarray:
        """Mask over ``chunks``: True where every point of the chunk is selected."""
        extent = np.minimum(chunk_len, axis_size - self.chunks * chunk_len)
        return self.points_per_chunk == extent


def _empty_pairs(step: int) -> AxisChunkPairs:
    return AxisChunkPairs(_EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY, step)


class SliceSelection:
    """``count`` points starting at ``start``, ``step`` (> 0) apart."""

    __slots__ = ("count", "start", "step")

    def __init__(self, start: int, step: int, count: int) -> None:
        self.start = start
        self.step = step
        self.count = count

    def __repr__(self) -> str:
        stop = self.start + self.count * self.step
        return f"SliceSelection({self.start}:{stop}:{self.step})"

    def chunk_pairs(self, chunk_len: int) -> AxisChunkPairs:
        """Split the selection into one slice pair per chunk it touches."""
        start, step, count = self.start, self.step, self.count
        if count == 0:
            return _empty_pairs(1)
        last = start + (count - 1) * step
        if start // chunk_len == last // chunk_len:  # one chunk: plain Python is faster
            chunk = start // chunk_len
            one = np.array([chunk], dtype=np.intp)
            zero = np.zeros(1, dtype=np.intp)
            return AxisChunkPairs(
                one,
                np.array([count], dtype=np.intp),
                zero,
                np.array([start - chunk * chunk_len], dtype=np.intp),
                np.array([count], dtype=np.intp),
                zero,
                step if count > 1 else 1,
            )
        if step >= chunk_len:  # at most one point per chunk
            points = start + np.arange(count, dtype=np.intp) * step
            return PointsSelection(points).chunk_pairs(chunk_len)
        chunks = np.arange(start // chunk_len, last // chunk_len + 1, dtype=np.intp)
        low = np.maximum(chunks * chunk_len, start)
        high = np.minimum(chunks * chunk_len + (chunk_len - 1), last)
        first = -((start - low) // step)  # ceil((low - start) / step)
        counts = (high - start) // step - first + 1
        return AxisChunkPairs(
            chunks,
            counts,
            np.arange(len(chunks), dtype=np.intp),
            start + first * step - chunks * chunk_len,
            counts,
            first,
            step,
        )


class PointsSelection:
    """Sorted, unique points along one axis."""

    __slots__ = ("points",)

    def __init__(self, points: np.ndarray) -> None:
        self.points = points

    def __repr__(self) -> str:
        return f"PointsSelection({self.points.tolist()})"

    @property
    def count(self) -> int:
        return len(self.points)

    def chunk_pairs(self, chunk_len: int) -> AxisChunkPairs:
        """Split the points into runs of consecutive points inside one chunk."""
        points = self.points
        if len(points) == 0:
            return _empty_pairs(1)
        chunk_of_point = points // chunk_len
        breaks = np.empty(len(points), dtype=bool)
        breaks[0] = True
        np.not_equal(points[1:], points[:-1] + 1, out=breaks[1:])
        breaks[1:] |= chunk_of_point[1:] != chunk_of_point[:-1]
        run_starts = np.flatnonzero(breaks)
        run_counts = np.diff(np.append(run_starts, len(points)))
        run_chunks = chunk_of_point[run_starts]
        new_chunk = np.empty(len(run_starts), dtype=bool)
        new_chunk[0] = True
        np.not_equal(run_chunks[1:], run_chunks[:-1], out=new_chunk[1:])
        first_run_of_chunk = np.flatnonzero(new_chunk)
        return AxisChunkPairs(
            run_chunks[first_run_of_chunk],
            np.add.reduceat(run_counts, first_run_of_chunk),
            np.cumsum(new_chunk) - 1,
            points[run_starts] - run_chunks * chunk_len,
            run_counts,
            run_starts,
            1,
        )


AxisSelection = SliceSelection | PointsSelection
