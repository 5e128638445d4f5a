"""Build and parse the virtual datasets that make up a committed version.

Each run of a :class:`~h5vc.store.chunkmap.ChunkMap` (chunks consecutive along axis 0
that sit in consecutive ``raw_data`` slots) is one block of a virtual mapping
``vds[r0*c0 : r1*c0, cols...] -> raw_data[s*c0 : s*c0 + (r1-r0)*c0, 0:w...]``
(clipped at the dataset's edge).

One mapping carries several runs of the same chunk column when their slots increase
down the column: HDF5 pairs the elements of a mapping's virtual and source selections
in row-major order, which then visits the runs in the same order on both sides. After
many small edits a version has hundreds of runs but a few dozen mappings, and a
commit's cost in HDF5 (building, storing and reopening the mapping list) follows the
mappings. A mapping holds at most :data:`MAX_RUNS_PER_MAPPING` runs: HDF5 reads a
mapping in time that grows with its number of blocks times its number of chunks.

The whole mapping list is handed to HDF5 at once, where it can: the creation property
list is built from its serialized form (``H5Pdecode``), the bytes of every mapping
written with numpy between a frame HDF5 itself encodes (see :func:`_plist_frame`).
That takes about a third of the time of adding the mappings one ``H5Pset_virtual``
call at a time, which remains the way where the library's functions cannot be found
or do not encode as expected. There, selections of several blocks are handed to
HDF5 in serialized form (one ``H5Sdecode`` per selection) rather than built with one
``H5Sselect_hyperslab`` call per block.
"""

from __future__ import annotations

import bisect
import itertools
import math
import struct
from collections import OrderedDict
from collections.abc import Iterator
from typing import Protocol

import h5py
import numpy as np
from h5py import h5d, h5p, h5s

import h5vc.config as config
from h5vc.errors import UnsupportedFormatError
from h5vc.hdf5.clib import PlistCodec, plist_codec
from h5vc.hdf5.mappings import Mappings
from h5vc.store.chunkmap import ChunkMap, Runs

__all__ = [
    "MAX_CLASS_RUNS",
    "MAX_SCATTERED_ELEMENTS",
    "MAX_SCATTERED_RUNS",
    "create_virtual_dataset",
    "group_runs",
    "mapping_count",
    "read_chunk_map",
]

#: A mapping of runs at one offset carries at most this many runs: HDF5 builds a
#: selection of n blocks in time that grows as n**2.
MAX_CLASS_RUNS = config.MAX_CLASS_RUNS
#: A mapping of runs at different offsets carries at most this many runs ...
MAX_SCATTERED_RUNS = config.MAX_SCATTERED_RUNS
#: ... and this many elements: HDF5 reads it element by element (about 25 ns each).
MAX_SCATTERED_ELEMENTS = config.MAX_SCATTERED_ELEMENTS

# Serialized hyperslab selection, version 1 (HDF5 file format, "dataspace selection"):
# uint32 type (2 = hyperslabs), version (1), reserved, byte length of what follows,
# rank, number of blocks, then per block its start and (inclusive) end coordinates.
_SEL_HYPERSLABS = 2
_SEL_VERSION_1 = 1
_UINT32_LIMIT = 2**32


def _fill_array(dtype: np.dtype, fillvalue: object) -> np.ndarray | None:
    """The fill value as ``PropDCID.set_fill_value`` takes it."""
    if fillvalue is None or dtype.kind == "O":
        return None
    if dtype.kind == "S":
        # h5py stores a fixed-length bytes array's fill value from the wrong memory;
        # given as a variable-length string, HDF5 converts it to the dataset's type.
        info = h5py.check_string_dtype(dtype)
        encoding = "ascii" if info is None else info.encoding
        return np.array(np.asarray(fillvalue, dtype=dtype)[()], dtype=h5py.string_dtype(encoding))
    return np.array(fillvalue, dtype=dtype)


def _fill_key(fill: np.ndarray | None) -> bytes:
    """The fill value of a property list as bytes that tell it apart from others."""
    if fill is None:
        return b""
    if fill.dtype.kind == "O":  # a string: its text, not the address of the object
        return b"O" + repr(fill[()]).encode()
    return fill.dtype.str.encode() + b":" + fill.tobytes()


class Source(Protocol):
    """What a chunk store knows of its ``raw_data`` (see
    :class:`~h5vc.store.rawdata.RawDataStore`)."""

    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> np.dtype: ...
    @property
    def name(self) -> str: ...
    @property
    def type_id(self) -> h5py.h5t.TypeID: ...


def source_name(raw_data: h5py.Dataset | str) -> tuple[bytes, bytes]:
    """The source file and dataset names with which a virtual dataset of this file
    maps ``raw_data`` (or the dataset of that name), as stored: ``"."`` is the same
    file, and ``"%%"`` stands for a ``"%"`` of the path (HDF5 reads ``"%b"`` in a
    source name as a block number)."""
    name = raw_data if isinstance(raw_data, str) else raw_data.name or ""
    return b".", name.encode().replace(b"%", b"%%")


def create_virtual_dataset(
    group: h5py.Group,
    name: str,
    raw_data: h5py.Dataset,
    chunk_map: ChunkMap,
    *,
    fillvalue: object = None,
    maxshape: tuple[int | None, ...] | None = None,
    merge: bool = True,
    source: Source | None = None,
) -> h5py.Dataset:
    """Create ``group[name]`` as a virtual dataset over ``raw_data`` per ``chunk_map``.

    ``merge=True`` maps runs of consecutive chunks, several runs per mapping
    (see :func:`group_runs`); ``merge=False`` maps every chunk on its own (the
    versioned-hdf5 layout). ``source``: what ``raw_data``'s store knows of it already
    (its shape, dtype, name and datatype), not asked of h5py again.
    """
    shape = chunk_map.shape
    if source is None:
        raw_shape, dtype = tuple(raw_data.shape), raw_data.dtype
    else:
        raw_shape, dtype = source.shape, source.dtype
    fill = _fill_array(dtype, fillvalue)
    hdf5_maxshape = None
    if maxshape is not None:
        hdf5_maxshape = tuple(h5s.UNLIMITED if m is None else m for m in maxshape)
    vspace = h5s.create_simple(shape, hdf5_maxshape)
    sspace = h5s.create_simple(raw_shape, (h5s.UNLIMITED, *raw_shape[1:]))
    raw_name = source_name(raw_data if source is None else source.name)[1]
    fill_key = _fill_key(fill)
    dcpl = None
    if merge and len(shape) == 1:
        frame = _plist_frame(fill, fill_key)
        if frame is not None:
            frame_key = _frame_key(fill, fill_key)
            dcpl = _column_plist(frame, frame_key, chunk_map, vspace, sspace, raw_name)
    if dcpl is not None:
        runs = None
    else:
        runs = chunk_map.runs() if merge else chunk_map.single_chunk_runs()
    if runs is not None and len(runs):
        blocks = _Blocks(runs, shape, chunk_map.chunks)
        if merge:
            groups = group_runs(runs, math.prod(chunk_map.chunks))
        else:
            groups = [[i] for i in range(len(runs))]
        frame = _plist_frame(fill, fill_key)
        entries = None if frame is None else blocks.entries(vspace, sspace, raw_name, groups)
        if frame is not None and entries is not None:
            try:
                dcpl = _decode_plist(frame, len(groups), entries)
            except ValueError:  # HDF5 refused the bytes: add the mappings one by one
                _PLIST_FRAMES[_frame_key(fill, fill_key)] = None
        if dcpl is None:
            dcpl = _add_mappings_reusing(
                _empty_plist(fill), blocks, groups, vspace, sspace, raw_name, (raw_name, fill_key)
            )
    elif dcpl is None:
        dcpl = _empty_plist(fill)
    vspace.select_all()
    type_id = raw_data.id.get_type() if source is None else source.type_id
    dsid = h5d.create(group.id, name.encode(), type_id, vspace, dcpl=dcpl)
    return h5py.Dataset(dsid)


# -- one-dimensional datasets, from the mappings of the last one ------------------------

#: A one-dimensional dataset of at most this many runs has its mappings worked out on
#: Python's lists, from those of the last such dataset of its chunk store (see
#: :func:`_column_plist`); more go through numpy's arrays.
COLUMN_RUNS = 1024
#: Chunks a dataset may differ in from the last one for its runs to be found from the
#: last one's (more: from its whole chunk map).
COLUMN_CHANGES = 64
#: Chunk stores whose last one-dimensional dataset is kept.
COLUMN_STORES = 32


class _Column:
    """The runs of the last one-dimensional dataset made over a chunk store, and the
    encoded selections of its mappings (see :func:`_column_plist`)."""

    __slots__ = ("middle", "rests", "runs", "slots")

    def __init__(
        self,
        slots: np.ndarray,
        runs: list[tuple[int, int, int]],
        middle: bytes,
        rests: dict[tuple[tuple[int, int, int], ...], bytes],
    ) -> None:
        #: The chunk map's slots (a copy).
        self.slots = slots
        #: Its runs in row order: first chunk row, length, slot of the first chunk.
        self.runs = runs
        #: The virtual dataspace's extent as encoded (``_extent_bytes``).
        self.middle = middle
        #: Every mapping's encoding but its first part (source names and extent), by
        #: its runs.
        self.rests = rests


#: By source name, shape and chunks (least recently used first).
_COLUMNS: OrderedDict[tuple[bytes, tuple[int, ...], tuple[int, ...]], _Column] = OrderedDict()


def _column_plist(
    frame: tuple[bytes, bytes],
    frame_key: bytes,
    chunk_map: ChunkMap,
    vspace: h5s.SpaceID,
    sspace: h5s.SpaceID,
    raw_name: bytes,
) -> h5p.PropDCID | None:
    """The creation property list of the mappings of a one-dimensional ``chunk_map``
    (``merge=True``), made from their bytes: the same mappings, in the same order, as
    :func:`group_runs` and :meth:`_Blocks.entries` give, worked out on Python's lists.

    A commit changes few chunks of a dataset: the runs are found again only around
    the chunks that differ from the last dataset made over the same chunk store (of
    the same shape), and the mappings it had are not encoded again. None where there
    are no runs or too many, a coordinate is too large for the compact selection
    encoding, or HDF5 refuses the bytes (then the frame is marked unusable): the
    caller goes the long way.
    """
    shape, chunks = chunk_map.shape, chunk_map.chunks
    key = (raw_name, shape, chunks)
    middle = _extent_bytes(vspace)
    last = _COLUMNS.pop(key, None)
    if last is not None and last.middle != middle:
        last = None
    runs = _column_runs(chunk_map.slots, last)
    if not runs or len(runs) > COLUMN_RUNS:
        return None
    groups = _column_groups(runs, chunks[0])
    rests = last.rests if last is not None else {}
    kept: dict[tuple[tuple[int, int, int], ...], bytes] = {}
    pieces = [b""]
    c0, n0 = chunks[0], shape[0]
    for members in groups:
        mapped = tuple([runs[i] for i in members])
        rest = rests.get(mapped)
        if rest is None:
            rest = _column_rest(mapped, c0, n0, middle)
            if rest is None:
                return None
        kept[mapped] = rest
        pieces.append(rest)
    entries = (b".\0" + raw_name + b"\0" + _extent_bytes(sspace)).join(pieces)
    try:
        dcpl = _decode_plist(frame, len(groups), entries)
    except ValueError:  # HDF5 refused the bytes: the long way adds them one by one
        _PLIST_FRAMES[frame_key] = None
        return None
    _COLUMNS[key] = _Column(chunk_map.slots.copy(), runs, middle, kept)
    while len(_COLUMNS) > COLUMN_STORES:
        _COLUMNS.popitem(last=False)
    return dcpl


def _column_runs(slots: np.ndarray, last: _Column | None) -> list[tuple[int, int, int]]:
    """The runs of the one-dimensional chunk map ``slots`` (first chunk row, length,
    slot of the first chunk, in row order): found again only around the chunks that
    differ from ``last``'s, where there are few."""
    changed = None
    if last is not None and last.slots.shape == slots.shape:
        changed = np.flatnonzero(slots != last.slots)
        if len(changed) > COLUMN_CHANGES:
            changed = None
    if changed is None or last is None:
        if len(slots) <= COLUMN_RUNS:
            return _runs_of(slots.tolist(), 0)
        found = ChunkMap((len(slots),), (1,), slots).runs()
        if len(found) > COLUMN_RUNS:
            return []
        return list(zip(found.coords[:, 0].tolist(), found.length.tolist(), found.slot.tolist()))
    if not len(changed):
        return last.runs
    # Each changed chunk and its neighbours, widened to whole runs of the last map: a
    # run of the new map ends where a run of the last one ended, or inside these spans.
    old = last.runs
    starts = [run[0] for run in old]
    n = len(slots)
    spans: list[list[int]] = []
    for row in changed.tolist():
        low, high = max(row - 1, 0), min(row + 1, n - 1)
        at = bisect.bisect_right(starts, low) - 1
        if at >= 0 and old[at][0] + old[at][1] > low:
            low = old[at][0]
        at = bisect.bisect_right(starts, high) - 1
        if at >= 0 and old[at][0] + old[at][1] > high:
            high = old[at][0] + old[at][1] - 1
        if spans and low <= spans[-1][1] + 1:
            spans[-1][1] = max(spans[-1][1], high)
        else:
            spans.append([low, high])
    runs: list[tuple[int, int, int]] = []
    at = 0
    for low, high in spans:
        while at < len(old) and old[at][0] < low:
            runs.append(old[at])
            at += 1
        while at < len(old) and old[at][0] <= high:
            at += 1
        runs += _runs_in(slots[low : high + 1], low)
    runs += old[at:]
    return runs


def _runs_in(slots: np.ndarray, first_row: int) -> list[tuple[int, int, int]]:
    """:func:`_runs_of` of an array of slots: found with numpy where there are many
    (a span around a changed chunk covers the whole runs around it)."""
    if len(slots) <= _FEW_SLOTS:
        return _runs_of(slots.tolist(), first_row)
    stored = slots >= 0
    starts = stored.copy()
    starts[1:] &= (slots[1:] != slots[:-1] + 1) | ~stored[:-1]
    ends = stored.copy()
    ends[:-1] &= starts[1:] | ~stored[1:]
    first, last = np.flatnonzero(starts), np.flatnonzero(ends)
    return list(
        zip((first + first_row).tolist(), (last - first + 1).tolist(), slots[first].tolist())
    )


#: Up to this many slots, runs are found on a list.
_FEW_SLOTS = 64


def _runs_of(slots: list[int], first_row: int) -> list[tuple[int, int, int]]:
    """The runs of the chunks ``slots`` of one column, the first at ``first_row``."""
    runs: list[tuple[int, int, int]] = []
    count = len(slots)
    i = 0
    while i < count:
        slot = slots[i]
        if slot < 0:
            i += 1
            continue
        j = i + 1
        while j < count and slots[j] == slots[j - 1] + 1:
            j += 1
        runs.append((first_row + i, j - i, slot))
        i = j
    return runs


def _column_groups(
    runs: list[tuple[int, int, int]],
    chunk_elements: int,
    max_runs: int = MAX_SCATTERED_RUNS,
    max_elements: int = MAX_SCATTERED_ELEMENTS,
    max_class_runs: int = MAX_CLASS_RUNS,
) -> list[list[int]]:
    """:func:`group_runs` of the runs of one chunk column, given as lists."""
    by_offset: dict[int, list[int]] = {}
    for i, (row, _, slot) in enumerate(runs):
        members = by_offset.get(slot - row)
        if members is None:
            by_offset[slot - row] = [i]
        else:
            members.append(i)
    groups: list[list[int]] = []
    lone: list[int] = []
    for offset in sorted(by_offset):
        members = by_offset[offset]
        if len(members) == 1:
            lone.append(members[0])
            continue
        for a in range(0, len(members), max_class_runs):
            piece = members[a : a + max_class_runs]
            if len(piece) > 1:
                groups.append(piece)
            else:
                lone.append(piece[0])
    if not lone:
        return groups
    lone.sort()  # back in row order
    max_chunks = max(1, max_elements // max(chunk_elements, 1))
    if max_chunks == 1 or max_runs <= 1:
        groups += [[run] for run in lone]
    else:
        slots = [runs[i][2] for i in lone]
        lengths = [runs[i][1] for i in lone]
        groups += _deal_out_lists(lone, slots, lengths, [0] * len(lone), max_chunks, max_runs)
    return groups


_HEADER = struct.Struct("<6I")
_BLOCK_1D = struct.Struct("<2I")


def _column_rest(
    mapped: tuple[tuple[int, int, int], ...], c0: int, n0: int, middle: bytes
) -> bytes | None:
    """The encoding of the mapping of the runs ``mapped`` of a one-dimensional dataset of
    ``n0`` elements in chunks of ``c0`` past its first part (see :meth:`_Blocks.entries`),
    or None where a coordinate does not fit the compact selection encoding."""
    size = len(mapped)
    header = _HEADER.pack(_SEL_HYPERSLABS, _SEL_VERSION_1, 0, 8 + size * 16, 1, size)
    source: list[bytes] = [header]
    virtual: list[bytes] = [middle, header]
    pack = _BLOCK_1D.pack
    for row, length, slot in mapped:
        start = row * c0
        block = min(start + length * c0, n0) - start
        at = slot * c0
        if max(start, at) + block - 1 >= _UINT32_LIMIT:
            return None
        source.append(pack(at, at + block - 1))
        virtual.append(pack(start, start + block - 1))
    return b"".join(source + virtual)


#: The encoded creation property list of a virtual dataset without mappings, cut where
#: the mappings go (before their count, after it), by fill value (see
#: :func:`_plist_frame`); None where the list cannot be built from its bytes.
_PLIST_FRAMES: dict[bytes, tuple[bytes, bytes] | None] = {}
_COUNT = struct.Struct("<Q")  # the number of mappings, as HDF5 encodes it


def _frame_key(fill: np.ndarray | None, fill_key: bytes) -> bytes:
    return (fill.dtype.str.encode() if fill is not None else b"-") + b"|" + fill_key


def _plist_frame(fill: np.ndarray | None, fill_key: bytes) -> tuple[bytes, bytes] | None:
    """The bytes around the mappings of an encoded virtual-layout creation property
    list with fill value ``fill``, as HDF5 encodes them, or None.

    HDF5 encodes a virtual layout as the number of mappings (uint64) followed by each
    mapping: source file and dataset names (NUL-terminated), then the source and the
    virtual selection, each as ``H5Sencode`` writes a dataspace. The frame is found by
    encoding a list with no mapping and one with a known mapping; it is used only if
    both give exactly these bytes and decoding the frame around that mapping gives the
    same mapping back. (None where :func:`~h5vc.hdf5.clib.plist_codec` is missing.)
    """
    key = _frame_key(fill, fill_key)
    if key in _PLIST_FRAMES:
        return _PLIST_FRAMES[key]
    frame = None
    codec = plist_codec()
    if codec is not None:
        try:
            frame = _find_frame(codec, fill)
        except (ValueError, RuntimeError, TypeError):
            frame = None
    _PLIST_FRAMES[key] = frame
    return frame


def _empty_plist(fill: np.ndarray | None) -> h5p.PropDCID:
    """A creation property list of a virtual dataset with fill value ``fill``, no
    mapping yet."""
    dcpl = h5p.create(h5p.DATASET_CREATE)
    dcpl.set_layout(h5d.VIRTUAL)
    if fill is not None:
        dcpl.set_fill_value(fill)
    return dcpl


def _find_frame(codec: PlistCodec, fill: np.ndarray | None) -> tuple[bytes, bytes] | None:
    encode, decode = codec.encode, codec.decode_dcpl
    vspace = h5s.create_simple((6, 5), (h5s.UNLIMITED, 5))
    sspace = h5s.create_simple((9, 3), (h5s.UNLIMITED, 3))
    vspace.select_hyperslab((2, 2), (1, 1), block=(3, 3))
    sspace.select_hyperslab((4, 0), (1, 1), block=(3, 3))
    one = _empty_plist(fill)
    one.set_virtual(vspace, b".", b"/probe%%", sspace)
    mapping = b".\0/probe%%\0" + sspace.encode() + vspace.encode()
    encoded, none = encode(one), encode(_empty_plist(fill))
    at = encoded.find(mapping)
    if at < _COUNT.size or encoded.find(mapping, at + 1) >= 0:
        return None
    head, tail = encoded[: at - _COUNT.size], encoded[at + len(mapping) :]
    if encoded[at - _COUNT.size : at] != _COUNT.pack(1) or head + _COUNT.pack(0) + tail != none:
        return None
    back = decode(head + _COUNT.pack(1) + mapping + tail)
    same = (
        back.get_layout() == h5d.VIRTUAL
        and back.get_virtual_count() == 1
        and back.get_virtual_filename(0) == "."
        and back.get_virtual_dsetname(0) == "/probe%%"
        and back.get_virtual_vspace(0).encode() == vspace.encode()
        and back.get_virtual_srcspace(0).encode() == sspace.encode()
    )
    return (head, tail) if same else None


def _decode_plist(frame: tuple[bytes, bytes], count: int, entries: bytes) -> h5p.PropDCID:
    """The creation property list of ``count`` mappings encoded as ``entries``."""
    codec = plist_codec()
    assert codec is not None
    head, tail = frame
    return codec.decode_dcpl(b"".join((head, _COUNT.pack(count), entries, tail)))


#: Mappings a virtual dataset shares with the next one of the same chunk store, kept
#: built (see :func:`_add_mappings_reusing`), by source name and fill value.
_SHARED_MAPPINGS: OrderedDict[tuple[bytes, bytes], tuple[h5p.PropDCID, np.ndarray, np.ndarray]]
_SHARED_MAPPINGS = OrderedDict()
#: Chunk stores whose shared mappings are kept.
SHARED_MAPPING_STORES = 32
#: Fewer mappings than this are built anew every time.
MIN_SHARED_MAPPINGS = 8


def _add_mappings_reusing(
    dcpl: h5p.PropDCID,
    blocks: _Blocks,
    groups: list[list[int]],
    vspace: h5s.SpaceID,
    sspace: h5s.SpaceID,
    raw_name: bytes,
    key: tuple[bytes, bytes],
) -> h5p.PropDCID:
    """Add one mapping per group of runs to ``dcpl`` (or to a copy of a property list
    holding the first of them already, which is returned instead).

    HDF5 takes a few microseconds per mapping added (``H5Pset_virtual``) but copies a
    list of them in a fraction of that. A commit of a long dataset changes few of its
    mappings, mostly those reaching its last chunk row (an append rewrites the short
    last chunk), so those go last and a copy of the list before them is kept for the
    next virtual dataset of the same chunk store: when its mappings start with the
    same ones (same blocks, same source, same fill value), they are not built again.
    A mapping is the same selections on both sides whatever the dataspace extents it
    was built with: HDF5 stores the selections and sets the virtual extent to the
    dataset's when it creates it.
    """
    sizes = np.fromiter(map(len, groups), dtype=np.int64, count=len(groups))
    flat = np.concatenate(groups)
    ends = (blocks.vstart[:, 0] + blocks.block[:, 0])[flat]
    starts = np.cumsum(sizes) - sizes
    reaching = np.maximum.reduceat(ends, starts) >= ends.max()
    stable = len(groups) - int(reaching.sum())
    if stable and reaching[:stable].any():  # those reaching the last row go last
        keep = np.flatnonzero(~reaching).tolist() + np.flatnonzero(reaching).tolist()
        groups = [groups[i] for i in keep]
        sizes = sizes[keep]
        flat = np.concatenate(groups)
    table = np.concatenate([blocks.vstart, blocks.sstart, blocks.block], axis=1)[flat]
    bounds = np.cumsum(sizes)
    done = 0
    shared = _SHARED_MAPPINGS.get(key)
    if shared is not None:
        kept, kept_table, kept_bounds = shared
        count = len(kept_bounds)
        if (
            count <= stable
            and np.array_equal(bounds[:count], kept_bounds)
            and np.array_equal(table[: len(kept_table)], kept_table)
        ):
            dcpl, done = kept.copy(), count
            _SHARED_MAPPINGS.move_to_end(key)
    if done < stable:
        blocks.add_mappings(dcpl, vspace, sspace, raw_name, groups[done:stable])
    if stable >= MIN_SHARED_MAPPINGS and done != stable:
        rows = int(bounds[stable - 1])
        _SHARED_MAPPINGS[key] = (dcpl.copy(), table[:rows].copy(), bounds[:stable].copy())
        _SHARED_MAPPINGS.move_to_end(key)
        while len(_SHARED_MAPPINGS) > SHARED_MAPPING_STORES:
            _SHARED_MAPPINGS.popitem(last=False)
    if stable < len(groups):
        blocks.add_mappings(dcpl, vspace, sspace, raw_name, groups[stable:])
    return dcpl


def group_runs(
    runs: Runs,
    chunk_elements: int,
    max_runs: int = MAX_SCATTERED_RUNS,
    max_elements: int = MAX_SCATTERED_ELEMENTS,
    max_class_runs: int = MAX_CLASS_RUNS,
) -> list[list[int]]:
    """Partition runs (in :meth:`ChunkMap.runs` order) into the runs of each mapping.

    All runs of a mapping lie in one chunk column, and their slots increase with their
    position down the column, so that row-major order pairs them up on both sides.

    - Runs at the same *offset* (slot minus chunk row) share mappings of up to
      ``max_class_runs`` runs: the virtual and source selections of such a mapping
      have the same shape, which HDF5 reads as fast as a single block. After edits,
      the untouched pieces of a dataset are such runs.
    - The other runs are dealt out greedily, each to the open mapping whose last slot
      is the highest one below its own (the fewest mappings for a sequence of
      increasing pieces). HDF5 reads such a mapping element by element, so one holds
      at most ``max_runs`` runs and ``max_elements`` elements (``chunk_elements``
      per chunk); longer runs keep a mapping of their own.
    """
    count = len(runs)
    if count == 0:
        return []
    rows = runs.coords[:, 0]
    max_chunks = max(1, max_elements // max(chunk_elements, 1))
    if (max_chunks == 1 or max_runs <= 1) and _lone_in_one_column(runs, rows):
        # No mapping may take two scattered runs and no two runs share an offset: one
        # mapping each (a table grown by appends, every chunk rewritten as it filled).
        return [[run] for run in range(count)]
    column = np.zeros(count, dtype=np.int64)
    if runs.coords.shape[1] > 1:
        other = runs.coords[:, 1:]
        column[1:] = np.cumsum(np.any(other[1:] != other[:-1], axis=1))
    offset = runs.slot - rows
    order = np.lexsort((rows, offset, column))
    key_change = np.ones(count, dtype=bool)
    key_change[1:] = (column[order][1:] != column[order][:-1]) | (
        offset[order][1:] != offset[order][:-1]
    )
    # Pieces of at most max_class_runs runs of one class, each starting a new piece.
    first_of_class = np.flatnonzero(key_change)
    rank = np.arange(count) - np.repeat(first_of_class, np.diff(np.append(first_of_class, count)))
    bounds = np.flatnonzero(np.append(rank % max_class_runs == 0, True))
    sizes = np.diff(bounds)
    in_order, cuts = order.tolist(), bounds.tolist()
    groups = [in_order[a:b] for a, b, size in zip(cuts, cuts[1:], sizes.tolist()) if size > 1]
    lone = np.sort(order[bounds[:-1][sizes == 1]])  # back in column, then row order
    if len(lone) and (max_chunks == 1 or max_runs <= 1):
        # A mapping of one chunk is full: each lone run keeps a mapping of its own (as
        # _deal_out would give it).
        groups += [[run] for run in lone.tolist()]
    elif len(lone):
        groups += _deal_out(lone, runs, column, max_chunks, max_runs)
    return groups


def _lone_in_one_column(runs: Runs, rows: np.ndarray) -> bool:
    """Whether ``runs`` lie in one chunk column, each at an offset (slot minus chunk
    row) of its own: no two share a mapping by offset (see :func:`group_runs`)."""
    other = runs.coords[:, 1:]
    if other.shape[1] and np.any(other != other[0]):
        return False
    offsets = (runs.slot - rows).tolist()
    return len(set(offsets)) == len(offsets)


def _deal_out(
    lone: np.ndarray, runs: Runs, column: np.ndarray, max_chunks: int, max_runs: int
) -> list[list[int]]:
    """Greedy increasing-slot grouping of ``lone`` runs (column, then row order)."""
    return _deal_out_lists(
        lone.tolist(),
        runs.slot[lone].tolist(),
        runs.length[lone].tolist(),
        column[lone].tolist(),
        max_chunks,
        max_runs,
    )


def _deal_out_lists(
    lone: list[int],
    slot: list[int],
    length: list[int],
    col: list[int],
    max_chunks: int,
    max_runs: int,
) -> list[list[int]]:
    """:func:`_deal_out` of the runs ``lone``, given their slot, length and column."""
    groups: list[list[int]] = []
    sizes: list[int] = []  # chunks in each group
    tails: list[int] = []  # sorted last slot ends of the open groups of the column
    owners: list[int] = []  # the group of each tail
    current = -1
    for i, run in enumerate(lone):
        if col[i] != current:
            current = col[i]
            tails.clear()
            owners.clear()
        size = length[i]
        at = bisect.bisect_right(tails, slot[i]) - 1
        if size > max_chunks or at < 0:
            number = len(groups)
            groups.append([run])
            sizes.append(size)
        else:
            number = owners.pop(at)
            del tails[at]
            groups[number].append(run)
            sizes[number] += size
        if len(groups[number]) < max_runs and sizes[number] < max_chunks:
            end = slot[i] + size
            at = bisect.bisect_right(tails, end)
            tails.insert(at, end)
            owners.insert(at, number)
    return groups


class _Blocks:
    """The virtual and source block of every run, and the mappings made from them."""

    def __init__(self, runs: Runs, shape: tuple[int, ...], chunks: tuple[int, ...]) -> None:
        chunk_arr = np.asarray(chunks, dtype=np.int64)
        vstart = runs.coords * chunk_arr
        vstop = np.minimum(vstart + chunk_arr, np.asarray(shape, dtype=np.int64))
        # Along axis 0 a run spans `length` chunks, clipped at the edge.
        vstop[:, 0] = np.minimum(vstart[:, 0] + runs.length * chunks[0], shape[0])
        self.vstart = vstart
        self.block = vstop - vstart
        self.sstart = np.zeros_like(vstart)
        self.sstart[:, 0] = runs.slot * chunks[0]
        self.ndim = len(shape)

    def entries(
        self, vspace: h5s.SpaceID, sspace: h5s.SpaceID, raw_name: bytes, groups: list[list[int]]
    ) -> bytes | None:
        """The mappings of ``groups`` as HDF5 encodes them in a creation property list
        (see :func:`_plist_frame`), or None where a coordinate is too large for the
        compact selection encoding."""
        vstop, sstop = self.vstart + self.block - 1, self.sstart + self.block - 1
        if max(vstop.max(initial=0), sstop.max(initial=0)) >= _UINT32_LIMIT:
            return None
        sizes = np.fromiter(map(len, groups), dtype=np.int64, count=len(groups))
        flat = np.fromiter(itertools.chain.from_iterable(groups), np.int64, int(sizes.sum()))
        row_bytes = 2 * self.ndim * 4
        virtual = np.concatenate([self.vstart, vstop], axis=1)[flat].astype("<u4").tobytes()
        source = np.concatenate([self.sstart, sstop], axis=1)[flat].astype("<u4").tobytes()
        first = b".\0" + raw_name + b"\0" + _extent_bytes(sspace)
        middle = _extent_bytes(vspace)
        if len(sizes) and sizes.min() == sizes.max():
            return _same_size_entries(
                first, middle, int(sizes[0]), len(sizes), self.ndim, source, virtual
            )
        headers = _selection_headers(sizes, self.ndim).tobytes()
        parts: list[bytes] = []
        begin = 0
        for number, end in enumerate((np.cumsum(sizes) * row_bytes).tolist()):
            header = headers[number * 24 : number * 24 + 24]
            parts += (first, header, source[begin:end], middle, header, virtual[begin:end])
            begin = end
        return b"".join(parts)

    def add_mappings(
        self,
        dcpl: h5p.PropDCID,
        vspace: h5s.SpaceID,
        sspace: h5s.SpaceID,
        raw_name: bytes,
        groups: list[list[int]] | None,
    ) -> None:
        """One mapping per group of runs, virtual and source selections built in
        one loop (a mapping of one block by two hyperslab selections, of several
        blocks by decoding serialized selections built for all of them at once)."""
        set_virtual = dcpl.set_virtual
        if groups is None:
            groups = [[i] for i in range(len(self.block))]
        vstart, sstart, block = self.vstart, self.sstart, self.block
        several = [members for members in groups if len(members) > 1]
        encoded: Iterator[tuple[bytes, bytes]] = iter(())
        if several:
            vstop, sstop = vstart + block - 1, sstart + block - 1
            if max(vstop.max(initial=0), sstop.max(initial=0)) < _UINT32_LIMIT:
                encoded = zip(
                    _encode(vspace, np.concatenate([vstart, vstop], axis=1), several),
                    _encode(sspace, np.concatenate([sstart, sstop], axis=1), several),
                )
            else:  # coordinates too large for the compact encoding
                encoded = iter([(b"", b"")] * len(several))
        ones = (1,) * self.ndim
        vstarts, sstarts, blocks = vstart.tolist(), sstart.tolist(), block.tolist()
        select_virtual, select_source = vspace.select_hyperslab, sspace.select_hyperslab
        for members in groups:
            if len(members) > 1:
                virtual, source = next(encoded)
                if virtual:
                    set_virtual(h5s.decode(virtual), b".", raw_name, h5s.decode(source))
                    continue
            first, *others = members
            select_virtual(tuple(vstarts[first]), ones, block=tuple(blocks[first]))
            select_source(tuple(sstarts[first]), ones, block=tuple(blocks[first]))
            for i in others:
                select_virtual(tuple(vstarts[i]), ones, block=tuple(blocks[i]), op=h5s.SELECT_OR)
                select_source(tuple(sstarts[i]), ones, block=tuple(blocks[i]), op=h5s.SELECT_OR)
            set_virtual(vspace, b".", raw_name, sspace)


def _same_size_entries(
    first: bytes, middle: bytes, size: int, count: int, ndim: int, source: bytes, virtual: bytes
) -> bytes:
    """:meth:`_Blocks.entries` of ``count`` mappings of ``size`` blocks each (every
    lone run its own mapping, most often): each entry of the same length, laid out
    side by side in one array rather than joined one by one."""
    header = _selection_headers(np.array([size], dtype=np.int64), ndim).tobytes()
    body = size * 2 * ndim * 4
    # (bytes, whether they hold one row per mapping or are the same in every one)
    parts: list[tuple[bytes, bool]] = [(first, False), (header, False), (source, True)]
    parts += [(middle, False), (header, False), (virtual, True)]
    width = sum(body if rows else len(part) for part, rows in parts)
    table = np.empty((count, width), dtype=np.uint8)
    at = 0
    for part, rows in parts:
        values = np.frombuffer(part, dtype=np.uint8)
        size_of = body if rows else len(part)
        table[:, at : at + size_of] = values.reshape(count, body) if rows else values
        at += size_of
    return table.tobytes()


def _extent_bytes(space: h5s.SpaceID) -> bytes:
    """What ``H5Sencode`` writes of ``space`` before its selection: type, version, size
    of sizes, uint32 extent size and the extent."""
    space.select_none()
    encoded = space.encode()
    extent_size = int(np.frombuffer(encoded, dtype="<u4", count=1, offset=3)[0])
    return encoded[: 7 + extent_size]


def _selection_headers(sizes: np.ndarray, ndim: int) -> np.ndarray:
    """The header of a serialized hyperslab selection (version 1) of ``sizes`` blocks
    each: type, version, reserved, byte length of what follows, rank, block count."""
    headers = np.empty((len(sizes), 6), dtype="<u4")
    headers[:, 0] = _SEL_HYPERSLABS
    headers[:, 1] = _SEL_VERSION_1
    headers[:, 2] = 0  # reserved
    headers[:, 3] = 8 + sizes * (2 * ndim * 4)  # bytes that follow: rank, count, blocks
    headers[:, 4] = ndim
    headers[:, 5] = sizes
    return headers


def _encode(space: h5s.SpaceID, coords: np.ndarray, groups: list[list[int]]) -> Iterator[bytes]:
    """``H5Sencode`` output of the blocks (rows of start and inclusive end coordinates
    in ``coords``) of each group, selected on ``space``; built for all groups at once."""
    prefix = _extent_bytes(space)
    sizes = np.array([len(members) for members in groups], dtype=np.int64)
    row_bytes = coords.shape[1] * 4
    body = coords[np.concatenate(groups)].astype("<u4").tobytes()
    header_bytes = _selection_headers(sizes, coords.shape[1] // 2).tobytes()
    begin = 0
    for number, end in enumerate((np.cumsum(sizes) * row_bytes).tolist()):
        yield prefix + header_bytes[number * 24 : number * 24 + 24] + body[begin:end]
        begin = end


def mapping_count(dataset: h5py.Dataset) -> int:
    """Number of virtual mappings of ``dataset`` (0 for a non-virtual dataset)."""
    dcpl = dataset.id.get_create_plist()  # one copy: it holds every mapping
    return dcpl.get_virtual_count() if dcpl.get_layout() == h5d.VIRTUAL else 0


def read_chunk_map(
    dataset: h5py.Dataset, chunks: tuple[int, ...], stored: Mappings | None = None
) -> ChunkMap:
    """Recover the chunk map of a committed virtual dataset from its mappings.

    Works for one mapping per chunk, one per run and several runs per mapping alike:
    every mapping's virtual and source blocks are expanded into chunks, paired in
    order. ``stored`` are the mappings :func:`stored_mappings` read from the file
    before HDF5 opened ``dataset``; without them they are asked from HDF5, one call
    per mapping. Raises :class:`UnsupportedFormatError` if a mapping is not
    chunk-aligned.
    """
    shape = tuple(dataset.shape)
    if stored is None:
        stored = _mappings_from_hdf5(dataset)
    chunk_map = ChunkMap.empty(shape, chunks)
    chunk_map.blocks = len(stored.virtual)
    if len(stored.sources) == 1:
        chunk_map.source = next(iter(stored.sources))
    if not len(stored.counts):
        return chunk_map
    chunk_arr = np.asarray(chunks, dtype=np.int64)
    coords, vcounts = _block_chunks(stored.virtual, stored.counts, chunk_arr)
    slots, scounts = _block_chunks(stored.source, stored.source_counts, chunk_arr)
    if (
        coords is None
        or slots is None
        or not np.array_equal(vcounts, scounts)
        or np.any(slots[:, 1:] != 0)
        or np.any(coords[:, 1:] >= np.asarray(chunk_map.slots.shape[1:], dtype=np.int64))
    ):
        raise UnsupportedFormatError(
            f"Expected the virtual mappings of {dataset.name!r} to be aligned to its "
            f"chunks {chunks}. Got unaligned mappings instead."
        )
    chunk_map.slots[tuple(coords.T)] = slots[:, 0]
    return chunk_map


def _mappings_from_hdf5(dataset: h5py.Dataset) -> Mappings:
    """Every mapping of ``dataset`` as HDF5 gives it (one call per selection)."""
    ndim = len(dataset.shape)
    dcpl = dataset.id.get_create_plist()  # one copy: it holds every mapping
    if dcpl.get_layout() != h5d.VIRTUAL and _never_written(dataset, dcpl):
        # versioned-hdf5 under h5py before 3.14 wrote a dataset mapping no chunk (empty,
        # or all fill) as a plain dataset, as h5py could not make a virtual one without
        # mappings: nothing stored, every element reads as the fill value.
        return Mappings.of([], [], ndim)
    if dcpl.get_layout() != h5d.VIRTUAL:
        raise UnsupportedFormatError(
            f"Expected {dataset.name!r} to be a virtual dataset over raw_data. "
            f"Got a dataset with another storage layout instead."
        )
    vblocks: list[np.ndarray] = []
    sblocks: list[np.ndarray] = []
    names: set[tuple[bytes, bytes]] = set()
    for i in range(dcpl.get_virtual_count()):
        vblocks.append(_blocks(dcpl.get_virtual_vspace(i), ndim))
        sblocks.append(_blocks(dcpl.get_virtual_srcspace(i), ndim))
        file, name = dcpl.get_virtual_filename(i), dcpl.get_virtual_dsetname(i)
        names.add((file.encode(), name.encode()))
    return Mappings.of(vblocks, sblocks, ndim, frozenset(names))


def _never_written(dataset: h5py.Dataset, dcpl: h5p.PropDCID) -> bool:
    """Whether a plain (contiguous) dataset has no storage: no element was written."""
    return dcpl.get_layout() == h5d.CONTIGUOUS and dataset.id.get_storage_size() == 0


def _blocks(space: h5s.SpaceID, ndim: int) -> np.ndarray:
    """The blocks of a selection as ``(n, 2, ndim)`` start and inclusive end coordinates."""
    if space.get_select_type() == h5s.SEL_HYPERSLABS:
        return np.asarray(space.get_select_hyper_blocklist(), dtype=np.int64).reshape(-1, 2, ndim)
    bounds = space.get_select_bounds()
    if bounds is None or space.get_select_npoints() == 0:  # an empty selection maps nothing
        return np.zeros((0, 2, ndim), dtype=np.int64)
    return np.asarray([bounds], dtype=np.int64).reshape(1, 2, ndim)


def _block_chunks(
    every: np.ndarray, per_mapping: np.ndarray, chunk_arr: np.ndarray
) -> tuple[np.ndarray | None, np.ndarray]:
    """Chunk coordinates covered by the blocks ``every`` (``per_mapping`` of them for
    each mapping, in order), and their count per mapping.

    Each block must start on a chunk boundary and stay within one chunk on every axis
    but the first; the coordinates are ``None`` otherwise.
    """
    start = every[:, 0, :]
    stop = every[:, 1, :] + 1
    first = start // chunk_arr
    if np.any(start % chunk_arr != 0) or np.any((stop[:, 1:] - 1) // chunk_arr[1:] != first[:, 1:]):
        return None, per_mapping
    rows = -(-(stop[:, 0] - start[:, 0]) // chunk_arr[0])
    step = np.arange(int(rows.sum()), dtype=np.int64) - np.repeat(np.cumsum(rows) - rows, rows)
    coords = np.repeat(first, rows, axis=0)
    coords[:, 0] += step
    mapping = np.repeat(np.arange(len(per_mapping)), per_mapping)
    counts = np.bincount(mapping, weights=rows, minlength=len(per_mapping)).astype(np.int64)
    return coords, counts
