"""Reading ``raw_data`` for the staging engine.

The staging engine is pure numpy: it reads its base slabs through a small protocol
(:class:`~h5vc.staging.transfer.HyperslabReader`).  :class:`RawDataSlab` implements it
for an ``h5py.Dataset``: positioned reads of the chunks' bytes where
:mod:`h5vc.store.fastread` can serve them, else one low-level ``H5Dread`` per slice
pair, hyperslab to hyperslab, with no temporary array and none of the selection
parsing h5py's high-level API does on every call (which dominates when a read is
split into many runs of chunks).
"""

from __future__ import annotations

import math
from typing import Any

import h5py
import numpy as np

import h5vc.config as config
from h5vc.hdf5.damage import damaged
from h5vc.staging import StagedChangesArray
from h5vc.store.chunkmap import ChunkMap
from h5vc.store.fastread import fast_reader

__all__ = ["RawDataSlab", "read_fill", "staged_array"]

#: Boxes smaller than this are read through h5py: its compiled reader and chunk cache
#: serve a read of a few chunks in 30-60 us, less than the positioned-read path's fixed
#: cost; from about 16 chunks of 8 KiB on, positioned reads win (1.4x at 64 Ki
#: float64, 3.6x at 256 Ki).
FAST_READ_MIN_BYTES = config.FAST_READ_MIN_BYTES


class RawDataSlab:
    """An ``h5py.Dataset`` as a base slab of the staging engine."""

    __slots__ = ("_dtype", "dataset")

    def __init__(self, dataset: h5py.Dataset):
        self.dataset = dataset
        self._dtype: np.dtype | None = None

    @property
    def dtype(self) -> np.dtype:
        """The dataset's dtype, read once (h5py builds it anew on every access)."""
        if self._dtype is None:
            self._dtype = self.dataset.dtype
        return self._dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.dataset.shape)

    def __getitem__(self, index: Any) -> Any:
        with damaged(str(self.dataset.file.filename), f"A chunk of {self.dataset.name}"):
            return self.dataset[index]

    def __len__(self) -> int:
        return len(self.dataset)

    def read_box(self, starts: list[int], counts: list[int]) -> np.ndarray | None:
        """``dataset[starts : starts + counts]`` as a new array, read by positioned
        reads; None when :mod:`h5vc.store.fastread` cannot serve it or the box is too
        small for positioned reads to pay (:data:`FAST_READ_MIN_BYTES`)."""
        if math.prod(counts) * self.dtype.itemsize < FAST_READ_MIN_BYTES:
            return None
        reader = fast_reader(self.dataset)
        if reader is None:
            return None
        out = np.empty(tuple(counts), dtype=self.dtype)
        if reader.read(out, [starts], [[0] * len(counts)], [counts]):
            return None
        return out

    def read_hyperslabs(
        self,
        destination: np.ndarray,
        src_starts: list[list[int]],
        dst_starts: list[list[int]],
        counts: list[list[int]],
        src_step: tuple[int, ...],
        dst_step: tuple[int, ...],
    ) -> bool:
        """``destination[dst] = dataset[src]`` for every slice pair; False if ``destination``
        cannot be filled in place (the caller then copies through ``__getitem__``)."""
        if (
            not destination.flags.c_contiguous
            or destination.dtype.kind == "O"
            or self.dtype != destination.dtype
        ):
            return False
        if (
            all(step == 1 for step in src_step)
            and all(step == 1 for step in dst_step)
            and sum(map(math.prod, counts)) * self.dtype.itemsize >= FAST_READ_MIN_BYTES
        ):
            reader = fast_reader(self.dataset)
            if reader is not None:
                left = reader.read(destination, src_starts, dst_starts, counts)
                if not left:
                    return True
                src_starts = [src_starts[i] for i in left]
                dst_starts = [dst_starts[i] for i in left]
                counts = [counts[i] for i in left]
        dataset_id = self.dataset.id
        file_space = dataset_id.get_space()
        memory_space = file_space.copy()
        memory_space.set_extent_simple(destination.shape if destination.ndim else (1,))
        read = dataset_id.read
        select_file = file_space.select_hyperslab
        select_memory = memory_space.select_hyperslab
        src_stride = tuple(src_step)
        dst_stride = tuple(dst_step)
        with damaged(str(self.dataset.file.filename), f"A chunk of {self.dataset.name}"):
            for src_row, dst_row, counts_row in zip(src_starts, dst_starts, counts):
                count = tuple(counts_row)
                select_file(tuple(src_row), count, src_stride)
                select_memory(tuple(dst_row), count, dst_stride)
                read(memory_space, file_space, destination)
        return True


def read_fill(dtype: np.dtype, fillvalue: Any) -> Any:
    """The value unstored chunks read as: the fill value, or ``b""`` for strings
    (HDF5 has no fill value for variable-length data)."""
    if dtype.kind == "O":
        return b""
    if fillvalue is None:
        return np.zeros((), dtype=dtype)[()]
    return fillvalue


def staged_array(
    chunk_map: ChunkMap, raw_data: h5py.Dataset, dtype: np.dtype, fillvalue: Any
) -> StagedChangesArray:
    """A staging array whose chunks sit on ``raw_data`` per ``chunk_map``."""
    slots = chunk_map.slots
    stored = slots >= 0
    return StagedChangesArray(
        shape=chunk_map.shape,
        chunk_size=chunk_map.chunks,
        dtype=dtype,
        fill_value=fillvalue,
        base_slabs=[RawDataSlab(raw_data)],
        slab_indices=stored.astype(np.intp),
        slab_offsets=np.where(stored, slots * chunk_map.chunks[0], 0).astype(np.intp),
    )
