"""The chunk index of a chunked dataset, read from the file's bytes.

A chunked dataset whose layout message is version 3 (HDF5's default format) indexes
its chunks in a version-1 B-tree (HDF5 file format, "Version 1 B-trees"): nodes
signed ``TREE`` of type 1, each with its level (0 for leaves), the number of entries
used, the addresses of its siblings, then keys and child addresses in turn. A key
holds the chunk's stored size, its filter mask and its coordinates (one more than
the rank, the last always 0); a leaf's child is the chunk's address.

HDF5 walks the same tree for ``H5Dchunk_iter``, but h5py turns every chunk into a
Python object (2 to 3 µs a chunk: 21 ms for the 10,000 chunks of an 80 MB array).
:func:`chunk_index` reads the nodes with positioned reads and decodes each with one
numpy call. It is used only where the file's bytes are what HDF5 reads (a file
opened read-only); anything unexpected (another index type, a node that does not
decode, a count that differs from HDF5's) makes it return None, and HDF5 is asked.
"""

from __future__ import annotations

import h5py
import numpy as np

import h5vc.config as config
from h5vc.hdf5.header import LAYOUT, HeaderDamage, PositionedReader, Record, object_messages

__all__ = ["ChunkIndex", "chunk_index"]

_LAYOUT_CHUNKED = 2
_NODE_RAW_DATA = 1
#: Entries read with a node's header at first: a node of HDF5's default size (2K =
#: 64 entries) is read in one call.
_FIRST_ENTRIES = config.BTREE_FIRST_ENTRIES


class ChunkIndex(Record):
    """Every allocated chunk: its coordinates (``(n, rank)``), address, stored size
    and filter mask. (A :class:`~h5vc.hdf5.header.Record`, not a dataclass: made on
    the first large read of a process.)"""

    coords: np.ndarray
    addresses: np.ndarray
    sizes: np.ndarray
    masks: np.ndarray

    __slots__ = ("addresses", "coords", "masks", "sizes")

    def __init__(
        self, coords: np.ndarray, addresses: np.ndarray, sizes: np.ndarray, masks: np.ndarray
    ) -> None:
        self.coords = coords
        self.addresses = addresses
        self.sizes = sizes
        self.masks = masks


def chunk_index(dataset: h5py.Dataset) -> ChunkIndex | None:
    """The chunk index of ``dataset`` from the file's bytes, or None where HDF5 must
    be asked (a file open for writing, another index type, anything unexpected)."""
    stored = object_messages(dataset, frozenset((LAYOUT,)))
    if stored is None:
        return None
    layout = stored.messages.get(LAYOUT)
    if layout is None or len(layout) < 3 or layout[0] != 3 or layout[1] != _LAYOUT_CHUNKED:
        return None
    width = stored.sizeof_addr
    if len(layout) < 3 + width:
        return None
    root = int.from_bytes(layout[3 : 3 + width], "little")
    try:
        index = _walk(stored.reader, root, layout[2], width)
    except (HeaderDamage, ValueError):
        return None
    if len(index.addresses) != dataset.id.get_num_chunks():
        return None
    return index


def _walk(reader: PositionedReader, root: int, dimensionality: int, width: int) -> ChunkIndex:
    """Every leaf entry of the B-tree at ``root``, level by level."""
    rank = dimensionality - 1
    if rank < 1:
        raise HeaderDamage(f"a chunk index of dimensionality {dimensionality}")
    key = [("size", "<u4"), ("mask", "<u4"), ("coords", "<u8", (dimensionality,))]
    entry = np.dtype([*key, ("child", f"<u{width}")])
    key_size = entry.itemsize - width
    prefix = 8 + 2 * width  # signature, type, level, entries used, two siblings
    if root == (1 << (8 * width)) - 1:  # the undefined address: nothing allocated
        empty = np.zeros(0, dtype=np.int64)
        return ChunkIndex(np.zeros((0, rank), dtype=np.int64), empty, empty, empty)
    nodes = [root]
    expected: int | None = None  # the level of the nodes being read (root: any)
    leaves: list[bytes] = []  # the entries of every leaf, as stored
    visited = 0
    while True:
        children: list[int] = []
        for address in nodes:
            visited += 1
            if visited > 1 << 24:
                raise HeaderDamage("a chunk index of more than 2**24 nodes")
            data = reader.read(address, prefix + _FIRST_ENTRIES * entry.itemsize + key_size)
            if len(data) < prefix or data[:4] != b"TREE" or data[4] != _NODE_RAW_DATA:
                raise HeaderDamage(f"no chunk index node at {address}")
            level, used = data[5], int.from_bytes(data[6:8], "little")
            if expected is None:
                expected = level
            if level != expected or used == 0:
                raise HeaderDamage(f"a node of level {level} with {used} entries")
            need = prefix + used * entry.itemsize + key_size
            if len(data) < need:
                if not reader.within(address, need):
                    raise HeaderDamage(f"a node of {used} entries at {address}")
                data = reader.read(address, need)
            if level == 0:
                leaves.append(data[prefix : prefix + used * entry.itemsize])
            else:
                entries = np.frombuffer(data, dtype=entry, count=used, offset=prefix)
                children.extend(entries["child"].tolist())
        if expected == 0:
            break
        nodes = children
        expected = None if expected is None else expected - 1
    every = np.frombuffer(b"".join(leaves), dtype=entry)
    coords = every["coords"][:, :rank].astype(np.int64)
    return ChunkIndex(
        coords,
        every["child"].astype(np.int64),
        every["size"].astype(np.int64),
        every["mask"].astype(np.int64),
    )
