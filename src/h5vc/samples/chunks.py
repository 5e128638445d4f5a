"""Reading the stored chunks of complete collection files without going through HDF5.

A backend ``01`` sample is exactly one chunk, and so is a backend ``00`` sample whenever
the maximum sample shape makes one chunk of its own (see
:func:`h5vc.samples.backends.chunk_shape`). A collection file never changes once its
content index exists. So a reader can look up the file offset and size of every chunk of
a dataset once (``H5Dchunk_iter``), read a sample's stored bytes with ``os.pread`` and
undo the filter pipeline itself. That skips HDF5's per-read work (dataspace selection,
chunk lookup, filter dispatch) and, because the decompressors release the GIL, lets
several threads decode samples at the same time.

Understood filter pipelines, as the compression options create them:

* Blosc (filter 32001 from ``hdf5plugin``): the chunk is one Blosc frame (16-byte header:
  format version, codec version, flags, type size, then the uncompressed size, block
  size and compressed size as little-endian uint32), decoded with ``numcodecs``' Blosc,
  which reads every frame of the C-Blosc 1 format that filter writes;
* deflate (filter 1): a zlib stream, decoded with zlib-ng (1.5x the standard library's
  ``zlib``, which stands in if zlib-ng is missing);
* shuffle (filter 2, cd_values ``[element size]``): a byte transpose, undone with numpy;
* Fletcher-32 (filter 3, the last filter of backend ``00`` pipelines): the chunk ends
  with a 4-byte checksum of the bytes before it, verified with :func:`fletcher32` and
  stripped.

Any other filter (LZF, Blosc2, ...) makes :meth:`ChunkDecoder.for_dataset` return
``None``: such samples are read through HDF5. A chunk stored with a filter skipped (HDF5
skips an optional filter that fails, e.g. compression that would not shrink the data;
the chunk's filter mask says which) is decoded without that step.

Decoding is never trusted on its own: a backend ``01`` sample decoded here is returned
only if its xxhash64 matches the record's checksum, a backend ``00`` sample only if its
chunk passed the Fletcher-32 check, and any failure falls back to the HDF5 read, which
gives the same data or raises the usual error.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import h5py
import numpy as np

from h5vc.deflate import codec as _inflate
from h5vc.errors import ChunkDecodeError

__all__ = [
    "BLOSC_FILTER",
    "ChunkDecodeError",
    "ChunkDecoder",
    "ChunkEncoder",
    "fletcher32",
]

#: ``numcodecs.blosc``, imported on first use (it takes a while); ``False`` if unavailable.
_blosc: Any = None

#: HDF5 filter id of the Blosc filter of ``hdf5plugin``.
BLOSC_FILTER = 32001
_BLOSC_HEADER_BYTES = 16
#: Uncompressed size and compressed size of a Blosc frame (block size in between).
_BLOSC_SIZES = struct.Struct("<I4xI")
#: Blosc compressor codes as the HDF5 filter stores them in cd_values[6].
_BLOSC_COMPRESSORS = {0: "blosclz", 1: "lz4", 2: "lz4hc", 3: "snappy", 4: "zlib", 5: "zstd"}

#: numcodecs' Fletcher-32 codec, created on first use (importing numcodecs takes a while).
_fletcher32_codec: Any = None


def _blosc_module() -> Any:
    """``numcodecs.blosc``, or ``False`` if numcodecs cannot be imported."""
    global _blosc
    if _blosc is None:
        try:
            from numcodecs import blosc
        except ImportError:  # without numcodecs, Blosc chunks are read through HDF5
            blosc = False
        _blosc = blosc
    return _blosc


def _blosc_sizes(data: Any) -> tuple[int, int]:
    if len(data) < _BLOSC_HEADER_BYTES:
        raise ChunkDecodeError(f"Expected a Blosc frame. Got {len(data)} bytes.")
    nbytes, cbytes = _BLOSC_SIZES.unpack_from(data, 4)
    if cbytes != len(data):
        raise ChunkDecodeError(
            f"Expected a Blosc frame of {len(data)} bytes. Its header says {cbytes}."
        )
    return nbytes, cbytes


def _blosc_decode(data: Any) -> Any:
    _blosc_sizes(data)
    return _blosc.decompress(data)


def _shuffle_decoder(element_size: int) -> Callable[[Any], Any]:
    def unshuffle(data: Any) -> Any:
        raw = np.frombuffer(data, np.uint8)
        count = raw.size // element_size
        if element_size <= 1 or count <= 1:
            return raw  # the HDF5 shuffle filter leaves such chunks as they are
        body = raw[: count * element_size].reshape(element_size, count).T.reshape(-1)
        if raw.size % element_size:
            body = np.concatenate((body, raw[count * element_size :]))
        return body

    return unshuffle


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


def _fletcher_check(data: Any) -> Any:
    """The bytes of ``data`` before its 4-byte Fletcher-32 checksum, once that matches.

    HDF5 stores the checksum as a little-endian uint32 after the filtered bytes and also
    accepts it with the two bytes of each 16-bit half swapped (what versions before 1.6.3
    wrote on little-endian machines); so does this check.
    """
    if len(data) < 4:
        raise ChunkDecodeError(f"Expected a Fletcher-32 checksum. Got {len(data)} bytes.")
    body = memoryview(data)[:-4]
    stored = int.from_bytes(data[-4:], "little")
    checksum = fletcher32(body)
    swapped = (checksum & 0x00FF00FF) << 8 | (checksum >> 8) & 0x00FF00FF
    if stored not in (checksum, swapped):
        raise ChunkDecodeError(
            f"Expected chunk bytes with the Fletcher-32 checksum {stored:08x} stored after "
            f"them. Got bytes with checksum {checksum:08x}."
        )
    return body


def _fletcher_strip(data: Any) -> Any:
    """The bytes of ``data`` before its 4-byte Fletcher-32 checksum, unchecked: for a
    caller that verifies the decoded sample against a digest of its own instead."""
    if len(data) < 4:
        raise ChunkDecodeError(f"Expected a Fletcher-32 checksum. Got {len(data)} bytes.")
    return memoryview(data)[:-4]


def _filter_stage(code: int, values: tuple[int, ...], dtype: np.dtype) -> Callable | None:
    """The decoding step of one filter of a pipeline, or ``None`` if not understood."""
    if code == h5py.h5z.FILTER_DEFLATE:
        return _inflate.decompress
    if code == h5py.h5z.FILTER_SHUFFLE:
        return _shuffle_decoder(values[0] if values else dtype.itemsize)
    if code == h5py.h5z.FILTER_FLETCHER32:
        return _fletcher_check
    if code == BLOSC_FILTER and _blosc_module():
        compressor = _BLOSC_COMPRESSORS.get(values[6] if len(values) > 6 else 0)
        if compressor in _blosc.list_compressors():
            return _blosc_decode
    return None


class ChunkDecoder:
    """Turns the stored bytes of one chunk into the sample, for one filter pipeline.

    Build it with :meth:`for_dataset`. :meth:`decode_into` runs without HDF5, so it may be
    called from several threads at once.
    """

    __slots__ = ("_blosc_first", "_filters")

    def __init__(self, filters: tuple[Callable[[Any], Any], ...]) -> None:
        self._filters = filters  # the decoding step of each filter, in pipeline order
        # Blosc undone last decompresses straight into the output.
        self._blosc_first = bool(filters) and filters[0] is _blosc_decode

    @classmethod
    def for_dataset(cls, dataset: h5py.Dataset) -> ChunkDecoder | None:
        """A decoder for the filter pipeline of ``dataset``; ``None`` if it is not understood."""
        plist = dataset.id.get_create_plist()
        filters = []
        for number in range(plist.get_nfilters()):
            code, _flags, values, _name = plist.get_filter(number)
            stage = _filter_stage(code, tuple(values), dataset.dtype)
            if stage is None:
                return None
            filters.append(stage)
        return cls(tuple(filters))

    @property
    def checksummed(self) -> bool:
        """Whether the pipeline ends chunks with a Fletcher-32 checksum (4 bytes)."""
        return any(f is _fletcher_check or f is _fletcher_strip for f in self._filters)

    def without_fletcher_check(self) -> ChunkDecoder:
        """This decoder, only stripping Fletcher-32 checksums instead of checking them.

        For samples whose decoded bytes are checked against a stronger digest anyway:
        HDF5's Fletcher-32 sums cost more than hashing the decoded sample.
        """
        return type(self)(
            tuple(_fletcher_strip if f is _fletcher_check else f for f in self._filters)
        )

    def decode_into(self, data: Any, mask: int, out: np.ndarray) -> None:
        """Decode the stored bytes ``data`` of one chunk into ``out`` (C-contiguous, the
        chunk's size). Bit ``i`` of the chunk's filter ``mask`` set means HDF5 stored the
        chunk without filter ``i`` (an optional filter that failed, such as compression
        that would not shrink the data).

        Raises an exception (not necessarily :class:`ChunkDecodeError`: the codecs raise
        their own) unless the bytes pass their Fletcher-32 check, if the pipeline has one,
        and decode to exactly ``out.nbytes`` bytes.
        """
        blosc_into_out = self._blosc_first and not mask & 1
        for number in reversed(range(blosc_into_out, len(self._filters))):  # last to first
            if not mask >> number & 1:
                data = self._filters[number](data)
        if blosc_into_out:
            nbytes, _ = _blosc_sizes(data)
            if nbytes != out.nbytes:
                raise ChunkDecodeError(f"Expected {out.nbytes} bytes. The chunk holds {nbytes}.")
            _blosc.decompress(data, out)
            return
        raw = np.frombuffer(data, np.uint8)
        if raw.size != out.nbytes:
            raise ChunkDecodeError(f"Expected {out.nbytes} bytes. The chunk holds {raw.size}.")
        out.reshape(-1).view(np.uint8)[...] = raw


class ChunkEncoder:
    """The stored bytes of one chunk, as HDF5's filter pipeline writes them, without HDF5.

    For pipelines of Blosc (filter 32001, as :mod:`hdf5plugin` sets it up: type size,
    level, shuffle and compressor in cd_values 2, 4, 5 and 6; automatic block size)
    optionally followed by Fletcher-32. Blosc runs in ``numcodecs``, which releases the
    GIL, so several threads may encode at once; called from a thread other than the main
    one, numcodecs compresses on that thread alone (no Blosc threads of its own), so a
    pool of encoding threads never competes with Blosc's threads.

    HDF5's Blosc filter compresses into a buffer the size of the chunk and, when the
    result does not fit, fails; the filter being optional, HDF5 then stores the chunk's
    bytes as they are (followed by their Fletcher-32 checksum, if the pipeline has it)
    with bit 0 of the chunk's filter mask set. Blosc's output for a buffer it fits in
    does not depend on the buffer's size, so :meth:`encode` returns

    * the Blosc frame (and checksum) for a chunk that compresses to at most half its
      size: filter mask 0;
    * the chunk's bytes (and checksum) for a chunk whose Blosc frame is larger than the
      chunk: filter mask 1 (:meth:`filter_mask` tells the two apart by their size);
    * ``None`` (write the chunk through HDF5) in between, where a bounded buffer is
      closest to changing the outcome.

    A writer should compare a chunk of each kind encoded here with HDF5's own before
    trusting the encoder with a file (see
    :meth:`h5vc.samples.backends.CollectionWriter.write`).
    """

    __slots__ = ("_blosc", "_fletcher", "_typesize")

    def __init__(self, blosc: tuple[str, int, int], typesize: int, fletcher: bool) -> None:
        self._blosc = blosc  # (compressor, level, shuffle)
        self._typesize = typesize
        self._fletcher = fletcher

    @classmethod
    def for_dataset(cls, dataset: h5py.Dataset) -> ChunkEncoder | None:
        """An encoder for the pipeline of ``dataset``; ``None`` if it is another one."""
        if not _blosc_module():
            return None
        plist = dataset.id.get_create_plist()
        filters = [plist.get_filter(number) for number in range(plist.get_nfilters())]
        if not filters or filters[0][0] != BLOSC_FILTER:
            return None
        fletcher = len(filters) == 2 and filters[1][0] == h5py.h5z.FILTER_FLETCHER32
        if len(filters) > 1 + fletcher:
            return None
        values = tuple(filters[0][2])
        if len(values) < 7:
            return None
        typesize, level, shuffle = values[2], values[4], values[5]
        compressor = _BLOSC_COMPRESSORS.get(values[6])
        if compressor is None or compressor not in _blosc.list_compressors():
            return None
        if not 1 <= typesize <= 255:
            return None
        return cls((compressor, level, shuffle), typesize, fletcher)

    def encode(self, chunk: np.ndarray) -> bytes | None:
        """The stored bytes of ``chunk`` (C-contiguous, the whole chunk): compressed, or
        as they are where HDF5 stores them so (see the class documentation); ``None``
        when HDF5 must write it."""
        if not chunk.nbytes:
            return None
        compressor, level, shuffle = self._blosc
        raw = np.ascontiguousarray(chunk).reshape(-1).view(np.uint8)
        encoded = _blosc.compress(raw, compressor.encode(), level, shuffle, 0, self._typesize)
        if len(encoded) > chunk.nbytes:
            stored = raw.tobytes()  # Blosc's filter fails: HDF5 skips it
        elif len(encoded) <= chunk.nbytes // 2:
            stored = bytes(encoded)
        else:
            return None
        if self._fletcher:
            return stored + fletcher32(stored).to_bytes(4, "little")
        return stored

    def filter_mask(self, stored: bytes, chunk_nbytes: int) -> int:
        """The filter mask of the stored bytes :meth:`encode` returned for a chunk of
        ``chunk_nbytes`` bytes: 1 (Blosc skipped) for the chunk's own bytes, else 0.

        The two never have the same size: a compressed chunk is at most half as large.
        """
        return int(len(stored) - 4 * self._fletcher >= chunk_nbytes)
