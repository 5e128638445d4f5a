"""Where every stored chunk of a chunked dataset lies in the file: one table per dataset.

A :class:`ChunkTable` holds, for every chunk slot along the first axis (slot ``i``
covers rows ``i * c0`` to ``(i + 1) * c0``), the chunk's file offset, stored size and
filter mask, or offset -1 for a chunk never written.  It is read from the chunk
B-tree's bytes where it can be (:mod:`h5vc.hdf5.btree`: a file opened read-only with
version-1 B-tree indexes), else from HDF5's chunk iteration (``H5Dchunk_iter``, one
call for all chunks).  The versioned store's ``raw_data`` (one chunk a slot, slots of
``chunks[0]`` rows) and the sample stores' collection files (one sample a chunk) both
look their chunks up here and read them with positioned reads.

Offsets are HDF5's addresses: in a file with a user block they are relative to its
end, so :func:`sample_table` refuses such files, and a reader that takes the table for
file offsets compares one chunk read both ways before trusting it.
"""

from __future__ import annotations

from typing import Any

import h5py
import numpy as np

from h5vc.hdf5.btree import chunk_index

__all__ = ["ChunkLocation", "ChunkTable", "sample_table"]

#: A chunk's file offset, stored size and filter mask; ``None`` for a chunk never written.
ChunkLocation = tuple[int, int, int] | None


class ChunkTable:
    """File offset, stored size and filter mask of every chunk slot (-1: not allocated)."""

    __slots__ = ("masks", "offsets", "sizes")

    def __init__(self, dataset_id: Any, n_slots: int, c0: int):
        self.offsets = np.full(n_slots, -1, dtype=np.int64)
        self.sizes = np.zeros(n_slots, dtype=np.int64)
        self.masks = np.zeros(n_slots, dtype=np.int64)
        index = chunk_index(h5py.Dataset(dataset_id))  # from the file's bytes, if it can
        if index is not None:
            first_rows, addresses = index.coords[:, 0], index.addresses
            sizes, masks = index.sizes, index.masks
        else:
            found: list[Any] = []
            dataset_id.chunk_iter(found.append)  # no Python frame per chunk
            count = len(found)
            first_rows = np.fromiter((info.chunk_offset[0] for info in found), np.int64, count)
            addresses = np.fromiter((info.byte_offset for info in found), np.int64, count)
            sizes = np.fromiter((info.size for info in found), np.int64, count)
            masks = np.fromiter((info.filter_mask for info in found), np.int64, count)
        slots = first_rows // c0
        keep = slots < n_slots
        slots = slots[keep]
        self.offsets[slots] = addresses[keep]
        self.sizes[slots] = sizes[keep]
        self.masks[slots] = masks[keep]

    def __len__(self) -> int:
        return len(self.offsets)

    def location(self, slot: int) -> ChunkLocation:
        """``(offset, size, filter mask)`` of the chunk in ``slot``; ``None`` for a chunk
        never written. Raises IndexError for a slot beyond the table."""
        offset = int(self.offsets[slot])
        if offset < 0:
            return None
        return offset, int(self.sizes[slot]), int(self.masks[slot])

    def extend(self, dataset_id: Any, n_slots: int, c0: int) -> None:
        """Look up the slots from the current end to ``n_slots`` one by one."""
        old = len(self.offsets)
        self.offsets = np.concatenate((self.offsets, np.full(n_slots - old, -1, np.int64)))
        self.sizes = np.concatenate((self.sizes, np.zeros(n_slots - old, np.int64)))
        self.masks = np.concatenate((self.masks, np.zeros(n_slots - old, np.int64)))
        corner = (0,) * (len(dataset_id.shape) - 1)
        for slot in range(old, n_slots):
            info = dataset_id.get_chunk_info_by_coord((slot * c0, *corner))
            if info.byte_offset is not None:
                self.offsets[slot] = info.byte_offset
                self.sizes[slot] = info.size
                self.masks[slot] = info.filter_mask


def sample_table(dataset: h5py.Dataset) -> ChunkTable | None:
    """The chunk table of a dataset of one sample per chunk along its first axis (slot
    ``i``: sample ``i``); ``None`` if it has another layout, the file has a user block
    (chunk addresses would be relative to it) or this HDF5 cannot list chunks."""
    sample_chunk = tuple(max(dim, 1) for dim in dataset.shape[1:])
    if (
        getattr(dataset.id, "chunk_iter", None) is None
        or dataset.chunks != (1, *sample_chunk)
        or dataset.file.id.get_create_plist().get_userblock() != 0
    ):
        return None
    return ChunkTable(dataset.id, dataset.shape[0], 1)
