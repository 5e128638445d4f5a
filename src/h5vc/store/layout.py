"""Names, attributes and format numbers of the versioned file layout.

::

    <root>/_version_data/
        versions/                 attrs: current_version, data_version
            __first_version__/    empty root of the version DAG
            <version>/            attrs: prev_version, committed, timestamp (+ user attrs)
                <dataset>         virtual dataset over raw_data; attrs: raw_data, chunks (+ user attrs)
        <dataset path>/
            raw_data              chunks stacked along axis 0
            hash_table            rows (sha256, (start, stop)); attr largest_index written last
        __h5vc_stores__/<dataset path>/@<n>/
            raw_data, hash_table  the store of a dataset created again with another
                                  dtype or chunks (h5vc's layout only)
"""

from __future__ import annotations

import numpy as np

VERSION_DATA = "_version_data"
VERSIONS = "versions"
FIRST_VERSION = "__first_version__"
RAW_DATA = "raw_data"
HASH_TABLE = "hash_table"

#: data_version written by versioned-hdf5 2.6.0: one virtual mapping per chunk.
DATA_VERSION_COMPAT = 4
#: data_version of h5vc's first layout: one mapping per run of chunks, hard-linked
#: unchanged objects.  versioned-hdf5 refuses any data_version above 4 when it
#: opens a file; a large value stays clear of its future layout numbers.
DATA_VERSION_H5VC_RUNS = 1000
#: data_version of h5vc's layout: as 1000, but a mapping may carry several runs
#: (several blocks per selection).  A file at 1000 is upgraded when next written.
DATA_VERSION_H5VC = 1001
H5VC_DATA_VERSIONS = frozenset({DATA_VERSION_H5VC_RUNS, DATA_VERSION_H5VC})
#: Layouts this library reads.  Versions before 4 (versioned-hdf5's older layouts)
#: had unreliable hash tables: a writable open rebuilds them and marks the file 4
#: (:mod:`h5vc.store.legacy`), so they are written as 4.
READABLE_DATA_VERSIONS = frozenset({1, 2, 3, DATA_VERSION_COMPAT, *H5VC_DATA_VERSIONS})
WRITABLE_DATA_VERSIONS = frozenset({DATA_VERSION_COMPAT, *H5VC_DATA_VERSIONS})

#: Under ``_version_data``: the chunk stores of datasets created again, after a delete,
#: with a dtype or chunk shape their earlier store cannot hold (h5vc's layout only).
#: The n-th such store of dataset path ``p`` is ``ALT_STORES/p/@n``; a committed
#: dataset names its store in its ``raw_data`` attribute.
ALT_STORES = "__h5vc_stores__"
ALT_PREFIX = "@"

# Attributes on the versions group.
ATTR_CURRENT_VERSION = "current_version"
ATTR_DATA_VERSION = "data_version"
# Attributes on a version group.
ATTR_PREV_VERSION = "prev_version"
ATTR_COMMITTED = "committed"
ATTR_TIMESTAMP = "timestamp"
ATTR_MESSAGE = "h5vc_message"
ATTR_AUTHOR = "h5vc_author"
#: Parents of a merge after the first (``prev_version``), as an array of names.
ATTR_MERGE_PARENTS = "h5vc_merge_parents"
#: Attribute of a sample column's group (its schema as JSON; see h5vc.columns).
ATTR_COLUMN = "h5vc_column"
VERSION_ATTRS = frozenset(
    {
        ATTR_PREV_VERSION,
        ATTR_COMMITTED,
        ATTR_TIMESTAMP,
        ATTR_MESSAGE,
        ATTR_AUTHOR,
        ATTR_MERGE_PARENTS,
    }
)
# Attributes on a committed virtual dataset and on raw_data.
ATTR_RAW_DATA = "raw_data"
ATTR_CHUNKS = "chunks"
DATASET_ATTRS = frozenset({ATTR_RAW_DATA, ATTR_CHUNKS})
# Attribute on hash_table: number of valid rows, written after the rows.
ATTR_LARGEST_INDEX = "largest_index"

TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f%z"

HASH_TABLE_DTYPE = np.dtype([("hash", np.uint8, (32,)), ("shape", np.int64, (2,))])
#: 3 KiB chunks (64 rows): a file of many small datasets does not pay 192 KiB (4096
#: rows) or 12 KiB (256) for each hash table, and a commit rewrites (and journals) only
#: the small chunk its rows went to; a store of 10,000 chunks reads its table in 157.
HASH_TABLE_CHUNKS = (64,)
#: A store whose chunks are smaller than a 64-row chunk of its hash table (3 KiB) gets
#: hash-table chunks of about its own chunk size, at least this many rows: 100 datasets
#: of 3 int64 pay 384 bytes each for their tables instead of 3 KiB.  A dataset made of
#: tiny chunks has as many raw_data chunks to index as 8-row table chunks.
HASH_TABLE_MIN_ROWS = 8


def hash_table_rows(dtype: np.dtype, chunks: tuple[int, ...]) -> int:
    """Rows in a hash-table chunk of a store of ``dtype`` and ``chunks``: the power of
    two whose bytes come nearest below one chunk of data, between
    :data:`HASH_TABLE_MIN_ROWS` and ``HASH_TABLE_CHUNKS[0]``."""
    chunk_bytes = int(np.prod(chunks, dtype=np.int64)) * np.dtype(dtype).itemsize
    rows = 1 << max(0, (chunk_bytes // HASH_TABLE_DTYPE.itemsize).bit_length() - 1)
    return max(HASH_TABLE_MIN_ROWS, min(HASH_TABLE_CHUNKS[0], rows))
