"""HDF5 filter pipelines done by h5vc itself, chunk by chunk, on all cores.

A :class:`Pipeline` encodes and decodes one chunk exactly as HDF5's filters
(shuffle, gzip, Blosc and Zstandard from hdf5plugin) store it, so chunks written
with ``write_direct_chunk`` read back through HDF5 (h5py, h5dump, any other tool)
and chunks read raw decode to the bytes HDF5 would return.  Deflate runs on zlib-ng
(valid zlib streams at the levels zlib has: HDF5 reads them; the stored bytes may
differ from zlib's by a little).  zlib-ng, Blosc and Zstandard release the GIL while
they work, so chunks are encoded and decoded on a thread pool of one worker per core.
Any other filter (lzf, szip, scale-offset, Fletcher-32, ...) has no pipeline here and
stays with HDF5.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

from h5vc.cores import usable
from h5vc.deflate import ZLIB_NG
from h5vc.deflate import codec as _deflate

__all__ = [
    "Pipeline",
    "as_bytes",
    "load_plugin_filters",
    "parallel_groups",
    "parallel_map",
    "pipeline_of",
    "serial",
    "workers",
]

#: Items are handed to the pool in this many groups per worker (see parallel_groups).
GROUPS_PER_WORKER = 4

FILTER_DEFLATE = 1
FILTER_SHUFFLE = 2
FILTER_BLOSC = 32001
FILTER_ZSTD = 32015

#: Blosc compressor codes of HDF5's Blosc filter (its 7th parameter).
_BLOSC_NAMES = {0: "blosclz", 1: "lz4", 2: "lz4hc", 3: "snappy", 4: "zlib", 5: "zstd"}

_T = TypeVar("_T")
_R = TypeVar("_R")

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
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
    out[: n * size].reshape(n, size)[...] = raw[: n * size].reshape(size, n).T
    out[n * size :] = raw[n * size :]


class _Filter:
    """One filter of a pipeline: encode and decode one chunk's bytes."""

    def __init__(self, code: int, values: tuple[int, ...], itemsize: int):
        self.code = code
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
            self.cname = _BLOSC_NAMES[padded[6]]
        elif code == FILTER_ZSTD:
            self.level = values[0] if values else 3
        else:  # pragma: no cover - pipeline_of admits only the codes above
            raise ValueError(f"Expected a supported filter code. Got {code}.")

    def encode(self, data: Any) -> Any:
        if self.code == FILTER_SHUFFLE:
            return _shuffle(data, self.size)
        if self.code == FILTER_DEFLATE:
            return _deflate.compress(data, self.level)
        if self.code == FILTER_BLOSC:
            from numcodecs import blosc

            typed = np.frombuffer(data, dtype=f"V{self.size}" if self.size > 1 else np.uint8)
            return blosc.compress(typed, self.cname.encode(), self.level, self.blosc_shuffle)
        from numcodecs import Zstd

        return Zstd(level=self.level).encode(data)

    def decode(self, data: Any) -> Any:
        if self.code == FILTER_SHUFFLE:
            out = np.empty(len(data), dtype=np.uint8)
            _unshuffle_into(data, self.size, out)
            return out
        if self.code == FILTER_DEFLATE:
            return _deflate.decompress(data)
        if self.code == FILTER_BLOSC:
            from numcodecs import blosc

            return blosc.decompress(data)
        from numcodecs import Zstd

        return Zstd().decode(data)

    def decode_into(self, data: Any, out: np.ndarray) -> None:
        """Decode ``data`` into the bytes ``out``, which it must fill exactly."""
        if self.code == FILTER_SHUFFLE:
            if len(data) != len(out):
                raise ValueError(f"Expected {len(out)} shuffled bytes. Got {len(data)}.")
            _unshuffle_into(data, self.size, out)
            return
        if self.code == FILTER_BLOSC:
            from numcodecs import blosc

            if len(data) >= 16 and int.from_bytes(bytes(data[4:8]), "little") == len(out):
                blosc.decompress(data, out)
                return
        decoded = np.frombuffer(self.decode(data), dtype=np.uint8)
        if len(decoded) != len(out):
            raise ValueError(f"Expected a decoded chunk of {len(out)} bytes. Got {len(decoded)}.")
        out[...] = decoded


class Pipeline:
    """The filter pipeline of one chunked dataset, as h5vc runs it."""

    def __init__(self, filters: list[_Filter], chunk_bytes: int):
        self.filters = filters
        self.chunk_bytes = chunk_bytes

    @property
    def faster_than_hdf5(self) -> bool:
        """Whether this pipeline beats HDF5's own filters even on one core: deflate (and
        shuffle) on zlib-ng do; Blosc and Zstandard through numcodecs do not."""
        codes = {item.code for item in self.filters}
        return ZLIB_NG and codes <= {FILTER_DEFLATE, FILTER_SHUFFLE}

    def encode(self, chunk: np.ndarray) -> bytes:
        """The bytes HDF5 stores for ``chunk`` (a full, C-contiguous chunk)."""
        data: Any = as_bytes(np.ascontiguousarray(chunk))
        for item in self.filters:
            data = item.encode(data)
        return bytes(data)

    def decode(self, stored: Any, filter_mask: int = 0) -> bytes:
        """The chunk's bytes from what HDF5 stored; ``filter_mask`` bit ``i`` set means
        filter ``i`` was skipped when the chunk was written."""
        out = np.empty(self.chunk_bytes, dtype=np.uint8)
        self.decode_into(stored, filter_mask, out)
        return out.tobytes()

    def decode_into(self, stored: Any, filter_mask: int, out: np.ndarray) -> None:
        """Decode a stored chunk into ``out``: its bytes, C-contiguous and writable (the
        last filter undone writes straight into it)."""
        applied = [f for i, f in enumerate(self.filters) if not filter_mask >> i & 1]
        data = stored
        for item in applied[:0:-1]:
            data = item.decode(data)
        if applied:
            applied[0].decode_into(data, out)
        elif len(data) == len(out):
            out[...] = np.frombuffer(data, dtype=np.uint8)
        else:
            raise ValueError(f"Expected a stored chunk of {len(out)} bytes. Got {len(data)}.")


def pipeline_of(dcpl: Any, itemsize: int, chunk_bytes: int) -> Pipeline | None:
    """The pipeline of a dataset creation property list, or None when it has a filter
    h5vc does not run (HDF5 then does the work) or no filter at all."""
    n = dcpl.get_nfilters()
    if n == 0:
        return None
    filters = []
    for i in range(n):
        code, _flags, values, _name = dcpl.get_filter(i)
        if code not in (FILTER_DEFLATE, FILTER_SHUFFLE, FILTER_BLOSC, FILTER_ZSTD):
            return None
        if code in (FILTER_BLOSC, FILTER_ZSTD) and not _have_numcodecs():
            return None
        values = tuple(int(v) for v in values)
        if code == FILTER_BLOSC and len(values) > 6 and values[6] not in _BLOSC_NAMES:
            return None
        filters.append(_Filter(int(code), values, itemsize))
    return Pipeline(filters, chunk_bytes)


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
