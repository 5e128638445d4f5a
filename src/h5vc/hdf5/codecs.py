"""HDF5 filter pipelines done by h5vc itself, chunk by chunk, on all cores.

A :class:`Pipeline` encodes and decodes one chunk exactly as HDF5's filters store it,
so chunks written with ``write_direct_chunk`` read back through HDF5 (h5py, h5dump,
any other tool) and chunks read raw decode to the bytes HDF5 would return.  The
versioned store and the sample stores both run their chunks through it.  Filters:

* shuffle (filter 2, parameter: the element size): a byte transpose, in numpy;
* deflate (filter 1): a zlib stream, on zlib-ng (valid zlib streams at the levels
  zlib has: HDF5 reads them; the stored bytes may differ from zlib's by a little;
  the standard library's ``zlib`` stands in if zlib-ng is missing);
* Blosc (filter 32001 from hdf5plugin; parameters 2, 4, 5 and 6: type size, level,
  shuffle, compressor): one Blosc frame (16-byte header: versions, flags, type size,
  then the uncompressed size, block size and compressed size as little-endian
  uint32), in numcodecs' Blosc, which reads every frame of the C-Blosc 1 format that
  filter writes; the header's sizes are checked before a frame is decoded;
* Zstandard (filter 32015): in numcodecs;
* Fletcher-32 (filter 3; run only where asked, see :func:`pipeline_of`): a 4-byte
  checksum after the bytes, checked (or only stripped) and removed.

:meth:`Pipeline.encode_like_hdf5` gives the very bytes and filter mask HDF5 itself
stores, for Blosc pipelines. zlib-ng, Blosc and Zstandard release the GIL while they
work, so chunks are encoded and decoded on a thread pool of one worker per core.
Any other filter (lzf, szip, scale-offset, ...) has no pipeline here and stays with
HDF5.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import struct
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

import h5vc.config as config
from h5vc.cores import usable
from h5vc.errors import ChunkDecodeError

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

__all__ = [
    "BLOSC_COMPRESSORS",
    "FILTER_BLOSC",
    "Pipeline",
    "as_bytes",
    "fletcher32",
    "load_plugin_filters",
    "parallel_groups",
    "parallel_map",
    "pipeline_of",
    "pipeline_for",
    "serial",
    "single_threaded_blosc",
    "workers",
]

#: Items are handed to the pool in this many groups per worker (see parallel_groups).
GROUPS_PER_WORKER = config.GROUPS_PER_WORKER

FILTER_DEFLATE = 1
FILTER_SHUFFLE = 2
FILTER_FLETCHER32 = 3
#: HDF5 filter id of the Blosc filter of ``hdf5plugin``.
FILTER_BLOSC = 32001
FILTER_ZSTD = 32015
_FILTER_NAMES = {
    "deflate": FILTER_DEFLATE,
    "shuffle": FILTER_SHUFFLE,
    "fletcher32": FILTER_FLETCHER32,
    "blosc": FILTER_BLOSC,
    "zstd": FILTER_ZSTD,
}

#: Blosc compressor codes of HDF5's Blosc filter (its 7th parameter).
BLOSC_COMPRESSORS = {0: "blosclz", 1: "lz4", 2: "lz4hc", 3: "snappy", 4: "zlib", 5: "zstd"}
_BLOSC_HEADER_BYTES = 16
#: Uncompressed size and compressed size in a Blosc frame's header (block size between).
_BLOSC_SIZES = struct.Struct("<I4xI")

_T = TypeVar("_T")
_R = TypeVar("_R")

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _forget_pool() -> None:
    """In a forked child: the parent's pool has no threads there, and counting them
    idle it would start none (its work would wait forever); its lock may have been
    held by another thread at the fork. The child makes its own of both."""
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)
_serial = threading.local()


def workers() -> int:
    """Threads of the codec pool: one per core this process may run on."""
    return usable()


@contextlib.contextmanager
def serial() -> Iterator[None]:
    """Inside the block, :func:`parallel_map` and :func:`parallel_groups` called from
    this thread work in this thread, with no pool: for callers that are already one of
    several running side by side (a Dask task), which the pool would only compete with."""
    before = getattr(_serial, "on", False)
    _serial.on = True
    try:
        yield
    finally:
        _serial.on = before


#: Holders of :func:`single_threaded_blosc` and numcodecs' ``use_threads`` before the first.
_blosc_holders = 0
_blosc_use_threads: Any = None


@contextlib.contextmanager
def single_threaded_blosc() -> Iterator[None]:
    """Inside the block (held by any number of callers at once), numcodecs' Blosc
    compresses and decompresses on the calling thread alone: its ``use_threads`` is
    off, then set back. For pools whose threads each run Blosc: otherwise a call from
    the main thread starts Blosc's own threads as well, and with ``use_threads`` set
    every call queues behind numcodecs' lock on Blosc's one shared context."""
    global _blosc_holders, _blosc_use_threads
    from numcodecs import blosc

    with _pool_lock:
        if not _blosc_holders:
            _blosc_use_threads = blosc.use_threads
            blosc.use_threads = False
        _blosc_holders += 1
    try:
        yield
    finally:
        with _pool_lock:
            _blosc_holders -= 1
            if not _blosc_holders:
                blosc.use_threads = _blosc_use_threads


def _pooled(count: int) -> bool:
    """Whether ``count`` items go to the pool (else: this thread, in order)."""
    return count >= 2 and workers() >= 2 and not getattr(_serial, "on", False)


def parallel_map(function: Callable[[_T], _R], items: Iterable[_T]) -> Iterator[_R]:
    """``map(function, items)`` on a thread pool of :func:`workers` threads, results in
    order; on one core, for one item or inside :func:`serial`, in this thread with no
    pool at all."""
    global _pool
    items = list(items)
    if not _pooled(len(items)):
        return map(function, items)
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                from concurrent.futures import ThreadPoolExecutor

                _pool = ThreadPoolExecutor(workers(), thread_name_prefix="h5vc-codec")
    return _pool.map(function, items)


def parallel_groups(function: Callable[[_T], _R], items: Iterable[_T]) -> Iterator[_R]:
    """:func:`parallel_map` with the items handed out in contiguous groups, about
    :data:`GROUPS_PER_WORKER` per worker: the pool's cost per task (a future, a lock, a
    wake-up: tens of microseconds on a busy machine) is paid per group, not per chunk.
    Every task is queued at once; results in order."""
    items = list(items)
    if not _pooled(len(items)):
        return map(function, items)
    n = workers()
    size = -(-len(items) // (GROUPS_PER_WORKER * n))
    groups = [items[i : i + size] for i in range(0, len(items), size)]
    done = parallel_map(lambda group: [function(item) for item in group], groups)
    return itertools.chain.from_iterable(done)


def _shuffle(data: bytes | memoryview, size: int) -> bytes:
    raw = np.frombuffer(data, dtype=np.uint8)
    n = len(raw) // size
    body = raw[: n * size].reshape(n, size).T.tobytes()
    return body + raw[n * size :].tobytes() if n * size < len(raw) else body


def _unshuffle_into(data: bytes | memoryview, size: int, out: np.ndarray) -> None:
    """HDF5's shuffle undone from ``data`` into the bytes ``out`` (trailing bytes that
    make no whole element stay where they are, as HDF5 leaves them)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    n = len(raw) // size
    if size <= 1 or n <= 1:  # HDF5's shuffle leaves such chunks as they are
        out[...] = raw
        return
    out[: n * size].reshape(n, size)[...] = raw[: n * size].reshape(size, n).T
    out[n * size :] = raw[n * size :]


#: numcodecs' Fletcher-32 codec, made on first use (importing numcodecs takes a while).
_fletcher32_codec: Any = None


def fletcher32(data: Any) -> int:
    """The Fletcher-32 checksum of the bytes ``data``, as HDF5's Fletcher-32 filter
    computes it (``H5_checksum_fletcher32``); numcodecs' ``Fletcher32`` codec computes
    the same sums (it appends them little-endian after the bytes), so its checksum is
    taken (0 for no bytes, where the codec refuses the empty buffer)."""
    global _fletcher32_codec
    if not len(data):
        return 0
    if _fletcher32_codec is None:
        from numcodecs.fletcher32 import Fletcher32

        _fletcher32_codec = Fletcher32()
    encoded = _fletcher32_codec.encode(np.frombuffer(data, np.uint8))
    return int.from_bytes(bytes(encoded[-4:]), "little")


def _fletcher_body(data: Any, check: bool) -> memoryview:
    """The bytes of ``data`` before its 4-byte Fletcher-32 checksum, once that matches
    (with ``check``). HDF5 stores the checksum as a little-endian uint32 after the
    filtered bytes and also accepts it with the two bytes of each 16-bit half swapped
    (what versions before 1.6.3 wrote on little-endian machines); so does this."""
    if len(data) < 4:
        raise ChunkDecodeError(f"Expected a Fletcher-32 checksum. Got {len(data)} bytes.")
    body = memoryview(data)[:-4]
    if check:
        stored = int.from_bytes(bytes(data[-4:]), "little")
        checksum = fletcher32(body)
        swapped = (checksum & 0x00FF00FF) << 8 | (checksum >> 8) & 0x00FF00FF
        if stored not in (checksum, swapped):
            raise ChunkDecodeError(
                f"Expected chunk bytes with the Fletcher-32 checksum {stored:08x} stored "
                f"after them. Got bytes with checksum {checksum:08x}."
            )
    return body


def _blosc_sizes(data: Any) -> tuple[int, int]:
    """Uncompressed and compressed size of the Blosc frame ``data``, which must be all of
    it (16-byte header: versions, flags, type size, then the uncompressed size, block
    size and compressed size as little-endian uint32)."""
    if len(data) < _BLOSC_HEADER_BYTES:
        raise ChunkDecodeError(f"Expected a Blosc frame. Got {len(data)} bytes.")
    nbytes, cbytes = _BLOSC_SIZES.unpack_from(data, 4)
    if cbytes != len(data):
        raise ChunkDecodeError(
            f"Expected a Blosc frame of {len(data)} bytes. Its header says {cbytes}."
        )
    return nbytes, cbytes


#: Chunks at least this long are checked by :func:`_lz4_frame_too_long` ...
_PROOF_MIN_BYTES = 8 * 1024
#: ... first their start (most data that compresses repeats itself early on), then a
#: start this many times longer, and so on.
_PROOF_HEAD_BYTES = 512
_PROOF_HEAD_GROWTH = 16
#: The bytes a Blosc frame adds to its codec's output, at least: a 16-byte header, a
#: 4-byte block start and a 4-byte stream length.
_BLOSC_FRAME_BYTES = 24
#: (chunk bytes, compressor, level, shuffle, type size) -> Blosc's block size for them.
_BLOSC_BLOCKS: dict[tuple[int, str, int, int, int], int] = {}


def _repeated_quads(data: np.ndarray) -> int:
    """Positions of the bytes ``data`` whose 4 bytes also start at an earlier position."""
    count = len(data) - 3
    if count <= 1:
        return 0
    data = np.ascontiguousarray(data, np.uint8)
    # The 4 bytes at each position as one uint32: a view one byte apart, copied once.
    quads = np.ndarray((count,), "<u4", data, strides=(1,)).copy()
    quads.sort()
    return int(np.count_nonzero(quads[1:] == quads[:-1]))


def _lz4_shortfall(repeats: int, size: int) -> int:
    """255 times the most by which LZ4's block of ``size`` bytes, ``repeats`` of whose
    positions start 4 bytes that also start earlier, can be shorter than ``size``.

    With ``m`` matches of ``L_i >= 4`` bytes, ``S = sum(L_i - 3) <= repeats`` and
    ``m <= S``, the block holds ``m + 1`` tokens, ``2 m`` offset bytes and the other
    ``T = size - S - 3 m`` bytes as literals, in ``m + 1`` runs: ``size + 1 - S`` bytes
    at least. A run of ``L >= 15`` literals takes ``1 + (L - 15) // 255`` more bytes
    for its length, at least ``(L - 14) / 255`` for any ``L``; over all runs at least
    ``(T - 14 (m + 1)) / 255 >= (size - 18 repeats - 14) / 255``. The smaller of the
    two shortfalls these bounds leave is returned.
    """
    return max(0, min(255 * (repeats - 1), 273 * repeats - size - 241))


def _blosc_block_bytes(nbytes: int, cname: str, level: int, shuffle: int, size: int) -> int:
    """The block size Blosc picks for ``nbytes`` with these settings (it depends on
    nothing else), read from the header of a frame of zeros."""
    key = (nbytes, cname, level, shuffle, size)
    block = _BLOSC_BLOCKS.get(key)
    if block is None:
        from numcodecs import blosc

        frame = blosc.compress(bytes(nbytes), cname.encode(), level, shuffle, 0, size)
        block = struct.unpack_from("<I", frame, 8)[0]
        if len(_BLOSC_BLOCKS) >= 256:
            _BLOSC_BLOCKS.clear()
        _BLOSC_BLOCKS[key] = block
    return block


def _lz4_frame_too_long(data: np.ndarray, block: int = 0) -> bool:
    """True if Blosc's frame of ``data`` compressed with LZ4 (lz4 or lz4hc, any level
    and parse), with the bytes as they are, is longer than ``data``: then HDF5's Blosc
    filter, which writes into a buffer the size of the chunk, fails.

    ``block``: Blosc's block size for ``data`` if known, each block being one stream
    (one-byte items); ``0``: any blocks and streams.

    An LZ4 block of ``n`` bytes with ``m`` matches of ``L_i >= 4`` bytes holds the
    ``n - sum(L_i)`` other bytes as literals, ``m + 1`` one-byte tokens and ``m``
    two-byte offsets: at least ``n + 1 - sum(L_i - 3)`` bytes. Each of the first
    ``L_i - 3`` positions of a match starts 4 bytes that also start earlier (at the
    match's source), and those positions differ between matches, so ``sum(L_i - 3)``
    is at most ``R``, the positions of ``data`` whose 4 bytes start at an earlier one
    too. A Blosc frame adds at least :data:`_BLOSC_FRAME_BYTES` to its codec's output
    (more with more blocks or streams, whose matches stay inside them; a stream LZ4
    cannot shrink is stored as it is, longer still), so with ``R <= 24`` the frame is
    longer than ``data``. With the blocks known, the lengths of long literal runs count
    too (:func:`_lz4_shortfall`, with ``R`` of each block): the frame of ``b`` blocks
    (16 header bytes, then 4 for each block's start and 4 for its stream's length) is
    longer than ``data`` unless the blocks' streams fall short of their blocks by
    ``16 + 8 b`` bytes or more: a chunk of one block may have up to
    ``(n + 6360) // 273`` repeats (207 for 50 KB), not 24.
    """
    if block <= 0:  # any blocks and streams
        if _repeated_quads(data[:_PROOF_HEAD_BYTES]) > _BLOSC_FRAME_BYTES:
            return False
        return _repeated_quads(data) <= _BLOSC_FRAME_BYTES
    total = len(data)
    block = min(block, total)
    budget = 255 * (16 + 8 * -(-total // block))
    head = _PROOF_HEAD_BYTES
    while head < block:  # the first block's start alone may repeat itself too often
        if _lz4_shortfall(head - 4, block) >= budget:  # it can: see if it does
            if _lz4_shortfall(_repeated_quads(data[:head]), block) >= budget:
                return False
            break
        head *= _PROOF_HEAD_GROWTH
    shortfall = 0
    for start in range(0, total, block):
        piece = data[start : start + block]
        shortfall += _lz4_shortfall(_repeated_quads(piece), len(piece))
        if shortfall >= budget:
            return False
    return True


class _Filter:
    """One filter of a pipeline: encode and decode one chunk's bytes."""

    def __init__(self, code: int, values: tuple[int, ...], itemsize: int, check: bool = True):
        self.code = code
        self.values = values
        self.itemsize = itemsize
        #: Fletcher-32 only: verify the checksum (else only strip it).
        self.check = check
        if code == FILTER_SHUFFLE:
            self.size = values[0] if values else itemsize
        elif code == FILTER_DEFLATE:
            self.level = values[0] if values else 6
        elif code == FILTER_BLOSC:
            # (filter version, format version, typesize, chunk bytes, level, shuffle, codec)
            padded = (*values, 0, 0, 0, 0, 0, 0, 0)
            self.size = padded[2] or itemsize
            self.level = padded[4] if len(values) > 4 else 5
            self.blosc_shuffle = padded[5] if len(values) > 5 else 1
            self.cname = BLOSC_COMPRESSORS[padded[6]]
        elif code == FILTER_ZSTD:
            self.level = values[0] if values else 3
        elif code != FILTER_FLETCHER32:  # pragma: no cover - pipeline_of admits no other
            raise ValueError(f"Expected a supported filter code. Got {code}.")

    def unchecked(self) -> _Filter:
        """This filter, a Fletcher-32 one stripping checksums without checking them."""
        if self.code != FILTER_FLETCHER32:
            return self
        return _Filter(self.code, self.values, self.itemsize, check=False)

    def encode(self, data: Any) -> Any:
        if self.code == FILTER_SHUFFLE:
            return _shuffle(data, self.size)
        if self.code == FILTER_DEFLATE:
            from h5vc.deflate import codec as deflate  # zlib-ng: loaded for deflated data

            return deflate.compress(data, self.level)
        if self.code == FILTER_BLOSC:
            from numcodecs import blosc

            return blosc.compress(
                data, self.cname.encode(), self.level, self.blosc_shuffle, 0, self.size
            )
        if self.code == FILTER_FLETCHER32:
            return bytes(data) + fletcher32(data).to_bytes(4, "little")
        from numcodecs import Zstd

        return Zstd(level=self.level).encode(data)

    def surely_fails(self, data: Any) -> bool:
        """Whether HDF5's Blosc filter is sure to fail on ``data`` (a chunk's bytes), its
        frame longer than the chunk, found for a fraction of compressing it; ``False``
        where unsure. Tried for lz4hc only (elsewhere compressing costs about as much),
        on bytes Blosc compresses as they are (no shuffle, or the byte shuffle of
        one-byte items, which leaves them as they are; the bit shuffle moves bits even
        then), see :func:`_lz4_frame_too_long`."""
        return (
            self.code == FILTER_BLOSC
            and self.cname == "lz4hc"
            and self.level > 0
            and (self.blosc_shuffle == 0 or (self.size == 1 and self.blosc_shuffle == 1))
            and len(data) >= _PROOF_MIN_BYTES
            and _lz4_frame_too_long(np.frombuffer(data, np.uint8), self._blocks(len(data)))
        )

    def _blocks(self, nbytes: int) -> int:
        """Blosc's block size for a chunk of ``nbytes`` where each block is one stream
        (one-byte items), else 0 (unknown)."""
        if self.size != 1:
            return 0
        return _blosc_block_bytes(nbytes, self.cname, self.level, self.blosc_shuffle, 1)

    def decode(self, data: Any) -> Any:
        if self.code == FILTER_SHUFFLE:
            out = np.empty(len(data), dtype=np.uint8)
            _unshuffle_into(data, self.size, out)
            return out
        if self.code == FILTER_DEFLATE:
            from h5vc.deflate import codec as deflate

            return deflate.decompress(data)
        if self.code == FILTER_BLOSC:
            from numcodecs import blosc

            _blosc_sizes(data)
            return blosc.decompress(data)
        if self.code == FILTER_FLETCHER32:
            return _fletcher_body(data, self.check)
        from numcodecs import Zstd

        return Zstd().decode(data)

    def decode_into(self, data: Any, out: np.ndarray) -> None:
        """Decode ``data`` into the bytes ``out``, which it must fill exactly."""
        if self.code == FILTER_SHUFFLE:
            if len(data) != len(out):
                raise ChunkDecodeError(f"Expected {len(out)} bytes. The chunk holds {len(data)}.")
            _unshuffle_into(data, self.size, out)
            return
        if self.code == FILTER_BLOSC:
            from numcodecs import blosc

            nbytes, _ = _blosc_sizes(data)
            if nbytes != len(out):
                raise ChunkDecodeError(f"Expected {len(out)} bytes. The chunk holds {nbytes}.")
            blosc.decompress(data, out)
            return
        decoded = np.frombuffer(self.decode(data), dtype=np.uint8)
        if len(decoded) != len(out):
            raise ChunkDecodeError(f"Expected {len(out)} bytes. The chunk holds {len(decoded)}.")
        out[...] = decoded


class Pipeline:
    """The filter pipeline of one chunked dataset, as h5vc runs it."""

    def __init__(self, filters: list[_Filter], chunk_bytes: int):
        self.filters = filters
        self.chunk_bytes = chunk_bytes

    def __repr__(self) -> str:
        names = {v: k for k, v in _FILTER_NAMES.items()}
        return "+".join(names[f.code] for f in self.filters) or "no filter"

    @property
    def faster_than_hdf5(self) -> bool:
        """Whether this pipeline beats HDF5's own filters even on one core: deflate (and
        shuffle) on zlib-ng do; Blosc and Zstandard through numcodecs do not."""
        from h5vc.deflate import ZLIB_NG

        codes = {item.code for item in self.filters}
        return ZLIB_NG and codes <= {FILTER_DEFLATE, FILTER_SHUFFLE}

    @property
    def checksummed(self) -> bool:
        """Whether chunks end with a Fletcher-32 checksum (4 bytes)."""
        return any(item.code == FILTER_FLETCHER32 for item in self.filters)

    def unchecked(self) -> Pipeline:
        """This pipeline, stripping Fletcher-32 checksums without checking them: for
        chunks whose decoded bytes are checked against a stronger digest anyway
        (HDF5's Fletcher-32 sums cost more than hashing the decoded chunk)."""
        return Pipeline([item.unchecked() for item in self.filters], self.chunk_bytes)

    @property
    def like_hdf5(self) -> bool:
        """Whether :meth:`encode_like_hdf5` can give HDF5's own stored bytes: a Blosc
        filter as hdf5plugin sets it up (all 7 parameters), then at most Fletcher-32."""
        codes = [item.code for item in self.filters]
        return (
            codes in ([FILTER_BLOSC], [FILTER_BLOSC, FILTER_FLETCHER32])
            and len(self.filters[0].values) >= 7
            and 1 <= self.filters[0].size <= 255
        )

    def encode(self, chunk: np.ndarray) -> bytes:
        """The bytes HDF5 stores for ``chunk`` (a full, C-contiguous chunk)."""
        data: Any = as_bytes(np.ascontiguousarray(chunk))
        for item in self.filters:
            data = item.encode(data)
        return bytes(data)

    def encode_like_hdf5(self, chunk: np.ndarray) -> tuple[bytes, int] | None:
        """The bytes and filter mask HDF5 itself stores for ``chunk`` (the whole chunk),
        or ``None`` where HDF5 must write it; only for pipelines :attr:`like_hdf5`.

        HDF5's Blosc filter compresses into a buffer the size of the chunk and, when
        the result does not fit, fails; the filter being optional, HDF5 then stores the
        chunk's bytes as they are (then their Fletcher-32 checksum, if the pipeline has
        it) with bit 0 of the filter mask set. Blosc's output for a buffer it fits in
        does not depend on the buffer's size, so this returns the Blosc frame (mask 0)
        for a chunk that compresses to at most half its size, the chunk's own bytes
        (mask 1) for one whose frame is larger than the chunk, and ``None`` in between,
        where a bounded buffer is closest to changing the outcome. Blosc runs in
        numcodecs, which releases the GIL and, called from a thread other than the main
        one, compresses on that thread alone (no Blosc threads of its own).
        """
        raw = as_bytes(np.ascontiguousarray(chunk))
        if not len(raw):
            return None
        if self.filters[0].surely_fails(raw):
            encoded: Any = None  # proven too long: not compressed at all
        else:
            encoded = self.filters[0].encode(raw)
        if encoded is None or len(encoded) > len(raw):
            stored, mask = raw, 1  # Blosc's filter fails: HDF5 skips it
        elif len(encoded) <= len(raw) // 2:
            stored, mask = encoded, 0
        else:
            return None
        for item in self.filters[1:]:
            stored = item.encode(stored)
        return bytes(stored), mask

    def decode(self, stored: Any, filter_mask: int = 0) -> bytes:
        """The chunk's bytes from what HDF5 stored; ``filter_mask`` bit ``i`` set means
        filter ``i`` was skipped when the chunk was written."""
        out = np.empty(self.chunk_bytes, dtype=np.uint8)
        self.decode_into(stored, filter_mask, out)
        return out.tobytes()

    def decode_into(self, stored: Any, filter_mask: int, out: np.ndarray) -> None:
        """Decode a stored chunk into ``out``: its bytes, C-contiguous and writable (the
        last filter undone writes straight into it). Raises an exception (not
        necessarily :class:`ChunkDecodeError`: the codecs raise their own) unless the
        bytes pass their Fletcher-32 check, if the pipeline has one, and decode to
        exactly ``len(out)`` bytes."""
        applied = [f for i, f in enumerate(self.filters) if not filter_mask >> i & 1]
        data = stored
        for item in applied[:0:-1]:
            data = item.decode(data)
        if applied:
            applied[0].decode_into(data, out)
        elif len(data) == len(out):
            out[...] = np.frombuffer(data, dtype=np.uint8)
        else:
            raise ChunkDecodeError(f"Expected {len(out)} bytes. The chunk holds {len(data)}.")


def pipeline_of(
    dcpl: Any, itemsize: int, chunk_bytes: int, *, checksums: bool = False
) -> Pipeline | None:
    """The pipeline of a dataset creation property list, or None when it has a filter
    h5vc does not run (HDF5 then does the work) or no filter at all. Fletcher-32 is
    run only with ``checksums`` (elsewhere HDF5 runs pipelines that have it)."""
    n = dcpl.get_nfilters()
    if n == 0:
        return None
    known = (FILTER_DEFLATE, FILTER_SHUFFLE, FILTER_BLOSC, FILTER_ZSTD)
    filters = []
    for i in range(n):
        code, _flags, values, _name = dcpl.get_filter(i)
        if code not in known and not (checksums and code == FILTER_FLETCHER32):
            return None
        if code in (FILTER_BLOSC, FILTER_ZSTD) and not _have_numcodecs():
            return None
        values = tuple(int(v) for v in values)
        if code == FILTER_BLOSC and not _blosc_runs(values):
            return None
        filters.append(_Filter(int(code), values, itemsize))
    return Pipeline(filters, chunk_bytes)


def pipeline_for(dataset: Any) -> Pipeline | None:
    """The pipeline of the chunked h5py ``dataset``, Fletcher-32 included, or None
    where HDF5 must run it (see :func:`pipeline_of`)."""
    if dataset.chunks is None:
        return None
    itemsize = dataset.dtype.itemsize
    chunk_bytes = math.prod(dataset.chunks) * itemsize
    dcpl = dataset.id.get_create_plist()
    if dcpl.get_nfilters() == 0:
        return Pipeline([], chunk_bytes)  # chunks stored as they are
    return pipeline_of(dcpl, itemsize, chunk_bytes, checksums=True)


def _blosc_runs(values: tuple[int, ...]) -> bool:
    """Whether numcodecs' Blosc has the compressor of Blosc parameters ``values``."""
    from numcodecs import blosc

    cname = BLOSC_COMPRESSORS.get(values[6] if len(values) > 6 else 0)
    return cname is not None and cname in blosc.list_compressors()


def load_plugin_filters(dcpl: Any) -> None:
    """Register hdf5plugin's filters with HDF5 if ``dcpl`` uses a filter HDF5 does not
    have (Blosc, Zstandard, LZ4, ... in a file read by a program that never imported
    hdf5plugin): otherwise HDF5 fails on every chunk with an error about its plugin
    directory. Importing hdf5plugin takes about 0.2 s, so it happens only then."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    import h5py

    for index in range(dcpl.get_nfilters()):
        if not h5py.h5z.filter_avail(dcpl.get_filter(index)[0]):
            with contextlib.suppress(ImportError):
                import hdf5plugin  # noqa: F401  (registers its filters on import)
            _plugins_loaded = True
            return


_plugins_loaded = False


def _have_numcodecs() -> bool:
    try:
        import numcodecs  # noqa: F401
    except ImportError:  # pragma: no cover - numcodecs is a dependency
        return False
    return True


def encode_chunks(
    pipeline: Pipeline, data: np.ndarray, chunks: tuple[int, ...], fill: Any
) -> Iterator[bytes]:
    """The stored bytes of each chunk of ``data`` (whole chunks back to back along axis
    0; the last may be short and is padded with ``fill``), in order. Every chunk is
    queued on the thread pool at once; ``data`` must not change until the iterator is
    exhausted."""
    c0 = chunks[0]
    count = -(-len(data) // c0)

    def encode(i: int) -> bytes:
        chunk = data[i * c0 : (i + 1) * c0]
        if len(chunk) < c0:
            padded = np.empty(chunks, dtype=data.dtype)
            padded[...] = fill
            padded[: len(chunk)] = chunk
            chunk = padded
        return pipeline.encode(chunk)

    return parallel_groups(encode, range(count))


def write_encoded(
    dataset_id: Any, encoded: Iterable[bytes], first_row: int, chunks: tuple[int, ...]
) -> None:
    """Store encoded chunks as is with ``write_direct_chunk``, in order, as the chunks
    from row ``first_row`` on."""
    corner = (0,) * (len(chunks) - 1)
    write = dataset_id.write_direct_chunk
    for i, stored in enumerate(encoded):
        write((first_row + i * chunks[0], *corner), stored, 0)


def as_bytes(array: np.ndarray) -> memoryview:
    """The bytes of a C-contiguous array, writable if the array is."""
    return memoryview(array.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
