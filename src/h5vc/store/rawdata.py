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
from h5vc.hashing import fill_chunk_hash, hash_chunks
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
        """
        slots = np.empty(len(chunks), dtype=np.int64)
        digests = hash_chunks(chunks)
        index = self.index
        pending: dict[bytes, int] = {}
        fill_digests: dict[tuple[int, ...], bytes] = {}
        fill = _fill_scalar(self.raw_data.dtype, fillvalue)
        new_chunks: list[np.ndarray] = []
        new_digests: list[bytes] = []
        next_slot = self.n_slots
        for i, (chunk, digest) in enumerate(zip(chunks, digests)):
            if skip_fill:
                fill_digest = fill_digests.get(chunk.shape)
                if fill_digest is None:
                    fill_digest = fill_chunk_hash(chunk.shape, chunk.dtype, fill)
                    fill_digests[chunk.shape] = fill_digest
                if digest == fill_digest:
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
                new_digests.append(digest)
            slots[i] = slot
        if new_chunks:
            self._append(new_chunks, new_digests, fill)
            index.update(pending)
        return slots

    def _append(self, chunks: list[np.ndarray], digests: list[bytes], fillvalue: Any) -> None:
        c0 = self.chunks[0]
        first = self.n_slots
        buffer = _stack_chunks(chunks, self.chunks, self.raw_data.dtype, fillvalue)
        self.raw_data.resize((first + len(chunks)) * c0, axis=0)
        self.raw_data[first * c0 :] = buffer
        rows = np.zeros(len(chunks), dtype=HASH_TABLE_DTYPE)
        rows["hash"] = np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(-1, 32)
        starts = (first + np.arange(len(chunks), dtype=np.int64)) * c0
        rows["shape"][:, 0] = starts
        rows["shape"][:, 1] = starts + np.fromiter((c.shape[0] for c in chunks), np.int64)
        n_rows = self._n_rows
        self.hash_table.resize((n_rows + len(chunks),))
        self.hash_table[n_rows:] = rows
        # Written last: readers trust rows up to this count only.
        self.hash_table.attrs[ATTR_LARGEST_INDEX] = np.int64(n_rows + len(chunks))
        self._n_rows = n_rows + len(chunks)


def _fill_scalar(dtype: np.dtype, fillvalue: Any) -> Any:
    if fillvalue is not None:
        return fillvalue
    return b"" if dtype.kind == "O" else np.zeros((), dtype=dtype)[()]


def _stack_chunks(
    chunks: list[np.ndarray], chunk_shape: tuple[int, ...], dtype: np.dtype, fill: Any
) -> np.ndarray:
    """Place chunks (possibly trimmed at the edge) in one full-size slab, padded."""
    c0 = chunk_shape[0]
    if len(chunks) == 1 and chunks[0].shape == chunk_shape:
        return np.asarray(chunks[0], dtype=dtype)
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
