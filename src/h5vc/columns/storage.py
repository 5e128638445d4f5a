"""The samples of the columns of a versioned file, stored in the file itself.

One store per column schema (equal schemas share one, so a sample is stored once in
every column, version and branch that holds it)::

    <root>/_h5vc_samples/<uid>/      attrs: h5vc_samples (schema JSON), count
        digests                      (rows, 16) uint8: content digest of each slot's
                                     sample; all zero for a free slot
        "0", "1", ...                (COLLECTION_SIZE, *shape) sample datasets, laid
                                     out as the collection files of backend 00/01

Slot ``s`` is row ``s % COLLECTION_SIZE`` of dataset ``str(s // COLLECTION_SIZE)``.
Slots ``[0, count)`` are allocated; ``count`` is written after the samples and their
digests, so slots written by a commit that does not finish are past it (free). A slot
whose digest row is zero is free and is reused before the store grows.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import h5py
import numpy as np
import xxhash

from h5vc.columns.schema import ColumnSchema
from h5vc.errors import CorruptDataError
from h5vc.hdf5.chunktable import ChunkTable, sample_table
from h5vc.hdf5.codecs import Pipeline, parallel_groups, pipeline_for
from h5vc.hdf5.header import file_descriptor
from h5vc.samples.backends import chunk_shape
from h5vc.samples.schema import Schema

__all__ = [
    "COLLECTION_SIZE",
    "SAMPLES_GROUP",
    "SampleSlots",
    "digest_of",
    "sample_checksum",
]

SAMPLES_GROUP = "_h5vc_samples"
#: The position of the one sample of a single read.
_FIRST = np.zeros(1, np.int64)
DIGESTS = "digests"
ATTR_COUNT = "count"
ATTR_SCHEMA = "h5vc_samples"
#: Samples per sample dataset.
COLLECTION_SIZE = 65536
DIGEST_BYTES = 16
_DIGEST_CHUNK_ROWS = 4096
#: Scattered reads of at least this many samples of a file open read-only look their
#: chunks up in a chunk table and read them with positioned reads, decoded on the codec
#: threads; fewer are read chunk by chunk through HDF5.
POSITIONED_READS = 32


def digest_of(sample: np.ndarray) -> bytes:
    """Content digest (xxh3-128 of dtype, shape and bytes): equal samples, equal digest."""
    hasher = xxhash.xxh3_128(f"{sample.dtype.str}|{sample.shape}|".encode())
    hasher.update(sample.data)
    return hasher.digest()


def sample_checksum(sample: np.ndarray) -> int:
    """xxhash64 of a sample's bytes (the checksum of a backend 01 record)."""
    return xxhash.xxh64_intdigest(sample.data)


def _runs(indices: np.ndarray) -> list[tuple[int, int, int]]:
    """``(position, start, stop)`` of the runs of consecutive values of sorted ``indices``."""
    if not len(indices):
        return []
    breaks = np.flatnonzero(np.diff(indices) != 1) + 1
    starts = np.concatenate(([0], breaks))
    stops = np.concatenate((breaks, [len(indices)]))
    return [(int(a), int(indices[a]), int(indices[b - 1]) + 1) for a, b in zip(starts, stops)]


class SampleSlots:
    """The sample store of one column schema in a versioned file."""

    def __init__(self, group: h5py.Group, schema: ColumnSchema):
        self.group = group
        self.schema = schema
        self._digests: np.ndarray | None = None
        self._datasets: dict[int, h5py.Dataset] = {}
        self._decoders: dict[str, Pipeline] = {}
        #: Chunk tables of the sample datasets (None: not usable), for positioned reads.
        self._tables: dict[str, ChunkTable | None] = {}

    # -- opening ------------------------------------------------------------------

    @classmethod
    def open(cls, root: h5py.Group, schema: ColumnSchema) -> SampleSlots | None:
        """The store of ``schema`` under ``root`` (None if none was created)."""
        group = root.get(f"{SAMPLES_GROUP}/{schema.uid}")
        return None if group is None else cls(group, schema)

    @classmethod
    def require(cls, root: h5py.Group, schema: ColumnSchema) -> SampleSlots:
        found = cls.open(root, schema)
        if found is not None:
            return found
        group = root.require_group(SAMPLES_GROUP).create_group(schema.uid)
        group.attrs[ATTR_SCHEMA] = schema.with_key_type("str").to_json()
        group.create_dataset(
            DIGESTS,
            shape=(0, DIGEST_BYTES),
            maxshape=(None, DIGEST_BYTES),
            dtype=np.uint8,
            chunks=(_DIGEST_CHUNK_ROWS, DIGEST_BYTES),
        )
        group.attrs[ATTR_COUNT] = np.int64(0)
        return cls(group, schema)

    @property
    def count(self) -> int:
        return int(self.group.attrs[ATTR_COUNT])

    def digests(self) -> np.ndarray:
        """``(count, 16)`` digests of the allocated slots (zero rows: free)."""
        if self._digests is None:
            count = self.count
            table = self.group[DIGESTS]
            if table.shape[0] < count:
                raise CorruptDataError(
                    f"Expected {count} digest rows in {table.name} of "
                    f"{self.group.file.filename!r}. Got {table.shape[0]}."
                )
            self._digests = table[:count] if count else np.zeros((0, DIGEST_BYTES), np.uint8)
        return self._digests

    def dataset(self, number: int, create: bool = False) -> h5py.Dataset:
        found = self._datasets.get(number)
        if found is not None:
            return found
        name = str(number)
        if name in self.group:
            found = self.group[name]
        elif create:
            found = self._create_dataset(name)
        else:
            raise CorruptDataError(
                f"Expected the sample dataset {self.group.name}/{name} in "
                f"{self.group.file.filename!r}. Got none."
            )
        self._datasets[number] = found
        return found

    def _create_dataset(self, name: str) -> h5py.Dataset:
        schema = self.schema
        layout = Schema(
            backend=schema.backend,
            shape=schema.shape,
            dtype=schema.dtype,
            compression=schema.compression,
            collection_count=1,
            collection_size=COLLECTION_SIZE,
        )
        return self.group.create_dataset(
            name,
            shape=(COLLECTION_SIZE, *schema.shape),
            maxshape=(COLLECTION_SIZE, *(dim or None for dim in schema.shape)),
            dtype=schema.dtype,
            chunks=chunk_shape(layout),
            fillvalue=np.zeros((), schema.dtype),
            fletcher32=schema.backend == "00",
            **schema.compression.filter_kwargs(),
        )

    # -- finding and writing ------------------------------------------------------

    def find(self, digests: np.ndarray) -> np.ndarray:
        """The slot holding each of ``digests`` (``(n, 16)`` uint8), -1 where none does."""
        found = np.full(len(digests), -1, np.int64)
        stored = self.digests()
        if not len(stored) or not len(digests):
            return found
        live = np.flatnonzero(stored.any(axis=1))
        if not len(live):
            return found
        heads = np.ascontiguousarray(stored[live, :8]).view("<u8").ravel()
        order = np.argsort(heads, kind="stable")
        sorted_heads = heads[order]
        wanted = np.ascontiguousarray(digests[:, :8]).view("<u8").ravel()
        at = np.minimum(np.searchsorted(sorted_heads, wanted), len(sorted_heads) - 1)
        candidates = live[order[at]]
        hit = (sorted_heads[at] == wanted) & (stored[candidates] == digests).all(axis=1)
        found[hit] = candidates[hit]
        return found

    def store(self, samples: Sequence[np.ndarray], digests: np.ndarray) -> np.ndarray:
        """Write ``samples`` (distinct, none stored yet) to free slots; their slots.

        The samples and digest rows are written first, ``count`` last.
        """
        n = len(samples)
        stored = self.digests()
        free = np.flatnonzero(~stored.any(axis=1))[:n]
        count = len(stored)
        slots = np.concatenate((free, np.arange(count, count + n - len(free)))).astype(np.int64)
        order = np.argsort(slots, kind="stable")
        sorted_slots = slots[order]
        numbers = sorted_slots // COLLECTION_SIZE
        for number in np.unique(numbers):
            pick = np.flatnonzero(numbers == number)
            dataset = self.dataset(int(number), create=True)
            rows = sorted_slots[pick] % COLLECTION_SIZE
            for position, start, stop in _runs(rows):
                block = [samples[i] for i in order[pick[position : position + stop - start]]]
                self._write_block(dataset, start, block)
        new_count = max(count, int(slots.max(initial=-1)) + 1)
        table = self.group[DIGESTS]
        if table.shape[0] < new_count:
            table.resize((new_count, DIGEST_BYTES))
        updated = np.zeros((new_count, DIGEST_BYTES), np.uint8)
        updated[:count] = stored
        updated[slots] = digests
        for _, start, stop in _runs(np.sort(slots)):
            table[start:stop] = updated[start:stop]
        self.group.attrs[ATTR_COUNT] = np.int64(new_count)
        self._digests = updated
        return slots

    def _write_block(self, dataset: h5py.Dataset, start: int, block: list[np.ndarray]) -> None:
        if not self.schema.variable_shape:
            dataset[start : start + len(block)] = np.stack(block) if block else block
            return
        for offset, sample in enumerate(block):
            if sample.size:
                region = tuple(slice(0, n) for n in sample.shape)
                where = (start + offset, *region)
                dataset[where] = sample

    def release(self, keep: np.ndarray) -> int:
        """Free every allocated slot not in ``keep`` (its digest row becomes zero);
        the number of slots freed."""
        stored = self.digests()
        unused = np.ones(len(stored), bool)
        unused[keep[keep < len(stored)]] = False
        unused &= stored.any(axis=1)
        freed = np.flatnonzero(unused)
        if not len(freed):
            return 0
        table = self.group[DIGESTS]
        updated = stored.copy()
        updated[freed] = 0
        for _, start, stop in _runs(freed):
            table[start:stop] = updated[start:stop]
        self._digests = updated
        return len(freed)

    # -- reading ------------------------------------------------------------------

    def read_fixed(self, slots: np.ndarray) -> np.ndarray:
        """The samples of ``slots`` as one ``(n, *shape)`` array (fixed-shape schema)."""
        out = np.empty((len(slots), *self.schema.shape), self.schema.dtype)
        if not len(slots):
            return out
        if len(slots) == 1:  # one sample (``column[key]``): no grouping to do
            number, row = divmod(int(slots[0]), COLLECTION_SIZE)
            dataset = self.dataset(number)
            rows = np.array([row], np.int64)
            self._check_rows(dataset, rows)
            try:
                if not self._read_chunks(dataset, rows, out, _FIRST):
                    out[0] = dataset[row]
            except OSError as err:
                raise self._unreadable(dataset, err) from err
            return out
        unique, inverse = np.unique(slots, return_inverse=True)
        numbers = unique // COLLECTION_SIZE
        gathered = np.empty((len(unique), *self.schema.shape), self.schema.dtype)
        for number in np.unique(numbers):
            pick = np.flatnonzero(numbers == number)
            dataset = self.dataset(int(number))
            rows = unique[pick] % COLLECTION_SIZE
            self._check_rows(dataset, rows)
            try:
                if len(rows) > 1 and len(rows) == int(rows[-1] - rows[0]) + 1:
                    gathered[pick] = dataset[int(rows[0]) : int(rows[-1]) + 1]
                elif not self._read_chunks(dataset, rows, gathered, pick):
                    gathered[pick] = dataset[rows]
            except OSError as err:
                raise self._unreadable(dataset, err) from err
        out[...] = gathered[inverse.ravel()]
        return out

    def _read_chunks(
        self, dataset: h5py.Dataset, rows: np.ndarray, out: np.ndarray, positions: np.ndarray
    ) -> bool:
        """Read the samples of ``rows`` (one chunk each) chunk by chunk, decoding them
        here (HDF5's selection of scattered rows costs more than the decoding); False,
        reading nothing, where the chunks are not one sample each or their filters are
        not understood."""
        if self.schema.backend != "01":
            return False
        name = dataset.name or ""
        decoder = self._decoders.get(name)
        if decoder is None:
            decoder = pipeline_for(dataset)
            if decoder is None:
                return False
            self._decoders[name] = decoder
        if len(rows) >= POSITIONED_READS and self._read_positioned(
            dataset, decoder, rows, out, positions
        ):
            return True
        read_chunk = dataset.id.read_direct_chunk
        zeros = (0,) * len(self.schema.shape)
        for row, position in zip(rows.tolist(), positions.tolist()):
            try:
                mask, data = read_chunk((row, *zeros))
            except KeyError:  # a chunk never written: all fill value
                out[position] = 0
                continue
            try:
                decoder.decode_into(
                    data, mask, out[position : position + 1].reshape(-1).view(np.uint8)
                )
            except Exception as err:
                raise CorruptDataError(
                    f"Expected the stored chunk of row {row} of {dataset.name} in "
                    f"{self.group.file.filename!r} to decode. Got: {err}"
                ) from err
        return True

    def _table(self, dataset: h5py.Dataset) -> ChunkTable | None:
        """The chunk table of ``dataset`` if its chunks can be read from the file by
        offset: a file open read-only, read through an OS file descriptor, whose table
        gives the bytes HDF5 reads for a stored chunk."""
        name = dataset.name or ""
        if name in self._tables:
            return self._tables[name]
        table = None
        file = dataset.file
        fd = file_descriptor(file) if file.mode == "r" else None
        if fd is not None:
            table = sample_table(dataset)
            stored = np.flatnonzero(table.offsets >= 0) if table is not None else np.zeros(0)
            if table is not None and len(stored):
                row = int(stored[0])
                location = table.location(row)
                zeros = (0,) * len(self.schema.shape)
                _, data = dataset.id.read_direct_chunk((row, *zeros))
                if location is None or os.pread(fd, location[1], location[0]) != bytes(data):
                    table = None
        self._tables[name] = table
        return table

    def _read_positioned(
        self,
        dataset: h5py.Dataset,
        decoder: Pipeline,
        rows: np.ndarray,
        out: np.ndarray,
        positions: np.ndarray,
    ) -> bool:
        """Read the chunks of ``rows`` by file offset, decoding on the codec threads;
        False, reading nothing, where that cannot be done (see :meth:`_table`)."""
        table = self._table(dataset)
        fd = file_descriptor(dataset.file)
        if table is None or fd is None or int(rows.max()) >= len(table):
            return False
        offsets, sizes, masks = table.offsets[rows], table.sizes[rows], table.masks[rows]
        if (offsets < 0).any():
            return False  # a chunk written after the table was read: HDF5 reads it
        flat = out.reshape(len(out), -1).view(np.uint8)

        def decode(i: int) -> None:
            data = os.pread(fd, int(sizes[i]), int(offsets[i]))
            try:
                decoder.decode_into(data, int(masks[i]), flat[positions[i]])
            except Exception as err:
                raise CorruptDataError(
                    f"Expected the stored chunk of row {int(rows[i])} of {dataset.name} in "
                    f"{self.group.file.filename!r} to decode. Got: {err}"
                ) from err

        for _ in parallel_groups(decode, range(len(rows))):
            pass
        return True

    def read_one(self, slot: int, shape: tuple[int, ...]) -> np.ndarray:
        dataset = self.dataset(slot // COLLECTION_SIZE)
        row = slot % COLLECTION_SIZE
        self._check_rows(dataset, np.array([row]))
        try:
            if math.prod(shape) == 0:
                return np.zeros(shape, self.schema.dtype)
            region = tuple(slice(0, n) for n in shape)
            where = (row, *region)
            return np.array(dataset[where], order="C")
        except OSError as err:
            raise self._unreadable(dataset, err) from err

    def _check_rows(self, dataset: h5py.Dataset, rows: np.ndarray) -> None:
        if len(rows) and int(rows.max()) >= dataset.shape[0]:
            raise CorruptDataError(
                f"Expected sample rows below {dataset.shape[0]} in {dataset.name} of "
                f"{self.group.file.filename!r}. Got row {int(rows.max())}."
            )

    def _unreadable(self, dataset: h5py.Dataset, err: BaseException) -> CorruptDataError:
        return CorruptDataError(
            f"Expected to read samples of {dataset.name} in {self.group.file.filename!r}. "
            f"Got an HDF5 error instead: {err}"
        )

    def describe(self, slot: int) -> str:
        return f"slot {slot} of {self.group.name}"


def slots_of(records: np.ndarray) -> np.ndarray:
    """The store slots of the rows of a records table."""
    return records["dataset"].astype(np.int64) * COLLECTION_SIZE + records["index"]
