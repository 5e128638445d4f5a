"""A persisted, sorted timestamp index of the committed versions.

``VersionLog`` finds a version by time by bisecting a sorted in-memory list,
but builds that list by reading every version group's attributes: on a file
with 10,000 versions the first ``vf[datetime]`` costs a read of 10,000 groups.
This index keeps the sorted list in the file, so a lookup reads one int64
array and one name.  It sits next to ``_version_data``, not in it, because
``_version_data`` holds only dataset stores and ``versions`` (the layout that
versioned-hdf5 and scripts enumerate, where a dataset of the index's name would
collide with it)::

    <root>/_h5vc_version_index/
        timestamps     int64 microseconds since 1970 (UTC), sorted ascending
        names          variable-length UTF-8 names, in the same order
        log            variable-length UTF-8 JSON per version, in the same order:
                       {"parents": [...], "message": ..., "author": ...}

With the ``log`` column a log of every version is one read of three arrays instead of
a read of every version group's attributes (files written before it have none and
are scanned).

Files written before the index moved keep it at ``_version_data/__version_index__``;
it is read there and moved next to ``_version_data`` on the next write.

The index imports only h5py, numpy and h5vc.hdf5.clib, so the commit code can call
:func:`append_entry` after writing the commit marker and
:func:`lookup` before falling back to a scan.  Ties are ordered by name, as in
``VersionLog``.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable
from typing import TYPE_CHECKING

import h5py
import numpy as np

from h5vc.hdf5.clib import short_writes, small_transfer, string_buffer

if TYPE_CHECKING:
    from h5vc.hdf5.filebytes import FileBytes

__all__ = [
    "INDEX_NAME",
    "IndexAppender",
    "LogEntry",
    "read_log",
    "read_names",
    "append_entry",
    "entry_count",
    "has_index",
    "lookup",
    "read_index",
    "remove_entries",
    "write_index",
]

INDEX_NAME = "_h5vc_version_index"
#: Where earlier files keep the index (inside ``_version_data``).
LEGACY_INDEX_NAME = "__version_index__"
TIMESTAMPS = "timestamps"
NAMES = "names"
LOG = "log"
#: ``(timestamp, name, {"parents": [...], "message": str | None, "author": str | None})``
LogEntry = tuple[np.datetime64, str, dict]
_UNIT = "datetime64[us]"
#: Rows per chunk of the three columns. Every commit appends a row to each, and HDF5
#: writes back the whole chunk it lands in: 256 rows keep that to 10 KiB a commit
#: (and a small file's index small) while an index of 10,000 versions reads in 40
#: chunks per column.
CHUNK_ROWS = 256
#: Bumped whenever an index is written anew or moved: the columns an
#: :class:`IndexAppender` keeps open may then be gone.
_rewrites = 0


def _index(version_data: h5py.Group) -> h5py.Group | None:
    """The index group of ``version_data`` (next to it, or where earlier files keep it)."""
    found = version_data.parent.get(INDEX_NAME)
    if found is None:
        found = version_data.get(LEGACY_INDEX_NAME)
    return found if isinstance(found, h5py.Group) else None


def _writable_index(version_data: h5py.Group) -> h5py.Group | None:
    """The index group for a write, moved out of ``_version_data`` if it is still there."""
    global _rewrites
    if LEGACY_INDEX_NAME in version_data:
        _rewrites += 1
        version_data.move(
            LEGACY_INDEX_NAME, f"{version_data.parent.name}/{INDEX_NAME}".replace("//", "/")
        )
    return _index(version_data)


def has_index(version_data: h5py.Group) -> bool:
    return _index(version_data) is not None


def entry_count(version_data: h5py.Group) -> int:
    """Number of versions the index lists."""
    group = _index(version_data)
    assert group is not None
    return int(group[TIMESTAMPS].shape[0])


def _as_int(ts: np.datetime64) -> int:
    return int(np.asarray(ts).astype(_UNIT).astype(np.int64))


def write_index(
    version_data: h5py.Group,
    entries: Iterable[tuple[np.datetime64, str]],
    log: dict[str, dict] | None = None,
) -> None:
    """(Re)write the whole index from ``(timestamp, name)`` pairs; with ``log``
    (name -> log entry for every name) the log column too."""
    global _rewrites
    _rewrites += 1
    ordered = sorted((_as_int(ts), name) for ts, name in entries)
    root = version_data.parent
    for where, name in ((version_data, LEGACY_INDEX_NAME), (root, INDEX_NAME)):
        if name in where:
            del where[name]
    group = root.create_group(INDEX_NAME)
    stamps = np.array([ts for ts, _ in ordered], dtype=np.int64)
    names = np.array([name for _, name in ordered], dtype=object)
    group.create_dataset(TIMESTAMPS, data=stamps, maxshape=(None,), chunks=(CHUNK_ROWS,))
    text = h5py.string_dtype()
    group.create_dataset(NAMES, data=names, dtype=text, maxshape=(None,), chunks=(CHUNK_ROWS,))
    if log is not None:
        import json  # the log column: loaded when it is read or written, not at open

        rows = np.array([json.dumps(log[name]) for _, name in ordered], dtype=object)
        group.create_dataset(LOG, data=rows, dtype=text, maxshape=(None,), chunks=(CHUNK_ROWS,))


def read_log(version_data: h5py.Group) -> list[LogEntry] | None:
    """Every version's timestamp, name and log entry, sorted by time; None if the file
    has no index with a complete log column."""
    group = _index(version_data)
    if group is None or LOG not in group:
        return None
    stamps = group[TIMESTAMPS][()].astype(_UNIT)
    names = group[NAMES].asstr()[()]
    rows = group[LOG].asstr()[()]
    if not len(stamps) == len(names) == len(rows):
        return None
    import json

    entries = json.loads("[" + ",".join(rows) + "]")  # one parse, not one per version
    return list(zip(stamps, names.tolist(), entries))


def read_names(version_data: h5py.Group, file_bytes: FileBytes | None = None) -> list[str] | None:
    """The names :func:`read_log` lists, in its order, without the timestamps and log
    entries (the names column's bytes decoded at once); None where it returns None.
    With ``file_bytes`` (the file's bytes, opened read-only) the names are read from
    them where the column is stored plainly, not through HDF5's conversion of each."""
    group = _index(version_data)
    if group is None or LOG not in group:
        return None
    names = group[NAMES]
    if not len(group[TIMESTAMPS]) == len(names) == len(group[LOG]):
        return None
    if file_bytes is not None:
        found = _names_from_bytes(names, file_bytes)
        if found is not None:
            return found
    return [name.decode() for name in names[()].tolist()]


def _names_from_bytes(names: h5py.Dataset, file_bytes: FileBytes) -> list[str] | None:
    """The names column read from the file's bytes: its chunks' stored references
    (read as stored) and the strings they point at in the global heap; None where
    it is not stored so (chunks unfiltered, each one allocated) or its bytes do not
    say (HDF5 then reads it, and reports any damage)."""
    from h5vc.hdf5.filebytes import vlen_strings

    n = names.shape[0]
    chunks = names.chunks
    string = h5py.check_string_dtype(names.dtype)
    if chunks is None or len(chunks) != 1 or string is None or string.length is not None:
        return None
    dataset = names.id
    if dataset.get_create_plist().get_nfilters():
        return None
    stored = []
    try:
        for start in range(0, n, chunks[0]):
            mask, chunk = dataset.read_direct_chunk((start,))
            if mask:
                return None
            stored.append(chunk)
    except (KeyError, OSError, RuntimeError, ValueError):
        return None  # a chunk not allocated, or not readable so
    return vlen_strings(file_bytes, b"".join(stored), n)


def read_index(version_data: h5py.Group) -> list[tuple[np.datetime64, str]] | None:
    """All ``(timestamp, name)`` pairs, sorted; None if the file has no index."""
    group = _index(version_data)
    if group is None:
        return None
    stamps = group[TIMESTAMPS][()].astype(_UNIT)
    names = group[NAMES].asstr()[()]
    return list(zip(stamps, names))


def append_entry(
    version_data: h5py.Group, ts: np.datetime64, name: str, log: dict | None = None
) -> None:
    """Add one committed version (a plain append when it is the newest).

    The log column is kept only while every version has an entry in it."""
    IndexAppender(version_data).append(ts, name, log)


class IndexAppender:
    """Appends versions to the index of one ``_version_data`` group, keeping its columns
    open and the newest timestamp known between commits (a commit then costs three
    appends, no lookups). The columns are looked up again if the index was rewritten
    or moved (:func:`write_index`), or their rows changed underneath."""

    __slots__ = ("_columns", "_last", "_rewrites", "version_data")

    def __init__(self, version_data: h5py.Group) -> None:
        self.version_data = version_data
        #: (timestamps, names, log or None) as low-level datasets; None: not open.
        self._columns: tuple[h5py.h5d.DatasetID, ...] | None = None
        self._last: tuple[int, int] | None = None  # (rows, newest timestamp)
        self._rewrites = -1

    def _open(self) -> tuple[h5py.h5d.DatasetID, ...] | None:
        columns = self._columns
        if (
            columns is not None
            and self._rewrites == _rewrites
            and all(column.valid for column in columns)
        ):
            return columns
        self._columns = self._last = None
        group = _writable_index(self.version_data)
        if group is None:
            return None
        gid = group.id
        log = LOG.encode()
        found = [h5py.h5d.open(gid, TIMESTAMPS.encode()), h5py.h5d.open(gid, NAMES.encode())]
        if log in gid:
            found.append(h5py.h5d.open(gid, log))
        self._rewrites = _rewrites
        self._columns = tuple(found)
        return self._columns

    def append(self, ts: np.datetime64, name: str, log: dict | None = None) -> None:
        """Add one committed version (see :func:`append_entry`)."""
        columns = self._open()
        if columns is None:
            return
        stamps, names = columns[0], columns[1]
        rows = columns[2] if len(columns) > 2 else None
        n = stamps.shape[0]
        value = _as_int(ts)
        if rows is not None and (log is None or rows.shape[0] != n):
            group = _index(self.version_data)
            assert group is not None
            del group[LOG]
            self._columns = columns = (stamps, names)
            rows = None
        last: int | None = None
        if n:
            known = self._last
            last = known[1] if known is not None and known[0] == n else None
            if last is None:
                last = int(_read_one(stamps, n - 1, np.dtype(np.int64)))
        # The newest name is read only on a tie of timestamps (one vlen read saved per commit).
        if last is not None and (
            value < last or (value == last and name < _read_name(names, n - 1))
        ):
            self._columns = self._last = None
            logs = read_log(self.version_data)
            entries = read_index(self.version_data) or []
            full = None if logs is None or log is None else {e[1]: e[2] for e in logs} | {name: log}
            write_index(self.version_data, [*entries, (ts, name)], full)
            return
        self._last = None  # unknown should an append fail halfway
        text = h5py.string_dtype()
        _append_one(names, n, np.array([name], dtype=text))
        _append_one(stamps, n, np.array([value], dtype=np.int64))
        if rows is not None:
            import json

            _append_one(rows, n, np.array([json.dumps(log)], dtype=text))
        self._last = (n + 1, value)


def _read_name(names: h5py.h5d.DatasetID, i: int) -> str:
    """Element ``i`` of the names column."""
    value = _read_one(names, i, h5py.string_dtype())[()]
    return value.decode() if isinstance(value, bytes) else str(value)


def _read_one(dataset: h5py.h5d.DatasetID, i: int, dtype: np.dtype) -> np.ndarray:
    """Element ``i`` of a 1-d dataset, as a 0-d array."""
    out = np.empty(1, dtype=dtype)
    space = dataset.get_space()
    space.select_hyperslab((i,), (1,))
    dataset.read(h5py.h5s.create_simple((1,)), space, out)
    return out.reshape(())


def _append_one(dataset: h5py.h5d.DatasetID, n: int, value: np.ndarray) -> None:
    """Grow a 1-d dataset of ``n`` elements by one and write ``value`` (one element) there
    (with a small conversion buffer: see :func:`~h5vc.hdf5.clib.small_transfer`), with
    HDF5's calls alone where they are found (:func:`~h5vc.hdf5.clib.short_writes`)."""
    calls = short_writes()
    dxpl = small_transfer()
    if calls is not None and dxpl is not None:
        if value.dtype.kind != "O":
            value = np.ascontiguousarray(value)
            mtype, address = _memory_type(value.dtype).id, value.ctypes.data
        else:
            text = string_buffer(value[0])
            mtype, address = calls.utf8, 0 if text is None else ctypes.addressof(text)
        if address:
            calls.append_one(dataset.id, n, mtype, _ONE.id, dxpl.id, address)
            return
    dataset.set_extent((n + 1,))
    space = dataset.get_space()
    space.select_hyperslab((n,), (1,))
    dataset.write(_ONE, space, value, mtype=_memory_type(value.dtype), dxpl=small_transfer())


#: The memory dataspace of one element.
_ONE = h5py.h5s.create_simple((1,))
_memory_types: dict[np.dtype, h5py.h5t.TypeID] = {}


def _memory_type(dtype: np.dtype) -> h5py.h5t.TypeID:
    """HDF5's memory type of ``dtype``, made once (h5py makes it on every write)."""
    found = _memory_types.get(dtype)
    if found is None:
        found = _memory_types[dtype] = h5py.h5t.py_create(dtype)
    return found


def remove_entries(
    version_data: h5py.Group, removed: set[str], log: dict[str, dict] | None = None
) -> None:
    """Drop deleted versions from the index; ``log`` gives the survivors' log entries
    (their parents change when a parent is deleted)."""
    entries = read_index(version_data)
    if entries is not None:
        write_index(version_data, [(ts, n) for ts, n in entries if n not in removed], log)


def lookup(version_data: h5py.Group, ts: np.datetime64, exact: bool = False) -> str | None:
    """The version committed at ``ts`` or the latest before it (None: no such version).

    The file must have an index (:func:`has_index`).
    """
    group = _index(version_data)
    if group is None:
        raise LookupError(f"{version_data.name!r} has no time index")
    stamps = group[TIMESTAMPS][()]
    value = _as_int(ts)
    i = int(np.searchsorted(stamps, value, side="right"))  # O(log n), sorted array
    if i == 0 or (exact and int(stamps[i - 1]) != value):
        return None
    return str(group[NAMES].asstr()[i - 1])
