"""Reading object headers from the file's bytes, before or instead of HDF5.

HDF5 trusts some fields of a dataset's object header: a damaged fill-value size, a
datatype whose precision exceeds its size or a nonsense chunk layout can crash the
process inside HDF5 when the dataset is opened or its fill value read, which no
Python code can catch.  :func:`check_dataset_header` reads the header's bytes with a
positioned read before the dataset is opened the first time and raises
:class:`~h5vc.errors.CorruptDataError` when the messages HDF5 would decode from them
are inconsistent.

:func:`stored_messages` and :func:`object_messages` hand the raw messages of a header
to the readers that decode what they point to from the file's bytes: a virtual
dataset's mapping list (:mod:`h5vc.hdf5.mappings`) and a chunk index
(:mod:`h5vc.hdf5.btree`). They answer only for files opened read-only, whose bytes
are what HDF5 reads.

Only version-1 object headers (HDF5's default, without a checksum) are checked
here: their message list, and in it the dataspace, datatype, fill-value and layout
messages.  A version-2 header (``OHDR``) carries a checksum that HDF5 verifies
before decoding anything, so a damaged one is reported by HDF5 as damage.
:func:`checked_messages` (the ``raw_data`` of a chunk store, whose header is version
2 in a small store) also reads version-2 headers, each block's checksum verified
first (:func:`walk_messages_v2`).  Files HDF5 does not read through an OS file
descriptor (the core driver, a remote file) are not checked.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from typing import Protocol

import h5py

import h5vc.config as config
from h5vc.errors import CorruptDataError
from h5vc.hdf5.clib import lookup3
from h5vc.remote import stream_descriptor

__all__ = [
    "DATASPACE",
    "FILL",
    "LAYOUT",
    "PIPELINE",
    "HeaderDamage",
    "PositionedReader",
    "Record",
    "StoredHeader",
    "check_dataset_header",
    "check_header_bytes",
    "checked_messages",
    "checksum",
    "checksum_python",
    "chunk_dims",
    "dataspace_dims",
    "file_descriptor",
    "fill_value",
    "object_messages",
    "same_datatype",
    "stored_messages",
    "stored_messages_at",
    "trust_dataset_header",
    "walk_messages",
    "walk_messages_v2",
]

#: Bytes read at first: the whole header of a usual chunk store (256 bytes of
#: messages after the 16-byte prefix), so one read is enough.
FIRST_READ = config.HEADER_FIRST_READ

#: A version-1 header chunk larger than this is not a chunk store's (it would hold
#: thousands of attributes): damage.
MAX_CHUNK_BYTES = 1 << 20

_NIL, _DATASPACE, _DATATYPE, _FILL_OLD, _FILL, _LAYOUT, _PIPELINE, _CONTINUATION = (
    0x0000,
    0x0001,
    0x0003,
    0x0004,
    0x0005,
    0x0008,
    0x000B,
    0x0010,
)

#: Types of the dataspace, datatype, layout and filter pipeline messages.
DATASPACE, DATATYPE, FILL, LAYOUT, PIPELINE = _DATASPACE, _DATATYPE, _FILL, _LAYOUT, _PIPELINE

#: Message flag bit: the message is shared (stored elsewhere, referenced here).
_SHARED = 0x02


#: (file number, header address) of the headers checked, or written, while their file
#: is open: HDF5 may hold a newer header in its metadata cache than the file does.
_KNOWN: set[tuple[object, int]] = set()

#: File number -> what :func:`_file_layout` found for that open file.
_FILES: dict[object, tuple[int, int, int, int] | tuple[()]] = {}

#: File number -> whether that open file is open read-only.
_READ_ONLY: dict[object, bool] = {}


class ByteSource(Protocol):
    """The bytes of a file as HDF5 sees them, where it reads the file through a Python
    file object rather than an OS file descriptor (a writable file's journal)."""

    @property
    def size(self) -> int: ...

    def pread(self, nbytes: int, offset: int) -> bytes: ...


#: Finders of the :class:`ByteSource` of an object's file (None where they know none),
#: registered by the layers that open files through Python file objects: the headers
#: of such files are checked through them (:func:`check_dataset_header`).
BYTE_SOURCES: list[Callable[[h5py.HLObject], ByteSource | None]] = []


class Record:
    """A plain record of named fields (its ``__slots__``), shown by name and value.

    The records of the read path are written out by hand rather than made with
    :mod:`dataclasses`, which compiles each class's methods when its module is
    imported (a millisecond or two a class, paid by every process's first read)."""

    __slots__: tuple[str, ...] = ()

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"


class HeaderDamage(Exception):
    """What is wrong with a header's bytes (turned into CorruptDataError)."""


class _Header(Record):
    """What the messages of one header say, as far as they were decoded."""

    rank: int | None
    element_size: int | None
    fill_sizes: list[int]
    chunk_element_size: int | None

    __slots__ = ("chunk_element_size", "element_size", "fill_sizes", "rank")

    def __init__(
        self,
        rank: int | None = None,
        element_size: int | None = None,
        fill_sizes: list[int] | None = None,
        chunk_element_size: int | None = None,
    ) -> None:
        self.rank = rank
        self.element_size = element_size
        self.fill_sizes = [] if fill_sizes is None else fill_sizes
        self.chunk_element_size = chunk_element_size


def check_dataset_header(group: h5py.Group, name: str) -> None:
    """Raise :class:`CorruptDataError` if the object header of dataset ``group[name]``
    is damaged in a way HDF5 would not survive decoding.

    The header is found through the link (which does not open the object) and read
    with positioned reads of the file, once per header while the file is open (and
    not at all for one written while it is open, see :func:`trust_dataset_header`).
    Does nothing for a link that is not a hard link, or a file without an OS file
    descriptor.
    """
    _check(group, name, _key(group, name))


def checked_messages(group: h5py.Group, name: str, kinds: frozenset[int]) -> StoredHeader | None:
    """:func:`check_dataset_header`, then :func:`stored_messages`, of ``group[name]``
    (its link looked up once)."""
    if not _read_only(group, group.id.fileno):
        check_dataset_header(group, name)
        return None
    key = _key(group, name)
    _check(group, name, key)
    if key is None:
        return None
    return _stored(group, key, kinds, f"{group.name.rstrip('/')}/{name}", version_2=True)


def _check(group: h5py.Group, name: str, key: tuple[object, int] | None) -> None:
    if key is None or key in _KNOWN:
        return
    where = _where(group, key[0])
    if where:
        fd, base, sizeof_addr, sizeof_size = where
        reader = PositionedReader(fd, base)
    else:
        found = _source_reader(group)
        if found is None:
            return
        reader, sizeof_addr, sizeof_size = found
    try:
        check_header_bytes(reader, key[1], sizeof_addr, sizeof_size)
    except HeaderDamage as damage:
        raise CorruptDataError(
            f"The object header of {group.name.rstrip('/')}/{name} in {group.file.filename!r} "
            f"is damaged and cannot be read: {damage}. Run h5vc.verify on the file; "
            f"restore it from a copy if it was written."
        ) from None
    _KNOWN.add(key)


def _source_reader(obj: h5py.HLObject) -> tuple[PositionedReader, int, int] | None:
    """A reader of the file of ``obj`` through its :class:`ByteSource`, and its sizes
    of addresses and lengths; None where no finder knows one."""
    for finder in BYTE_SOURCES:
        source = finder(obj)
        if source is not None:
            plist = h5py.h5i.get_file_id(obj.id).get_create_plist()
            sizeof_addr, sizeof_size = plist.get_sizes()
            reader = PositionedReader(-1, int(plist.get_userblock()), source=source)
            return reader, int(sizeof_addr), int(sizeof_size)
    return None


def _where(obj: h5py.HLObject, fileno: object) -> tuple[int, int, int, int] | tuple[()]:
    """:func:`_file_layout` of the file of ``obj`` (number ``fileno``), found once."""
    where = _FILES.get(fileno)
    if where is None:
        where = _FILES[fileno] = _file_layout(obj.file)
    return where


def _read_only(obj: h5py.HLObject, fileno: object) -> bool:
    """Whether the file of ``obj`` (number ``fileno``) is open read-only."""
    read_only = _READ_ONLY.get(fileno)
    if read_only is None:
        intent = h5py.h5i.get_file_id(obj.id).get_intent()
        read_only = _READ_ONLY[fileno] = intent == h5py.h5f.ACC_RDONLY
    return read_only


def file_descriptor(file: h5py.File) -> int | None:
    """The OS file descriptor HDF5 reads ``file`` through, if it has one."""
    try:
        # A local file opened by h5vc.remote.open_private, found by its file number
        # first: HDF5 copies a Python driver's access list (tens of microseconds) to
        # name the driver.
        fd = stream_descriptor(file)
        if fd is not None:
            return fd
        # The driver's id, compared directly (h5py's File.driver builds a table per call).
        driver = file.id.get_access_plist().get_driver()
        if driver != h5py.h5fd.SEC2:  # a Python stream h5vc did not open, or another driver
            return None
        handle = file.id.get_vfd_handle()
    except Exception:
        return None
    return handle if isinstance(handle, int) and handle >= 0 else None


def _file_layout(file: h5py.File) -> tuple[int, int, int, int] | tuple[()]:
    """(descriptor, base address, size of addresses, size of lengths) of an open file;
    empty if HDF5 does not read it through an OS file descriptor."""
    fd = file_descriptor(file)
    if fd is None:
        return ()
    plist = file.id.get_create_plist()
    sizeof_addr, sizeof_size = plist.get_sizes()
    return fd, int(plist.get_userblock()), int(sizeof_addr), int(sizeof_size)


def trust_dataset_header(group: h5py.Group, name: str) -> None:
    """``group[name]`` was just created: HDF5 may not have written its header to the
    file yet, so :func:`check_dataset_header` must not read it while the file is open."""
    key = _key(group, name)
    if key is not None:
        _KNOWN.add(key)


class StoredHeader(Record):
    """Messages of an object header as the file holds them, and how to read further."""

    reader: PositionedReader
    sizeof_addr: int
    sizeof_size: int
    #: The first unshared message of each type asked for that the header holds.
    messages: dict[int, bytes]

    __slots__ = ("messages", "reader", "sizeof_addr", "sizeof_size")

    def __init__(
        self,
        reader: PositionedReader,
        sizeof_addr: int,
        sizeof_size: int,
        messages: dict[int, bytes],
    ) -> None:
        self.reader = reader
        self.sizeof_addr = sizeof_addr
        self.sizeof_size = sizeof_size
        self.messages = messages


def stored_messages(group: h5py.Group, name: str, kinds: frozenset[int]) -> StoredHeader | None:
    """The messages of types ``kinds`` in the object header of ``group[name]``, read
    from the file's bytes without opening the object.

    Only for a file opened read-only, whose bytes are what HDF5 reads (a file open for
    writing may hold newer metadata in HDF5's cache). None when the header cannot be
    read this way: a file open for writing or without an OS file descriptor, a link
    that is not a hard link, a version-2 header. Raises :class:`CorruptDataError` if
    the header's message list is damaged.
    """
    if not _read_only(group, group.id.fileno):
        return None  # asked first: a file open for writing needs no link lookups
    key = _key(group, name)
    if key is None:
        return None
    return _stored(group, key, kinds, f"{group.name.rstrip('/')}/{name}")


def stored_messages_at(
    group: h5py.Group, address: int, kinds: frozenset[int], where: str
) -> StoredHeader | None:
    """:func:`stored_messages` of the object whose header is at ``address`` in the file
    of ``group`` (known from a link to it); ``where`` names it in error messages."""
    return _stored(group, (group.id.fileno, address), kinds, where)


def object_messages(obj: h5py.HLObject, kinds: frozenset[int]) -> StoredHeader | None:
    """:func:`stored_messages` of the open object ``obj``."""
    if not _read_only(obj, obj.id.fileno):
        return None
    key = (obj.id.fileno, _address(obj))
    return _stored(obj, key, kinds, obj.name or "an anonymous object")


def _address(obj: h5py.HLObject) -> int:
    """The header address of ``obj``, from a link to it: ``H5Oget_info`` also counts
    the attributes, which costs 1 to 5 ms the first time for a chunk store."""
    path = h5py.h5i.get_name(obj.id)
    parent, _, name = (path or b"").rpartition(b"/")
    if name:
        group = h5py.h5g.open(h5py.h5i.get_file_id(obj.id), parent or b"/")
        info = group.links.get_info(name)
        if info.type == h5py.h5l.TYPE_HARD:
            return int(info.u)
    return int(h5py.h5o.get_info(obj.id).addr)


def _stored(
    obj: h5py.HLObject,
    key: tuple[object, int],
    kinds: frozenset[int],
    where: str,
    *,
    version_2: bool = False,
) -> StoredHeader | None:
    if not _read_only(obj, key[0]):
        return None
    layout = _where(obj, key[0])
    if not layout:
        return None
    fd, base, sizeof_addr, sizeof_size = layout
    reader = PositionedReader(fd, base)
    found: dict[int, bytes] = {}

    def visit(kind: int, flags: int, body: bytes) -> None:
        if kind in kinds and kind not in found and not flags & _SHARED:
            found[kind] = body

    try:
        walked = walk_messages(
            reader, key[1], sizeof_addr, sizeof_size, visit, lambda: len(found) == len(kinds)
        )
        if not walked and version_2:
            walked = walk_messages_v2(reader, key[1], sizeof_addr, sizeof_size, visit)
    except HeaderDamage as damage:
        raise CorruptDataError(
            f"The object header of {where} in {obj.file.filename!r} is damaged and cannot "
            f"be read: {damage}. Run h5vc.verify on the file; restore it from a copy if it "
            f"was written."
        ) from None
    return StoredHeader(reader, sizeof_addr, sizeof_size, found) if walked else None


def dataspace_dims(body: bytes, sizeof_size: int) -> tuple[int, ...]:
    """The current dimensions a dataspace message gives (its sizes checked)."""
    rank = _dataspace(body, sizeof_size)
    start = 8 if body[0] == 1 else 4
    return tuple(
        int.from_bytes(body[start + i * sizeof_size : start + (i + 1) * sizeof_size], "little")
        for i in range(rank)
    )


def _key(group: h5py.Group, name: str) -> tuple[object, int] | None:
    """(file number, header address) of the hard link ``group[name]``, if it is one."""
    if not group.id.links.exists(name.encode()):
        return None  # the caller reports the missing dataset
    info = group.id.links.get_info(name.encode())
    if info.type != h5py.h5l.TYPE_HARD:
        return None
    return group.id.fileno, int(info.u)


class PositionedReader:
    """Positioned reads of the file at HDF5 addresses (relative to the base address)."""

    def __init__(self, fd: int, base: int, *, source: ByteSource | None = None):
        self.fd = fd
        self.base = base
        #: Where the bytes come from when the file has no descriptor HDF5 reads through.
        self.source = source
        self.size = source.size if source is not None else os.fstat(fd).st_size

    def read(self, address: int, nbytes: int) -> bytes:
        """``nbytes`` at ``address``: fewer only at the end of the file."""
        start = self.base + address
        if address < 0 or start >= self.size:
            raise HeaderDamage(f"address {address} lies beyond the end of the file")
        if self.source is not None:
            return self.source.pread(min(nbytes, self.size - start), start)
        return os.pread(self.fd, min(nbytes, self.size - start), start)

    def within(self, address: int, nbytes: int) -> bool:
        return address >= 0 and self.base + address + nbytes <= self.size


def checksum(data: bytes) -> int:
    """HDF5's checksum of metadata (Bob Jenkins' lookup3 ``hashlittle``, initial value
    0), as HDF5 stores it after a version-2 header's blocks and a virtual dataset's
    mapping list: HDF5's own function (:func:`h5vc.hdf5.clib.lookup3`), or the same
    in Python where that library cannot be found."""
    compiled = lookup3()
    if compiled is not None:
        return compiled(data if isinstance(data, bytes) else bytes(data))
    return checksum_python(data)


def checksum_python(data: bytes) -> int:
    """:func:`checksum` in Python (about 1 us per 12 bytes)."""
    mask = 0xFFFFFFFF

    def rot(x: int, k: int) -> int:
        return ((x << k) | (x >> (32 - k))) & mask

    length = len(data)
    a = b = c = (0xDEADBEEF + length) & mask
    if not length:
        return c
    padded = bytes(data) + bytes(-length % 12)
    last = (length - 1) // 12  # the last block (1 to 12 bytes) gets the final mix
    for block in range(last):
        x, y, z = struct.unpack_from("<3I", padded, 12 * block)
        a, b, c = (a + x) & mask, (b + y) & mask, (c + z) & mask
        a = (a - c) & mask
        a ^= rot(c, 4)
        c = (c + b) & mask
        b = (b - a) & mask
        b ^= rot(a, 6)
        a = (a + c) & mask
        c = (c - b) & mask
        c ^= rot(b, 8)
        b = (b + a) & mask
        a = (a - c) & mask
        a ^= rot(c, 16)
        c = (c + b) & mask
        b = (b - a) & mask
        b ^= rot(a, 19)
        a = (a + c) & mask
        c = (c - b) & mask
        c ^= rot(b, 4)
        b = (b + a) & mask
    x, y, z = struct.unpack_from("<3I", padded, 12 * last)
    a, b, c = (a + x) & mask, (b + y) & mask, (c + z) & mask
    c ^= b
    c = (c - rot(b, 14)) & mask
    a ^= c
    a = (a - rot(c, 11)) & mask
    b ^= a
    b = (b - rot(a, 25)) & mask
    c ^= b
    c = (c - rot(b, 16)) & mask
    a ^= c
    a = (a - rot(c, 4)) & mask
    b ^= a
    b = (b - rot(a, 14)) & mask
    c ^= b
    c = (c - rot(b, 24)) & mask
    return c


def walk_messages_v2(
    reader: PositionedReader,
    address: int,
    sizeof_addr: int,
    sizeof_size: int,
    visit: Callable[[int, int, bytes], None],
) -> bool:
    """Call ``visit(type, flags, body)`` on every message of the version-2 header
    (``OHDR``) at ``address`` and its continuation blocks (``OCHK``), each block's
    checksum verified first (HDF5's lookup3, as HDF5 verifies it); False, visiting
    nothing, for a header of another version. Raises :class:`HeaderDamage` where a
    checksum or the message list is wrong."""
    head = reader.read(address, FIRST_READ)
    if head[:4] != b"OHDR":
        return False
    if len(head) < 7 or head[4] != 2:
        raise HeaderDamage("a version-2 object header of another version")
    flags = head[5]
    pos = 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
    width = 1 << (flags & 0x03)
    if len(head) < pos + width:
        raise HeaderDamage("the header is cut off by the end of the file")
    size = int.from_bytes(head[pos : pos + width], "little")
    start = pos + width
    if size > MAX_CHUNK_BYTES or not reader.within(address, start + size + 4):
        raise HeaderDamage(f"a header of {size} bytes does not fit in the file")
    if len(head) < start + size + 4:
        head = reader.read(address, start + size + 4)
    blocks = [(head[: start + size + 4], start, address)]
    message_head = 6 if flags & 0x04 else 4  # creation order tracked: 2 bytes more
    visited = 0
    while blocks:
        visited += 1
        if visited > 4096:
            raise HeaderDamage("a header of more than 4096 blocks")
        block, pos, at = blocks.pop(0)
        stored = int.from_bytes(block[-4:], "little")
        if checksum(block[:-4]) != stored:
            raise HeaderDamage(f"the checksum of the header block at {at} does not match")
        end = len(block) - 4
        while end - pos >= message_head:
            kind, length, message_flags = block[pos], *struct.unpack_from("<HB", block, pos + 1)
            body = block[pos + message_head : pos + message_head + length]
            if len(body) < length or pos + message_head + length > end:
                raise HeaderDamage(f"a message of {length} bytes does not fit its block")
            if kind == _CONTINUATION:
                target, chunk = _continuation(body, sizeof_addr, sizeof_size)
                if not 8 <= chunk <= MAX_CHUNK_BYTES or not reader.within(target, chunk):
                    raise HeaderDamage(f"a continuation block of {chunk} bytes at {target}")
                data = reader.read(target, chunk)
                if data[:4] != b"OCHK":
                    raise HeaderDamage(f"no continuation block at {target}")
                blocks.append((data, 4, target))
            elif kind != _NIL:
                visit(kind, message_flags, body)
            pos += message_head + length
    return True


def check_header_bytes(
    reader: PositionedReader, address: int, sizeof_addr: int, sizeof_size: int
) -> None:
    """Raise :class:`HeaderDamage` if the header at ``address`` is inconsistent."""
    header = _Header()

    def visit(kind: int, flags: int, body: bytes) -> None:
        if not flags & _SHARED:
            _decode(kind, body, header, sizeof_addr, sizeof_size)

    if walk_messages(reader, address, sizeof_addr, sizeof_size, visit, lambda: _complete(header)):
        _cross_check(header)


def walk_messages(
    reader: PositionedReader,
    address: int,
    sizeof_addr: int,
    sizeof_size: int,
    visit: Callable[[int, int, bytes], None],
    done: Callable[[], bool],
) -> bool:
    """Call ``visit(type, flags, body)`` on the messages of the version-1 header at
    ``address``, block by block, following continuations, until ``done()`` after a
    block; raise :class:`HeaderDamage` where the message list itself is inconsistent.

    Returns False, visiting nothing, for a version-2 header (``OHDR``): HDF5 checks
    its checksum before decoding anything.
    """
    head = reader.read(address, FIRST_READ)
    if head[:4] == b"OHDR":
        return False
    if len(head) < 16:
        raise HeaderDamage("the header is cut off by the end of the file")
    version, n_messages, chunk_size = head[0], *struct.unpack_from("<H4xI", head, 2)
    if version != 1:
        raise HeaderDamage(f"expected object header version 1 or 2, got {version}")
    if chunk_size > MAX_CHUNK_BYTES or not reader.within(address + 16, chunk_size):
        raise HeaderDamage(f"a header of {chunk_size} bytes does not fit in the file")
    if len(head) < 16 + chunk_size:
        head = reader.read(address, 16 + chunk_size)
    blocks = [(head[16 : 16 + chunk_size], address + 16)]
    seen = 0
    while blocks:
        block, at = blocks.pop(0)
        pos = 0
        while pos < len(block):
            if len(block) - pos < 8:
                raise HeaderDamage(f"{len(block) - pos} stray bytes end the block at {at}")
            kind, size, flags = struct.unpack_from("<HHB", block, pos)
            body = block[pos + 8 : pos + 8 + size]
            if len(body) < size or size % 8:
                raise HeaderDamage(
                    f"message {seen} (type {kind:#06x}, {size} bytes) does not fit its block"
                )
            seen += 1
            if seen > n_messages:
                raise HeaderDamage(f"more messages than the {n_messages} the header counts")
            if kind == _CONTINUATION:
                target, length = _continuation(body, sizeof_addr, sizeof_size)
                if length > MAX_CHUNK_BYTES or not reader.within(target, length):
                    raise HeaderDamage(f"a continuation block of {length} bytes at {target}")
                if not done():
                    blocks.append((reader.read(target, length), target))
            else:
                visit(kind, flags, body)
            pos += 8 + size
        if done():
            break
    return True


def _complete(header: _Header) -> bool:
    return (
        header.rank is not None
        and header.element_size is not None
        and header.chunk_element_size is not None
    )


def _continuation(body: bytes, sizeof_addr: int, sizeof_size: int) -> tuple[int, int]:
    if len(body) < sizeof_addr + sizeof_size:
        raise HeaderDamage("a continuation message is too short")
    target = int.from_bytes(body[:sizeof_addr], "little")
    length = int.from_bytes(body[sizeof_addr : sizeof_addr + sizeof_size], "little")
    return target, length


def _decode(kind: int, body: bytes, header: _Header, sizeof_addr: int, sizeof_size: int) -> None:
    if kind == _DATASPACE:
        header.rank = _dataspace(body, sizeof_size)
    elif kind == _DATATYPE:
        header.element_size = _datatype(body)
    elif kind == _FILL:
        size = _fill(body)
        if size is not None:
            header.fill_sizes.append(size)
    elif kind == _FILL_OLD:
        if len(body) < 4:
            raise HeaderDamage("the old fill-value message is too short")
        size = int.from_bytes(body[:4], "little")
        if 4 + size > len(body):
            raise HeaderDamage(f"an old fill value of {size} bytes in a {len(body)}-byte message")
        if size:
            header.fill_sizes.append(size)
    elif kind == _LAYOUT:
        _layout(body, header, sizeof_addr, sizeof_size)


def same_datatype(first: bytes | None, second: bytes | None) -> bool:
    """Whether two datatype message bodies describe the same type: equal bytes, but
    for the zeros a version-1 header pads its messages with to a multiple of 8."""
    if first is None or second is None:
        return False
    short, long = sorted((first, second), key=len)
    return (
        long[: len(short)] == short and len(long) - len(short) < 8 and not any(long[len(short) :])
    )


def chunk_dims(body: bytes, sizeof_addr: int) -> tuple[int, ...] | None:
    """The chunk shape a chunked layout message (version 3 or 4) gives; None for
    another layout or a message too short to hold it."""
    if len(body) < 3 or body[0] not in (3, 4) or body[1] != 2:
        return None
    if body[0] == 3:  # dimensionality, the chunk index's address, 4-byte sizes
        dimensionality, start, width = body[2], 3 + sizeof_addr, 4
    elif len(body) < 5:
        return None
    else:  # flags, dimensionality, the sizes' width, the sizes
        dimensionality, start, width = body[3], 5, body[4]
    end = start + dimensionality * width
    if not 2 <= dimensionality <= 33 or not 1 <= width <= 8 or end > len(body):
        return None
    sizes = [
        int.from_bytes(body[start + i * width : start + (i + 1) * width], "little")
        for i in range(dimensionality)
    ]
    return tuple(sizes[:-1])  # the last is the element size


def _dataspace(body: bytes, sizeof_size: int) -> int:
    """The rank the dataspace message gives (its sizes checked)."""
    if len(body) < 4:
        raise HeaderDamage("the dataspace message is too short")
    version, rank, flags = body[0], body[1], body[2]
    if version not in (1, 2):
        raise HeaderDamage(f"dataspace message version {version}")
    if version == 2 and body[3] > 2:
        raise HeaderDamage(f"dataspace type {body[3]}")
    if rank > 32:
        raise HeaderDamage(f"a dataspace of rank {rank}")
    start = 8 if version == 1 else 4
    n = rank * sizeof_size
    has_max = bool(flags & 1)
    if start + n * (2 if has_max else 1) > len(body):
        raise HeaderDamage(f"a rank-{rank} dataspace in a {len(body)}-byte message")
    if has_max:
        unlimited = (1 << (8 * sizeof_size)) - 1
        for i in range(rank):
            at = start + i * sizeof_size
            dim = int.from_bytes(body[at : at + sizeof_size], "little")
            maximum = int.from_bytes(body[at + n : at + n + sizeof_size], "little")
            if maximum != unlimited and dim > maximum:
                raise HeaderDamage(f"dimension {i} is {dim}, above its maximum {maximum}")
    return rank


def _datatype(body: bytes) -> int:
    """The element size the datatype message gives (its bit fields checked)."""
    if len(body) < 8:
        raise HeaderDamage("the datatype message is too short")
    cls, version = body[0] & 0x0F, body[0] >> 4
    size = int.from_bytes(body[4:8], "little")
    if not 1 <= version <= 5 or cls > 11:
        raise HeaderDamage(f"datatype class {cls} version {version}")
    if size == 0:
        raise HeaderDamage("a datatype of size 0")
    if cls in (0, 1, 4):  # fixed-point, floating-point, bitfield: bit offset, precision
        need = 20 if cls == 1 else 12
        if len(body) < need:
            raise HeaderDamage(f"a {len(body)}-byte datatype message of class {cls}")
        offset, precision = struct.unpack_from("<HH", body, 8)
        if precision == 0 or offset + precision > 8 * size:
            raise HeaderDamage(f"{precision} bits at bit {offset} in a {size}-byte number type")
        if cls == 1:
            e_pos, e_size, m_pos, m_size = body[12:16]
            sign = body[2]
            if (
                e_size == 0
                or m_size == 0
                or e_pos + e_size > precision
                or m_pos + m_size > precision
                or sign >= precision
                or (e_pos < m_pos + m_size and m_pos < e_pos + e_size)
            ):
                raise HeaderDamage(
                    f"a floating-point type with exponent {e_size} bits at {e_pos}, "
                    f"mantissa {m_size} bits at {m_pos}, sign at {sign}, precision "
                    f"{precision} at {offset}"
                )
    return size


def fill_value(body: bytes) -> bytes | None:
    """The fill value a fill-value message (version 1 to 3) gives, as stored: ``b""``
    where none is defined (HDF5 then fills with zeros); None where the message says
    the fill value is undefined, or cannot be read."""
    if len(body) < 2:
        return None
    version = body[0]
    if version in (1, 2) and len(body) >= 4:
        present, start = version == 1 or bool(body[3]), 4
    elif version == 3:
        flags = body[1]
        if flags & 0x10:
            return None  # undefined: HDF5 leaves unmapped elements as they are
        present, start = bool(flags & 0x20), 2
    else:
        return None
    if not present:
        return b""
    if start + 4 > len(body):
        return None
    size = int.from_bytes(body[start : start + 4], "little")
    if start + 4 + size > len(body):
        return None
    return body[start + 4 : start + 4 + size]


def _fill(body: bytes) -> int | None:
    """The size of the fill value the message holds (None: it holds none)."""
    if len(body) < 2:
        raise HeaderDamage("the fill-value message is too short")
    version = body[0]
    if version in (1, 2):
        if len(body) < 4:
            raise HeaderDamage("the fill-value message is too short")
        alloc_time, write_time, defined = body[1], body[2], body[3]
        if not 1 <= alloc_time <= 3 or write_time > 2 or defined > 1:
            raise HeaderDamage(
                f"fill-value times {alloc_time}, {write_time} and defined flag {defined}"
            )
        present = version == 1 or defined
        start = 4
    elif version == 3:
        flags = body[1]
        if flags & 0xC0 or flags & 0x30 == 0x30 or flags & 0x0C == 0x0C:
            raise HeaderDamage(f"fill-value flags {flags:#04x}")
        present = bool(flags & 0x20)
        start = 2
    else:
        raise HeaderDamage(f"fill-value message version {version}")
    if not present:
        return None
    if start + 4 > len(body):
        raise HeaderDamage("the fill-value message is too short for its size")
    size = int.from_bytes(body[start : start + 4], "little")
    if start + 4 + size > len(body):
        raise HeaderDamage(f"a fill value of {size} bytes in a {len(body)}-byte message")
    return size or None


def _layout(body: bytes, header: _Header, sizeof_addr: int, sizeof_size: int) -> None:
    """Check a chunked layout message (a chunk store is chunked)."""
    if len(body) < 2:
        raise HeaderDamage("the layout message is too short")
    version, cls = body[0], body[1]
    if version not in (3, 4):
        raise HeaderDamage(f"layout message version {version}")
    if cls != 2:
        raise HeaderDamage(f"layout class {cls}, expected chunked (2)")
    if version == 3:
        if len(body) < 3:
            raise HeaderDamage("the layout message is too short")
        dimensionality = body[2]
        start, width = 3 + sizeof_addr, 4
    else:
        if len(body) < 5:
            raise HeaderDamage("the layout message is too short")
        flags, dimensionality, width = body[2], body[3], body[4]
        if flags & ~0x03 or not 1 <= width <= 8:
            raise HeaderDamage(f"layout flags {flags:#04x}, dimension width {width}")
        start = 5
    if not 2 <= dimensionality <= 33:
        raise HeaderDamage(f"chunk dimensionality {dimensionality}")
    end = start + dimensionality * width
    if end > len(body):
        raise HeaderDamage(f"{dimensionality} chunk sizes in a {len(body)}-byte message")
    sizes = [
        int.from_bytes(body[start + i * width : start + (i + 1) * width], "little")
        for i in range(dimensionality)
    ]
    if version == 4:
        _chunk_index(body, end, flags, sizeof_addr, sizeof_size)
    dims, element = sizes[:-1], sizes[-1]
    product = element
    for dim in dims:
        product *= dim
    if min(sizes) == 0 or product >= 1 << 32:
        raise HeaderDamage(f"chunk sizes {dims} of {element}-byte elements")
    if header.rank is not None and header.rank != len(dims):
        raise HeaderDamage(f"rank-{len(dims)} chunks of a rank-{header.rank} dataspace")
    header.rank = len(dims) if header.rank is None else header.rank
    header.chunk_element_size = element


def _chunk_index(body: bytes, at: int, flags: int, sizeof_addr: int, sizeof_size: int) -> None:
    """Check a version-4 layout's chunk-index type and its fields' length."""
    if at >= len(body):
        raise HeaderDamage("the layout message is too short for its chunk index")
    kind = body[at]
    extra = {1: 0, 2: 0, 3: 1, 4: 5, 5: 6}.get(kind)
    if extra is None:
        raise HeaderDamage(f"chunk index type {kind}")
    if kind == 1 and flags & 0x02:
        extra = sizeof_size + 4  # filtered single chunk: its size and filter mask
    if at + 1 + extra + sizeof_addr > len(body):
        raise HeaderDamage("the layout message is too short for its chunk index")


def _cross_check(header: _Header) -> None:
    """The messages agree: layout element size and fill values match the datatype."""
    if header.chunk_element_size is None:
        raise HeaderDamage("no chunked layout message")
    size = header.element_size
    if size is None:
        return  # a shared datatype: its size is not known here
    if header.chunk_element_size != size:
        raise HeaderDamage(
            f"chunks of {header.chunk_element_size}-byte elements, the datatype has {size}"
        )
    for value in header.fill_sizes:
        if value != size:
            raise HeaderDamage(f"a fill value of {value} bytes, the datatype has {size}")
