"""A whole tree of groups and virtual datasets read from a read-only file's bytes.

Commands that look at every object of a file (``h5vc du``) pay HDF5's cost per object:
walking the links of 10,000 version groups opens each one (``H5Lvisit``: 0.4 s), and
:mod:`h5vc.hdf5.header` with :mod:`h5vc.hdf5.mappings` read every header and mapping
list in their general form (70 us a dataset).  :class:`FileBytes` maps the file into
memory once and reads what such a walk needs with a few ``struct`` calls per object:

- the messages of an object header (:meth:`FileBytes.header`);
- the members of a group (:meth:`FileBytes.links`) kept in a symbol table (version-1
  B-tree, symbol nodes, local heap: HDF5's default for files of every h5vc version),
  or as link messages in its object header (compact storage of a new-style group, in
  a version-1 header or a version-2 one, whose checksums are checked);
- a dataset's dimensions and element size (:meth:`FileBytes.dims`,
  :meth:`FileBytes.element`);
- a virtual dataset's mapping list (:meth:`FileBytes.mappings`) when it is what h5vc and
  versioned-hdf5 write: version-0 or version-1 entries without shared names, whose
  selections are version-1 hyperslab blocks;
- variable-length strings from their stored references (:func:`vlen_strings`: the
  names column of the time index).

The functions named ``many_*`` read the same for many objects at once with numpy
(the global heap collections holding the mapping lists and strings are walked at
once too, and kept); the rows they do not read are read one by one as above.

Anything else (dense link storage in a fractal heap, soft or external links, other
encodings) and any length or signature that disagrees with the bytes raises
:class:`Unreadable`, or answers None where the caller can read that one object through
the general readers: those readers (and HDF5) then read it and report damage as damage.

Only for files opened read-only (HDF5 may hold newer metadata of a file open for
writing than its bytes) and read through an OS file descriptor.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import struct
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, TypeVar, cast

import h5py
import numpy as np

from h5vc.hdf5.header import Record, checksum, file_descriptor

__all__ = [
    "ManyDatasets",
    "ManyMappings",
    "FileBytes",
    "Header",
    "Mappings",
    "Unreadable",
    "many_datasets",
    "many_compact_links",
    "many_links",
    "many_mappings",
    "vlen_strings",
]

_DATASPACE, _LINK_INFO, _DATATYPE, _LINK, _LAYOUT, _CONTINUATION, _SYMBOL_TABLE = (
    0x0001,
    0x0002,
    0x0003,
    0x0006,
    0x0008,
    0x0010,
    0x0011,
)
#: A dataset's messages: once the header showed all three, the rest is not read.
_DATASET = frozenset((_DATASPACE, _DATATYPE, _LAYOUT))
#: Message flag bit: the message is shared (stored elsewhere).
_SHARED = 0x02
#: Symbol table entry cache type of a soft link.
_CACHED_SOFT_LINK = 2
#: A header block, a local heap or a global heap collection larger than this is damage.
_MAX_BLOCK = 1 << 31
#: B-tree levels deeper than this are damage (a B-tree of 2**32 entries has fewer).
_MAX_LEVEL = 32
_SEL_HYPERSLABS = 2
_LAYOUT_VIRTUAL = 3
_FORMATS = {2: "H", 4: "I", 8: "Q"}
_PREFIX = struct.Struct("<BxH4xI")  # version, message count, (references,) size
_MESSAGE = struct.Struct("<HHB")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_SELECTION = struct.Struct("<6I")  # type, version, reserved, length, rank, blocks


class Unreadable(Exception):
    """The bytes are not in a form read here, or disagree with themselves: read the
    file through HDF5 instead."""


_Reader = TypeVar("_Reader", bound=Callable[..., Any])


def _bytes_checked(function: _Reader) -> _Reader:
    """``function`` raising :class:`Unreadable` where damaged bytes would make its
    numpy indexing or unpacking fail (HDF5 then reads the file and names the damage)."""

    @functools.wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except (IndexError, ValueError, OverflowError, struct.error) as error:
            raise Unreadable(f"bytes that do not decode: {error}") from error

    return cast(_Reader, checked)


class Header(Record):
    """The messages of an object header, as ``(offset in the map, length)``: the first
    unshared message of each type, and every link message."""

    messages: dict[int, tuple[int, int]]
    links: list[tuple[int, int]]

    __slots__ = ("links", "messages")

    def __init__(self, messages: dict[int, tuple[int, int]], links: list[tuple[int, int]]) -> None:
        self.messages = messages
        self.links = links


class Mappings(Record):
    """A virtual dataset's mappings: the ``(source file, source dataset)`` names they
    read (as stored), and the first and last coordinates of every block of their
    source and of their virtual selections, flat (``2 * ndim`` numbers a block)."""

    sources: set[tuple[bytes, bytes]]
    source: list[int]
    virtual: list[int]

    __slots__ = ("source", "sources", "virtual")

    def __init__(
        self,
        sources: set[tuple[bytes, bytes]],
        source: list[int],
        virtual: list[int],
    ) -> None:
        self.sources = sources
        self.source = source
        self.virtual = virtual


class FileBytes:
    """A read-only memory map of an HDF5 file, read at HDF5 addresses."""

    def __init__(self, fd: int, base: int, sizeof_addr: int, sizeof_size: int):
        if sizeof_addr not in _FORMATS or sizeof_size not in _FORMATS:
            raise Unreadable(f"addresses of {sizeof_addr} bytes, lengths of {sizeof_size}")
        self.map = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        self.base = base
        self.size = len(self.map) - base
        self.sizeof_addr = sizeof_addr
        self.sizeof_size = sizeof_size
        self.undefined = (1 << (8 * sizeof_addr)) - 1
        addr, length = _FORMATS[sizeof_addr], _FORMATS[sizeof_size]
        self._addr = struct.Struct("<" + addr)
        self._length = struct.Struct("<" + length)
        self._pair = struct.Struct(f"<{addr}{length}")  # a continuation message
        self._two_addr = struct.Struct(f"<{addr}{addr}")  # a symbol table message
        self._heap = struct.Struct(f"<4sB3x{length}{length}{addr}")  # a local heap
        self._symbol = struct.Struct(f"<{length}{addr}I")  # a symbol table entry's start
        self._global = struct.Struct(f"<H6x{length}")  # a global heap object's start
        self._dims: dict[tuple[int, int], struct.Struct] = {}
        #: Global heap collections read: address -> {object index: (offset, length)}
        #: (or the same, read at once by :func:`_heap_objects`).
        self._collections: dict[int, dict[int, tuple[int, int]] | _HeapCollection] = {}
        #: Collections walked at once (:func:`_heap_objects`), not in ``_collections``.
        self._walked: list[_WalkedHeaps] = []

    @classmethod
    def of(cls, file: h5py.File) -> FileBytes | None:
        """The bytes of ``file`` if it is open read-only through an OS file descriptor;
        else None."""
        if file.id.get_intent() != h5py.h5f.ACC_RDONLY:
            return None
        fd = file_descriptor(file)
        if fd is None:
            return None
        plist = file.id.get_create_plist()
        sizeof_addr, sizeof_size = plist.get_sizes()
        try:
            return cls(fd, int(plist.get_userblock()), int(sizeof_addr), int(sizeof_size))
        except (Unreadable, OSError, ValueError):
            return None

    def cut(self) -> bool:
        """True if the file is now shorter than the map: another program cut it. Its
        missing pages would kill the process (SIGBUS) when read instead of raising,
        so the map's bytes are not to be read then. (The map keeps a descriptor of
        its own: this holds after the handle it was made from closed.)"""
        try:
            return self.map.size() < len(self.map)
        except (OSError, ValueError):  # unmapped, or its descriptor gone
            return True

    def close(self) -> None:
        """Unmap the file (left to the garbage collector while an array read from it
        is still referenced, by a traceback for instance)."""
        with contextlib.suppress(BufferError):
            self.map.close()

    def __enter__(self) -> FileBytes:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _at(self, address: int, nbytes: int) -> int:
        """The offset in the map of ``nbytes`` at ``address``, all inside the file."""
        if address < 0 or nbytes < 0 or address + nbytes > self.size:
            raise Unreadable(f"{nbytes} bytes at address {address} run past the end of the file")
        return self.base + address

    def header(self, address: int, *, whole: bool = False) -> Header:
        """The messages of the object header at ``address`` (version 1, or version 2
        with its checksums checked), continuation blocks followed, up to the first
        symbol table message (a group's), or the first dataspace, datatype and layout
        messages (a dataset's); with ``whole``, every message."""
        data = self.map
        start = self._at(address, 16)
        if data[start : start + 4] == b"OHDR":
            return self._header_v2(address, start, whole)
        message = _MESSAGE.unpack_from
        version, n_messages, chunk_size = _PREFIX.unpack_from(data, start)
        if version != 1 or chunk_size > _MAX_BLOCK:
            raise Unreadable(f"an object header of version {version} at {address}")
        found: dict[int, tuple[int, int]] = {}
        header = Header(found, [])
        blocks = [(self._at(address + 16, chunk_size), chunk_size)]
        seen = 0
        for pos, size in blocks:  # continuation blocks are appended as they are found
            end = pos + size
            while pos < end:
                if end - pos < 8:
                    raise Unreadable(f"{end - pos} stray bytes end a header block")
                kind, length, flags = message(data, pos)
                pos += 8
                if pos + length > end or length % 8:
                    raise Unreadable(f"a message of {length} bytes does not fit its block")
                seen += 1
                if seen > n_messages:
                    raise Unreadable(f"more messages than the {n_messages} the header counts")
                if kind == _CONTINUATION:
                    blocks.append(self._continuation(pos, length, 0))
                elif self._note(header, kind, flags, pos, length) and not whole:
                    return header
                pos += length
        return header

    def _note(self, header: Header, kind: int, flags: int, pos: int, length: int) -> bool:
        """Keep message ``kind`` at ``pos`` in ``header``; True once the header has
        shown what its object is (see :meth:`header`)."""
        found = header.messages
        if kind == _LINK:
            header.links.append((pos, length))
        elif kind not in found and not flags & _SHARED:
            found[kind] = (pos, length)
            return kind == _SYMBOL_TABLE or (
                kind in _DATASET and _DATASPACE in found and _DATATYPE in found and _LAYOUT in found
            )
        return False

    def _continuation(self, pos: int, length: int, signature: int) -> tuple[int, int]:
        """The block (offset in the map, size) a continuation message at ``pos``
        points to, less ``signature`` bytes at its start."""
        if length < self._pair.size:
            raise Unreadable("a continuation message is too short")
        target, nbytes = self._pair.unpack_from(self.map, pos)
        if nbytes > _MAX_BLOCK or nbytes < signature:
            raise Unreadable(f"a continuation block of {nbytes} bytes")
        return self._at(target, nbytes), nbytes

    def _header_v2(self, address: int, start: int, whole: bool = False) -> Header:
        """:meth:`header` of the version-2 object header at ``address`` (``start`` in
        the map): every block's checksum is checked."""
        data = self.map
        version, flags = data[start + 4], data[start + 5]
        if version != 2 or flags & ~0x3F:
            raise Unreadable(f"a version-2 object header of an unknown form at {address}")
        prefix = 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
        width = 1 << (flags & 0x03)
        self._at(address, prefix + width)
        chunk_size = int.from_bytes(data[start + prefix : start + prefix + width], "little")
        if chunk_size > _MAX_BLOCK:
            raise Unreadable(f"an object header block of {chunk_size} bytes")
        self._at(address, prefix + width + chunk_size + 4)
        # (start of the checksummed bytes, start of the messages, end of the messages)
        blocks = [(start, start + prefix + width, start + prefix + width + chunk_size)]
        header = Header({}, [])
        size_of = 6 if flags & 0x04 else 4  # type, size, flags (, creation order)
        for first, pos, end in blocks:
            if checksum(data[first:end]) != _U32.unpack_from(data, end)[0]:
                raise Unreadable(f"an object header block whose checksum disagrees at {address}")
            while end - pos >= size_of:  # fewer bytes are a gap
                kind, length, message_flags = (
                    data[pos],
                    _U16.unpack_from(data, pos + 1)[0],
                    data[pos + 3],
                )
                pos += size_of
                if pos + length > end:
                    raise Unreadable(f"a message of {length} bytes does not fit its block")
                if kind == _CONTINUATION:
                    block, nbytes = self._continuation(pos, length, 8)
                    if data[block : block + 4] != b"OCHK":
                        raise Unreadable("no object header continuation block")
                    blocks.append((block, block + 4, block + nbytes - 4))
                elif self._note(header, kind, message_flags, pos, length) and not whole:
                    return header
                pos += length
        return header

    def links(self, header: Header) -> list[tuple[str, int]] | None:
        """The hard links of the group whose header is ``header``, by name; None if it
        is not a group.  Raises :class:`Unreadable` for a soft or external link, or
        dense link storage."""
        table = header.messages.get(_SYMBOL_TABLE)
        if table is not None:
            if table[1] < self._two_addr.size:
                raise Unreadable("a symbol table message is too short")
            btree, heap = self._two_addr.unpack_from(self.map, table[0])
            names = self._local_heap(heap)
            found: list[tuple[str, int]] = []
            nodes = list(self._symbol_nodes(btree, 0))
            if len(nodes) > _FEW_NODES and _plain_sizes(self):
                found = self._many_symbols(nodes, names)
            else:
                for node in nodes:
                    found += self._symbols(node, names)
        elif _LINK_INFO in header.messages:
            self._compact(header.messages[_LINK_INFO])
            found = [self._link(pos, length) for pos, length in header.links]
        elif header.links:
            raise Unreadable("link messages in an object that is not a group")
        else:
            return None
        if len(found) > 1:
            found.sort(key=_name)  # UTF-8 keeps code point order: the bytes' order
        return found

    def _compact(self, info: tuple[int, int]) -> None:
        """Check that the link info message at ``info`` keeps the links in the header
        (compact storage), not in a fractal heap (dense storage)."""
        pos, length = info
        data = self.map
        if length < 2 or data[pos] != 0 or data[pos + 1] & ~0x03:
            raise Unreadable("a link info message of an unknown form")
        at = pos + 2 + (8 if data[pos + 1] & 0x01 else 0)
        if at + self.sizeof_addr > pos + length:
            raise Unreadable("a link info message is too short")
        if self._addr.unpack_from(data, at)[0] != self.undefined:
            raise Unreadable("a group keeping its links in dense storage")

    def _link(self, pos: int, length: int) -> tuple[str, int]:
        """The name and target of the hard link message at ``pos``."""
        data = self.map
        end = pos + length
        if length < 3 or data[pos] != 1 or data[pos + 1] & ~0x1F:
            raise Unreadable("a link message of an unknown form")
        flags = data[pos + 1]
        at = pos + 2
        kind = 0
        if flags & 0x08:
            kind = data[at]
            at += 1
        at += (8 if flags & 0x04 else 0) + (1 if flags & 0x10 else 0)
        width = 1 << (flags & 0x03)
        size = int.from_bytes(data[at : at + width], "little")
        at += width
        if kind != 0:
            raise Unreadable("a soft link" if kind == 1 else "an external or user-defined link")
        if size == 0 or at + size + self.sizeof_addr > end:
            raise Unreadable(f"a link name of {size} bytes does not fit its message")
        try:
            name = data[at : at + size].decode()
        except UnicodeDecodeError:
            raise Unreadable("a link name that is not UTF-8") from None
        return name, self._addr.unpack_from(data, at + size)[0]

    def is_dataset(self, header: Header) -> bool:
        """Whether the object whose header is ``header`` is a dataset (it has a
        layout message)."""
        return _LAYOUT in header.messages

    def _local_heap(self, address: int) -> bytes:
        """The data segment of the local heap at ``address``."""
        pos = self._at(address, self._heap.size)
        signature, version, size, _, data = self._heap.unpack_from(self.map, pos)
        if signature != b"HEAP" or version != 0 or size > _MAX_BLOCK:
            raise Unreadable(f"no local heap at {address}")
        start = self._at(data, size)
        return self.map[start : start + size]

    def _symbol_nodes(self, address: int, depth: int) -> Iterator[int]:
        """The addresses of the symbol nodes below the group B-tree node at ``address``,
        in key order."""
        if depth > _MAX_LEVEL:
            raise Unreadable("a group B-tree deeper than any file holds")
        sa, sl = self.sizeof_addr, self.sizeof_size
        pos = self._at(address, 8 + 2 * sa)
        data = self.map
        if data[pos : pos + 5] != b"TREE\0":
            raise Unreadable(f"no group B-tree node at {address}")
        level, (used,) = data[pos + 5], _U16.unpack_from(data, pos + 6)
        # Keys (heap offsets) and children alternate after the two sibling addresses.
        pos = self._at(address + 8 + 2 * sa, used * (sl + sa) + sl) + sl
        unpack = self._addr.unpack_from
        for child in [unpack(data, pos + i * (sl + sa))[0] for i in range(used)]:
            if level:
                yield from self._symbol_nodes(child, depth + 1)
            else:
                yield child

    def _symbols(self, address: int, names: bytes) -> list[tuple[str, int]]:
        """The links of the symbol node at ``address`` (names in the heap ``names``)."""
        data = self.map
        pos = self._at(address, 8)
        if data[pos : pos + 5] != b"SNOD\1":
            raise Unreadable(f"no symbol table node at {address}")
        (count,) = _U16.unpack_from(data, pos + 6)
        entry = self.sizeof_size + self.sizeof_addr + 24
        pos = self._at(address + 8, count * entry)
        unpack = self._symbol.unpack_from
        found = []
        for _ in range(count):
            offset, target, cache = unpack(data, pos)
            if cache == _CACHED_SOFT_LINK or target == self.undefined:
                raise Unreadable("a soft link")
            stop = names.find(b"\0", offset)
            if stop < 0:
                raise Unreadable(f"a link name at heap offset {offset} outside its heap")
            found.append((names[offset:stop].decode(), target))
            pos += entry
        return found

    def _many_symbols(self, nodes: list[int], names: bytes) -> list[tuple[str, int]]:
        """:meth:`_symbols` of every symbol node at ``nodes``, read at once (8-byte
        addresses and lengths)."""
        rows = _Rows(self)
        at = np.asarray(nodes, dtype=np.uint64)
        ok = np.ones(len(at), dtype=bool)
        head = rows.at(at, 8, ok)
        if not (ok & _is(head, b"SNOD\1")).all():
            raise Unreadable("no symbol table node")
        count = _field(head, 6, 2).astype(np.int64)
        if (at.astype(np.int64) + 8 + count * 40 > self.size).any():
            raise Unreadable("symbol table entries run past the end of the file")
        row = np.repeat(np.arange(len(at)), count)
        number = np.arange(len(row)) - np.repeat(np.cumsum(count) - count, count)
        entries = rows.items(
            at[row] + np.uint64(8) + np.uint64(40) * number.astype(np.uint64),
            _SYMBOL_ENTRY,
            np.ones(len(row), dtype=bool),
        )
        target = entries["target"]
        if (entries["cache"] == _CACHED_SOFT_LINK).any() or (target == self.undefined).any():
            raise Unreadable("a soft link")
        offset = entries["offset"].astype(np.int64)
        ends = np.flatnonzero(np.frombuffer(names, dtype=np.uint8) == 0)
        k = np.searchsorted(ends, offset)  # the first NUL at or after each name's start
        if (k == len(ends)).any():
            raise Unreadable("a link name outside its heap")
        return [
            (names[a:b].decode(), t)
            for a, b, t in zip(offset.tolist(), ends[k].tolist(), target.tolist())
        ]

    def dims(self, header: Header) -> tuple[int, ...] | None:
        """The dimensions the dataspace message of ``header`` gives; None without one,
        or for a null dataspace."""
        found = header.messages.get(_DATASPACE)
        if found is None:
            return None
        pos, length = found
        if length < 8:
            raise Unreadable("a dataspace message of an unknown form")
        data = self.map
        version, rank, flags = data[pos], data[pos + 1], data[pos + 2]
        if version not in (1, 2) or rank > 32:
            raise Unreadable("a dataspace message of an unknown form")
        if version == 2 and data[pos + 3] == 2:
            return None
        start = pos + (8 if version == 1 else 4)
        count = 2 * rank if flags & 1 else rank
        shape = self._dims.get((rank, count))
        if shape is None:
            shape = self._dims[rank, count] = struct.Struct(f"<{count}{_FORMATS[self.sizeof_size]}")
        if start + shape.size > pos + length:
            raise Unreadable(f"a rank-{rank} dataspace in a {length}-byte message")
        values = shape.unpack_from(data, start)
        dims = values[:rank]
        if flags & 1:
            unlimited = (1 << (8 * self.sizeof_size)) - 1
            if any(m != unlimited and d > m for d, m in zip(dims, values[rank:])):
                raise Unreadable("a dimension above its maximum")
        return dims

    def element(self, header: Header) -> tuple[int, int] | None:
        """The class and size of the datatype message of ``header`` (None without
        one, or when it is shared)."""
        found = header.messages.get(_DATATYPE)
        if found is None or found[1] < 8:
            return None
        pos = found[0]
        return self.map[pos] & 0x0F, _U32.unpack_from(self.map, pos + 4)[0]

    def mappings(self, header: Header, ndim: int) -> Mappings | None:
        """The mappings of the virtual dataset of rank ``ndim`` whose header is
        ``header``, if they are of the form described in the module; None otherwise
        (no virtual layout, another encoding, lengths that disagree with the bytes)."""
        blob = self.mapping_list(header)
        if blob is None:
            return None
        if not blob:
            return Mappings(set(), [], [])  # no mapping: every chunk the fill value
        return self._decode(blob, ndim)

    def mapping_list(self, header: Header) -> bytes | None:
        """The mapping list (the global heap object, its checksum last) of the virtual
        dataset whose header is ``header``; empty if it has no mappings, None if it is
        not a virtual dataset or its heap object cannot be found."""
        found = header.messages.get(_LAYOUT)
        sa = self.sizeof_addr
        if found is None or found[1] < 6 + sa:
            return None
        pos = found[0]
        data = self.map
        if data[pos] != 4 or data[pos + 1] != _LAYOUT_VIRTUAL:
            return None
        (address,) = self._addr.unpack_from(data, pos + 2)
        (index,) = _U32.unpack_from(data, pos + 2 + sa)
        if address == self.undefined:
            return b""
        try:
            objects = self._collections.get(address)
            if objects is None:
                objects = self._walked_collection(address) or self._collection(address)
                self._collections[address] = objects
        except Unreadable:
            return None
        where = objects.get(index)
        if where is None:
            return None
        return self.map[where[0] : where[0] + where[1]]

    def _walked_collection(self, address: int) -> _HeapCollection | None:
        """The collection at ``address`` as :func:`_heap_objects` walked it, if it did."""
        for walked in self._walked:
            found = walked.collection(address)
            if found is not None:
                return found
        return None

    def decode_mappings(self, blob: bytes, ndim: int) -> Mappings | None:
        """The mappings of the mapping list ``blob`` of a virtual dataset of rank
        ``ndim`` (see :meth:`mappings`; its checksum is not checked here)."""
        return self._decode(blob, ndim)

    def _collection(self, address: int) -> dict[int, tuple[int, int]]:
        """The objects of the global heap collection at ``address``."""
        prefix = 8 + self.sizeof_size  # "GCOL", version, 3 reserved bytes, size
        pos = self._at(address, prefix)
        data = self.map
        if data[pos : pos + 4] != b"GCOL":
            raise Unreadable(f"no global heap collection at {address}")
        (size,) = self._length.unpack_from(data, pos + 8)
        if not prefix <= size <= _MAX_BLOCK:
            raise Unreadable(f"a global heap collection of {size} bytes")
        end = self._at(address, size) + size
        entry = self._global.size  # index, reference count, reserved, object size
        last = end - entry
        unpack = self._global.unpack_from
        objects: dict[int, tuple[int, int]] = {}
        pos += prefix
        while pos <= last:
            number, length = unpack(data, pos)
            if number == 0:
                break  # the free space closes the collection
            pos += entry
            if pos + length > end:
                raise Unreadable(f"heap object {number} overruns its collection")
            objects[number] = (pos, length)
            pos += (length + 7) & ~7
        return objects

    def _decode(self, blob: bytes, ndim: int) -> Mappings | None:
        """The mapping list ``blob`` (see :meth:`mappings`)."""
        end = len(blob) - 4  # the checksum follows the entries
        sl = self.sizeof_size
        if end < 1 + sl or blob[0] not in (0, 1):
            return None
        version = blob[0]
        (count,) = self._length.unpack_from(blob, 1)
        pos = 1 + sl
        found = Mappings(set(), [], [])
        selection = _SELECTION.unpack_from
        for _ in range(count):
            if version == 1:
                if pos >= end or blob[pos] & 0x03:  # a name shared with an earlier entry
                    return None
                same_file = blob[pos] & 0x04
                pos += 1
            else:
                same_file = 0
            if same_file:
                file_name = b"."
            else:
                stop = blob.find(b"\0", pos, end)
                if stop < 0:
                    return None
                file_name, pos = blob[pos:stop], stop + 1
            stop = blob.find(b"\0", pos, end)
            if stop < 0:
                return None
            found.sources.add((file_name, blob[pos:stop]))
            pos = stop + 1
            for side in (found.source, found.virtual):
                if pos + 24 > end:
                    return None
                kind, form, _, length, rank, blocks = selection(blob, pos)
                if kind != _SEL_HYPERSLABS or form != 1 or rank != ndim:
                    return None
                if length != 8 + blocks * 8 * rank or pos + 16 + length > end:
                    return None
                side += struct.unpack_from(f"<{2 * rank * blocks}I", blob, pos + 24)
                pos += 16 + length
        return found if pos == end else None


def _name(link: tuple[str, int]) -> str:
    return link[0]


# Reading many objects at once --------------------------------------------------------
#
# The methods below read the headers of many objects with numpy, for the shapes h5vc
# writes (8-byte addresses and lengths); a row that is not of that shape, or whose
# bytes disagree with it, comes back None and is read one by one with the methods
# above (which read every shape, and raise where the bytes are damaged).

#: Entries of a symbol node read at once (HDF5 writes at most 2K = 32 by default).
_MANY_SYMBOLS = 64
#: Bytes of a link name read at once (a longer one is read one by one).
_NAME_WINDOW = 24
#: Dataset ranks read at once.
_MANY_RANK = 4
#: Messages walked at once before a header is read one by one.
_MANY_MESSAGES = 32
#: Bytes of a mapping list's first names read at once.
_NAMES_WINDOW = 256


class ManyDatasets(Record):
    """What the headers of many virtual datasets say, by row: whether the row was
    read (``ok``; else read it one by one), rank and dimensions (``(n, 4)``, the
    first ``rank`` used), datatype class and element size, and where the mapping
    list is (``heap``, ``index``; ``has_heap`` False: no mapping)."""

    ok: np.ndarray
    rank: np.ndarray
    dims: np.ndarray
    type_class: np.ndarray
    element_size: np.ndarray
    has_heap: np.ndarray
    heap: np.ndarray
    index: np.ndarray

    __slots__ = ("dims", "element_size", "has_heap", "heap", "index", "ok", "rank", "type_class")

    def __init__(
        self,
        ok: np.ndarray,
        rank: np.ndarray,
        dims: np.ndarray,
        type_class: np.ndarray,
        element_size: np.ndarray,
        has_heap: np.ndarray,
        heap: np.ndarray,
        index: np.ndarray,
    ) -> None:
        self.ok = ok
        self.rank = rank
        self.dims = dims
        self.type_class = type_class
        self.element_size = element_size
        self.has_heap = has_heap
        self.heap = heap
        self.index = index


class ManyMappings(Record):
    """Mapping lists of many virtual datasets of one rank, by row: whether the row
    was read (``ok``; else read it one by one with :meth:`FileBytes.mappings`); its
    one source (``names[source_name[i]]``, file and dataset as stored); and its
    blocks, rows ``first[i]:first[i] + count[i]`` of ``source`` and ``virtual``
    (``(n, 2 * rank)``: first and last coordinates of each block)."""

    ok: np.ndarray
    names: list[tuple[bytes, bytes]]
    source_name: np.ndarray
    first: np.ndarray
    count: np.ndarray
    source: np.ndarray
    virtual: np.ndarray

    __slots__ = ("count", "first", "names", "ok", "source", "source_name", "virtual")

    def __init__(
        self,
        ok: np.ndarray,
        names: list[tuple[bytes, bytes]],
        source_name: np.ndarray,
        first: np.ndarray,
        count: np.ndarray,
        source: np.ndarray,
        virtual: np.ndarray,
    ) -> None:
        self.ok = ok
        self.names = names
        self.source_name = source_name
        self.first = first
        self.count = count
        self.source = source
        self.virtual = virtual


def _field(rows: np.ndarray, at: int | np.ndarray, width: int) -> np.ndarray:
    """The little-endian unsigned integers of ``width`` bytes at byte ``at`` (one
    position, or one per row) of each row, as uint64."""
    if isinstance(at, np.ndarray):
        cols = at[:, None] + np.arange(width)
        raw = np.take_along_axis(rows, cols, axis=1)
    else:
        raw = rows[:, at : at + width]
    return np.ascontiguousarray(raw).view(f"<u{width}")[:, 0].astype(np.uint64)


class _Rows:
    """Bytes of the file at many offsets of the map."""

    def __init__(self, file_bytes: FileBytes):
        self.data = np.frombuffer(file_bytes.map, dtype=np.uint8)
        self.base = file_bytes.base
        self.size = file_bytes.size
        self._windows: dict[int, np.ndarray] = {}

    def _window(self, width: int) -> np.ndarray:
        """Every ``width`` consecutive bytes of the map, as the elements of a view (one
        ``width``-byte item at every offset: an element taken from it is one copy, not
        ``width`` lookups, several times faster than a row of a sliding window)."""
        found = self._windows.get(width)
        if found is None:
            found = self._windows[width] = np.ndarray(
                shape=(max(len(self.data) - width + 1, 0),),
                dtype=f"V{width}",
                buffer=self.data,
                strides=(1,),
            )
        return found

    def _rows(self, starts: np.ndarray, width: int) -> np.ndarray:
        """The ``width`` bytes at each offset of ``starts`` (all inside the map), as
        rows."""
        return self._window(width)[starts].view(np.uint8).reshape(-1, width)

    def at(self, addresses: np.ndarray, width: int, ok: np.ndarray) -> np.ndarray:
        """``width`` bytes at each HDF5 address (uint64); rows whose bytes run past the
        end of the file are cleared in ``ok`` (and read as the file's first bytes)."""
        if self.size < width:
            ok[:] = False
            return np.zeros((len(addresses), width), dtype=np.uint8)
        ok &= addresses <= np.uint64(self.size - width)
        start = np.where(ok, addresses, 0).astype(np.int64) + self.base
        return self._rows(start, width)

    def items(self, addresses: np.ndarray, dtype: np.dtype, ok: np.ndarray) -> np.ndarray:
        """The item of ``dtype`` (a record of fields) at each HDF5 address; rows cleared
        in ``ok`` as by :meth:`at`."""
        width = dtype.itemsize
        if self.size < width:
            ok[:] = False
            return np.zeros(len(addresses), dtype=dtype)
        ok &= addresses <= np.uint64(self.size - width)
        start = np.where(ok, addresses, 0).astype(np.int64) + self.base
        return self._window(width)[start].view(dtype)

    def offsets(self, starts: np.ndarray, width: int, ok: np.ndarray) -> np.ndarray:
        """As :meth:`at` for offsets in the map (int64)."""
        if len(self.data) < width:
            ok[:] = False
            return np.zeros((len(starts), width), dtype=np.uint8)
        ok &= (starts >= 0) & (starts + width <= len(self.data))
        return self._rows(np.where(ok, starts, 0), width)


def _unique(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of a 1-d array, sorted, and the position of each value among
    them: ``np.unique(values, return_inverse=True)`` without its check for masked
    arrays, whose first call imports ``numpy.ma`` (20-40 ms)."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    first = np.ones(len(values), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    inverse = np.empty(len(values), dtype=np.intp)
    inverse[order] = np.cumsum(first) - 1
    return ordered[first], inverse


def _is(rows: np.ndarray, signature: bytes) -> np.ndarray:
    return (rows[:, : len(signature)] == np.frombuffer(signature, dtype=np.uint8)).all(axis=1)


def _plain_sizes(file_bytes: FileBytes) -> bool:
    return file_bytes.sizeof_addr == file_bytes.sizeof_size == 8


#: Symbol nodes a group's B-tree leads to, above which they are read at once.
_FEW_NODES = 4
#: A symbol table entry's start (8-byte lengths and addresses): the name's offset in
#: the local heap, the object's address, the cache type.
_SYMBOL_ENTRY = np.dtype(
    {"names": ["offset", "target", "cache"], "formats": ["<u8", "<u8", "<u4"], "itemsize": 20}
)
#: An address (of 8 bytes: files of other sizes are read one object at a time).
_ADDRESS = np.dtype("<u8")
#: A version-1 header message's start: type, size and flags, then (a continuation
#: message's body) the address and length of the block it continues in.
_MESSAGE_START = np.dtype(
    {
        "names": ["kind", "size", "flags", "target", "extent"],
        "formats": ["<u2", "<u2", "u1", "<u8", "<u8"],
        "offsets": [0, 2, 4, 8, 16],
        "itemsize": 24,
    }
)


def _walk_many(
    file_bytes: FileBytes,
    rows: _Rows,
    addresses: list[int],
    kinds: tuple[int, ...],
    others: tuple[int, ...],
    every: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where the first unshared message of each of ``kinds`` is in the version-1
    headers at ``addresses`` (``(n, len(kinds))`` body addresses and lengths), and
    which rows were read: not those where a message of ``others`` comes first, nor
    those with two continuations in one block, or whose bytes disagree.  With
    ``every``, each header is walked to its end and its link messages are appended
    to ``every`` as ``(rows, body addresses, lengths)``."""
    n = len(addresses)
    size_of_file = np.uint64(file_bytes.size)
    where = np.asarray(addresses, dtype=np.uint64)
    ok = np.ones(n, dtype=bool)
    prefix = rows.at(where, 16, ok)
    ok &= prefix[:, 0] == 1
    n_messages = _field(prefix, 2, 2).astype(np.int64)
    pos = where + np.uint64(16)
    end = pos + _field(prefix, 8, 4)
    ok &= end <= size_of_file
    # The continuation block met in the current block, walked once it ends.
    next_pos = np.zeros(n, dtype=np.uint64)
    next_end = np.zeros(n, dtype=np.uint64)
    body = np.zeros((n, len(kinds)), dtype=np.uint64)
    length = np.zeros((n, len(kinds)), dtype=np.int64)  # size + 1 once found
    seen = np.zeros(n, dtype=np.int64)
    active = ok.copy()
    refused = np.asarray(others, dtype=np.uint64)
    for _ in range(_MANY_MESSAGES):
        move = np.flatnonzero(active & (pos >= end) & (next_end > 0))
        pos[move], end[move] = next_pos[move], next_end[move]
        next_end[move] = 0
        at = np.flatnonzero(active & (pos < end))
        active[:] = False
        if not len(at):
            break
        step_ok = np.ones(len(at), dtype=bool)
        message = rows.items(pos[at], _MESSAGE_START, step_ok)
        kind, size = message["kind"].astype(np.uint64), message["size"].astype(np.uint64)
        after = pos[at] + np.uint64(8) + size
        seen[at] += 1
        step_ok &= (
            (after <= end[at])
            & (size % np.uint64(8) == 0)
            & (seen[at] <= n_messages[at])
            & ~np.isin(kind, refused)
        )
        continued = step_ok & (kind == _CONTINUATION)
        target, extent = message["target"], message["extent"]
        fits = (
            (size >= 16)
            & (next_end[at] == 0)
            & (target <= size_of_file)
            & (extent <= size_of_file - np.minimum(target, size_of_file))
            & (extent > 0)
        )
        step_ok &= ~continued | fits
        continued &= step_ok
        next_pos[at[continued]] = target[continued]
        next_end[at[continued]] = target[continued] + extent[continued]
        for column, wanted in enumerate(kinds):
            hit = step_ok & (kind == wanted) & (message["flags"] & _SHARED == 0)
            hit &= length[at, column] == 0
            body[at[hit], column] = pos[at[hit]] + np.uint64(8)
            length[at[hit], column] = size[hit].astype(np.int64) + 1
        if every is not None:
            link = step_ok & (kind == _LINK)
            every.append((at[link], pos[at[link]] + np.uint64(8), size[link]))
        ok[at[~step_ok]] = False
        pos[at] = after
        active[at] = step_ok & (every is not None or ~(length[at] > 0).all(axis=1))
    else:  # headers of more messages than walked at once
        ok[np.flatnonzero(active & ((pos < end) | (next_end > 0)))] = False
    ok &= (length > 0).all(axis=1)
    return body, length - 1, ok


@_bytes_checked
def many_links(file_bytes: FileBytes, addresses: list[int]) -> list[list[tuple[str, int]] | None]:
    """:meth:`FileBytes.links` of the groups at ``addresses``, for groups whose header
    starts with a symbol table message and whose B-tree is one node; None for the
    others (and for any that is not a group)."""
    n = len(addresses)
    if not n or not _plain_sizes(file_bytes):
        return [None] * n
    rows = _Rows(file_bytes)
    undefined = np.uint64(file_bytes.undefined)
    body, length, ok = _walk_many(
        file_bytes, rows, addresses, (_SYMBOL_TABLE,), (_LINK_INFO, _LINK, _LAYOUT)
    )
    table = rows.at(body[:, 0], 16, ok)
    ok &= length[:, 0] >= 16
    btree, heap = _field(table, 0, 8), _field(table, 8, 8)
    local = rows.at(heap, 32, ok)
    ok &= _is(local, b"HEAP\0")
    heap_size, heap_data = _field(local, 8, 8), _field(local, 24, 8)
    ok &= (heap_data <= np.uint64(file_bytes.size)) & (
        heap_size <= np.uint64(file_bytes.size) - np.minimum(heap_data, np.uint64(file_bytes.size))
    )
    tree = rows.at(btree, 40, ok)
    ok &= _is(tree, b"TREE\0\0") & (_field(tree, 6, 2) == 1)
    node = _field(tree, 32, 8)
    symbols = rows.at(node, 8, ok)
    count = _field(symbols, 6, 2).astype(np.int64)
    ok &= _is(symbols, b"SNOD\1") & (count <= _MANY_SYMBOLS)
    count[~ok] = 0
    # One row per link: its group (row), and its entry in the symbol node.
    row = np.repeat(np.arange(n), count)
    number = np.arange(len(row)) - np.repeat(np.cumsum(count) - count, count)
    entry_ok = np.ones(len(row), dtype=bool)
    entries = rows.at(
        node[row] + np.uint64(8) + np.uint64(40) * number.astype(np.uint64), 24, entry_ok
    )
    offset, target = _field(entries, 0, 8), _field(entries, 8, 8)
    entry_ok &= (
        (_field(entries, 16, 4) != _CACHED_SOFT_LINK)
        & (target != undefined)
        & (target < np.uint64(file_bytes.size))
        & (offset < heap_size[row])
    )
    window = rows.at(heap_data[row] + np.minimum(offset, heap_size[row]), _NAME_WINDOW, entry_ok)
    inside = offset[:, None] + np.arange(_NAME_WINDOW, dtype=np.uint64) < heap_size[row][:, None]
    ends = (window == 0) & inside
    entry_ok &= ends.any(axis=1)
    ok[row[~entry_ok]] = False
    keep = ok[row]
    row, target, window, ends = row[keep], target[keep], window[keep], ends[keep]
    length = ends.argmax(axis=1)
    window[np.arange(_NAME_WINDOW) >= length[:, None]] = 0
    names, rank = _unique(np.ascontiguousarray(window).view(f"V{_NAME_WINDOW}")[:, 0])
    text = [bytes(name).rstrip(b"\0").decode() for name in names]
    return _grouped_links(n, ok, row, rank, text, target)


@_bytes_checked
def many_compact_links(
    file_bytes: FileBytes, addresses: list[int]
) -> list[list[tuple[str, int]] | None]:
    """:meth:`FileBytes.links` of the groups at ``addresses`` that keep their links
    as link messages in a version-1 header (compact storage), for link messages of
    hard links with names of one-byte length; None for the others (and for any
    object that is not such a group)."""
    n = len(addresses)
    if not n or not _plain_sizes(file_bytes):
        return [None] * n
    rows = _Rows(file_bytes)
    size_of_file = np.uint64(file_bytes.size)
    every: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    body, length, ok = _walk_many(
        file_bytes, rows, addresses, (_LINK_INFO,), (_SYMBOL_TABLE, _LAYOUT), every
    )
    # The link info message: version 0, flags, (creation order,) fractal heap address.
    info = rows.at(body[:, 0], 18, ok)
    flags = info[:, 1].astype(np.int64)
    heap_at = 2 + 8 * (flags & 1)
    ok &= (info[:, 0] == 0) & (flags & ~0x03 == 0) & (length[:, 0] >= heap_at + 8)
    ok &= _field(info, heap_at, 8) == undefined_of(file_bytes)  # compact storage
    nothing = np.zeros(0, dtype=np.uint64)
    row = np.concatenate([r for r, _, _ in every] + [np.zeros(0, dtype=np.int64)])
    at = np.concatenate([a for _, a, _ in every] + [nothing])
    size = np.concatenate([z for _, _, z in every] + [nothing]).astype(np.int64)
    # A link message: version 1, flags, (type,) (creation order,) (charset,) name
    # length, name, address.
    link_ok = np.ones(len(row), dtype=bool)
    head = rows.at(at, 12, link_ok)
    link_flags = head[:, 1].astype(np.int64)
    link_ok &= (head[:, 0] == 1) & (link_flags & ~0x1F == 0) & (link_flags & 0x03 == 0)
    typed = (link_flags >> 3) & 1
    link_ok &= (typed == 0) | (head[:, 2] == 0)  # a hard link
    length_at = 2 + typed + 8 * ((link_flags >> 2) & 1) + ((link_flags >> 4) & 1)
    name_size = np.take_along_axis(head, length_at[:, None], axis=1)[:, 0].astype(np.int64)
    name_at = length_at + 1
    link_ok &= (name_size > 0) & (name_size <= _NAME_WINDOW)
    link_ok &= size >= name_at + name_size + 8
    window = rows.at(at + name_at.astype(np.uint64), _NAME_WINDOW + 8, link_ok)
    # The address after the name (inside the window read: the same bytes).
    target_at = at + (name_at + np.minimum(name_size, _NAME_WINDOW)).astype(np.uint64)
    target = rows.items(target_at, _ADDRESS, np.ones(len(row), dtype=bool)).astype(np.uint64)
    link_ok &= target < size_of_file
    in_name = np.arange(_NAME_WINDOW) < name_size[:, None]
    link_ok &= ~((window[:, :_NAME_WINDOW] == 0) & in_name).any(axis=1)  # no NUL in a name
    ok[row[~link_ok]] = False
    keep = ok[row]
    row, window, target, name_size = row[keep], window[keep], target[keep], name_size[keep]
    window = window[:, :_NAME_WINDOW].copy()
    window[np.arange(_NAME_WINDOW) >= name_size[:, None]] = 0
    names, rank = _unique(np.ascontiguousarray(window).view(f"V{_NAME_WINDOW}")[:, 0])
    try:
        text = [bytes(name).rstrip(b"\0").decode() for name in names]
    except UnicodeDecodeError:
        return [None] * n
    return _grouped_links(n, ok, row, rank, text, target)


def _grouped_links(
    n: int,
    ok: np.ndarray,
    row: np.ndarray,
    rank: np.ndarray,
    text: list[str],
    target: np.ndarray,
) -> list[list[tuple[str, int]] | None]:
    """The links of ``n`` groups: link ``i`` (named ``text[rank[i]]``, to ``target[i]``)
    is group ``row[i]``'s; each group's by name (bytes order); None where not ``ok``."""
    order = np.lexsort((rank, row))  # by group, then name (bytes order)
    row = row[order]
    names = [text[i] for i in rank[order].tolist()]
    links = list(zip(names, target[order].tolist()))
    bounds = np.searchsorted(row, np.arange(n + 1)).tolist()
    return [
        links[bounds[i] : bounds[i + 1]] if good else None for i, good in enumerate(ok.tolist())
    ]


@_bytes_checked
def many_datasets(file_bytes: FileBytes, addresses: list[int]) -> ManyDatasets:
    """What the version-1 headers of the virtual datasets at ``addresses`` say, read
    up to their dataspace, datatype and layout messages; None for any other object
    (a group, a header continued before those messages, a rank above 4)."""
    if not addresses or not _plain_sizes(file_bytes):
        return many_datasets(file_bytes, [0])  # a row that is not read
    rows = _Rows(file_bytes)
    body, length, ok = _walk_many(
        file_bytes,
        rows,
        addresses,
        (_DATASPACE, _DATATYPE, _LAYOUT),
        (_SYMBOL_TABLE, _LINK_INFO, _LINK),
    )
    # The dataspace: version, rank, flags, (type), then the dimensions (and maxima).
    space = rows.at(body[:, 0], 8 + 16 * _MANY_RANK, ok)
    version, rank, flags = space[:, 0], space[:, 1].astype(np.int64), space[:, 2]
    ok &= ((version == 1) | ((version == 2) & (space[:, 3] < 2))) & (rank <= _MANY_RANK)
    start = np.where(version == 1, 8, 4)
    has_max = (flags & 1).astype(np.int64)
    ok &= length[:, 0] >= start + 8 * rank * (1 + has_max)
    dims = np.stack([_field(space, start + 8 * axis, 8) for axis in range(_MANY_RANK)], axis=1)
    below = np.minimum(rank, _MANY_RANK)
    maxima = np.stack(
        [_field(space, start + 8 * (below + axis), 8) for axis in range(_MANY_RANK)], axis=1
    )
    valid = np.arange(_MANY_RANK) < rank[:, None]
    over = valid & (has_max[:, None] == 1) & (maxima != undefined_of(file_bytes)) & (dims > maxima)
    ok &= ~over.any(axis=1)
    datatype = rows.at(body[:, 1], 8, ok)
    ok &= length[:, 1] >= 8
    layout = rows.at(body[:, 2], 14, ok)
    ok &= (length[:, 2] >= 14) & (layout[:, 0] == 4) & (layout[:, 1] == _LAYOUT_VIRTUAL)
    heap, index = _field(layout, 2, 8), _field(layout, 10, 4)
    no_heap = heap == undefined_of(file_bytes)
    return ManyDatasets(
        ok=ok,
        rank=rank,
        dims=dims,
        type_class=datatype[:, 0] & 0x0F,
        element_size=_field(datatype, 4, 4),
        has_heap=~no_heap,
        heap=heap,
        index=index,
    )


def undefined_of(file_bytes: FileBytes) -> np.uint64:
    return np.uint64(file_bytes.undefined)


@_bytes_checked
def many_mappings(
    file_bytes: FileBytes, heap: np.ndarray, index: np.ndarray, rank: int
) -> ManyMappings:
    """The mapping lists at global heap objects ``(heap[i], index[i])`` of virtual
    datasets of rank ``rank``, read at once where a list is of version 0 and every
    mapping reads one block of the same source into one block."""
    n = len(heap)
    rows = _Rows(file_bytes)
    ok, starts, sizes = _heap_objects(file_bytes, rows, heap, index)
    head = rows.offsets(starts, 9 + _NAMES_WINDOW, ok)
    count = _field(head, 1, 8)
    ok &= (head[:, 0] == 0) & (count >= 1) & (count <= np.uint64(1 << 32))
    # The two names of the first mapping: where the window's first two NULs are.
    inside = np.arange(_NAMES_WINDOW) < (sizes - 13)[:, None]
    nul = (head[:, 9:] == 0) & inside
    first = nul.argmax(axis=1)
    nul[np.arange(n), first] = False
    second = nul.argmax(axis=1)
    ok &= nul.any(axis=1) & (second > first)
    names = second + 1  # bytes of both names and their NULs
    entry = names + 2 * (24 + 8 * rank)
    count = count.astype(np.int64)
    # Lists of one block a selection have entries of one width; the others are walked.
    walked = ok & (sizes - 13 != count * entry) & (count <= _MANY_ENTRIES)
    ok &= sizes - 13 == count * entry
    selection = np.frombuffer(
        struct.pack("<6I", _SEL_HYPERSLABS, 1, 0, 8 + 8 * rank, rank, 1), dtype=np.uint8
    )
    source_name = np.zeros(n, dtype=np.int64)
    owners: list[np.ndarray] = []
    nothing = np.zeros((0, 2 * rank), dtype=np.int64)
    sources, virtuals = [nothing], [nothing]
    known: dict[bytes, int] = {}
    text: list[tuple[bytes, bytes]] = []

    def name_rows(rowset: np.ndarray, name_bytes: int) -> None:
        """Note the source names of the rows ``rowset`` (of ``name_bytes`` each)."""
        raw = np.ascontiguousarray(head[rowset, 9 : 9 + name_bytes]).view(f"V{name_bytes}")
        unique, inverse = _unique(raw[:, 0])
        for value in unique:
            key = bytes(value)
            if key not in known:
                known[key] = len(text)
                file_name, _, dataset_name = key[:-1].partition(b"\0")
                text.append((file_name, dataset_name))
        source_name[rowset] = np.asarray([known[bytes(value)] for value in unique])[inverse.ravel()]

    for name_bytes in _unique(names[ok])[0].tolist():
        rowset = np.flatnonzero(ok & (names == name_bytes))
        per = count[rowset]
        owner = np.repeat(rowset, per)
        number = np.arange(len(owner)) - np.repeat(np.cumsum(per) - per, per)
        width = name_bytes + 2 * (24 + 8 * rank)
        entry_ok = np.ones(len(owner), dtype=bool)
        entries = rows.offsets(starts[owner] + 9 + number * width, width, entry_ok)
        virtual_at = name_bytes + 24 + 8 * rank
        entry_ok &= (
            (entries[:, :name_bytes] == head[owner, 9 : 9 + name_bytes]).all(axis=1)
            & (entries[:, name_bytes : name_bytes + 24] == selection).all(axis=1)
            & (entries[:, virtual_at : virtual_at + 24] == selection).all(axis=1)
        )
        ok[owner[~entry_ok]] = False
        name_rows(rowset, name_bytes)
        owners.append(owner)
        sources.append(np.ascontiguousarray(entries[:, name_bytes + 24 : virtual_at]).view("<u4"))
        virtuals.append(np.ascontiguousarray(entries[:, virtual_at + 24 :]).view("<u4"))
    chosen = np.flatnonzero(walked)
    if len(chosen):
        good, owner, source, virtual = _walk_mappings(
            rows, head, starts, sizes, names, count, chosen, rank
        )
        ok[good] = True
        for name_bytes in _unique(names[good])[0].tolist():
            name_rows(good[names[good] == name_bytes], name_bytes)
        owners.append(owner)
        sources.append(source)
        virtuals.append(virtual)
    owner = np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64)
    order = np.argsort(owner, kind="stable")  # each row's blocks together, in order
    count[~ok] = 0
    starts_of = np.zeros(n, dtype=np.int64)
    taken = np.isin(owner[order], np.flatnonzero(ok))
    order = order[taken]
    kept = np.bincount(owner[order], minlength=n)
    starts_of[1:] = np.cumsum(kept)[:-1]
    return ManyMappings(
        ok=ok,
        names=text,
        source_name=source_name,
        first=starts_of,
        count=kept,
        source=np.concatenate(sources).astype(np.int64)[order],
        virtual=np.concatenate(virtuals).astype(np.int64)[order],
    )


#: Mappings of a list walked at once (:func:`_walk_mappings`; a longer list whose
#: selections are not all of one block is read one by one).
_MANY_ENTRIES = 64


def _walk_mappings(
    rows: _Rows,
    head: np.ndarray,
    starts: np.ndarray,
    sizes: np.ndarray,
    names: np.ndarray,
    count: np.ndarray,
    chosen: np.ndarray,
    rank: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The mapping lists at rows ``chosen`` of :func:`many_mappings` (version 0; their
    first ``names[i]`` bytes of names in ``head``), walked mapping by mapping, where
    each selection is a hyperslab of one or more blocks, every mapping names the
    first one's source, and the source and virtual selections of a list have as many
    blocks in all: the rows so read, and their blocks (owner row, source and virtual
    first and last coordinates, each row's in the list's order)."""
    m = len(chosen)
    pos = starts[chosen] + 9  # the first mapping
    end = starts[chosen] + sizes[chosen] - 4  # the checksum follows the mappings
    nb = names[chosen]
    left = count[chosen].copy()
    good = np.ones(m, dtype=bool)
    width = int(nb.max())
    first_names = head[chosen, 9 : 9 + width]
    outside = np.arange(width) >= nb[:, None]
    block = 8 * rank  # bytes of a block: first and last coordinates, 4 bytes each
    found: list[tuple[np.ndarray, ...]] = []
    active = np.arange(m)
    for _ in range(_MANY_ENTRIES):
        if not len(active):
            break
        at, k, e = pos[active], nb[active], end[active]
        step = at + k + 24 <= e
        same = rows.offsets(at, width, step)
        step &= ((same == first_names[active]) | outside[active]).all(axis=1)
        sides = []
        sel = at + k
        for _side in range(2):
            header = rows.offsets(sel, 24, step).view("<u4").astype(np.int64)
            blocks, length = header[:, 5], header[:, 3]
            step &= (
                (header[:, 0] == _SEL_HYPERSLABS)
                & (header[:, 1] == 1)
                & (header[:, 2] == 0)
                & (header[:, 4] == rank)
                & (blocks >= 1)
                & (length == 8 + block * blocks)
                & (sel + 16 + length <= e)
            )
            sides.append((sel + 24, blocks))
            sel = sel + 16 + length
        good[active[~step]] = False
        done = active[step]
        found.append((done, *(value[step] for side in sides for value in side)))
        pos[done] = sel[step]
        left[done] -= 1
        active = done[left[done] > 0]
    good[active] = False  # more mappings than walked (not met: counts are at most that)
    good &= pos == end
    if found:
        owner_of = np.concatenate([f[0] for f in found])
        source_at, source_n, virtual_at, virtual_n = (
            np.concatenate([f[i] for f in found]) for i in range(1, 5)
        )
    else:
        owner_of = source_at = source_n = virtual_at = virtual_n = np.zeros(0, np.int64)
    keep = good[owner_of]
    totals = np.bincount(owner_of[keep], source_n[keep], minlength=m)
    totals -= np.bincount(owner_of[keep], virtual_n[keep], minlength=m)
    good &= totals == 0  # a list of as many source blocks as virtual ones
    keep = good[owner_of]
    sides = []
    for at, n in ((source_at[keep], source_n[keep]), (virtual_at[keep], virtual_n[keep])):
        owner = np.repeat(owner_of[keep], n)
        number = np.arange(len(owner)) - np.repeat(np.cumsum(n) - n, n)
        block_ok = np.ones(len(owner), dtype=bool)
        blocks = rows.offsets(np.repeat(at, n) + number * block, block, block_ok)
        good[owner[~block_ok]] = False
        order = np.argsort(owner, kind="stable")  # each row's blocks in the list's order
        sides.append((owner[order], blocks.view("<u4")[order]))
    (owner, source), (_, virtual) = sides
    taken = good[owner]
    return chosen[good], chosen[owner[taken]], source[taken], virtual[taken]


#: Objects of a global heap collection walked at once (a collection holding more is
#: read one by one, by :meth:`FileBytes._collection`).
_MANY_HEAP_OBJECTS = 64


class _HeapCollection:
    """The objects of one global heap collection walked by :func:`_heap_objects`, as
    :meth:`FileBytes._collection` lists them (by index, the last of an index kept)."""

    __slots__ = ("_found", "_numbers", "_sizes", "_starts")

    def __init__(self, numbers: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> None:
        self._numbers, self._starts, self._sizes = numbers, starts, sizes
        self._found: dict[int, tuple[int, int]] | None = None

    def get(self, number: int) -> tuple[int, int] | None:
        found = self._found
        if found is None:
            found = self._found = dict(
                zip(self._numbers.tolist(), zip(self._starts.tolist(), self._sizes.tolist()))
            )
        return found.get(number)


class _WalkedHeaps:
    """Global heap collections walked at once: their addresses (sorted), and their
    objects (index, offset in the map, length), by collection in file order
    (collection ``k``'s are rows ``bounds[k]:bounds[k + 1]``)."""

    __slots__ = ("_keys", "_order", "addresses", "bounds", "lengths", "numbers", "starts")

    def __init__(
        self,
        addresses: np.ndarray,
        bounds: np.ndarray,
        numbers: np.ndarray,
        starts: np.ndarray,
        lengths: np.ndarray,
    ) -> None:
        self.addresses, self.bounds = addresses, bounds
        self.numbers, self.starts, self.lengths = numbers, starts, lengths
        collection = np.repeat(np.arange(len(addresses), dtype=np.int64), np.diff(bounds))
        keys = collection * (1 << 32) + numbers
        self._order = np.argsort(keys, kind="stable")
        self._keys = keys[self._order]

    def collection(self, address: int) -> _HeapCollection | None:
        k = int(np.searchsorted(self.addresses, address))
        if k == len(self.addresses) or int(self.addresses[k]) != address:
            return None
        a, b = self.bounds[k], self.bounds[k + 1]
        return _HeapCollection(self.numbers[a:b], self.starts[a:b], self.lengths[a:b])

    def find(
        self, heap: np.ndarray, index: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Which objects ``(heap[i], index[i])`` are in collections walked here, which
        of those were found (the last of an index in its collection, as a dict keeps
        it), and where they are (offset in the map, length)."""
        n = len(heap)
        starts = np.zeros(n, dtype=np.int64)
        sizes = np.zeros(n, dtype=np.int64)
        if not len(self.addresses):
            return np.zeros(n, dtype=bool), np.zeros(n, dtype=bool), starts, sizes
        k = np.minimum(np.searchsorted(self.addresses, heap), len(self.addresses) - 1)
        covered = self.addresses[k] == heap
        wanted = k.astype(np.int64) * (1 << 32) + index
        hit = np.searchsorted(self._keys, wanted, side="right") - 1
        found = covered & (hit >= 0)
        found[found] = self._keys[hit[found]] == wanted[found]
        chosen = self._order[hit[found]]
        starts[found], sizes[found] = self.starts[chosen], self.lengths[chosen]
        return covered, found, starts, sizes


def _words(file_bytes: FileBytes) -> np.ndarray:
    """The map as the little-endian 8-byte words at every byte offset (element ``i``
    is the word at offset ``i``)."""
    return np.ndarray(
        shape=(max(len(file_bytes.map) - 7, 0),),
        dtype="<u8",
        buffer=file_bytes.map,
        strides=(1,),
    )


def _heap_objects(
    file_bytes: FileBytes, rows: _Rows, heap: np.ndarray, index: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where the global heap objects ``(heap[i], index[i])`` are (offset in the map and
    length), and which were found: the collections not walked yet are walked at
    once (:func:`_walk_heaps`; ``file_bytes`` keeps them), the others looked up; those
    not walked are read one by one, as :meth:`FileBytes._collection` reads them."""
    n = len(heap)
    ok = np.zeros(n, dtype=bool)
    starts = np.zeros(n, dtype=np.int64)
    sizes = np.zeros(n, dtype=np.int64)
    if not n:
        return ok, starts, sizes
    heap = np.asarray(heap, dtype=np.uint64)
    index = np.asarray(index, dtype=np.int64)
    covered = np.zeros(n, dtype=bool)

    def look_up(table: _WalkedHeaps) -> None:
        inside, found, at, size = table.find(heap, index)
        inside &= ~covered
        covered[inside] = True
        ok[inside], starts[inside], sizes[inside] = found[inside], at[inside], size[inside]

    for table in file_bytes._walked:
        look_up(table)
    collections = file_bytes._collections
    addresses = _unique(heap[~covered])[0]
    addresses = addresses[[address not in collections for address in addresses.tolist()]]
    if len(addresses):
        table = _walk_heaps(file_bytes, rows, addresses)
        file_bytes._walked.append(table)
        look_up(table)
    for i in np.flatnonzero(~covered).tolist():  # read one by one
        where = collections[int(heap[i])].get(int(index[i]))
        if where is not None:
            ok[i] = True
            starts[i], sizes[i] = where
    return ok, starts, sizes


def _walk_heaps(file_bytes: FileBytes, rows: _Rows, addresses: np.ndarray) -> _WalkedHeaps:
    """The global heap collections at ``addresses`` (sorted, distinct) walked at once,
    object by object, up to :data:`_MANY_HEAP_OBJECTS` each; the others (more objects,
    or bytes that disagree) are read by :meth:`FileBytes._collection` into
    ``file_bytes._collections`` (empty where it raises)."""
    m = len(addresses)
    readable = np.ones(m, dtype=bool)
    if _plain_sizes(file_bytes) and len(file_bytes.map) >= 16:
        head = rows.at(addresses, 16, readable)  # "GCOL", version, reserved, size
        size = _field(head, 8, 8)
        size_of_file = np.uint64(file_bytes.size)
        readable &= (
            _is(head, b"GCOL")
            & (size >= np.uint64(16))
            & (size <= np.uint64(_MAX_BLOCK))
            & (size <= size_of_file - np.minimum(addresses, size_of_file))
        )
    else:  # left to FileBytes._collection
        readable[:] = False
        size = np.zeros(m, dtype=np.uint64)
    walk = np.flatnonzero(readable)
    first = addresses[walk].astype(np.int64) + file_bytes.base
    end = first + size[walk].astype(np.int64)
    pos, last = first + 16, end - 16  # an object's start; the last one it may be at
    words = _words(file_bytes)
    keep = pos <= last
    walk, pos, end = walk[keep], pos[keep], end[keep]
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for _ in range(_MANY_HEAP_OBJECTS):
        if not len(walk):
            break
        number = words[pos] & np.uint64(0xFFFF)
        length = words[pos + 8]
        body = pos + 16
        going = number != 0  # index 0: the free space, which closes the collection
        over = going & (length > (end - body).astype(np.uint64))
        readable[walk[over]] = False  # an object overrunning its collection
        going &= ~over
        walk, end, body, length = (
            walk[going],
            end[going],
            body[going],
            length[going].astype(np.int64),
        )
        found.append((walk, number[going].astype(np.int64), body, length))
        pos = body + ((length + 7) & ~7)
        keep = pos <= end - 16
        walk, pos, end = walk[keep], pos[keep], end[keep]
    left = np.zeros(m, dtype=bool)
    left[walk] = True  # collections of more objects than walked at once
    collections = file_bytes._collections
    for address in addresses[left | ~readable].tolist():
        try:
            collections[address] = file_bytes._collection(address)
        except Unreadable:
            collections[address] = {}
    done = readable & ~left
    nothing = np.zeros(0, dtype=np.int64)
    owner = np.concatenate([f[0] for f in found] + [nothing])
    number = np.concatenate([f[1] for f in found] + [nothing])
    body = np.concatenate([f[2] for f in found] + [nothing])
    length = np.concatenate([f[3] for f in found] + [nothing])
    keep = done[owner]
    owner, number, body, length = owner[keep], number[keep], body[keep], length[keep]
    order = np.argsort(owner, kind="stable")  # by collection, then in the file
    owner, number, body, length = owner[order], number[order], body[order], length[order]
    walked = np.flatnonzero(done)
    bounds = np.asarray(np.searchsorted(owner, np.append(walked, m)), dtype=np.int64)
    bounds[-1] = len(owner)
    return _WalkedHeaps(addresses[walked], bounds, number, body, length)


#: A stored reference to a variable-length value (8-byte addresses): its length, and
#: the global heap collection and index of the object holding it.
_VLEN_REFERENCE = np.dtype([("length", "<u4"), ("heap", "<u8"), ("index", "<u4")])


def vlen_strings(file_bytes: FileBytes, references: bytes, n: int) -> list[str] | None:
    """The ``n`` variable-length UTF-8 strings whose stored references (a dataset's
    elements as stored) start ``references``, read from the global heap; None where
    a reference is not of the form read here (8-byte addresses), its object is not
    found, is not of its length or is not UTF-8."""
    if not _plain_sizes(file_bytes) or len(references) < _VLEN_REFERENCE.itemsize * n:
        return None
    found = np.frombuffer(references, dtype=_VLEN_REFERENCE, count=n)
    try:
        ok, starts, sizes = _heap_objects(
            file_bytes, _Rows(file_bytes), found["heap"], found["index"]
        )
    except (IndexError, ValueError, OverflowError, struct.error, Unreadable):
        return None
    if not ok.all() or (sizes != found["length"]).any():
        return None
    data = file_bytes.map
    try:
        return [data[a : a + b].decode() for a, b in zip(starts.tolist(), sizes.tolist())]
    except UnicodeDecodeError:
        return None
