"""The chunk store of one dataset path: ``raw_data`` plus its ``hash_table``.

``raw_data`` holds every distinct chunk ever committed for the dataset, stacked
along axis 0 (slot ``s`` is rows ``s*c0 : (s+1)*c0``).  ``hash_table`` maps each
chunk's SHA-256 to its rows; its ``largest_index`` attribute (the number of valid
rows) is written after the rows, so an interrupted commit leaves rows past it
that are simply ignored.

The hash index is read once per open store and then kept in memory and appended
to, so a commit costs O(chunks written), not O(chunks ever stored).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import h5py
import numpy as np

from h5vc.errors import MetadataMismatchError
from h5vc.hashing import fill_chunk_hash, hash_in_batches
from h5vc.store.layout import (
    ATTR_CHUNKS,
    ATTR_LARGEST_INDEX,
    HASH_TABLE,
    HASH_TABLE_CHUNKS,
    HASH_TABLE_DTYPE,
    RAW_DATA,
)

__all__ = ["RawDataStore"]


class RawDataStore:
    """``raw_data`` + ``hash_table`` of one dataset path, with an in-memory hash index."""

    def __init__(self, group: h5py.Group):
        self.group = group
        self.raw_data: h5py.Dataset = group[RAW_DATA]
        self.hash_table: h5py.Dataset = group[HASH_TABLE]
        chunks_attr = self.raw_data.attrs.get(ATTR_CHUNKS)
        self.chunks: tuple[int, ...] = (
            tuple(int(c) for c in chunks_attr)
            if chunks_attr is not None
            else tuple(self.raw_data.chunks)
        )
        self._index: dict[bytes, int] | None = None
        self._fillvalue: Any = None
        self._n_rows = int(self.hash_table.attrs.get(ATTR_LARGEST_INDEX, 0))

    # -- creation -----------------------------------------------------------------

    @classmethod
    def create(
        cls,
        parent: h5py.Group,
        path: str,
        *,
        dtype: np.dtype,
        chunks: tuple[int, ...],
        fillvalue: Any = None,
        filters: dict[str, Any] | None = None,
    ) -> RawDataStore:
        """Create the group ``parent/path`` with an empty raw_data and hash_table."""
        group = parent.require_group(path)
        create_kwargs: dict[str, Any] = dict(filters or {})
        if fillvalue is not None and dtype.kind != "O":
            create_kwargs["fillvalue"] = fillvalue
        raw_data = group.create_dataset(
            RAW_DATA,
            shape=(0, *tuple(chunks[1:])),
            dtype=dtype,
            chunks=tuple(chunks),
            maxshape=(None, *tuple(chunks[1:])),
            **create_kwargs,
        )
        raw_data.attrs[ATTR_CHUNKS] = np.asarray(chunks, dtype=np.int64)
        # One zeroed row to start with, as the format's other writer does; rows
        # past largest_index are never read.  Uncompressed: a compressed chunk
        # changes size when rows are appended and is rewritten to new file space
        # at every commit, which the file never gets back.
        hash_table = group.create_dataset(
            HASH_TABLE,
            shape=(1,),
            dtype=HASH_TABLE_DTYPE,
            chunks=HASH_TABLE_CHUNKS,
            maxshape=(None,),
        )
        hash_table.attrs[ATTR_LARGEST_INDEX] = np.int64(0)
        return cls(group)

    def check_compatible(self, name: str, dtype: np.dtype, chunks: tuple[int, ...]) -> None:
        """Raise if a dataset of this dtype and chunking cannot share this store."""
        if tuple(chunks) != self.chunks:
            raise MetadataMismatchError(
                f"Dataset {name!r} is stored with chunks {self.chunks}; its chunks cannot "
                f"change between versions. Got chunks={tuple(chunks)} instead."
            )
        if np.dtype(dtype) != self.raw_data.dtype and not (
            np.dtype(dtype).kind == "O" and self.raw_data.dtype.kind == "O"
        ):
            raise MetadataMismatchError(
                f"Dataset {name!r} is stored with dtype {self.raw_data.dtype}; its dtype "
                f"cannot change between versions. Got dtype={np.dtype(dtype)} instead."
            )

    # -- the hash index -------------------------------------------------------------

    @property
    def fillvalue(self) -> Any:
        """The dataset's fill value (raw_data carries it)."""
        if self._fillvalue is None:
            self._fillvalue = self.raw_data.fillvalue
        return self._fillvalue

    @property
    def n_slots(self) -> int:
        """Number of chunk slots in raw_data."""
        return self.raw_data.shape[0] // self.chunks[0]

    @property
    def index(self) -> dict[bytes, int]:
        """SHA-256 digest -> slot, loaded from hash_table on first use."""
        if self._index is None:
            self._index = self._load_index()
        return self._index

    def _load_index(self) -> dict[bytes, int]:
        if self._n_rows == 0:
            return {}
        rows = self.hash_table[: self._n_rows]
        digests = np.ascontiguousarray(rows["hash"]).tobytes()
        slots = (rows["shape"][:, 0] // self.chunks[0]).tolist()
        return {digests[32 * i : 32 * (i + 1)]: slot for i, slot in enumerate(slots)}

    # -- writing --------------------------------------------------------------------

    def store_chunks(
        self, chunks: Sequence[np.ndarray], *, fillvalue: Any = None, skip_fill: bool = True
    ) -> np.ndarray:
        """Store chunks not stored yet; return the slot of each (-1: all fill value).

        Identical chunks (same bytes and shape) share one slot, within this call and
        across everything stored before.  With ``skip_fill``, chunks whose bytes are
        exactly those of the fill value are not stored at all: their digest is
        compared with the digest of a fill chunk of the same shape.

        Large writes go in batches: while one batch is deduplicated and written,
        the next is hashed on another thread.  Hash-table rows, then the row
        count, are written after all the chunks.
        """
        slots = np.empty(len(chunks), dtype=np.int64)
        new_digests: list[bytes] = []
        new_rows: list[int] = []
        writer = _BatchWriter(self, _fill_scalar(self.raw_data.dtype, fillvalue), skip_fill)
        offset = 0
        for batch, digests in hash_in_batches(chunks):
            writer.place(batch, digests, slots[offset : offset + len(batch)])
            offset += len(batch)
        new_digests, new_rows = writer.new_digests, writer.new_rows
        if new_digests:
            self._write_rows(new_digests, new_rows)
            self.index.update(writer.pending)
        return slots

    def _write_chunks(self, chunks: list[np.ndarray], fill: Any) -> int:
        """Append chunks to raw_data in one write; return the first new slot."""
        c0 = self.chunks[0]
        first = self.n_slots
        buffer = _stack_chunks(chunks, self.chunks, self.raw_data.dtype, fill)
        self.raw_data.resize((first + len(chunks)) * c0, axis=0)
        self.raw_data[first * c0 :] = buffer
        return first

    def _write_rows(self, digests: list[bytes], rows_used: list[int]) -> None:
        """Append hash-table rows for newly stored chunks, then the row count."""
        c0 = self.chunks[0]
        n_new = len(digests)
        first = self.n_slots - n_new
        rows = np.zeros(n_new, dtype=HASH_TABLE_DTYPE)
        rows["hash"] = np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(-1, 32)
        starts = (first + np.arange(n_new, dtype=np.int64)) * c0
        rows["shape"][:, 0] = starts
        rows["shape"][:, 1] = starts + np.asarray(rows_used, dtype=np.int64)
        n_rows = self._n_rows
        self.hash_table.resize((n_rows + n_new,))
        self.hash_table[n_rows:] = rows
        # Written last: readers trust rows up to this count only.
        self.hash_table.attrs[ATTR_LARGEST_INDEX] = np.int64(n_rows + n_new)
        self._n_rows = n_rows + n_new


class _BatchWriter:
    """Deduplicates batches of hashed chunks and appends the new ones to raw_data."""

    def __init__(self, store: RawDataStore, fill: Any, skip_fill: bool):
        self.store = store
        self.fill = fill
        self.skip_fill = skip_fill
        self.pending: dict[bytes, int] = {}
        self.fill_digests: dict[tuple[int, ...], bytes] = {}
        self.new_digests: list[bytes] = []
        self.new_rows: list[int] = []

    def _is_fill(self, chunk: np.ndarray, digest: bytes) -> bool:
        fill_digest = self.fill_digests.get(chunk.shape)
        if fill_digest is None:
            fill_digest = fill_chunk_hash(chunk.shape, chunk.dtype, self.fill)
            self.fill_digests[chunk.shape] = fill_digest
        return digest == fill_digest

    def place(self, batch: Sequence[np.ndarray], digests: list[bytes], slots: np.ndarray) -> None:
        index, pending = self.store.index, self.pending
        next_slot = self.store.n_slots
        new_chunks: list[np.ndarray] = []
        for i, (chunk, digest) in enumerate(zip(batch, digests)):
            if self.skip_fill and self._is_fill(chunk, digest):
                slots[i] = -1
                continue
            slot = index.get(digest)
            if slot is None:
                slot = pending.get(digest)
            if slot is None:
                slot = next_slot
                next_slot += 1
                pending[digest] = slot
                new_chunks.append(chunk)
                self.new_digests.append(digest)
                self.new_rows.append(chunk.shape[0])
            slots[i] = slot
        if new_chunks:
            self.store._write_chunks(new_chunks, self.fill)


def _fill_scalar(dtype: np.dtype, fillvalue: Any) -> Any:
    if fillvalue is not None:
        return fillvalue
    return b"" if dtype.kind == "O" else np.zeros((), dtype=dtype)[()]


def _consecutive_view(
    chunks: list[np.ndarray], chunk_shape: tuple[int, ...], dtype: np.dtype
) -> np.ndarray | None:
    """The chunks as one array without copying, if they already lie back to back.

    That is the case for a dataset created from an array: its chunks are
    consecutive full chunks of one staged slab.  None otherwise.
    """
    base = chunks[0].base
    if (
        base is None
        or base.dtype != dtype
        or not base.flags.c_contiguous
        or any(c.base is not base or c.shape != chunk_shape for c in chunks)
        or not all(c.flags.c_contiguous for c in chunks)
    ):
        return None
    nbytes = chunks[0].nbytes
    pointers = [c.ctypes.data for c in chunks]
    first = pointers[0]
    if any(p != first + i * nbytes for i, p in enumerate(pointers)):
        return None
    start = (first - base.ctypes.data) // dtype.itemsize
    flat = base.reshape(-1)
    size = len(chunks) * chunks[0].size
    return flat[start : start + size].reshape((len(chunks) * chunk_shape[0], *chunk_shape[1:]))


def _stack_chunks(
    chunks: list[np.ndarray], chunk_shape: tuple[int, ...], dtype: np.dtype, fill: Any
) -> np.ndarray:
    """Place chunks (possibly trimmed at the edge) in one full-size slab, padded."""
    c0 = chunk_shape[0]
    if len(chunks) == 1 and chunks[0].shape == chunk_shape:
        return np.asarray(chunks[0], dtype=dtype)
    view = _consecutive_view(chunks, chunk_shape, dtype)
    if view is not None:
        return view
    buffer = np.empty((len(chunks) * c0, *tuple(chunk_shape[1:])), dtype=dtype)
    full = [chunk.shape == chunk_shape for chunk in chunks]
    i = 0
    while i < len(chunks):
        if full[i]:
            j = i
            while j < len(chunks) and full[j]:
                j += 1
            if j - i == 1:
                buffer[i * c0 : j * c0] = chunks[i]
            else:
                np.concatenate(chunks[i:j], axis=0, out=buffer[i * c0 : j * c0])
            i = j
            continue
        slot = buffer[i * c0 : (i + 1) * c0]
        slot[...] = fill
        slot[tuple(slice(0, n) for n in chunks[i].shape)] = chunks[i]
        i += 1
    return buffer
