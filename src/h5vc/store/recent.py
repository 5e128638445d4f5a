"""The chunks a store's last commit wrote, read back from memory.

A table grown by appends rewrites its short last chunk at every commit: the next
commit's staged dataset starts from that chunk, which the commit before has just
written.  :class:`~h5vc.store.rawdata.RawDataStore` keeps the chunks its last
:meth:`~h5vc.store.rawdata.RawDataStore.store_chunks` wrote (up to
:data:`RECENT_CHUNK_BYTES`, copies of what went to the file) by slot, and
:class:`RecentChunksSlab`, the base slab of a dataset staged over the store, copies
slice pairs inside one of them from memory instead of reading ``raw_data``.  Every
other pair, and every read the slab cannot do in place, goes to ``raw_data`` as
:class:`~h5vc.store.reading.RawDataSlab` reads it.

The kept chunks are dropped whenever the slots may hold something else: chunks
written over them, a rolled-back or reloaded store, a store replaced by a rewritten
one (see :class:`~h5vc.store.rawdata.RawDataStore`).
"""

from __future__ import annotations

import h5py
import numpy as np

from h5vc.store.reading import RawDataSlab

__all__ = ["RECENT_CHUNK_BYTES", "RecentChunksSlab"]

#: At most this many bytes of a store's last commit are kept in memory.
RECENT_CHUNK_BYTES = 4 << 20


class RecentChunksSlab(RawDataSlab):
    """``raw_data`` as a base slab, with the chunks ``recent`` (slot -> its rows, from
    the top of the slot; a short last chunk keeps only the rows written) read from
    memory."""

    __slots__ = ("_c0", "recent")

    def __init__(self, dataset: h5py.Dataset, recent: dict[int, np.ndarray], c0: int):
        super().__init__(dataset)
        self.recent = recent
        self._c0 = c0

    def read_hyperslabs(
        self,
        destination: np.ndarray,
        src_starts: list[list[int]],
        dst_starts: list[list[int]],
        counts: list[list[int]],
        src_step: tuple[int, ...],
        dst_step: tuple[int, ...],
    ) -> bool:
        if (
            not destination.flags.c_contiguous
            or destination.dtype.kind == "O"
            or self.dtype != destination.dtype
        ):
            return False
        recent, c0 = self.recent, self._c0
        left: list[int] = []
        for i, (src, dst, count) in enumerate(zip(src_starts, dst_starts, counts)):
            chunk = recent.get(src[0] // c0)
            if chunk is None or not all(count):
                left.append(i)
                continue
            first = src[0] - src[0] // c0 * c0
            if first + (count[0] - 1) * src_step[0] >= len(chunk):
                left.append(i)  # beyond the rows kept (or another slot)
                continue
            source = (first, *src[1:])
            take = tuple(
                slice(s, s + (n - 1) * t + 1, t) for s, n, t in zip(source, count, src_step)
            )
            put = tuple(slice(s, s + (n - 1) * t + 1, t) for s, n, t in zip(dst, count, dst_step))
            destination[put] = chunk[take]
        if not left:
            return True
        if len(left) < len(src_starts):
            src_starts = [src_starts[i] for i in left]
            dst_starts = [dst_starts[i] for i in left]
            counts = [counts[i] for i in left]
        return super().read_hyperslabs(
            destination, src_starts, dst_starts, counts, src_step, dst_step
        )
