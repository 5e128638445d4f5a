"""Reduce a user index to an orthogonal selection plus a numpy post-index.

``array[index]`` equals ``buffer[post_index]`` where ``buffer`` holds the
*orthogonal* selection: for every axis, the selected points in ascending order
(an integer index keeps its axis, with length one). The post-index has the same
structure as the user's index (integers, slices, arrays and new axes in the same
places), so numpy itself lays out the result exactly as it would on the array.
Errors are numpy's: whenever the index is rejected, the same index is applied to
a zero-strided dummy of the array's shape so that numpy raises its own exception.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import ndindex
import numpy as np

from h5vc.staging.mapper import AxisSelection, PointsSelection, SliceSelection

__all__ = ["ParsedIndex", "parse_index", "raise_numpy_setitem_error"]

_FULL = slice(None)
_REVERSED = slice(None, None, -1)


@dataclass(frozen=True, slots=True)
class ParsedIndex:
    """An index reduced to one orthogonal selection per axis.

    ``post_index`` is None when the buffer already is the result.
    ``has_arrays`` is True when the post-index holds arrays (fancy indexing).
    """

    axes: tuple[AxisSelection, ...]
    post_index: tuple[Any, ...] | None
    has_arrays: bool

    @property
    def buffer_shape(self) -> tuple[int, ...]:
        return tuple(axis.count for axis in self.axes)

    def apply_post(self, buffer: np.ndarray) -> Any:
        """The user's result from the dense orthogonal buffer."""
        return buffer if self.post_index is None else buffer[self.post_index]


def _raise_numpy_error(index: Any, shape: tuple[int, ...], error: Exception) -> None:
    """Raise what numpy raises for ``index`` on an array of ``shape``, else ``error``."""
    dummy = np.broadcast_to(np.zeros((), dtype=np.uint8), shape)
    try:
        dummy[index]
    except Exception as numpy_error:
        raise numpy_error from None
    raise error


def raise_numpy_setitem_error(
    index: Any, shape: tuple[int, ...], dtype: np.dtype, value: Any, error: Exception
) -> None:
    """Raise what numpy raises for ``array[index] = value``, else ``error``.

    The assignment runs on a writeable zero-strided dummy, so it costs no memory.
    """
    dummy = np.lib.stride_tricks.as_strided(
        np.zeros(1, dtype=dtype), shape, (0,) * len(shape), writeable=True
    )
    try:
        dummy[index] = value
    except Exception as numpy_error:
        raise numpy_error from None
    raise error


def parse_index(index: Any, shape: tuple[int, ...]) -> ParsedIndex:
    """Canonicalise ``index`` for an array of ``shape`` (numpy's errors)."""
    try:
        parsed = _parse_basic(index, shape)
        if parsed is None:
            parsed = _parse_general(index, shape)
    except (IndexError, TypeError, ValueError) as error:
        _raise_numpy_error(index, shape, error)
        raise  # unreachable: _raise_numpy_error always raises
    if (
        parsed.post_index is not None
        and _has_ellipsis(index)
        and not any(item is Ellipsis for item in parsed.post_index)
    ):
        # numpy returns a 0-d array, not a scalar, when the index holds an ellipsis
        parsed = ParsedIndex(parsed.axes, (*parsed.post_index, Ellipsis), parsed.has_arrays)
    return parsed


def _has_ellipsis(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(item is Ellipsis for item in items)


def _slice_selection(axis_slice: slice, size: int) -> tuple[SliceSelection, slice]:
    points = range(size)[axis_slice]
    if points.step < 0:
        points = points[::-1]
        post = _REVERSED
    else:
        post = _FULL
    return SliceSelection(points.start, points.step, len(points)), post


def _parse_basic(index: Any, shape: tuple[int, ...]) -> ParsedIndex | None:
    """Fast path for integers, slices, ``...`` and ``None``; None if not basic."""
    items = index if isinstance(index, tuple) else (index,)
    n_axes_indexed = 0
    n_ellipsis = 0
    for item in items:
        if item is None:
            continue
        if item is Ellipsis:
            n_ellipsis += 1
        elif isinstance(item, slice | int | np.integer) and not isinstance(item, bool | np.bool_):
            n_axes_indexed += 1
        else:
            return None
    if n_ellipsis > 1 or n_axes_indexed > len(shape):
        return None  # the general path raises numpy's message
    axes: list[AxisSelection] = []
    post: list[Any] = []
    trivial = True
    for item in items:
        if item is None:
            post.append(None)
            trivial = False
        elif item is Ellipsis:
            for _ in range(len(shape) - n_axes_indexed):
                axes.append(SliceSelection(0, 1, shape[len(axes)]))
                post.append(_FULL)
        elif isinstance(item, slice):
            selection, axis_post = _slice_selection(item, shape[len(axes)])
            axes.append(selection)
            post.append(axis_post)
            trivial = trivial and axis_post is _FULL
        else:
            size = shape[len(axes)]
            position = operator.index(item)
            if not -size <= position < size:
                return None
            axes.append(SliceSelection(position % size, 1, 1))
            post.append(0)
            trivial = False
    while len(axes) < len(shape):
        axes.append(SliceSelection(0, 1, shape[len(axes)]))
        post.append(_FULL)
    return ParsedIndex(tuple(axes), None if trivial else tuple(post), False)


def _canonical_items(index: Any) -> list[Any]:
    """The index as a list of None, Ellipsis, slices, integers and integer arrays.

    ndindex validates each item and turns lists into arrays; a boolean scalar
    becomes a ``np.bool_``.
    """
    items: list[Any] = []
    for raw in index if isinstance(index, tuple) else (index,):
        item = ndindex.ndindex(raw)
        if isinstance(item, ndindex.Newaxis):
            items.append(None)
        elif isinstance(item, ndindex.ellipsis):
            items.append(Ellipsis)
        elif isinstance(item, ndindex.Slice | ndindex.Integer):
            items.append(item.raw)
        elif isinstance(item, ndindex.BooleanArray) and item.ndim == 0:
            items.append(np.bool_(item.array))
        else:
            items.append(item.array)
    return items


def _n_axes_indexed(item: Any) -> int:
    if item is None or item is Ellipsis or isinstance(item, np.bool_):
        return 0
    if isinstance(item, np.ndarray) and item.dtype == bool:
        return item.ndim
    return 1


#: A full slice that an ellipsis of the index stands for.
_ELLIPSIS_SLICE = slice(None)


def _expand_ellipsis(items: list[Any], shape: tuple[int, ...]) -> list[Any]:
    """Replace the ellipsis (or pad the end) with full slices."""
    n_indexed = sum(_n_axes_indexed(item) for item in items)
    if n_indexed > len(shape):
        raise IndexError("too many indices")
    ellipses = [at for at, item in enumerate(items) if item is Ellipsis]
    if len(ellipses) > 1:
        raise IndexError("more than one ellipsis")
    if not ellipses:
        return [*items, *[slice(None)] * (len(shape) - n_indexed)]
    # The ellipsis stays (numpy places broadcast array dimensions by it, even when it
    # stands for no axis), followed by the full slices it stands for.
    at = ellipses[0] + 1
    return [*items[:at], *[_ELLIPSIS_SLICE] * (len(shape) - n_indexed), *items[at:]]


def _expand_masks(items: list[Any], shape: tuple[int, ...]) -> list[Any]:
    """Replace each boolean mask with the integer arrays of its ``nonzero()``."""
    expanded: list[Any] = []
    axis = 0
    for item in items:
        n_axes = _n_axes_indexed(item)
        if isinstance(item, np.ndarray) and item.dtype == bool:
            if item.shape != shape[axis : axis + n_axes]:
                raise IndexError("boolean index did not match indexed array")
            expanded.extend(np.nonzero(item))
        else:
            expanded.append(item)
        axis += n_axes
    return expanded


def _parse_general(index: Any, shape: tuple[int, ...]) -> ParsedIndex:
    """Any index numpy accepts: integer and boolean arrays, boolean scalars."""
    items = _expand_masks(_expand_ellipsis(_canonical_items(index), shape), shape)
    has_arrays = any(isinstance(item, np.ndarray | np.bool_) for item in items)
    arrays = [item for item in items if isinstance(item, np.ndarray)]
    broadcast_shape = np.broadcast_shapes(*(array.shape for array in arrays))
    axes: list[AxisSelection] = []
    post: list[Any] = []
    for item in items:
        if item is None or item is Ellipsis or isinstance(item, np.bool_):
            post.append(item)
            continue
        size = shape[len(axes)]
        if item is _ELLIPSIS_SLICE:  # covered by the ellipsis in ``post``
            axes.append(SliceSelection(0, 1, size))
        elif isinstance(item, slice):
            selection, axis_post = _slice_selection(item, size)
            axes.append(selection)
            post.append(axis_post)
        elif has_arrays:  # integers take part in the broadcast of the arrays
            points, inverse = _array_points(np.asarray(item), size)
            axes.append(PointsSelection(points))
            post.append(np.broadcast_to(inverse, broadcast_shape))
        else:
            position = operator.index(item)
            if not -size <= position < size:
                raise IndexError("index out of bounds")
            axes.append(SliceSelection(position % size, 1, 1))
            post.append(0)
    return ParsedIndex(tuple(axes), tuple(post), has_arrays)


def _array_points(array: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique points of an integer array, and where each entry is among them."""
    if array.size and not (-size <= array.min() and array.max() < size):
        raise IndexError("index out of bounds")
    array = np.where(array < 0, array + size, array).astype(np.intp, copy=False)
    points, inverse = np.unique(array, return_inverse=True)
    return points, inverse.reshape(array.shape)
