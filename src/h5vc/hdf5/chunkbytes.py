"""Where a chunk of an unfiltered chunked dataset lies, read from the file's bytes.

A small first read of a committed dataset (:mod:`h5vc.store.reading`) needs a few
chunks of its ``raw_data`` and nothing else: opening ``raw_data`` through HDF5 to ask
for them costs more than the read. :class:`ChunkLocator` finds a chunk's address
from the dataset's layout message and its chunk index in the file's bytes
(:class:`~h5vc.hdf5.filebytes.FileBytes`):

- a version-4 layout indexed by an extensible array (what small chunk stores use):
  the array's header (``EAHD``), index block (``EAIB``) and, for chunks past the
  index block's own elements, the data blocks the index block points to
  (``EADB``), each block's lookup3 checksum verified (a mismatch is
  :class:`~h5vc.errors.CorruptDataError`);
- a version-3 layout indexed by a version-1 B-tree (HDF5's default), walked from the
  root to the chunk's leaf entry, whose coordinates, stored size and filter mask must
  be what an unfiltered chunk of those coordinates has.

Anything else (other index types, paged data blocks, secondary blocks, a chunk not
allocated, bytes that do not decode) answers None: HDF5 then reads the dataset.
:func:`numeric_dtype` turns a datatype message of a native little-endian number into
its numpy dtype.

Only for files opened read-only, whose bytes are what HDF5 reads.
"""

from __future__ import annotations

import bisect
import functools
import math
import struct

import numpy as np

from h5vc.errors import CorruptDataError
from h5vc.hdf5.filebytes import FileBytes, Unreadable
from h5vc.hdf5.header import checksum

__all__ = ["ChunkLocator", "numeric_dtype"]

_LAYOUT_CHUNKED = 2
_INDEX_EARRAY = 4
_NODE_RAW_DATA = 1
#: B-tree levels deeper than this are damage.
_MAX_LEVEL = 32
#: The floating-point layouts numpy reads: size -> (precision, exponent location and
#: size, mantissa location and size, exponent bias, sign location).
_IEEE = {
    2: (16, 10, 5, 0, 10, 15, 15),
    4: (32, 23, 8, 0, 23, 127, 31),
    8: (64, 52, 11, 0, 52, 1023, 63),
}


def numeric_dtype(body: bytes) -> np.dtype | None:
    """The numpy dtype of a datatype message of a little-endian integer or IEEE
    float of 1 to 8 bytes, using all its bits; None for any other type."""
    if len(body) < 12:
        return None
    cls, flags, size = body[0] & 0x0F, body[1], int.from_bytes(body[4:8], "little")
    offset, precision = struct.unpack_from("<HH", body, 8)
    if offset or precision != 8 * size:
        return None
    if cls == 0:  # fixed-point: byte order, padding, sign
        if flags & 0x07 or size not in (1, 2, 4, 8):
            return None
        return np.dtype(f"<{'i' if flags & 0x08 else 'u'}{size}")
    if cls == 1 and size in _IEEE and len(body) >= 20:
        # Little-endian (bits 0 and 6 clear), no padding, implied leading 1 (bits 4-5).
        if flags & 0x4F or flags & 0x30 != 0x20:
            return None
        e_loc, e_size, m_loc, m_size = body[12:16]
        bias = int.from_bytes(body[16:20], "little")
        if (precision, e_loc, e_size, m_loc, m_size, bias, body[2]) != _IEEE[size]:
            return None
        return np.dtype(f"<f{size}")
    return None


@functools.cache
def _node_entry(dims: int) -> np.dtype:
    """An entry of a version-1 B-tree node of chunks of rank ``dims`` (the element
    size counted): its key (chunk size, filter mask, coordinates) and child address."""
    return np.dtype(
        [("size", "<u4"), ("mask", "<u4"), ("coords", "<u8", (dims,)), ("child", "<u8")]
    )


class ChunkLocator:
    """The addresses of the chunks of one chunked dataset (see the module), by their
    position along the first axis (its chunks span the other axes whole)."""

    def __init__(self, file_bytes: FileBytes, layout: bytes, where: str, filename: str):
        """``layout``: the dataset's layout message; ``where`` and ``filename`` name it
        in error messages. Raises :class:`Unreadable` for a layout read elsewhere."""
        self._bytes = file_bytes
        self._where = where
        self._filename = filename
        sa = file_bytes.sizeof_addr
        if len(layout) < 3 or layout[1] != _LAYOUT_CHUNKED or layout[0] not in (3, 4):
            raise Unreadable("not a chunked layout read here")
        self._addresses: dict[int, int] = {}
        self._earray: tuple[int, ...] | None = None
        #: Checked blocks of the index by address: extensible-array data blocks, and
        #: B-tree nodes as (level, first coordinates, children, sizes, masks).
        self._blocks: dict[int, bytes] = {}
        self._nodes: dict[int, tuple[int, list[int], list[int], list[int], list[int]]] = {}
        if layout[0] == 3:
            dimensionality = layout[2]
            if len(layout) < 3 + sa + 4 * dimensionality:
                raise Unreadable("a layout message too short")
            self._root = int.from_bytes(layout[3 : 3 + sa], "little")
            sizes = struct.unpack_from(f"<{dimensionality}I", layout, 3 + sa)
        else:
            flags, dimensionality, width = layout[2], layout[3], layout[4]
            at = 5 + dimensionality * width
            if flags or len(layout) < at + 6 + sa or layout[at] != _INDEX_EARRAY:
                raise Unreadable("a chunk index other than an extensible array")
            sizes = tuple(
                int.from_bytes(layout[5 + i * width : 5 + (i + 1) * width], "little")
                for i in range(dimensionality)
            )
            self._root = int.from_bytes(layout[at + 6 : at + 6 + sa], "little")
        self.chunks: tuple[int, ...] = tuple(sizes[:-1])
        self.element = sizes[-1]
        self.dimensionality = dimensionality
        self.layout_version = layout[0]
        self.nbytes = self.element * math.prod(self.chunks)

    def address(self, slot: int) -> int | None:
        """The address of the chunk at ``slot`` along the first axis (its bytes are
        :attr:`nbytes` long there); None where it is not found here."""
        found = self._addresses.get(slot)
        if found is None:
            try:
                if self.layout_version == 3:
                    found = self._btree(slot)
                else:
                    found = self._extensible(slot)
            except (Unreadable, struct.error, ValueError, IndexError):
                return None
            if found is None or not self._bytes.size >= found + self.nbytes > found:
                return None
            self._addresses[slot] = found
        return found

    def _damaged(self, what: str) -> CorruptDataError:
        return CorruptDataError(
            f"The chunk index of {self._where} in {self._filename!r} is damaged: {what}. "
            f"Run h5vc.verify on the file; restore it from a copy if it was written."
        )

    def _block(self, address: int, signature: bytes, size: int) -> bytes:
        """The ``size`` bytes of a checksummed block at ``address`` (checksum last)."""
        fb = self._bytes
        pos = fb._at(address, size)
        block = fb.map[pos : pos + size]
        if block[:4] != signature:
            raise Unreadable(f"no {signature.decode()} block at {address}")
        if checksum(block[:-4]) != int.from_bytes(block[-4:], "little"):
            raise self._damaged(f"the checksum of its {signature.decode()} block disagrees")
        return block

    def _extensible(self, slot: int) -> int | None:
        fb = self._bytes
        sa, sl = fb.sizeof_addr, fb.sizeof_size
        if self._earray is None:
            header = self._block(self._root, b"EAHD", 12 + 6 * sl + sa + 4)
            version, client, element, bits, index_elements, min_elements, min_pointers, page = (
                header[4:12]
            )
            if version != 0 or client != 0 or element != sa:
                raise Unreadable("an extensible array of filtered chunks")
            max_index = int.from_bytes(header[12 + 4 * sl : 12 + 5 * sl], "little")
            index_block = int.from_bytes(header[12 + 6 * sl : 12 + 6 * sl + sa], "little")
            self._earray = (
                bits,
                index_elements,
                min_elements,
                min_pointers,
                page,
                max_index,
                index_block,
            )
        bits, index_elements, min_elements, min_pointers, page, max_index, index_block = (
            self._earray
        )
        if slot >= max_index or index_block == fb.undefined:
            return None
        # The index block: its elements, then the data block addresses it holds,
        # then those of the secondary blocks.
        direct_blocks = 2 * (min_pointers - 1)
        super_blocks = 1 + bits - (min_elements.bit_length() - 1)
        secondary = max(0, super_blocks - 2 * (min_pointers.bit_length() - 1))
        size = 6 + sa + (index_elements + direct_blocks + secondary) * sa
        if slot >= index_elements:
            # Super blocks 0, 1, ... hold 2**(s//2) data blocks of
            # min_elements * 2**((s+1)//2) elements; those of the first super blocks
            # (direct_blocks data blocks in all) are addressed by the index block.
            rest = slot - index_elements
            super_block = (rest // min_elements + 1).bit_length() - 1
            first_index = first_block = 0
            for s in range(super_block):
                count, elements = 1 << (s // 2), min_elements << ((s + 1) // 2)
                first_index += count * elements
                first_block += count
            elements = min_elements << ((super_block + 1) // 2)
            block = first_block + (rest - first_index) // elements
            if block >= direct_blocks or elements > 1 << page:
                return None  # in a secondary block, or a paged data block
        block_bytes = self._index_block(index_block, size + 4)
        address_of = int.from_bytes
        if slot < index_elements:
            at = 6 + sa + slot * sa
            found = address_of(block_bytes[at : at + sa], "little")
            return None if found == fb.undefined else found
        at = 6 + sa + index_elements * sa + block * sa
        data_block = address_of(block_bytes[at : at + sa], "little")
        if data_block == fb.undefined:
            return None
        offset_bytes = (bits + 7) // 8
        data = self._blocks.get(data_block)
        if data is None:
            size = 6 + sa + offset_bytes + elements * sa + 4
            data = self._blocks[data_block] = self._block(data_block, b"EADB", size)
        within = (rest - first_index) % elements
        at = 6 + sa + offset_bytes + within * sa
        found = address_of(data[at : at + sa], "little")
        return None if found == fb.undefined else found

    def _index_block(self, address: int, size: int) -> bytes:
        cached = getattr(self, "_iblock", None)
        if cached is None:
            cached = self._iblock = self._block(address, b"EAIB", size)
        return cached

    def _btree(self, slot: int) -> int | None:
        """The address of chunk ``slot`` from the dataset's version-1 B-tree, its
        nodes read once each (their keys searched with numpy)."""
        row = slot * self.chunks[0]
        address = self._root
        level_above = None
        undefined = self._bytes.undefined
        for _ in range(_MAX_LEVEL):
            if address == undefined:
                return None
            node = self._nodes.get(address)
            if node is None:
                node = self._node(address)
                if node is None:
                    return self._btree_walk(slot)
                self._nodes[address] = node
            level, firsts, children, sizes, masks = node
            if level_above is not None and level != level_above - 1:
                raise Unreadable(f"a node of level {level} under one of level {level_above}")
            # The last entry whose key is at most the target.
            at = max(0, bisect.bisect_right(firsts, row) - 1)
            if level == 0:
                if firsts[at] != row or masks[at] or sizes[at] != self.nbytes:
                    return None
                return children[at]
            level_above, address = level, children[at]
        raise Unreadable("a chunk index deeper than any file holds")

    def _node(self, address: int) -> tuple[int, list[int], list[int], list[int], list[int]] | None:
        """The B-tree node at ``address`` as (level, each entry's first coordinate,
        children, chunk sizes, filter masks); None for a node whose keys vary in
        other coordinates than the first (searched entry by entry)."""
        fb = self._bytes
        sa = fb.sizeof_addr
        dims = self.dimensionality
        if sa != 8:
            return None
        prefix = 8 + 2 * sa
        head = fb._at(address, prefix)
        data = fb.map
        if data[head : head + 4] != b"TREE" or data[head + 4] != _NODE_RAW_DATA:
            raise Unreadable(f"no chunk index node at {address}")
        level, used = data[head + 5], int.from_bytes(data[head + 6 : head + 8], "little")
        if used == 0:
            raise Unreadable(f"a node of level {level} with no entries")
        entry = _node_entry(dims)
        start = fb._at(address, prefix + used * entry.itemsize + entry.itemsize - sa) + prefix
        entries = np.frombuffer(data[start : start + used * entry.itemsize], dtype=entry)
        coords = entries["coords"]
        if dims > 1 and coords[:, 1:].any():
            return None
        firsts = coords[:, 0]
        if len(firsts) > 1 and (firsts[1:] <= firsts[:-1]).any():
            raise Unreadable(f"a chunk index node at {address} with keys out of order")
        return (
            level,
            firsts.tolist(),
            entries["child"].tolist(),
            entries["size"].tolist(),
            entries["mask"].tolist(),
        )

    def _btree_walk(self, slot: int) -> int | None:
        fb = self._bytes
        sa = fb.sizeof_addr
        dims = self.dimensionality
        target = (slot * self.chunks[0],) + (0,) * (dims - 1)
        key = struct.Struct(f"<II{dims}Q")
        step = key.size + sa
        prefix = 8 + 2 * sa
        address = self._root
        level_above = None
        for _ in range(_MAX_LEVEL):
            if address == fb.undefined:
                return None
            head = fb._at(address, prefix)
            data = fb.map
            if data[head : head + 4] != b"TREE" or data[head + 4] != _NODE_RAW_DATA:
                raise Unreadable(f"no chunk index node at {address}")
            level, used = data[head + 5], int.from_bytes(data[head + 6 : head + 8], "little")
            if used == 0 or (level_above is not None and level != level_above - 1):
                raise Unreadable(f"a node of level {level} with {used} entries")
            start = fb._at(address, prefix + used * step + key.size) + prefix
            # The last entry whose key is at most the target.
            low, high = 0, used - 1
            while low < high:
                middle = (low + high + 1) // 2
                if key.unpack_from(data, start + middle * step)[2:] <= target:
                    low = middle
                else:
                    high = middle - 1
            at = start + low * step
            size, mask, *coords = key.unpack_from(data, at)
            child = int.from_bytes(data[at + key.size : at + step], "little")
            if level == 0:
                if tuple(coords) != target or mask or size != self.nbytes:
                    return None
                return child
            level_above, address = level, child
        raise Unreadable("a chunk index deeper than any file holds")
