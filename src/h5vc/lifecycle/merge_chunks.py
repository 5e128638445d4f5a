"""Three-way merge of one dataset's data, decided from chunk maps first.

Every chunk position of the merged dataset is classified from the ``raw_data`` slots
of base, ours and theirs alone (within one store, equal content means an equal slot:
chunks are deduplicated by hash): unchanged or changed on one side only is settled
without reading data; only chunks changed on both sides to different content are read
(three small arrays) and merged element by element.  Pure numpy: no HDF5 here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from h5vc.store import grid_shape

__all__ = ["ABSENT", "ChunkPlan", "merge_elements", "plan_chunks", "result_shape"]

#: Slot of a chunk position outside a dataset's chunk grid.
ABSENT = -2


def result_shape(
    base: tuple[int, ...] | None, ours: tuple[int, ...], theirs: tuple[int, ...]
) -> tuple[int, ...] | None:
    """The merged shape, or None when both sides resized differently."""
    if ours == theirs:
        return ours
    if base is not None and ours == base:
        return theirs
    if base is not None and theirs == base:
        return ours
    return None


def _padded(slots: np.ndarray | None, grid: tuple[int, ...]) -> np.ndarray:
    """``slots`` cut or padded with ABSENT to ``grid``."""
    out = np.full(grid, ABSENT, dtype=np.int64)
    if slots is None:
        return out
    common = tuple(slice(0, min(a, b)) for a, b in zip(slots.shape, grid))
    out[common] = slots[common]
    return out


@dataclass(frozen=True)
class ChunkPlan:
    """Where each chunk of the merged dataset comes from."""

    #: The merged chunk map: ours' slot, or theirs' where only theirs changed.
    slots: np.ndarray
    #: Chunk coordinates (n, ndim) changed on both sides to different content.
    both: np.ndarray
    #: How many chunk positions were taken from theirs without reading data.
    from_theirs: int


def plan_chunks(
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    base: np.ndarray | None,
    ours: np.ndarray,
    theirs: np.ndarray,
) -> ChunkPlan:
    """Classify every chunk of the merged grid (``shape``/``chunks``) from three slot maps.

    ``base`` is None for a dataset that did not exist in the base version.
    """
    grid = grid_shape(shape, chunks)
    b, o, t = _padded(base, grid), _padded(ours, grid), _padded(theirs, grid)
    ours_changed = o != b
    theirs_changed = t != b
    take_theirs = theirs_changed & ~ours_changed
    both = ours_changed & theirs_changed & (o != t)
    slots = np.where(take_theirs, t, o)
    return ChunkPlan(
        slots=slots, both=np.argwhere(both), from_theirs=int(np.count_nonzero(take_theirs))
    )


def _equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise equality in which NaN equals NaN (structured: field by field)."""
    if a.dtype.names:
        out = np.ones(a.shape, dtype=bool)
        for name in a.dtype.names:
            out &= _equal(a[name], b[name])
        return out
    if a.dtype.kind in "fc":
        return (a == b) | (np.isnan(a) & np.isnan(b))
    if a.ndim and a.dtype.kind == "O":
        return np.frompyfunc(lambda x, y: x == y, 2, 1)(a, b).astype(bool)
    return np.asarray(a == b)


def merge_elements(
    base: np.ndarray, ours: np.ndarray, theirs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Merge one region element by element: ``(merged values, conflict mask)``.

    An element changed on one side takes that side's value; changed on both sides to
    the same value, that value; to different values, it is a conflict (and keeps ours).
    """
    ours_changed = ~_equal(ours, base)
    theirs_changed = ~_equal(theirs, base)
    merged = np.where(theirs_changed & ~ours_changed, theirs, ours)
    conflict = ours_changed & theirs_changed & ~_equal(ours, theirs)
    return merged, conflict
