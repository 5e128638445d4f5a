"""h5vc's tunables, in one place: sizes, thresholds, cache sizes and thread counts.

Every tunable is a module attribute here, read by the module that uses it. Each can be
set from the environment as ``H5VC_<NAME>`` (for example ``H5VC_THREADS=1``), read
once, when h5vc is imported: a whole number, with an optional binary suffix ``K``,
``M`` or ``G`` (``H5VC_PIECE_BYTES=4M``). A value that is not a whole number, or is
below the tunable's minimum, raises :class:`~h5vc.errors.ConfigError` naming the
variable. None of them changes what is stored or read, only how fast and with how
much memory (the sample stores' chunk sizes decide the chunk shape of new collection
files, which any reader reads).

Threads
    ``THREADS`` (0: one per core the process may run on) -- threads of every pool:
    encoding, decoding, hashing, positioned reads. ``SAMPLE_THREADS_MAX`` (4) -- at
    most this many encoding threads per sample writer, decoding threads per sample
    reader, unless asked for more.
Positioned reads of the versioned store
    ``FAST_READ_MIN_BYTES`` (128 KiB) -- boxes smaller than this are read through h5py.
    ``PIECE_BYTES`` (1 MiB) -- uncompressed chunks are read in pieces of at most this.
    ``BUFFER_BYTES`` (256 KiB) -- compressed chunks are fetched in runs of about this.
    ``SCATTER_MIN_BYTES`` (4 KiB) -- stretches this long are read straight into the
    result. ``KEEP_BYTES`` (16 MiB) -- a thread keeps read buffers up to this size.
    ``SCATTER_MAX_GAP`` (8 KiB) -- a gap this small between two reads is read through.
    ``MAP_READS`` (1) -- 1: files opened read-only are read from a memory map.
    ``GROUPS_PER_WORKER`` (4) -- pool tasks per thread a batch is cut into.
    ``HEADER_FIRST_READ`` (512) -- bytes of an object header read at first.
    ``BTREE_FIRST_ENTRIES`` (64) -- chunk B-tree entries read with a node's header.
Reads of virtual datasets
    ``HDF5_READ_BYTES`` (1 MiB) and ``HDF5_READ_BLOCKS`` (32) -- selections up to this
    size, of mappings of up to this many blocks, are read by HDF5 itself.
    ``MAX_PIECES`` (4096) -- boxes cut into more pieces go through the staging engine.
    ``MAX_CLASS_RUNS`` (32), ``MAX_SCATTERED_RUNS`` (16), ``MAX_SCATTERED_ELEMENTS``
    (32 Ki) -- limits of the mappings a commit writes (HDF5's cost grows as n**2).
Writes and maintenance
    ``WRITE_THROUGH_BYTES`` (4 MiB) -- arrays this large are stored at once, not staged.
    ``HASH_BATCH_BYTES`` (8 MiB) -- writes larger than this hash on background threads.
    ``MIN_RESUMED_BYTES`` (512 KiB) -- chunks of at least this many bytes keep their
    hash states, so that an edited copy is hashed on from its first changed step.
    ``SPILL_BYTES`` (64 MiB) -- journaled old pages held in memory before spilling.
    ``WRITE_METADATA_CACHE_BYTES`` (256 KiB) -- HDF5's metadata cache of a writable
    file (each flush costs time in the number of entries cached).
    ``COPY_BUDGET_BYTES`` (4 MiB) -- raw data in memory while slots move or convert.
    ``LEGACY_WINDOW_BYTES`` (16 MiB) -- raw data read and hashed at a time in repairs.
    ``EXPORT_SLAB_BYTES`` (64 MiB) -- ``h5vc export`` copies slabs of about this size.
    ``MIN_CHUNK_BYTES`` (64 KiB), ``MAX_CHUNK_BYTES`` (1 MiB) -- chunk sizes guessed.
Caches
    ``CACHED_CHUNK_MAPS`` (256) -- chunk maps kept per open file.
    ``CACHED_VIEWS`` (256) -- views of committed objects kept per open handle.
    ``MAX_OPEN_FILES`` (16) -- files kept open per process.
Dask and remote files
    ``DASK_BLOCK_BYTES`` (64 MiB) -- Dask block size for reads and writes.
    ``DASK_WRITE_BLOCK_BYTES`` (16 MiB) -- block size of writes computed a few at once.
    ``DASK_IN_FLIGHT_BYTES`` (128 MiB) -- computed blocks a write keeps in flight.
    ``REMOTE_BLOCK_BYTES`` (64 KiB) -- bytes fetched per request from a URL.
Sample stores
    ``SAMPLE_CHUNK_TARGET_BYTES`` (128 KiB) and ``SAMPLE_CHUNK_MIN_BYTES`` (16 KiB) --
    backend ``00`` chunk sizes. ``SAMPLE_QUEUE_SAMPLES`` (64), ``SAMPLE_QUEUE_BYTES``
    (64 MiB) -- samples queued for the encoding threads; ``SAMPLE_QUEUE_MAX_CHUNK_BYTES``
    (4 MiB), ``SAMPLE_QUEUE_MIN_CHUNK_BYTES`` (8 KiB) -- chunk sizes queued.
    ``SAMPLE_CACHE_MIN_BYTES`` (1 MiB), ``SAMPLE_CACHE_MAX_BYTES`` (64 MiB) -- chunk
    cache of collection files. ``SAMPLE_BATCH_WINDOW`` (128) -- chunks ``read_many``
    reads before it decodes them.

``docs/config.md`` lists the same; :func:`tunables` gives each name, value, default
and minimum.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from h5vc.errors import ConfigError

__all__ = ["ENV_PREFIX", "Tunable", "parse", "tunables"]

#: Environment variables that set a tunable are this prefix and its name.
ENV_PREFIX = "H5VC_"

_K = 1 << 10
_M = 1 << 20
_SUFFIXES = {"": 1, "K": _K, "M": _M, "G": 1 << 30}
_NUMBER = re.compile(r"\s*(\d[\d_]*)\s*([KMG]?)(?:i?B)?\s*", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Tunable:
    """One tunable: its name, value in force, default and smallest allowed value."""

    name: str
    value: int
    default: int
    minimum: int

    @property
    def variable(self) -> str:
        """The environment variable that sets it."""
        return ENV_PREFIX + self.name


_TUNABLES: dict[str, Tunable] = {}


def parse(variable: str, text: str, minimum: int) -> int:
    """The whole number ``text`` (optionally ending in ``K``, ``M`` or ``G``: KiB, MiB,
    GiB) given for the environment variable ``variable``; raises ConfigError unless it
    is one of at least ``minimum``."""
    match = _NUMBER.fullmatch(text)
    value = int(match[1].replace("_", "")) * _SUFFIXES[match[2].upper()] if match else None
    if value is None or value < minimum:
        raise ConfigError(
            f"Expected {variable} to be a whole number of at least {minimum} (it may end in "
            f"K, M or G for KiB, MiB, GiB). Got {text!r}."
        )
    return value


def _define(name: str, default: int, minimum: int = 1) -> int:
    variable = ENV_PREFIX + name
    text = os.environ.get(variable)
    value = default if text is None else parse(variable, text, minimum)
    _TUNABLES[name] = Tunable(name, value, default, minimum)
    return value


def tunables() -> list[Tunable]:
    """Every tunable, in the order of this module."""
    return list(_TUNABLES.values())


# -- threads ---------------------------------------------------------------------------

#: Threads of every pool (0: one per core the process may run on).
THREADS = _define("THREADS", 0, minimum=0)
#: Sample writers and readers start at most this many threads unless asked for more.
SAMPLE_THREADS_MAX = _define("SAMPLE_THREADS_MAX", 4)

# -- positioned reads of the versioned store -------------------------------------------

#: Boxes smaller than this are read through h5py (its chunk cache serves a read of a
#: few chunks in 30-60 us, less than the positioned-read path's fixed cost).
FAST_READ_MIN_BYTES = _define("FAST_READ_MIN_BYTES", 128 * _K)
#: Uncompressed chunks are read in pieces of at most this size.
PIECE_BYTES = _define("PIECE_BYTES", _M)
#: Compressed chunks are fetched in runs of about this many stored bytes.
BUFFER_BYTES = _define("BUFFER_BYTES", 256 * _K)
#: Stretches of the result at least this long are read straight into it.
SCATTER_MIN_BYTES = _define("SCATTER_MIN_BYTES", 4 * _K)
#: A thread keeps read buffers up to this size for its next read.
KEEP_BYTES = _define("KEEP_BYTES", 16 * _M)
#: A gap of at most this many bytes between two segments is read and thrown away.
SCATTER_MAX_GAP = _define("SCATTER_MAX_GAP", 8 * _K, minimum=0)
#: 1: uncompressed chunks of files opened read-only are copied from a memory map of
#: the file (0: read with positioned reads into a buffer first).
MAP_READS = _define("MAP_READS", 1, minimum=0)
#: Items are handed to a pool in this many groups per thread.
GROUPS_PER_WORKER = _define("GROUPS_PER_WORKER", 4)
#: Bytes of an object header read at first.
HEADER_FIRST_READ = _define("HEADER_FIRST_READ", 512, minimum=16)
#: Entries of a chunk B-tree node read with its header at first.
BTREE_FIRST_ENTRIES = _define("BTREE_FIRST_ENTRIES", 64)

# -- reads of virtual datasets ---------------------------------------------------------

#: Selections of at most this many bytes ...
HDF5_READ_BYTES = _define("HDF5_READ_BYTES", _M, minimum=0)
#: ... of mappings of at most this many blocks are read by HDF5 from the virtual dataset.
HDF5_READ_BLOCKS = _define("HDF5_READ_BLOCKS", 32, minimum=0)
#: Boxes cut into more pieces than this go through the staging engine.
MAX_PIECES = _define("MAX_PIECES", 4096)
#: A mapping of runs at one offset carries at most this many runs.
MAX_CLASS_RUNS = _define("MAX_CLASS_RUNS", 32)
#: Scattered runs of a mapping, at most ...
MAX_SCATTERED_RUNS = _define("MAX_SCATTERED_RUNS", 16)
#: ... and their elements, at most.
MAX_SCATTERED_ELEMENTS = _define("MAX_SCATTERED_ELEMENTS", 32 * _K)

# -- writes and maintenance ------------------------------------------------------------

#: Arrays of at least this many bytes are stored at once instead of staged in memory.
WRITE_THROUGH_BYTES = _define("WRITE_THROUGH_BYTES", 4 * _M)
#: Writes larger than this hash their next batches on background threads.
HASH_BATCH_BYTES = _define("HASH_BATCH_BYTES", 8 * _M)
#: Chunks of at least this many bytes keep their hash states, so that an edited copy
#: is hashed on from its first changed step (0: never).
MIN_RESUMED_BYTES = _define("MIN_RESUMED_BYTES", 512 * _K, minimum=0)
#: Journaled old pages held in memory before they are spilled early.
SPILL_BYTES = _define("SPILL_BYTES", 64 * _M)
#: HDF5's metadata cache of a file open for writing: HDF5's flush (every commit point)
#: takes time in the number of entries cached, which grows with the versions touched.
WRITE_METADATA_CACHE_BYTES = _define("WRITE_METADATA_CACHE_BYTES", 256 * _K, minimum=64 * _K)
#: Raw data held in memory while slots are moved or converted.
COPY_BUDGET_BYTES = _define("COPY_BUDGET_BYTES", 4 * _M)
#: Raw data read and hashed at a time when a legacy store is repaired.
LEGACY_WINDOW_BYTES = _define("LEGACY_WINDOW_BYTES", 16 * _M)
#: ``h5vc export`` copies a dataset in slabs of about this many bytes.
EXPORT_SLAB_BYTES = _define("EXPORT_SLAB_BYTES", 64 * _M)
#: Chunk byte sizes guessed chunks aim between.
MIN_CHUNK_BYTES = _define("MIN_CHUNK_BYTES", 64 * _K)
MAX_CHUNK_BYTES = _define("MAX_CHUNK_BYTES", _M)

# -- caches ----------------------------------------------------------------------------

#: Chunk maps kept per open file.
CACHED_CHUNK_MAPS = _define("CACHED_CHUNK_MAPS", 256)
#: Read-only views of committed objects kept per open handle.
CACHED_VIEWS = _define("CACHED_VIEWS", 256)
#: Files kept open per process.
MAX_OPEN_FILES = _define("MAX_OPEN_FILES", 16)

# -- Dask and remote files -------------------------------------------------------------

#: Target size of one Dask block, for reads and writes.
DASK_BLOCK_BYTES = _define("DASK_BLOCK_BYTES", 64 * _M)
#: Target size of one block when writing: blocks are computed a few at a time.
DASK_WRITE_BLOCK_BYTES = _define("DASK_WRITE_BLOCK_BYTES", 16 * _M)
#: Bytes of computed blocks a write keeps in flight, at most (but two blocks a batch).
DASK_IN_FLIGHT_BYTES = _define("DASK_IN_FLIGHT_BYTES", 128 * _M)
#: Bytes fsspec fetches per request (and caches) when reading a URL.
REMOTE_BLOCK_BYTES = _define("REMOTE_BLOCK_BYTES", 64 * _K)

# -- sample stores ---------------------------------------------------------------------

#: Backend ``00`` chunks are about this size (bytes, before compression) ...
SAMPLE_CHUNK_TARGET_BYTES = _define("SAMPLE_CHUNK_TARGET_BYTES", 128 * _K)
#: ... and hold several tiny samples until they reach this size.
SAMPLE_CHUNK_MIN_BYTES = _define("SAMPLE_CHUNK_MIN_BYTES", 16 * _K)
#: A sample writer queues at most this many samples for its encoding threads ...
SAMPLE_QUEUE_SAMPLES = _define("SAMPLE_QUEUE_SAMPLES", 64)
#: ... of at most this many bytes in all ...
SAMPLE_QUEUE_BYTES = _define("SAMPLE_QUEUE_BYTES", 64 * _M)
#: ... and only samples whose chunk is at most this large ...
SAMPLE_QUEUE_MAX_CHUNK_BYTES = _define("SAMPLE_QUEUE_MAX_CHUNK_BYTES", 4 * _M)
#: ... and at least this large (encoding a smaller one costs less than a hand-off).
SAMPLE_QUEUE_MIN_CHUNK_BYTES = _define("SAMPLE_QUEUE_MIN_CHUNK_BYTES", 8 * _K, minimum=0)
#: HDF5 chunk cache of a collection file's datasets: at least ...
SAMPLE_CACHE_MIN_BYTES = _define("SAMPLE_CACHE_MIN_BYTES", _M, minimum=0)
#: ... and at most this many bytes (or one chunk, if larger).
SAMPLE_CACHE_MAX_BYTES = _define("SAMPLE_CACHE_MAX_BYTES", 64 * _M, minimum=0)
#: ``SampleReader.read_many`` reads this many stored chunks, then decodes them.
SAMPLE_BATCH_WINDOW = _define("SAMPLE_BATCH_WINDOW", 128)
