"""The staged changes of one dataset, held in memory until commit."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from h5vc.staging.indexing import raise_numpy_setitem_error
from h5vc.staging.plans import ChangesPlan, GetItemPlan, LoadPlan, ResizePlan, SetItemPlan

__all__ = ["StagedChangesArray"]


def _chunk_grid(shape: tuple[int, ...], chunk_size: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(-(-n // c) for n, c in zip(shape, chunk_size))


def _layout_array(values: Any, grid: tuple[int, ...], name: str) -> np.ndarray:
    if values is None:
        return np.zeros(grid, dtype=np.intp)
    layout = np.array(values, dtype=np.intp)
    if layout.shape != grid:
        raise ValueError(f"Expected {name} of shape {grid}. Got {layout.shape} instead.")
    return layout


class StagedChangesArray:
    """A numpy-like array whose chunks live on *slabs*.

    ``slabs[0]`` is one read-only chunk full of the fill value; the base slabs
    ``slabs[1 : 1 + n_base_slabs]`` are read-only array-likes (typically the
    ``raw_data`` dataset); the staged slabs after them are numpy arrays created
    as chunks are written. Every slab stacks whole chunks along axis 0. For each
    chunk, ``slab_indices`` tells which slab holds it and ``slab_offsets`` the
    row where it starts. Reads and writes touch only the chunks they select.
    """

    def __init__(
        self,
        shape: Sequence[int],
        chunk_size: Sequence[int],
        dtype: Any,
        fill_value: Any = None,
        base_slabs: Sequence[Any] = (),
        slab_indices: Any = None,
        slab_offsets: Any = None,
    ) -> None:
        self.shape = tuple(int(n) for n in shape)
        self.chunk_size = tuple(int(n) for n in chunk_size)
        if not self.shape or len(self.chunk_size) != len(self.shape):
            raise ValueError(
                f"Expected a chunk size with {len(self.shape)} dimensions (at least one). "
                f"Got {self.chunk_size} for shape {self.shape} instead."
            )
        if any(c < 1 for c in self.chunk_size) or any(n < 0 for n in self.shape):
            raise ValueError(
                f"Expected positive chunk sizes and non-negative extents. "
                f"Got chunk size {self.chunk_size} and shape {self.shape} instead."
            )
        self.dtype = np.dtype(dtype)
        fill = np.zeros((), dtype=self.dtype) if fill_value is None else fill_value
        self._fill = np.asarray(fill, dtype=self.dtype)
        self.n_base_slabs = len(base_slabs)
        full_slab = np.broadcast_to(self._fill, self.chunk_size)
        self.slabs: list[Any] = [full_slab, *base_slabs]
        grid = _chunk_grid(self.shape, self.chunk_size)
        self.slab_indices = _layout_array(slab_indices, grid, "slab_indices")
        self.slab_offsets = _layout_array(slab_offsets, grid, "slab_offsets")
        #: whether a resize cut off chunks that held data (staged or on a base slab)
        self.dropped_data = False

    @classmethod
    def from_array(
        cls, array: Any, chunk_size: Sequence[int], fill_value: Any = None
    ) -> StagedChangesArray:
        """A staged array holding a copy of ``array``."""
        data = np.asarray(array)
        staged = cls(data.shape, chunk_size, data.dtype, fill_value)
        staged[...] = data
        return staged

    # -- properties -----------------------------------------------------------------

    @property
    def fill_value(self) -> Any:
        return self._fill[()]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def has_changes(self) -> bool:
        """Whether the array may differ from its base slabs: a chunk lies on a staged
        slab, or a resize cut off chunks that held data (growing back brings fill
        values where the base had data, with every chunk on a base or the fill slab).

        Staged slabs that no chunk points to are dropped as soon as that happens,
        so any remaining staged slab holds changes.
        """
        return self.dropped_data or any(
            slab is not None for slab in self.slabs[1 + self.n_base_slabs :]
        )

    def __repr__(self) -> str:
        n_staged = sum(slab is not None for slab in self.slabs[1 + self.n_base_slabs :])
        return (
            f"<StagedChangesArray shape={self.shape} chunk_size={self.chunk_size} "
            f"dtype={self.dtype} base slabs={self.n_base_slabs} staged slabs={n_staged}>"
        )

    # -- plans ----------------------------------------------------------------------

    def _getitem_plan(self, index: Any) -> GetItemPlan:
        return GetItemPlan(self, index)

    def _setitem_plan(self, index: Any) -> SetItemPlan:
        return SetItemPlan(self, index)

    def _resize_plan(self, shape: Any) -> ResizePlan:
        return ResizePlan(self, shape)

    def _load_plan(self) -> LoadPlan:
        return LoadPlan(self)

    def _changes_plan(self) -> ChangesPlan:
        return ChangesPlan(self)

    # -- operations -----------------------------------------------------------------

    def __getitem__(self, index: Any) -> Any:
        return GetItemPlan(self, index).execute(self)

    def __setitem__(self, index: Any, value: Any) -> None:
        try:
            plan = SetItemPlan(self, index)
            source = plan.value_source(self, value)
        except (IndexError, TypeError, ValueError, OverflowError) as error:
            # numpy checks the value against the index before the index's bounds
            raise_numpy_setitem_error(index, self.shape, self.dtype, value, error)
            raise  # unreachable: the line above always raises
        plan.write(self, source)

    def resize(self, shape: Any) -> None:
        """Change the shape; new points hold the fill value."""
        ResizePlan(self, shape).execute(self)

    def load(self) -> None:
        """Copy every chunk still on a base slab into memory."""
        LoadPlan(self).execute(self)

    def place_stored(self, grid_box: tuple[slice, ...], slots: np.ndarray, base: Any) -> None:
        """Point the chunks of ``grid_box`` (a box of the chunk grid) at rows of the base
        slab ``base``: chunk ``i`` at row ``slots[i] * chunk_size[0]``, or at the fill
        slab where ``slots[i] < 0``.

        ``base`` becomes the one base slab if the array has none yet; an array with a
        base slab must be given that same slab. Staged slabs no chunk points to any
        more are dropped.
        """
        if self.n_base_slabs == 0:
            self.slabs.insert(1, base)
            self.n_base_slabs = 1
            self.slab_indices[self.slab_indices >= 1] += 1
        elif self.n_base_slabs != 1 or self.slabs[1] is not base:
            raise ValueError("Expected the array's own (single) base slab.")
        slots = np.asarray(slots, dtype=np.intp)
        if slots.shape != self.slab_indices[grid_box].shape:
            raise ValueError(
                f"Expected slots of shape {self.slab_indices[grid_box].shape}. Got {slots.shape}."
            )
        stored = slots >= 0
        self.slab_indices[grid_box] = np.where(stored, 1, 0)
        self.slab_offsets[grid_box] = np.where(stored, slots * self.chunk_size[0], 0)
        referenced = np.bincount(self.slab_indices.ravel(), minlength=len(self.slabs)) > 0
        for slab in range(2, len(self.slabs)):
            if not referenced[slab]:
                self.slabs[slab] = None

    def changes(self) -> Iterator[tuple[tuple[int, ...], np.ndarray]]:
        """``(chunk coordinates, data)`` for every chunk on a staged slab.

        ``data`` is a view of the chunk trimmed to the array's edge. Chunks come
        with axis 0 varying fastest.
        """
        return ChangesPlan(self).execute(self)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy is False:
            raise ValueError("A StagedChangesArray cannot be converted to numpy without a copy.")
        data = GetItemPlan(self, ()).read_buffer(self)
        return data if dtype is None else data.astype(dtype, copy=False)
