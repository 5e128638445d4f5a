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

import itertools
import math
import os
from typing import Any

import numpy as np

import h5vc.config as config
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
DEFAULT_BLOCK_BYTES = config.DASK_BLOCK_BYTES


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


#: Target size of one block when writing: blocks are computed a few at a time.
WRITE_BLOCK_BYTES = config.DASK_WRITE_BLOCK_BYTES

#: Bytes of computed blocks a write keeps in flight (each batch and the next), at most
#: (but always two blocks per batch).
IN_FLIGHT_BYTES = config.DASK_IN_FLIGHT_BYTES


def _write_target() -> int:
    """The block size for writes, read at call time (so that it can be changed)."""
    return WRITE_BLOCK_BYTES


def _block_slices(
    chunks: tuple[tuple[int, ...], ...],
) -> list[tuple[tuple[int, ...], tuple[slice, ...]]]:
    """(block position, box) of every block of a Dask array with ``chunks``."""
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
    Dask's scheduler; the next few while the current ones are written) and written by
    this one writer, so memory holds a few blocks, never the whole array. A target
    with ``write_through(region, values)`` (a staged dataset of a versioned file)
    stores the whole chunks of each block in the file at once, hashed and
    deduplicated as a commit would (taken back if the version is not committed);
    only chunks the selection covers in part are staged in memory. ``value`` must
    have exactly the shape of the selection (no broadcasting) and a dtype that casts
    to the dataset's. Selections other than integers and step-1 slices are computed
    whole first.
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
    stored = tuple(getattr(target, "chunks", None) or ())
    if stored:
        value = value.rechunk(_aligned_chunks(box, stored, np.dtype(value.dtype), _write_target()))
    blocks = _block_slices(value.chunks)
    largest = [max(sizes_, default=0) for sizes_ in value.chunks]
    block_bytes = max(1, math.prod(largest) * np.dtype(value.dtype).itemsize)
    batch = max(2, min(os.cpu_count() or 1, IN_FLIGHT_BYTES // block_bytes))
    groups = [blocks[first : first + batch] for first in range(0, len(blocks), batch)]
    writer = getattr(target, "write_through", None) if stored else None
    for group, computed in _computed(value, groups):
        for (_, part), data in zip(group, computed):
            region = tuple(slice(b.start + p.start, b.start + p.stop) for b, p in zip(box, part))
            _write_block(target, writer, region, np.asarray(data), stored, shape)


def _computed(value: Any, groups: list[Any]) -> Any:
    """(group, computed blocks) for every group of blocks, the next group computed on
    another thread while the caller writes the current one."""
    from concurrent.futures import ThreadPoolExecutor

    import dask

    def compute(group: Any) -> Any:
        return dask.compute(*(value.blocks[position] for position, _ in group))

    if not groups:
        return
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(compute, groups[0])
        try:
            for k, group in enumerate(groups):
                computed = pending.result()
                if k + 1 < len(groups):
                    pending = pool.submit(compute, groups[k + 1])
                yield group, computed
                del computed
        finally:
            pending.cancel()


def _write_block(
    target: Any,
    writer: Any,
    region: tuple[slice, ...],
    data: np.ndarray,
    stored: tuple[int, ...],
    shape: tuple[int, ...],
) -> None:
    """``target[region] = data``: the whole chunks through ``writer`` when there is one,
    the chunks ``region`` covers in part through ``target[...]``."""
    if writer is None:
        target[region] = data
        return
    inner = []
    for box, c, n in zip(region, stored, shape):
        low = -(-box.start // c) * c
        high = box.stop if box.stop == n else box.stop // c * c
        inner.append(slice(low, max(low, high)))
    if any(b.start >= b.stop for b in inner):
        target[region] = data
        return
    local = tuple(slice(i.start - r.start, i.stop - r.start) for i, r in zip(inner, region))
    if not writer(tuple(inner), data[local]):
        target[region] = data
        return
    current = list(region)
    for axis, middle in enumerate(inner):
        edges = (
            slice(current[axis].start, middle.start),
            slice(middle.stop, current[axis].stop),
        )
        for edge in edges:
            if edge.start < edge.stop:
                piece = (*current[:axis], edge, *current[axis + 1 :])
                where = tuple(
                    slice(p.start - r.start, p.stop - r.start) for p, r in zip(piece, region)
                )
                target[piece] = data[where]
        current[axis] = middle


def _aligned_chunks(
    box: tuple[slice, ...], stored: tuple[int, ...], dtype: np.dtype, target_bytes: int
) -> tuple[tuple[int, ...], ...]:
    """Dask chunks for writing into ``box`` of a dataset stored in ``stored`` chunks:
    every block boundary inside the box lies on a stored chunk boundary of the
    dataset, and a block holds whole chunks of about ``target_bytes``."""
    sizes = tuple(b.stop - b.start for b in box)
    if not all(sizes):
        return tuple((n,) for n in sizes)
    lengths = [sizes_[0] for sizes_ in block_chunks(sizes, stored, dtype, target_bytes)]
    out = []
    for b, c, length in zip(box, stored, lengths):
        step = max(c, length // c * c)
        edges = [b.start]
        edge = b.start // c * c + step
        while edge < b.stop:
            edges.append(edge)
            edge += step
        edges.append(b.stop)
        out.append(tuple(int(y - x) for x, y in itertools.pairwise(edges)))
    return tuple(out)


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
