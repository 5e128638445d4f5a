"""Plans: what an operation on a :class:`StagedChangesArray` will do.

A plan deals only in shapes, chunks and indices; it never touches data. It is
built from the array's metadata (``shape``, ``chunk_size``, ``slab_indices``,
``slab_offsets``, number of slabs), prints as the list of transfers it will run,
and is then executed against the array's slabs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from h5vc.staging.indexing import ParsedIndex, parse_index
from h5vc.staging.mapper import AxisChunkPairs
from h5vc.staging.transfer import OUT, VALUE, TransferPlan

if TYPE_CHECKING:
    from h5vc.staging.array import StagedChangesArray

__all__ = ["ChangesPlan", "GetItemPlan", "LoadPlan", "ResizePlan", "SetItemPlan"]

_REPR_MAX_CHUNKS = 50


class _NdPairs(NamedTuple):
    """Slice pairs of an n-dimensional selection, one row per pair."""

    chunk_pos: np.ndarray  # (n_pairs, ndim) position in each axis' chunk list
    in_chunk_start: np.ndarray
    counts: np.ndarray
    buffer_start: np.ndarray


def _cartesian_pairs(pairs: Sequence[AxisChunkPairs]) -> _NdPairs:
    """The n-dimensional slice pairs: the product of every axis' pairs."""
    if len(pairs) == 1:
        (axis,) = pairs
        return _NdPairs(
            axis.chunk_pos[:, None],
            axis.in_chunk_start[:, None],
            axis.counts[:, None],
            axis.buffer_start[:, None],
        )
    grid = np.indices([len(axis.counts) for axis in pairs]).reshape(len(pairs), -1)
    columns = [
        [getattr(axis, name)[grid[k]] for k, axis in enumerate(pairs)]
        for name in ("chunk_pos", "in_chunk_start", "counts", "buffer_start")
    ]
    return _NdPairs(*(np.stack(column, axis=1) for column in columns))


def _group_by_slab(slab_of_row: np.ndarray) -> Iterator[tuple[int, Any]]:
    """(slab, rows) for each distinct slab, slabs ascending."""
    if len(slab_of_row) == 1:
        yield int(slab_of_row[0]), slice(None)
        return
    order = np.argsort(slab_of_row, kind="stable")
    ordered = slab_of_row[order]
    bounds = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    for rows in np.split(order, bounds):
        if len(rows):
            yield int(slab_of_row[rows[0]]), rows


def _whole_chunk_copies(
    sources: np.ndarray,
    source_offsets: np.ndarray,
    destination: int,
    destination_offsets: np.ndarray,
    chunk_size: tuple[int, ...],
) -> list[TransferPlan]:
    """Copy whole chunks from their slabs to consecutive rows of a new slab."""
    ndim = len(chunk_size)
    transfers = []
    for slab, rows in _group_by_slab(sources):
        n_rows = len(source_offsets[rows])
        src_start = np.zeros((n_rows, ndim), dtype=np.intp)
        dst_start = np.zeros((n_rows, ndim), dtype=np.intp)
        src_start[:, 0] = source_offsets[rows]
        dst_start[:, 0] = destination_offsets[rows]
        count = np.broadcast_to(np.array(chunk_size, dtype=np.intp), (n_rows, ndim))
        ones = (1,) * ndim
        transfers.append(
            TransferPlan.build(
                slab, destination, src_start, dst_start, count, ones, ones, slab == 0
            )
        )
    return transfers


def _moves_lines(slab: int, coords: np.ndarray, offsets: np.ndarray, chunk_rows: int) -> list[str]:
    lines = []
    for i, (chunk, offset) in enumerate(zip(coords.tolist(), offsets.tolist())):
        if i == _REPR_MAX_CHUNKS:
            lines.append(f"# ... {len(offsets) - i} more")
            break
        lines.append(f"# chunk {tuple(chunk)} -> slabs[{slab}][{offset}:{offset + chunk_rows}]")
    return lines


class _ChunkMoves(NamedTuple):
    """Chunks leaving the fill or base slabs for a new staged slab."""

    slab: int
    coords: np.ndarray  # (n_chunks, ndim) chunk coordinates
    offsets: np.ndarray  # row offsets on the new slab
    transfers: list[TransferPlan]

    @classmethod
    def plan(
        cls,
        slab: int,
        coords: np.ndarray,
        sources: np.ndarray,
        source_offsets: np.ndarray,
        copy_mask: np.ndarray,
        chunk_size: tuple[int, ...],
    ) -> _ChunkMoves:
        """Move chunks, given in source order, to ``slab``; copy those in ``copy_mask``."""
        offsets = np.arange(len(sources), dtype=np.intp) * chunk_size[0]
        transfers = []
        if copy_mask.any():
            transfers = _whole_chunk_copies(
                sources[copy_mask], source_offsets[copy_mask], slab, offsets[copy_mask], chunk_size
            )
        return cls(slab, coords, offsets, transfers)

    def slab_shape(self, chunk_size: tuple[int, ...]) -> tuple[int, ...]:
        return (len(self.offsets) * chunk_size[0], *chunk_size[1:])

    def lines(self, chunk_size: tuple[int, ...]) -> list[str]:
        lines = [f"slabs.append(np.empty({self.slab_shape(chunk_size)}))  # slabs[{self.slab}]"]
        for transfer in self.transfers:
            lines += transfer.lines()
        return lines + _moves_lines(self.slab, self.coords, self.offsets, chunk_size[0])

    def create_slab(self, array: StagedChangesArray) -> None:
        """Append the new slab and copy the chunks that need their old content."""
        slabs = array.slabs
        assert len(slabs) == self.slab
        slabs.append(np.empty(self.slab_shape(array.chunk_size), dtype=array.dtype))
        for transfer in self.transfers:
            transfer.execute(slabs[transfer.source_slab], slabs[self.slab])

    def update_metadata(self, array: StagedChangesArray) -> None:
        """Point the moved chunks to their new place."""
        chunks = tuple(self.coords.T)
        array.slab_indices[chunks] = self.slab
        array.slab_offsets[chunks] = self.offsets


def _source_order(sources: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Order chunks by slab, then offset, so consecutive rows are read together."""
    if len(sources) == 1:
        return np.zeros(1, dtype=np.intp)
    return np.lexsort((offsets, sources))


def _read_transfers(
    parsed: ParsedIndex, array: StagedChangesArray
) -> tuple[list[TransferPlan], tuple[int, ...]]:
    """Transfers filling the orthogonal buffer of ``parsed`` from the slabs."""
    pairs = [axis.chunk_pairs(c) for axis, c in zip(parsed.axes, array.chunk_size)]
    steps = tuple(axis.step for axis in pairs)
    if any(len(axis.counts) == 0 for axis in pairs):
        return [], steps
    nd_pairs = _cartesian_pairs(pairs)
    chunks = tuple(axis.chunks[nd_pairs.chunk_pos[:, k]] for k, axis in enumerate(pairs))
    slabs = array.slab_indices[chunks]
    src_start = nd_pairs.in_chunk_start.copy()
    src_start[:, 0] += array.slab_offsets[chunks]
    ones = (1,) * len(pairs)
    transfers = [
        TransferPlan.build(
            slab,
            OUT,
            src_start[rows],
            nd_pairs.buffer_start[rows],
            nd_pairs.counts[rows],
            steps,
            ones,
            slab == 0,
        )
        for slab, rows in _group_by_slab(slabs)
    ]
    return transfers, steps


class GetItemPlan:
    """``array[index]``: fill a buffer from every slab, then apply the post-index."""

    def __init__(self, array: StagedChangesArray, index: Any) -> None:
        self.index = parse_index(index, array.shape)
        self.transfers, _ = _read_transfers(self.index, array)

    def __repr__(self) -> str:
        lines = [type(self).__name__, f"out = np.empty({self.index.buffer_shape})"]
        for transfer in self.transfers:
            lines += transfer.lines()
        if self.index.post_index is not None:
            lines.append(f"out = out[{self.index.post_index!r}]")
        return "\n".join(lines)

    def read_buffer(self, array: StagedChangesArray) -> np.ndarray:
        """The dense orthogonal buffer of the selection."""
        buffer = np.empty(self.index.buffer_shape, dtype=array.dtype)
        slabs = array.slabs
        for transfer in self.transfers:
            transfer.execute(slabs[transfer.source_slab], buffer)
        return buffer

    def execute(self, array: StagedChangesArray) -> Any:
        return self.index.apply_post(self.read_buffer(array))


_SCALAR_TYPES = (int, float, complex, bool, bytes, str, np.generic)


class SetItemPlan:
    """``array[index] = value``.

    Selected chunks on the fill or base slabs move to one new staged slab (those
    only partly selected are copied first); then the value is copied into the
    staged slabs. With array indices, the selection's orthogonal buffer is read
    and updated by numpy first, so duplicates and broadcasting follow numpy.
    """

    def __init__(self, array: StagedChangesArray, index: Any) -> None:
        self.user_index = index
        self.index = parse_index(index, array.shape)
        self.chunk_size = array.chunk_size
        self.read_transfers: list[TransferPlan] = []
        if self.index.has_arrays:
            self.read_transfers, _ = _read_transfers(self.index, array)
        self.moves: _ChunkMoves | None = None
        self.value_transfers: list[TransferPlan] = []
        pairs = [axis.chunk_pairs(c) for axis, c in zip(self.index.axes, array.chunk_size)]
        if all(len(axis.counts) for axis in pairs):
            self._plan_writes(array, pairs)

    def _plan_writes(self, array: StagedChangesArray, pairs: list[AxisChunkPairs]) -> None:
        chunk_size = array.chunk_size
        block = np.ix_(*(axis.chunks for axis in pairs))
        block_slabs = array.slab_indices[block]
        block_offsets = array.slab_offsets[block]
        on_fixed_slab = np.nonzero(block_slabs <= array.n_base_slabs)
        if len(on_fixed_slab[0]):
            whole = np.ones(block_slabs.shape, dtype=bool)
            for k, axis in enumerate(pairs):
                whole_along_axis = axis.whole_chunks(chunk_size[k], array.shape[k])
                whole &= whole_along_axis.reshape([-1 if i == k else 1 for i in range(len(pairs))])
            sources, source_offsets = block_slabs[on_fixed_slab], block_offsets[on_fixed_slab]
            order = _source_order(sources, source_offsets)
            positions = tuple(pos[order] for pos in on_fixed_slab)
            coords = np.stack([axis.chunks[pos] for axis, pos in zip(pairs, positions)], axis=1)
            self.moves = _ChunkMoves.plan(
                len(array.slabs),
                coords,
                sources[order],
                source_offsets[order],
                ~whole[positions],
                chunk_size,
            )
            block_slabs[positions] = self.moves.slab
            block_offsets[positions] = self.moves.offsets
        nd_pairs = _cartesian_pairs(pairs)
        pair_chunks = tuple(nd_pairs.chunk_pos.T)
        dst_start = nd_pairs.in_chunk_start.copy()
        dst_start[:, 0] += block_offsets[pair_chunks]
        steps = tuple(axis.step for axis in pairs)
        ones = (1,) * len(pairs)
        self.value_transfers = [
            TransferPlan.build(
                VALUE,
                slab,
                nd_pairs.buffer_start[rows],
                dst_start[rows],
                nd_pairs.counts[rows],
                ones,
                steps,
            )
            for slab, rows in _group_by_slab(block_slabs[pair_chunks])
        ]

    def __repr__(self) -> str:
        lines = [type(self).__name__]
        if self.read_transfers:
            lines.append(f"value_buffer = np.empty({self.index.buffer_shape})")
            for transfer in self.read_transfers:
                lines += transfer.lines()
            lines.append(f"value_buffer[{self.index.post_index!r}] = value")
            lines.append("value = value_buffer")
        if self.moves is not None:
            lines += self.moves.lines(self.chunk_size)
        for transfer in self.value_transfers:
            lines += transfer.lines()
        return "\n".join(lines)

    def value_source(self, array: StagedChangesArray, value: Any) -> np.ndarray:
        """The value laid out as the orthogonal buffer (may raise; changes nothing)."""
        index, dtype = self.index, array.dtype
        if index.has_arrays:
            buffer = np.empty(index.buffer_shape, dtype=dtype)
            for transfer in self.read_transfers:
                transfer.execute(array.slabs[transfer.source_slab], buffer)
            buffer[index.post_index] = value
            return buffer
        if isinstance(value, _SCALAR_TYPES) or (isinstance(value, np.ndarray) and value.ndim == 0):
            return np.broadcast_to(np.asarray(value, dtype=dtype), index.buffer_shape)
        if (
            index.post_index is None
            and isinstance(value, np.ndarray)
            and value.dtype == dtype
            and value.shape == index.buffer_shape
        ):
            return value
        buffer = np.empty(index.buffer_shape, dtype=dtype)
        buffer[() if index.post_index is None else index.post_index] = value
        return buffer

    def write(self, array: StagedChangesArray, source: np.ndarray) -> None:
        """Move chunks off read-only slabs, then copy ``source`` in (cannot fail)."""
        if self.moves is not None:
            self.moves.create_slab(array)
            self.moves.update_metadata(array)
        for transfer in self.value_transfers:
            transfer.execute(source, array.slabs[transfer.destination_slab])


def _parse_shape(new_shape: Any, ndim: int) -> tuple[int, ...]:
    shape = (new_shape,) if isinstance(new_shape, int | np.integer) else tuple(new_shape)
    if len(shape) != ndim:
        raise ValueError(
            f"Expected a shape with {ndim} dimensions. Got {len(shape)} instead: {shape}."
        )
    shape = tuple(int(n) for n in shape)
    if any(n < 0 for n in shape):
        raise ValueError(f"negative dimensions are not allowed: {shape}")
    return shape


class ResizePlan:
    """``array.resize(shape)``, one axis at a time.

    Shrinking only trims the chunk grid. Growing adds chunks on the fill slab;
    an edge chunk that was cut short and is not on the fill slab gets the rest of
    its extent filled with the fill value, after a move to a staged slab if it
    lay on a base slab. Slabs no chunk points to any more are dropped.
    """

    def __init__(self, array: StagedChangesArray, new_shape: Any) -> None:
        self.shape = _parse_shape(new_shape, array.ndim)
        self.chunk_size = array.chunk_size
        self.n_base_slabs = array.n_base_slabs
        current = [min(old, new) for old, new in zip(array.shape, self.shape)]
        kept = tuple(slice(0, -(-n // c)) for n, c in zip(current, self.chunk_size))
        self.slab_indices = array.slab_indices[kept].copy()
        self.slab_offsets = array.slab_offsets[kept].copy()
        # a chunk cut off the grid that held data (not the fill slab): growing back
        # brings fill values, so the array no longer matches its base there
        self.drops_data = bool(
            np.count_nonzero(array.slab_indices) > np.count_nonzero(self.slab_indices)
        )
        self.steps: list[_ChunkMoves | TransferPlan] = []
        self._next_slab = len(array.slabs)
        for axis, size in enumerate(self.shape):
            if size > current[axis]:
                self._fill_edge(axis, current[axis])
                current[axis] = size
                self._grow_grid(axis)
        n_slabs = self._next_slab
        referenced = np.bincount(self.slab_indices.ravel(), minlength=n_slabs) > 0
        self.dropped = [
            slab
            for slab in range(1, len(array.slabs))
            if array.slabs[slab] is not None and not referenced[slab]
        ]

    def _grow_grid(self, axis: int) -> None:
        n_chunks = -(-self.shape[axis] // self.chunk_size[axis])
        added = n_chunks - self.slab_indices.shape[axis]
        if added <= 0:
            return
        # New chunks on the fill slab (0, offset 0): one concatenation per array
        # (np.pad costs several times as much on these small grids).
        shape = list(self.slab_indices.shape)
        shape[axis] = added
        zeros = np.zeros(shape, dtype=self.slab_indices.dtype)
        self.slab_indices = np.concatenate([self.slab_indices, zeros], axis=axis)
        self.slab_offsets = np.concatenate(
            [self.slab_offsets, zeros.astype(self.slab_offsets.dtype, copy=False)], axis=axis
        )

    def _fill_edge(self, axis: int, size: int) -> None:
        """Fill the part of the edge chunks beyond ``size`` along ``axis``."""
        chunk_len = self.chunk_size[axis]
        valid = size % chunk_len
        if valid == 0:
            return
        last = self.slab_indices.shape[axis] - 1
        edge = (slice(None),) * axis + (slice(last, last + 1),)
        positions = np.nonzero(self.slab_indices[edge])
        if not len(positions[0]):
            return
        chunks = tuple(pos + last if k == axis else pos for k, pos in enumerate(positions))
        slabs, offsets = self.slab_indices[chunks], self.slab_offsets[chunks]
        on_base = slabs <= self.n_base_slabs
        if on_base.any():
            order = _source_order(slabs[on_base], offsets[on_base])
            coords = np.stack(chunks, axis=1)[on_base][order]
            moves = _ChunkMoves.plan(
                self._next_slab,
                coords,
                slabs[on_base][order],
                offsets[on_base][order],
                np.ones(len(order), dtype=bool),
                self.chunk_size,
            )
            self.steps.append(moves)
            self._next_slab += 1
            self.slab_indices[tuple(coords.T)] = moves.slab
            self.slab_offsets[tuple(coords.T)] = moves.offsets
            slabs, offsets = self.slab_indices[chunks], self.slab_offsets[chunks]
        ndim = len(self.shape)
        dst_start = np.zeros((len(slabs), ndim), dtype=np.intp)
        dst_start[:, 0] = offsets
        dst_start[:, axis] += valid
        count = np.tile(np.array(self.chunk_size, dtype=np.intp), (len(slabs), 1))
        count[:, axis] = chunk_len - valid
        ones = (1,) * ndim
        for slab, rows in _group_by_slab(slabs):
            src_start = np.zeros_like(dst_start[rows])
            self.steps.append(
                TransferPlan.build(
                    0, slab, src_start, dst_start[rows], count[rows], ones, ones, True
                )
            )

    def __repr__(self) -> str:
        lines = [type(self).__name__, f"shape = {self.shape}"]
        for step in self.steps:
            lines += step.lines(self.chunk_size) if isinstance(step, _ChunkMoves) else step.lines()
        lines += [f"slabs[{slab}] = None" for slab in self.dropped]
        lines += [f"slab_indices:\n{self.slab_indices}", f"slab_offsets:\n{self.slab_offsets}"]
        return "\n".join(lines)

    def execute(self, array: StagedChangesArray) -> None:
        for step in self.steps:
            if isinstance(step, _ChunkMoves):
                step.create_slab(array)
            else:
                step.execute(array.slabs[step.source_slab], array.slabs[step.destination_slab])
        array.shape = self.shape
        array.slab_indices = self.slab_indices
        array.slab_offsets = self.slab_offsets
        array.dropped_data = array.dropped_data or self.drops_data
        for slab in self.dropped:
            array.slabs[slab] = None


class LoadPlan:
    """``array.load()``: copy every chunk on a base slab to one new staged slab."""

    def __init__(self, array: StagedChangesArray) -> None:
        self.chunk_size = array.chunk_size
        slab_indices = array.slab_indices
        on_base = np.nonzero((slab_indices >= 1) & (slab_indices <= array.n_base_slabs))
        self.moves: _ChunkMoves | None = None
        if len(on_base[0]):
            sources, offsets = slab_indices[on_base], array.slab_offsets[on_base]
            order = _source_order(sources, offsets)
            self.moves = _ChunkMoves.plan(
                len(array.slabs),
                np.stack(on_base, axis=1)[order],
                sources[order],
                offsets[order],
                np.ones(len(order), dtype=bool),
                array.chunk_size,
            )
        base = range(1, 1 + array.n_base_slabs)
        self.dropped = [slab for slab in base if array.slabs[slab] is not None]

    def __repr__(self) -> str:
        lines = [type(self).__name__]
        if self.moves is not None:
            lines += self.moves.lines(self.chunk_size)
        lines += [f"slabs[{slab}] = None" for slab in self.dropped]
        return "\n".join(lines)

    def execute(self, array: StagedChangesArray) -> None:
        if self.moves is not None:
            self.moves.create_slab(array)
            self.moves.update_metadata(array)
        for slab in self.dropped:
            array.slabs[slab] = None


class ChangesPlan:
    """The chunks on staged slabs, axis 0 varying fastest, trimmed to the array edge."""

    def __init__(self, array: StagedChangesArray) -> None:
        self.chunk_size = array.chunk_size
        staged = array.slab_indices > array.n_base_slabs
        reversed_coords = np.nonzero(staged.T)
        self.coords = np.stack(reversed_coords[::-1], axis=1).reshape(-1, array.ndim)
        chunks = tuple(self.coords.T)
        self.slabs = array.slab_indices[chunks]
        self.offsets = array.slab_offsets[chunks]
        sizes = np.array(array.shape, dtype=np.intp)
        chunk_lens = np.array(self.chunk_size, dtype=np.intp)
        self.extents = np.minimum(chunk_lens, sizes - self.coords * chunk_lens)

    def __len__(self) -> int:
        return len(self.slabs)

    def _rows(self) -> Iterator[tuple[tuple[int, ...], int, tuple[slice, ...]]]:
        rows = zip(self.coords.tolist(), self.slabs.tolist(), self.offsets.tolist())
        for (coords, slab, offset), extent in zip(rows, self.extents.tolist()):
            selection = (slice(offset, offset + extent[0]), *(slice(0, n) for n in extent[1:]))
            yield tuple(coords), slab, selection

    def __repr__(self) -> str:
        lines = [type(self).__name__, f"# {len(self)} staged chunks"]
        for i, (coords, slab, selection) in enumerate(self._rows()):
            if i == _REPR_MAX_CHUNKS:
                lines.append(f"# ... {len(self) - i} more")
                break
            bounds = ", ".join(f"{s.start}:{s.stop}" for s in selection)
            lines.append(f"chunk {coords} = slabs[{slab}][{bounds}]")
        return "\n".join(lines)

    def execute(self, array: StagedChangesArray) -> Iterator[tuple[tuple[int, ...], np.ndarray]]:
        slabs = array.slabs
        for coords, slab, selection in self._rows():
            yield coords, slabs[slab][selection]
