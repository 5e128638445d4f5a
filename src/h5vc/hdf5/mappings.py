"""The mappings of a virtual dataset, read from the file's bytes before HDF5 opens it.

HDF5 keeps a virtual dataset's mappings in one global-heap object that its layout
message points to (HDF5 file format, "Global Heap Block for Virtual Datasets"):

- a version byte (0, or 1 with a flags byte per entry) and the number of entries;
- per entry the source file and dataset names (NUL-terminated strings, or with
  version 1 a reference to an earlier entry's), the source selection and the
  virtual selection, serialized as in the dataspace selection format;
- a checksum.

HDF5 decodes this object when the dataset is opened, and checks its checksum only
after decoding it: a damaged count or rank in a selection crashes the process
instead of raising an error. :func:`stored_mappings` reads and decodes the object
first, with every length checked against the bytes that hold it, and raises
:class:`~h5vc.errors.CorruptDataError` where they disagree. The dataset must then
be opened by HDF5, which checks the checksum over the same bytes: what was decoded
here is then what HDF5 holds, and gives the chunk map without one HDF5 call per
mapping (two copies of a dataspace each, 25 to 30 µs per mapping).

Only files opened read-only are read this way (see
:func:`~h5vc.hdf5.header.stored_messages`); encodings this module does not know
(point selections, "all" selections, version-2 object headers) are left to HDF5.
"""

from __future__ import annotations

import struct
import threading
from typing import Any

import h5py
import numpy as np

from h5vc.errors import CorruptDataError
from h5vc.hdf5.clib import lookup3
from h5vc.hdf5.header import (
    DATASPACE,
    DATATYPE,
    LAYOUT,
    HeaderDamage,
    PositionedReader,
    Record,
    StoredHeader,
    checksum,
    dataspace_dims,
    stored_messages,
)

__all__ = [
    "Mappings",
    "StoredVirtual",
    "checksum",
    "decode_mappings",
    "header_mappings",
    "keep_by_bytes",
    "stored_mappings",
    "stored_dims",
    "stored_shape",
    "stored_virtual",
]

_LAYOUT_VIRTUAL = 3
_SEL_NONE, _SEL_POINTS, _SEL_HYPERSLABS, _SEL_ALL = 0, 1, 2, 3
#: Version-1 heap entry flags: the source file / dataset name is an earlier entry's,
#: the source file is this file (no name stored).
_SHARED_FILE, _SHARED_DATASET, _SAME_FILE = 0x01, 0x02, 0x04
#: A global heap collection larger than this is damage.
_MAX_COLLECTION = 1 << 31
#: Collections of at most this many bytes are kept for the next call (HDF5 fills
#: collections of 4 KiB with the mappings of many small datasets).
_KEEP_COLLECTION = 1 << 16
#: A regular hyperslab of more blocks than this is left to HDF5.
_MAX_REGULAR_BLOCKS = 1 << 20
#: Mapping lists of at most this many bytes have their checksum verified by
#: :func:`stored_virtual` where HDF5's own checksum function cannot be called (in
#: Python: about 1 us per 12 bytes); with it (:mod:`h5vc.hdf5.clib`), every list.
_CHECKSUM_BYTES = 1024
#: The header messages of a virtual dataset :func:`stored_virtual` reads.
_VIRTUAL_MESSAGES = frozenset((DATASPACE, DATATYPE, LAYOUT))
#: Up to this many mappings the entries are walked one by one: decoding them at once
#: with numpy costs more than it saves (29 against 22 us for two mappings).
_FEW_MAPPINGS = 8


class Mappings(Record):
    """The blocks of every mapping: ``(n, 2, ndim)`` start and inclusive end
    coordinates, virtual and source side, and how many blocks each mapping has; and
    the distinct ``(source file, source dataset)`` names the mappings read from, as
    stored (``"."`` is the virtual dataset's own file; ``"%%"`` stands for ``"%"``)."""

    virtual: np.ndarray
    source: np.ndarray
    counts: np.ndarray
    source_counts: np.ndarray
    sources: frozenset[tuple[bytes, bytes]]

    __slots__ = ("counts", "source", "source_counts", "sources", "virtual")

    def __init__(
        self,
        virtual: np.ndarray,
        source: np.ndarray,
        counts: np.ndarray,
        source_counts: np.ndarray,
        sources: frozenset[tuple[bytes, bytes]] = frozenset(),
    ) -> None:
        self.virtual = virtual
        self.source = source
        self.counts = counts
        self.source_counts = source_counts
        self.sources = sources

    @classmethod
    def of(
        cls,
        virtual: list[np.ndarray],
        source: list[np.ndarray],
        ndim: int,
        sources: frozenset[tuple[bytes, bytes]] = frozenset(),
    ) -> Mappings:
        """From one block array per mapping and side."""

        def joined(parts: list[np.ndarray]) -> np.ndarray:
            if not parts:
                return np.zeros((0, 2, ndim), dtype=np.int64)
            return np.concatenate(parts).astype(np.int64, copy=False)

        return cls(
            joined(virtual),
            joined(source),
            np.array([len(b) for b in virtual], dtype=np.int64),
            np.array([len(b) for b in source], dtype=np.int64),
            sources,
        )


class StoredVirtual(Record):
    """What the header of a virtual dataset says, read from the file's bytes: its
    mappings, its shape and its datatype message as stored (two datasets of one
    datatype message hold the same numbers)."""

    mappings: Mappings
    shape: tuple[int, ...]
    datatype: bytes | None
    #: Whether the mapping list's checksum was verified here (as HDF5 verifies it
    #: when it opens the dataset): every list where HDF5's checksum function can be
    #: called, else short lists only.
    checksum_verified: bool

    __slots__ = ("checksum_verified", "datatype", "mappings", "shape")

    def __init__(
        self,
        mappings: Mappings,
        shape: tuple[int, ...],
        datatype: bytes | None,
        checksum_verified: bool = False,
    ) -> None:
        self.mappings = mappings
        self.shape = shape
        self.datatype = datatype
        self.checksum_verified = checksum_verified


class _Unknown(Exception):
    """An encoding this module does not decode: HDF5 is asked instead."""


def stored_mappings(group: h5py.Group, name: str) -> Mappings | None:
    """The mappings of the virtual dataset ``group[name]``, read from the file before
    HDF5 opens it; None if it is not a virtual dataset or cannot be read this way.

    Raises :class:`CorruptDataError` if the stored mappings are damaged in a way HDF5
    would not survive decoding.
    """
    stored = stored_virtual(group, name)
    return None if stored is None else stored.mappings


def stored_virtual(
    group: h5py.Group, name: str, collections: dict[int, dict[int, bytes]] | None = None
) -> StoredVirtual | None:
    """:func:`stored_mappings` of ``group[name]`` with its shape and datatype message;
    ``collections`` as for :func:`header_mappings`."""
    stored = stored_messages(group, name, _VIRTUAL_MESSAGES)
    if stored is None:
        return None
    try:
        decoded = _decoded(stored, collections)
    except (HeaderDamage, struct.error, ValueError) as damage:
        where = f"{group.name.rstrip('/')}/{name}"
        raise _damaged(where, group.file.filename, damage) from None
    if decoded is None:
        return None
    mappings, blob = decoded
    shape = stored_dims(stored)
    if shape is None:
        return None
    checked = (
        blob is not None
        and (len(blob) <= _CHECKSUM_BYTES or lookup3() is not None)
        and checksum(blob[:-4]) == int.from_bytes(blob[-4:], "little")
    )
    return StoredVirtual(mappings, shape, stored.messages.get(DATATYPE), checked)


def stored_dims(stored: StoredHeader) -> tuple[int, ...] | None:
    """The shape the dataspace message of ``stored`` gives; None if it has none or
    it cannot be read here."""
    space = stored.messages.get(DATASPACE)
    if space is None:
        return None
    try:
        return tuple(int(n) for n in dataspace_dims(space, stored.sizeof_size))
    except (_Unknown, HeaderDamage, struct.error, ValueError):
        return None


def header_mappings(
    stored: StoredHeader,
    where: str,
    filename: str,
    collections: dict[int, dict[int, bytes]] | None = None,
) -> Mappings | None:
    """The mappings of the virtual dataset whose dataspace and layout messages
    ``stored`` holds (:func:`stored_mappings`; ``where`` and ``filename`` name it in
    error messages). ``collections`` keeps the global heap collections read, by
    address, for the next call (HDF5 puts the mappings of many datasets in one): keep
    it no longer than the file's bytes stay as they are (a writer adds objects to a
    collection; an object not found among those kept is read again)."""
    try:
        return _decoded_mappings(stored, collections)
    except (HeaderDamage, struct.error, ValueError) as damage:
        raise _damaged(where, filename, damage) from None


def _damaged(where: str, filename: str, damage: Exception) -> CorruptDataError:
    return CorruptDataError(
        f"The virtual mappings of {where} in {filename!r} are damaged and cannot be "
        f"read: {damage}. Run "
        f"h5vc.verify on the file; restore it from a copy if it was written."
    )


def _decoded_mappings(
    stored: StoredHeader, collections: dict[int, dict[int, bytes]] | None
) -> Mappings | None:
    """:func:`header_mappings`, raising what is wrong with the bytes."""
    decoded = _decoded(stored, collections)
    return None if decoded is None else decoded[0]


def _decoded(
    stored: StoredHeader, collections: dict[int, dict[int, bytes]] | None
) -> tuple[Mappings, bytes | None] | None:
    """The mappings and the heap object they were decoded from (None: no mappings)."""
    layout = stored.messages.get(LAYOUT)
    space = stored.messages.get(DATASPACE)
    if layout is None or space is None or len(layout) < 2:
        return None
    if layout[0] != 4 or layout[1] != _LAYOUT_VIRTUAL:
        return None  # not a virtual dataset (or a layout HDF5 will refuse itself)
    try:
        dims = dataspace_dims(space, stored.sizeof_size)
        blob = _heap_object(
            stored.reader, layout, stored.sizeof_addr, stored.sizeof_size, collections
        )
        if blob is None:
            return Mappings.of([], [], len(dims)), None
        return _kept_decode(blob, len(dims), stored.sizeof_size), blob
    except _Unknown:
        return None


def stored_shape(group: h5py.Group, name: str) -> tuple[int, ...] | None:
    """The shape of dataset ``group[name]`` read from the file before HDF5 opens it
    (see :func:`stored_mappings`); None if it cannot be read this way."""
    stored = stored_messages(group, name, frozenset((DATASPACE,)))
    return None if stored is None else stored_dims(stored)


def _heap_object(
    reader: PositionedReader,
    layout: bytes,
    sizeof_addr: int,
    sizeof_size: int,
    collections: dict[int, dict[int, bytes]] | None = None,
) -> bytes | None:
    """The global-heap object a version-4 virtual layout message points to (None: the
    dataset has no mappings); with ``collections``, every object of its collection is
    kept there for the next call."""
    if len(layout) < 2 + sizeof_addr + 4:
        raise HeaderDamage("the virtual layout message is too short")
    address = int.from_bytes(layout[2 : 2 + sizeof_addr], "little")
    index = int.from_bytes(layout[2 + sizeof_addr : 6 + sizeof_addr], "little")
    if address == (1 << (8 * sizeof_addr)) - 1:
        return None  # the undefined address: no mappings stored
    objects = None if collections is None else collections.get(address)
    if objects is not None:
        found = objects.get(index)
        if found is not None:
            return found
        # Not among the objects kept: the collection may have grown since; read again.
    prefix = 8 + sizeof_size  # "GCOL", version, 3 reserved bytes, collection size
    head = reader.read(address, prefix)
    if len(head) < prefix or head[:4] != b"GCOL":
        raise HeaderDamage(f"no global heap collection at {address}")
    size = int.from_bytes(head[8:prefix], "little")
    if not prefix <= size <= _MAX_COLLECTION or not reader.within(address, size):
        raise HeaderDamage(f"a global heap collection of {size} bytes at {address}")
    data = reader.read(address, size)
    if size > _KEEP_COLLECTION:
        collections = None  # one large object: nothing to share
    entry = 8 + sizeof_size  # index, reference count, reserved, object size
    pos = prefix
    kept: dict[int, bytes] = {}
    while pos + entry <= size:
        number = int.from_bytes(data[pos : pos + 2], "little")
        length = int.from_bytes(data[pos + 8 : pos + entry], "little")
        if number == 0:
            break  # the free space closes the collection
        if pos + entry + length > size:
            raise HeaderDamage(f"heap object {number} of {length} bytes overruns its collection")
        if collections is not None:
            kept[number] = data[pos + entry : pos + entry + length]
        elif number == index:
            return data[pos + entry : pos + entry + length]
        pos += entry + -(-length // 8) * 8
    if collections is not None:
        collections[address] = kept
        if index in kept:
            return kept[index]
    raise HeaderDamage(f"no object {index} in the global heap collection at {address}")


#: Mapping lists decoded for :func:`stored_virtual` (the header of a virtual dataset
#: read before each handle's first read of it), by bytes, rank and size of lengths: a
#: function of those alone, so valid in any file. Up to :data:`KEPT_BYTES` of lists,
#: the oldest dropped first; the arrays of a kept decoding are read-only.
_KEPT: dict[tuple[bytes, int, int], Mappings] = {}
_KEPT_MUTEX = threading.Lock()
KEPT_BYTES = 4 << 20
_kept_bytes = 0


def _kept_decode(blob: bytes, ndim: int, sizeof_size: int) -> Mappings:
    """:func:`decode_mappings`, kept for the next handle of the same list (a list of
    160 mappings takes about a millisecond to decode)."""
    global _kept_bytes
    key = (blob, ndim, sizeof_size)
    found = _KEPT.get(key)
    if found is not None:
        return found
    mappings = decode_mappings(blob, ndim, sizeof_size)
    if len(blob) > KEPT_BYTES:
        return mappings
    for array in (mappings.virtual, mappings.source, mappings.counts, mappings.source_counts):
        array.flags.writeable = False
    with _KEPT_MUTEX:
        _kept_bytes = keep_by_bytes(_KEPT, key, mappings, _kept_bytes, KEPT_BYTES)
    return mappings


def keep_by_bytes(
    kept: dict[tuple[bytes, int, int], Any],
    key: tuple[bytes, int, int],
    value: Any,
    held: int,
    limit: int,
) -> int:
    """Keep ``value`` in ``kept`` under ``key`` (whose first item is the bytes it was
    decoded from, and is counted) unless a value is kept there already, dropping the
    oldest entries beyond ``limit`` bytes; returns the bytes held then (``held``
    before). The caller holds the lock of ``kept``."""
    if key in kept:
        return held
    kept[key] = value
    held += len(key[0])
    while held > limit:
        oldest = next(iter(kept))
        held -= len(oldest[0])
        del kept[oldest]
    return held


def decode_mappings(blob: bytes, ndim: int, sizeof_size: int) -> Mappings:
    """Decode the heap object of a virtual dataset of rank ``ndim``.

    Raises :class:`HeaderDamage` where a length or count disagrees with the bytes,
    ``_Unknown`` for an encoding left to HDF5. The entries are walked in Python; the
    coordinates of all of them are converted at once.
    """
    if len(blob) < 1 + sizeof_size + 4:
        raise HeaderDamage(f"a mapping list of {len(blob)} bytes")
    version = blob[0]
    if version not in (0, 1):
        raise _Unknown
    count = int.from_bytes(blob[1 : 1 + sizeof_size], "little")
    end = len(blob) - 4  # the checksum follows the entries
    if count > end:
        raise HeaderDamage(f"{count} mappings in {len(blob)} bytes")
    pos = 1 + sizeof_size
    if version == 0 and count > _FEW_MAPPINGS:
        uniform = _uniform(blob, pos, end, count, ndim)
        if uniform is not None:
            return uniform
    sides = (_Side(blob, ndim), _Side(blob, ndim))  # source, virtual
    # A name shared with an earlier entry (version 1) is one already collected.
    files: set[bytes] = set()
    datasets: set[bytes] = set()
    for number in range(count):
        if version == 1:
            if pos >= end:
                raise HeaderDamage(f"mapping {number} starts past the end of the list")
            flags = blob[pos]
            pos += 1
            if flags & _SHARED_FILE:
                pos = _shared(pos, sizeof_size, number, end)
            elif flags & _SAME_FILE:
                files.add(b".")
            else:
                start, pos = pos, _string_end(blob, pos, end)
                files.add(blob[start : pos - 1])
            if flags & _SHARED_DATASET:
                pos = _shared(pos, sizeof_size, number, end)
            else:
                start, pos = pos, _string_end(blob, pos, end)
                datasets.add(blob[start : pos - 1])
        else:
            start, middle = pos, _string_end(blob, pos, end)
            pos = _string_end(blob, middle, end)
            files.add(blob[start : middle - 1])
            datasets.add(blob[middle : pos - 1])
        for side in sides:
            pos = side.add(pos, end)
    if pos != end:
        raise HeaderDamage(f"{end - pos} bytes after the last of {count} mappings")
    source, virtual = (side.blocks() for side in sides)
    return Mappings(virtual, source, sides[1].counts(), sides[0].counts(), _pairs(files, datasets))


def _pairs(files: set[bytes], datasets: set[bytes]) -> frozenset[tuple[bytes, bytes]]:
    """The source names as pairs; a single pair when every mapping reads one dataset of
    one file (what h5vc and versioned-hdf5 write), else every combination (which says
    that there is more than one source)."""
    return frozenset((f, d) for f in files for d in datasets)


def _uniform(blob: bytes, pos: int, end: int, count: int, ndim: int) -> Mappings | None:
    """The mappings of a version-0 list whose entries differ in their coordinates
    only (the same names, selections of the same number of blocks), decoded at
    once; None if they differ otherwise."""
    middle = _string_end(blob, pos, end)
    first = _string_end(blob, middle, end)
    names = (blob[pos : middle - 1], blob[middle : first - 1])  # source file, dataset
    offsets = []
    for _ in range(2):  # source, virtual
        if first + 24 > end:
            return None
        kind, version, _reserved, length, rank, blocks = struct.unpack_from("<6I", blob, first)
        if (kind, version, rank) != (_SEL_HYPERSLABS, 1, ndim) or length != 8 + blocks * 8 * ndim:
            return None
        offsets.append((first + 24 - pos, blocks))
        first += 16 + length
    size = first - pos
    if size * count != end - pos:
        return None
    rows = np.frombuffer(blob, dtype=np.uint8, count=size * count, offset=pos).reshape(count, size)
    fixed = np.ones(size, dtype=bool)
    for at, blocks in offsets:
        fixed[at : at + blocks * 8 * ndim] = False
    if not (rows[:, fixed] == rows[0, fixed]).all():
        return None
    (source_at, source_blocks), (virtual_at, virtual_blocks) = offsets

    def coords(at: int, blocks: int) -> np.ndarray:
        raw = np.ascontiguousarray(rows[:, at : at + blocks * 8 * ndim])
        every = raw.view("<u4").astype(np.int64).reshape(count * blocks, 2, ndim)
        if np.any(every[:, 1] < every[:, 0]):
            raise HeaderDamage("a block ends before it starts")
        return every

    return Mappings(
        coords(virtual_at, virtual_blocks),
        coords(source_at, source_blocks),
        np.full(count, virtual_blocks, dtype=np.int64),
        np.full(count, source_blocks, dtype=np.int64),
        frozenset([names]),
    )


class _Side:
    """The selections of one side of every mapping, as they are walked."""

    def __init__(self, blob: bytes, ndim: int):
        self.blob = blob
        self.ndim = ndim
        #: Version-1 hyperslab blocks (32-bit coordinates): where each one's start.
        self.compact: list[tuple[int, int]] = []
        #: Blocks of other encodings, by selection number.
        self.other: dict[int, np.ndarray] = {}
        self.sizes: list[int] = []

    def add(self, pos: int, end: int) -> int:
        """Take the selection at ``pos``; return the position after it."""
        blob, ndim = self.blob, self.ndim
        if pos + 8 > end:
            raise HeaderDamage("a selection runs past the end of the mapping list")
        kind, version = struct.unpack_from("<II", blob, pos)
        if kind == _SEL_HYPERSLABS and version == 1:
            # type, version, reserved, length of the rest; rank, number of blocks, blocks
            if pos + 24 > end:
                raise HeaderDamage("a selection runs past the end of the mapping list")
            length, rank, blocks = struct.unpack_from("<III", blob, pos + 12)
            _check_rank(rank, ndim)
            if length != 8 + blocks * 2 * rank * 4 or pos + 16 + length > end:
                raise HeaderDamage(f"a selection of {blocks} blocks in {length} bytes")
            self.compact.append((pos + 24, blocks))
            self.sizes.append(blocks)
            return pos + 16 + length
        if kind == _SEL_NONE and version == 1:
            if pos + 16 > end:
                raise HeaderDamage("a selection runs past the end of the mapping list")
            self.sizes.append(0)
            return pos + 16
        if kind != _SEL_HYPERSLABS:
            raise _Unknown  # points or all: HDF5 reads them
        if version == 2:
            coords, pos = _hyperslabs_v2(blob, pos, end, ndim)
        elif version == 3:
            coords, pos = _hyperslabs_v3(blob, pos, end, ndim)
        else:
            raise _Unknown
        self.other[len(self.sizes)] = coords
        self.sizes.append(len(coords))
        return pos

    def counts(self) -> np.ndarray:
        return np.array(self.sizes, dtype=np.int64)

    def blocks(self) -> np.ndarray:
        """Every block of every selection, in order, as ``(n, 2, ndim)`` int64."""
        ndim, view = self.ndim, memoryview(self.blob)
        row = 2 * ndim * 4
        joined = b"".join(view[start : start + blocks * row] for start, blocks in self.compact)
        compact = np.frombuffer(joined, dtype="<u4").astype(np.int64).reshape(-1, 2, ndim)
        if self.other:
            parts: list[np.ndarray] = []
            taken = 0
            for number, size in enumerate(self.sizes):
                if number in self.other:
                    parts.append(self.other[number])
                else:
                    parts.append(compact[taken : taken + size])
                    taken += size
            every = np.concatenate(parts) if parts else compact
        else:
            every = compact
        if np.any(every[:, 1] < every[:, 0]):
            raise HeaderDamage("a block ends before it starts")
        return every


def _string_end(blob: bytes, pos: int, end: int) -> int:
    """The position after the NUL-terminated string at ``pos``."""
    stop = blob.find(b"\0", pos, end)
    if stop < 0:
        raise HeaderDamage("a name runs past the end of the mapping list")
    return stop + 1


def _shared(pos: int, sizeof_size: int, number: int, end: int) -> int:
    """The position after a reference to an earlier entry's name."""
    if pos + sizeof_size > end:
        raise HeaderDamage(f"mapping {number} runs past the end of the list")
    return pos + sizeof_size


def _check_rank(rank: int, ndim: int) -> None:
    if rank > 32:
        raise HeaderDamage(f"a selection of rank {rank}")
    if rank != ndim:
        raise _Unknown  # a mapping between ranks: HDF5 reads it


def _values(blob: bytes, pos: int, end: int, width: int, count: int) -> np.ndarray:
    """``count`` little-endian unsigned integers of ``width`` bytes at ``pos``."""
    if width not in (2, 4, 8):
        raise HeaderDamage(f"selection coordinates of {width} bytes")
    if pos + count * width > end:
        raise HeaderDamage(f"{count} selection coordinates run past the end of the list")
    return np.frombuffer(blob, dtype=f"<u{width}", count=count, offset=pos).astype(np.int64)


def _hyperslabs_v2(blob: bytes, pos: int, end: int, ndim: int) -> tuple[np.ndarray, int]:
    # type, version, flags, length of the rest; rank, start/stride/count/block per axis
    if pos + 17 > end:
        raise HeaderDamage("a selection runs past the end of the mapping list")
    flags = blob[pos + 8]
    length, rank = struct.unpack_from("<II", blob, pos + 9)
    _check_rank(rank, ndim)
    if not flags & 1 or length != 4 + 32 * rank:
        raise HeaderDamage(f"a version-2 selection with flags {flags} in {length} bytes")
    values = _values(blob, pos + 17, end, 8, 4 * rank).reshape(rank, 4)
    return _regular(values), pos + 13 + length


def _hyperslabs_v3(blob: bytes, pos: int, end: int, ndim: int) -> tuple[np.ndarray, int]:
    # type, version, flags, width of the numbers; rank, then the regular form or
    # the number of blocks and the blocks
    if pos + 14 > end:
        raise HeaderDamage("a selection runs past the end of the mapping list")
    flags, width = blob[pos + 8], blob[pos + 9]
    (rank,) = struct.unpack_from("<I", blob, pos + 10)
    _check_rank(rank, ndim)
    pos += 14
    if flags & 1:
        values = _values(blob, pos, end, width, 4 * rank).reshape(rank, 4)
        return _regular(values), pos + 4 * rank * width
    blocks = int(_values(blob, pos, end, width, 1)[0])
    pos += width
    if blocks * 2 * rank * width > end - pos:
        raise HeaderDamage(f"{blocks} blocks run past the end of the mapping list")
    coords = _values(blob, pos, end, width, blocks * 2 * rank).reshape(blocks, 2, rank)
    return coords, pos + blocks * 2 * rank * width


def _regular(values: np.ndarray) -> np.ndarray:
    """The blocks of a regular hyperslab (start, stride, count, block per axis), in
    row-major order."""
    start, stride, count, block = values.T
    total = int(np.prod(count, dtype=np.float64)) if len(count) else 1
    if total > _MAX_REGULAR_BLOCKS:
        raise _Unknown
    if np.any((block == 0) | (count == 0)):
        return np.zeros((0, 2, len(start)), dtype=np.int64)
    grid = np.indices(tuple(int(c) for c in count)).reshape(len(count), -1).T
    first = start + grid * stride
    return np.stack([first, first + block - 1], axis=1)
