"""Writing a Dask array into a staged dataset, block by block.

Used by ``StagedGroup.create_dataset(name, data=dask_array)`` and
``StagedDataset.__setitem__`` (which hand any Dask array over to this module) and by
:mod:`h5vc.xarray`. Blocks are rechunked to whole stored chunks, computed a few at a
time by Dask's scheduler (in parallel) and written by the one caller, so the whole
array is never in memory at once. Works on anything shaped like a staged dataset
(``shape``, ``dtype``, ``chunks``, ``name``, ``__setitem__``); imports no other part
of h5vc but its errors.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from h5vc.errors import ArrayMismatchError

__all__ = [
    "DEFAULT_BLOCK_BYTES",
    "block_chunks",
    "check_fits",
    "create_dataset",
    "is_dask_array",
    "store",
]

#: Target size of one Dask block, for reads (:func:`h5vc.dask.from_version`) and writes.
DEFAULT_BLOCK_BYTES = 64 * 1024 * 1024


def is_dask_array(value: Any) -> bool:
    """True for a Dask array (a Dask collection with blocks and a dtype)."""
    return hasattr(value, "__dask_graph__") and hasattr(value, "blocks") and hasattr(value, "dtype")


def block_chunks(
    shape: tuple[int, ...],
    stored: tuple[int, ...],
    dtype: np.dtype,
    target_bytes: int = DEFAULT_BLOCK_BYTES,
) -> tuple[tuple[int, ...], ...]:
    """Dask chunks for ``shape``: multiples of the ``stored`` chunks, each block at most
    about ``target_bytes`` (one stored chunk when a chunk is already larger)."""
    from dask.array.core import normalize_chunks

    limit = max(int(target_bytes), int(np.prod(stored, dtype=np.int64)) * dtype.itemsize)
    return normalize_chunks("auto", shape, limit=limit, dtype=dtype, previous_chunks=stored)


def _target() -> int:
    """The block size, read at call time (so that it can be changed)."""
    return DEFAULT_BLOCK_BYTES


def _block_slices(
    chunks: tuple[tuple[int, ...], ...],
) -> list[tuple[tuple[int, ...], tuple[slice, ...]]]:
    """(block position, box) of every block of a Dask array with ``chunks``."""
    import itertools

    starts = [np.cumsum((0, *sizes)) for sizes in chunks]
    out = []
    for index in itertools.product(*(range(len(sizes)) for sizes in chunks)):
        box = tuple(
            slice(int(starts[axis][i]), int(starts[axis][i + 1])) for axis, i in enumerate(index)
        )
        out.append((index, box))
    return out


def check_fits(value: Any, shape: tuple[int, ...], dtype: np.dtype, what: str) -> None:
    """Raise :class:`ArrayMismatchError` unless a Dask array fits ``shape`` and ``dtype``."""
    if any(np.isnan(n) for sizes in value.chunks for n in sizes):
        raise ArrayMismatchError(
            f"Cannot write a Dask array of unknown chunk sizes to {what}: call "
            f"compute_chunk_sizes() first."
        )
    if tuple(value.shape) != tuple(shape):
        raise ArrayMismatchError(
            f"Cannot write a Dask array of shape {tuple(value.shape)} to {what}: "
            f"expected shape {tuple(shape)}."
        )
    if not np.can_cast(value.dtype, dtype, casting="same_kind"):
        raise ArrayMismatchError(
            f"Cannot write a Dask array of dtype {value.dtype} to {what} of dtype "
            f"{dtype}: expected a dtype that casts to {dtype} (same kind)."
        )


def _basic_region(index: Any, shape: tuple[int, ...]) -> tuple[tuple[slice, ...], tuple[int, ...]]:
    """The box ``index`` selects as slices, and the shape it has with integer axes
    kept as length 1; raises ValueError for anything but integers and step-1 slices."""
    import ndindex

    expanded = ndindex.ndindex(index).expand(shape)
    box, kept = [], []
    for item in expanded.args:
        if isinstance(item, ndindex.Integer):
            box.append(slice(item.raw, item.raw + 1))
        elif isinstance(item, ndindex.Slice) and item.step == 1:
            box.append(slice(item.start, item.stop))
            kept.append(item.stop - item.start)
        else:
            raise ValueError(f"not a basic selection: {index!r}")
    return tuple(box), tuple(kept)


def store(target: Any, value: Any, index: Any = ()) -> None:
    """Write the Dask array ``value`` into ``target[index]`` (a staged dataset).

    Blocks are computed a few at a time (as many as there are cores, in parallel by
    Dask's scheduler) and written by this one writer, so memory holds a few blocks,
    never the whole array; the staged dataset keeps the chunks written until the
    version is committed, as for any write. ``value`` must have exactly the shape of
    the selection (no broadcasting) and a dtype that casts to the dataset's.
    Selections other than integers and step-1 slices are computed whole first.
    """
    shape = tuple(target.shape)
    whole = (isinstance(index, tuple) and not index) or index is Ellipsis
    what = f"dataset {target.name!r}" if whole else f"{target.name!r}[{index!r}]"
    try:
        box, kept = _basic_region(index, shape)
    except (ValueError, IndexError, TypeError):
        import ndindex

        selected = ndindex.ndindex(index).newshape(shape)  # numpy's IndexError if invalid
        check_fits(value, selected, np.dtype(target.dtype), what)
        target[index] = np.asarray(value)
        return
    check_fits(value, kept, np.dtype(target.dtype), what)
    sizes = tuple(b.stop - b.start for b in box)
    if value.shape != sizes:
        value = value.reshape(sizes)  # integer axes back as length 1
    if getattr(target, "chunks", None):
        aligned = block_chunks(sizes, tuple(target.chunks), np.dtype(value.dtype), _target())
        value = value.rechunk(aligned)  # whole stored chunks per block, where the box allows
    import dask

    batch = max(2, os.cpu_count() or 1)
    blocks = _block_slices(value.chunks)
    for first in range(0, len(blocks), batch):
        group = blocks[first : first + batch]
        computed = dask.compute(*(value.blocks[position] for position, _ in group))
        for (_, part), data in zip(group, computed):
            region = tuple(slice(b.start + p.start, b.start + p.stop) for b, p in zip(box, part))
            target[region] = np.asarray(data)


def create_dataset(group: Any, name: str, data: Any, **kwargs: Any) -> Any:
    """``group.create_dataset(name, data=dask_array, ...)``: created empty with the
    given options, then filled block by block by :func:`store`."""
    shape = kwargs.pop("shape", None)
    dtype = np.dtype(kwargs.pop("dtype", None) or data.dtype)
    if shape is not None:
        shape = (int(shape),) if isinstance(shape, int | np.integer) else tuple(shape)
        if shape != tuple(data.shape):
            raise ArrayMismatchError(
                f"Cannot create dataset {name!r} of shape {shape} from a Dask array of "
                f"shape {tuple(data.shape)}."
            )
    if dtype.kind in "OUS" or np.dtype(data.dtype).kind in "OUS":
        return group.create_dataset(name, data=np.asarray(data), dtype=dtype, **kwargs)
    check_fits(data, tuple(data.shape), dtype, f"dataset {name!r}")
    dataset = group.create_dataset(name, shape=tuple(data.shape), dtype=dtype, **kwargs)
    store(dataset, data)
    return dataset
