"""Reading ``raw_data`` chunks with positioned reads instead of HDF5's read path.

Committed chunks never move, except when a store is compacted or rewritten (which
:mod:`h5vc.store.rawdata` and :mod:`h5vc.store.compact` announce through
:func:`forget`).  So the file offset of every ``raw_data`` chunk is looked up once
per open store and kept in a :class:`~h5vc.hdf5.chunktable.ChunkTable`; a
hyperslab of ``raw_data`` is then read with positioned reads.  Where the stored rows
land in long contiguous stretches of the result (1-D data, chunks as wide as the
result) they are read straight into it (:mod:`h5vc.hdf5.scatter`); chunks narrower
than the result's rows (the chunk columns of a 2-D result) are read band by band, each
band of rows of the result filled by one thread from the stored rows of every chunk
crossing it; otherwise runs of chunks that lie one after the other in the file are
read in pieces into a buffer of the reading thread and copied into place, the pieces
shared out between threads in the order of their place in the result. Files opened
read-only are memory-mapped instead: all but whole rows are copied into place piece by
piece from the map, with no buffer between. Compressed chunks are read raw, in runs of
adjacent chunks by the thread that decodes them (:mod:`h5vc.hdf5.codecs`), on all
cores. Every size that decides between these ways is a threshold of
:mod:`h5vc.store.planner`.

:class:`FastReader` serves what it can and says so; HDF5 serves the rest: a file
not opened with the ``sec2`` driver (no descriptor: a Python file object, the core
driver, ...), a dtype that is not a native fixed-size number, a filter h5vc does not
run, a chunk not allocated in the file.
"""

from __future__ import annotations

import copy
import ctypes
import functools
import math
import os
import threading
import time
import weakref
from typing import Any

import h5py
import numpy as np

import h5vc.config as config
from h5vc.errors import CorruptDataError
from h5vc.hdf5 import codecs, scatter
from h5vc.hdf5.chunktable import ChunkTable
from h5vc.hdf5.codecs import Pipeline, as_bytes, parallel_groups, pipeline_of
from h5vc.hdf5.damage import damaged, slot_count
from h5vc.hdf5.header import file_descriptor
from h5vc.store import planner

__all__ = ["ChunkTable", "FastReader", "fast_reader", "forget"]

#: Whether uncompressed chunks of files opened read-only are copied from a memory map
#: of the file (:meth:`FastReader._mapped`).
MAP_READS = bool(config.MAP_READS)

#: Bytes of the result a thread fills at a time when it reads chunks narrower than
#: the result's rows (:meth:`FastReader._band_rows`): a few pieces, within the cache.
BAND_BYTES = 4 * planner.PIECE_BYTES

#: Bytes of a 2-D result filled at a time when chunks narrower than its rows are copied
#: from the memory map of the file (:meth:`FastReader._read_mapped_tiles`).
MAP_BAND_BYTES = 4 * planner.PIECE_BYTES

_READERS: weakref.WeakKeyDictionary[Any, FastReader | None] = weakref.WeakKeyDictionary()

#: The memory map of each mapped file, by device, inode and descriptor, shared by its
#: readers (:meth:`FastReader._mapped`) and unmapped when none holds it any more.
_MAPS: weakref.WeakValueDictionary[tuple[int, int, int], np.ndarray] = weakref.WeakValueDictionary()


#: Chunk tables of files opened read-only, kept for the next handle of the same file
#: (each open of a file makes new readers): up to KEPT_TABLES, by file, stamp and
#: dataset (:meth:`FastReader._kept_key`), the oldest dropped first. Looking up the
#: chunks of 10 000 slots takes 4 ms; a kept table is used only while the file's size
#: and times are those it was found with, and its last chunk reads the same both ways.
_KEPT_TABLES: dict[tuple[Any, ...], ChunkTable] = {}
KEPT_TABLES = 16

#: A file whose modification or change time is less than this old may still be
#: written within the same tick of the file system's clock: its stamp tells nothing.
QUIET_NS = 50_000_000


def quiet_stamp(fd: int) -> tuple[int, int, int, int, int] | None:
    """The device, inode, size, modification and change times of the file of ``fd``,
    if any write after now would change them: None where a time is recent (a write
    within the same clock tick keeps it) or whole milliseconds (a file system of
    coarse times), or ``fd`` cannot be looked at. Every write, truncation or time set
    by hand moves the times to the present."""
    try:
        info = os.fstat(fd)
    except (OSError, ValueError):
        return None
    times = (info.st_mtime_ns, info.st_ctime_ns)
    if any(t % 1_000_000 == 0 for t in times) or time.time_ns() - max(times) < QUIET_NS:
        return None
    return info.st_dev, info.st_ino, info.st_size, *times


def fast_reader(raw_data: h5py.Dataset) -> FastReader | None:
    """The positioned-read reader of ``raw_data``, or None when HDF5 must read it."""
    try:
        return _READERS[raw_data]
    except KeyError:
        pass
    reader = FastReader.open(raw_data)
    _READERS[raw_data] = reader
    return reader


def forget(raw_data: h5py.Dataset, *, appended: bool = False) -> None:
    """``raw_data`` changed: look its chunks up again. With ``appended`` (chunks were only
    added past the end, none moved) only the new slots are looked up, on the next read."""
    reader = _READERS.get(raw_data)
    if reader is not None and not appended:
        reader.table = None
    elif reader is not None:
        reader.grown = True


class FastReader:
    """Positioned reads of one ``raw_data`` dataset."""

    def __init__(
        self,
        dataset_id: Any,
        fd: int,
        dtype: np.dtype,
        chunks: tuple[int, ...],
        pipeline: Pipeline | None,
    ):
        self.dataset_id = dataset_id
        self.fd = fd
        self.dtype = dtype
        self.chunks = chunks
        self.row_bytes = math.prod(chunks[1:]) * dtype.itemsize
        self.chunk_bytes = self.row_bytes * chunks[0]
        self.pipeline = pipeline
        self.table: ChunkTable | None = None
        self.grown = False
        #: Whether the file is open read-only (its chunk table may be kept for other
        #: handles of it: :data:`_KEPT_TABLES`).
        self.read_only = False
        #: Whether uncompressed chunks may be read from a memory map of the file (a file
        #: opened read-only: :meth:`_mapped`).
        self.mappable = False
        self._map: np.ndarray | None = None

    def names(self) -> tuple[str, str]:
        """File and object name of the dataset read, for error messages."""
        file_name = h5py.h5f.get_name(self.dataset_id).decode(errors="replace")
        name = h5py.h5i.get_name(self.dataset_id).decode(errors="replace")
        return file_name, name

    def describe(self) -> str:
        """File and object name of the dataset read, for error messages."""
        return ": ".join(self.names())

    @classmethod
    def open(cls, raw_data: h5py.Dataset) -> FastReader | None:
        """A reader of ``raw_data``, or None when it cannot serve it."""
        dtype = raw_data.dtype
        chunks = raw_data.chunks
        if (
            chunks is None
            or dtype.kind not in "biufc"
            or not dtype.isnative
            or raw_data.id.get_type().get_size() != dtype.itemsize
            or tuple(raw_data.shape[1:]) != tuple(chunks[1:])
        ):
            return None
        fd = file_descriptor(raw_data.file)
        if fd is None:
            return None
        chunks = tuple(int(c) for c in chunks)
        chunk_bytes = math.prod(chunks) * dtype.itemsize
        dcpl = raw_data.id.get_create_plist()
        pipeline = pipeline_of(dcpl, dtype.itemsize, chunk_bytes)
        if pipeline is None and dcpl.get_nfilters():
            return None
        reader = cls(raw_data.id, fd, dtype, chunks, pipeline)
        reader.read_only = raw_data.file.id.get_intent() == h5py.h5f.ACC_RDONLY
        reader.mappable = MAP_READS and reader.read_only
        return reader

    def _mapped(self, end: int) -> np.ndarray | None:
        """The file's bytes up to at least ``end``, as a read-only memory map; None where
        the file is not mapped (not opened read-only, or shorter than ``end``: then
        positioned reads report the missing bytes).

        Read from the map, a chunk's rows are copied from the page cache into the result
        once; positioned reads copy them into a buffer first (a sixth of a full read's
        CPU time for 100x100 chunks). Only files opened read-only are mapped: their
        committed bytes change only under the write lock their readers wait for (and a
        changed file is opened anew), so the mapped bytes never shrink under a read
        made by h5vc; the file's size is checked before each read against other programs.
        The readers of one file share its map (:data:`_MAPS`)."""
        if not self.mappable:
            return None
        try:
            # Checked before every use of the map: a file another program cut while
            # mapped would kill this process (SIGBUS) at its missing pages instead of
            # raising; a file too short is read by positioned reads, which report the
            # missing bytes.
            status = os.fstat(self.fd)
        except OSError:
            self.mappable = False
            return None
        if status.st_size < end:
            return None
        mapped = self._map
        if mapped is not None and len(mapped) >= end:
            return mapped
        try:
            key = (status.st_dev, status.st_ino, self.fd)
            mapped = _MAPS.get(key)
            if mapped is None or len(mapped) < end:
                mapped = _MAPS[key] = _map_file(self.fd, status.st_size)
        except (OSError, ValueError):  # a descriptor that cannot be mapped
            self.mappable = False
            return None
        self._map = mapped
        return mapped

    # -- the chunk table ------------------------------------------------------------

    def _table(self) -> ChunkTable | None:
        file_name, name = self.names()
        with damaged(file_name, f"The chunk index of {name}"):
            return self._look_up_table()

    def _look_up_table(self) -> ChunkTable | None:
        table = self.table
        if table is not None and self.grown:
            self.grown = False
            n_slots = slot_count(self.dataset_id, self.chunks[0])
            if n_slots < len(table.offsets) or n_slots > 2 * len(table.offsets) + 64:
                table = self.table = None  # cut, or grown a lot: one iteration is faster
            elif n_slots > len(table.offsets):
                self.dataset_id.flush()
                table.extend(self.dataset_id, n_slots, self.chunks[0])
        if table is None:
            dataset_id = self.dataset_id
            dataset_id.flush()  # chunks still in HDF5's chunk cache reach the file
            n_slots = slot_count(self.dataset_id, self.chunks[0])
            key = self._kept_key(n_slots) if self.read_only else None
            kept = _KEPT_TABLES.get(key) if key is not None else None
            if kept is not None and self._check(kept):
                table = copy.copy(kept)  # its own, should it grow
            else:
                table = ChunkTable(dataset_id, n_slots, self.chunks[0])
                if not self._check(table):
                    self.fd = -1
                    return None
                if key is not None:
                    _KEPT_TABLES[key] = table
                    while len(_KEPT_TABLES) > KEPT_TABLES:
                        _KEPT_TABLES.pop(next(iter(_KEPT_TABLES)))
            self.table = table
        return table

    def _kept_key(self, n_slots: int) -> tuple[Any, ...] | None:
        """What a chunk table found in another handle of this file is kept under
        (:data:`_KEPT_TABLES`): the file (device and inode), its stamp (size,
        modification and change times), this dataset's name, chunks and slots; None
        where the stamp may not tell a later write (see :func:`quiet_stamp`)."""
        stamp = quiet_stamp(self.fd)
        if stamp is None:
            return None
        name = h5py.h5i.get_name(self.dataset_id)
        return (*stamp, name, self.chunks, self.dtype.itemsize, n_slots)

    def _check(self, table: ChunkTable) -> bool:
        """Compare one chunk read both ways (the offsets are the file's, not HDF5's)."""
        allocated = np.flatnonzero(table.offsets >= 0)
        if not len(allocated):
            return True
        slot = int(allocated[-1])
        corner = (slot * self.chunks[0],) + (0,) * (len(self.chunks) - 1)
        _, expected = self.dataset_id.read_direct_chunk(corner)
        size = int(table.sizes[slot])
        return os.pread(self.fd, size, int(table.offsets[slot])) == bytes(expected)

    # -- reading --------------------------------------------------------------------

    def read(
        self,
        destination: np.ndarray,
        src_starts: list[list[int]] | np.ndarray,
        dst_starts: list[list[int]] | np.ndarray,
        counts: list[list[int]] | np.ndarray,
    ) -> list[int]:
        """``destination[dst] = raw_data[src]`` for every slice pair it can serve (steps
        of 1; corners and counts as lists of rows or ``(n, ndim)`` arrays); returns the
        positions of the pairs left for HDF5."""
        if self.fd < 0 or not self.dataset_id.valid:
            return list(range(len(counts)))
        table = self._table()
        if table is None:
            return list(range(len(counts)))
        runs, left = self._plan(table, src_starts, dst_starts, counts)
        if self.pipeline is None:
            scatters = scatter.available() and destination.flags.c_contiguous
            if scatters:
                runs = self._read_whole_rows(destination, table, runs)
            if not len(runs) or (
                self.mappable and self._read_mapped_tiles(destination, table, runs)
            ):
                return left
            tasks = runs.tasks()
            if scatters:
                tasks = self._read_scatter(destination, table, tasks)
            # Copied from the map, pieces cost less than bands through a buffer (a tenth
            # less CPU time for 100x100 chunks of a 4000x4000 result).
            band_rows = 0 if self.mappable else self._band_rows(destination, tasks)
            if band_rows:

                def read_band(band: list[_Task]) -> None:
                    self._read_band(destination, table, band)

                for _ in parallel_groups(read_band, _bands(tasks, band_rows)):
                    pass
                return left
            # Pieces of at most PIECE_BYTES, in the order of their place in the result:
            # each thread fills its own stretch of it.
            pieces = _split(tasks, max(1, planner.PIECE_BYTES // self.row_bytes))
            pieces.sort(key=lambda task: task.dst)

            def read_plain(task: _Task) -> None:
                self._read_plain(destination, table, task)

            for _ in parallel_groups(read_plain, pieces):
                pass
        else:
            self._read_compressed(destination, table, runs.tasks())
        return left

    def _plan(
        self,
        table: ChunkTable,
        src_starts: list[list[int]] | np.ndarray,
        dst_starts: list[list[int]] | np.ndarray,
        counts: list[list[int]] | np.ndarray,
    ) -> tuple[_Runs, list[int]]:
        """Split the slice pairs into runs of chunks that follow each other in the file
        (every chunk its own run when compressed: they are decoded in parallel); return
        the runs, in order, and the positions of the pairs left for HDF5 (a chunk not
        allocated, or beyond the table). Planned for all pairs at once with numpy."""
        n = len(counts)
        if n == 0:
            return _Runs.empty(len(self.chunks)), []
        src = np.asarray(src_starts, dtype=np.int64).reshape(n, -1)
        dst = np.asarray(dst_starts, dtype=np.int64).reshape(n, -1)
        count = np.asarray(counts, dtype=np.int64).reshape(n, -1)
        c0 = self.chunks[0]
        src0, count0 = src[:, 0], count[:, 0]
        first = src0 // c0
        last = (src0 + count0 - 1) // c0
        served = (count0 > 0) & (last < len(table.offsets))
        lengths = np.where(served, last - first + 1, 0)
        pair = np.repeat(np.arange(n), lengths)
        chunk = (
            first[pair] + np.arange(len(pair)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        )
        offsets = table.offsets[chunk]
        served &= np.bincount(pair[offsets < 0], minlength=n) == 0
        keep = served[pair]
        pair, chunk, offsets = pair[keep], chunk[keep], offsets[keep]
        starts = np.ones(len(chunk), dtype=bool)
        if self.pipeline is None:
            starts[1:] = (pair[1:] != pair[:-1]) | (offsets[1:] != offsets[:-1] + self.chunk_bytes)
        begin = np.flatnonzero(starts)
        end = np.append(begin[1:], len(chunk)) - 1
        owner, slot = pair[begin], chunk[begin]
        row_lo = np.maximum(src0[owner], slot * c0)
        row_hi = np.minimum(src0[owner] + count0[owner], (chunk[end] + 1) * c0)
        run_dst = dst[owner]
        run_dst[:, 0] += row_lo - src0[owner]
        run_count = count[owner]
        run_count[:, 0] = row_hi - row_lo
        runs = _Runs(
            slot, row_lo - slot * c0, row_hi - slot * c0, src[owner, 1:], run_dst, run_count
        )
        return runs, np.flatnonzero(~served).tolist()

    def _read_whole_rows(self, destination: np.ndarray, table: ChunkTable, runs: _Runs) -> _Runs:
        """The runs whose stored rows are whole rows of a C-contiguous ``destination``
        (1-D data, chunks as wide as the result) read straight into it by one
        :mod:`h5vc.hdf5.scatter` read, planned from the runs' arrays; returns the
        others."""
        inner = self.chunks[1:]
        row_bytes = self.row_bytes
        if destination.strides[:1] != (row_bytes,) or tuple(destination.shape[1:]) != inner:
            return runs
        whole = (runs.src_rest == 0).all(axis=1) & (runs.count[:, 1:] == inner).all(axis=1)
        if not whole.any():
            return runs
        rows = runs.dst[whole, 0]
        reads = scatter.plan(
            destination,
            table.offsets[runs.slot[whole]] + runs.lo[whole] * row_bytes,
            destination.ctypes.data + rows * row_bytes,
            runs.count[whole, 0] * row_bytes,
            planner.PIECE_BYTES,
            max_gap=planner.SCATTER_MAX_GAP,
        )
        threads = codecs.GROUPS_PER_WORKER * codecs.workers()
        scatter.run(self.fd, reads, codecs.parallel_map, threads)
        return runs.select(~whole)

    def _read_scatter(
        self, destination: np.ndarray, table: ChunkTable, tasks: list[_Task]
    ) -> list[_Task]:
        """Tasks whose rows land in long contiguous stretches of ``destination`` read
        straight into it by one :mod:`h5vc.hdf5.scatter` read; returns the others.

        Short stretches (a 100x100 chunk of a wide 2-D result is 100 stretches of 800
        bytes) stay with the buffered path: the kernel's copy per stretch costs as
        much as numpy's, and planning 100 segments per chunk costs more. So do all
        stretches but whole rows of a mapped file (:meth:`_mapped`): copied piece by
        piece from the map, 1000x1000 chunks of a 4000x4000 result cost a tenth less CPU time.
        """
        row_bytes = self.row_bytes
        strides = destination.strides
        groups: dict[tuple[tuple[int, ...], tuple[int, ...]], list[_Task]] = {}
        for task in tasks:
            groups.setdefault((tuple(task.src_rest), tuple(task.count[1:])), []).append(task)
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        left: list[_Task] = []
        base = destination.ctypes.data
        for (src_rest, count_rest), group in groups.items():
            run_src, run_dst, run_len = self._row_runs(src_rest, count_rest, strides[1:])
            whole_rows = len(run_len) == 1 and run_len[0] == row_bytes == strides[0]
            if not whole_rows and (self.mappable or run_len.min() < planner.SCATTER_MIN_BYTES):
                left.extend(group)  # read band by band (from the map: fewer copies)
                continue
            files = np.array(
                [table.offsets[t.slot] + t.rows[0] * row_bytes for t in group], np.int64
            )
            places = base + np.array([t.dst for t in group], np.int64) @ np.array(strides, np.int64)
            rows = np.array([t.count[0] for t in group], np.int64)
            if whole_rows:  # each task is one stretch of the file and of the result
                parts.append((files, places, rows * row_bytes))
                continue
            owner = np.repeat(np.arange(len(group)), rows)
            row = np.arange(len(owner)) - np.repeat(np.cumsum(rows) - rows, rows)
            row_files = files[owner] + row * row_bytes
            row_places = places[owner] + row * strides[0]
            parts.append(
                (
                    (row_files[:, None] + run_src).reshape(-1),
                    (row_places[:, None] + run_dst).reshape(-1),
                    np.tile(run_len, len(owner)),
                )
            )
        if parts:
            file_offsets, addresses, lengths = (np.concatenate(c) for c in zip(*parts))
            reads = scatter.plan(
                destination,
                file_offsets,
                addresses,
                lengths,
                planner.PIECE_BYTES,
                max_gap=planner.SCATTER_MAX_GAP,
            )
            threads = codecs.GROUPS_PER_WORKER * codecs.workers()
            scatter.run(self.fd, reads, codecs.parallel_map, threads)
        return left

    def _row_runs(
        self, src_rest: tuple[int, ...], count_rest: tuple[int, ...], strides: tuple[int, ...]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where the box ``src_rest : src_rest + count_rest`` of one stored row lies:
        byte offsets of its contiguous runs in the row, their byte offsets in the
        result (whose strides past axis 0 are ``strides``) and their lengths, adjacent
        runs merged."""
        itemsize = self.dtype.itemsize
        inner = self.chunks[1:]
        if not inner:  # 1-D: a row is one element
            return np.zeros(1, np.int64), np.zeros(1, np.int64), np.full(1, itemsize, np.int64)
        row_strides = np.array([math.prod(inner[k + 1 :]) * itemsize for k in range(len(inner))])
        runs = math.prod(count_rest[:-1])
        index = np.indices(count_rest[:-1], dtype=np.int64).reshape(len(inner) - 1, runs)
        starts = np.array(src_rest[:-1], np.int64)[:, None] + index
        src = starts.T @ row_strides[:-1] + src_rest[-1] * itemsize
        dst = index.T @ np.array(strides[:-1], np.int64)
        length = count_rest[-1] * itemsize
        if len(src) > 1:  # merge runs that follow each other both in the row and the result
            joined = (src[1:] == src[:-1] + length) & (dst[1:] == dst[:-1] + length)
            if joined.all():
                return src[:1], dst[:1], np.array([length * len(src)], np.int64)
        return src, dst, np.full(len(src), length, np.int64)

    def _band_rows(self, destination: np.ndarray, tasks: list[_Task]) -> int:
        """Rows of the result per band when ``tasks`` are read band by band; 0 when
        they are read piece by piece.

        Tasks narrower than the result's rows (the chunk columns of a 2-D result) are
        read in bands of whole rows of the result, a band at a time per thread: the
        stored rows of every task crossing the band into a buffer, then copied into
        the band, which stays in the cache while it is filled. Read task by task
        instead, each stored row lands on another page of the result (a quarter more
        CPU time for 100x100 chunks of a 4000x4000 result).
        """
        if destination.ndim < 2 or not tasks or not destination.flags.c_contiguous:
            return 0
        row_bytes = destination.strides[0]
        if row_bytes > BAND_BYTES:
            return 0
        width = math.prod(destination.shape[1:])
        if all(math.prod(task.count[1:]) == width for task in tasks):
            return 0  # every task fills whole rows of the result: already bands
        return max(1, min(self.chunks[0], BAND_BYTES // row_bytes))

    def _read_band(self, destination: np.ndarray, table: ChunkTable, band: list[_Task]) -> None:
        """The tasks of one band (:func:`_bands`): their stored rows read one after
        the other into this thread's buffer, then copied into place, with one copy
        where the tasks lie side by side in a 2-D result (:func:`_copy_tiled`)."""
        row_bytes, fd, offsets = self.row_bytes, self.fd, table.offsets
        sizes = [task.count[0] * row_bytes for task in band]
        buffer = as_bytes(_scratch("band", sum(sizes)))
        at = 0
        for task, size in zip(band, sizes):
            _pread_into(
                fd, buffer[at : at + size], int(offsets[task.slot]) + task.rows[0] * row_bytes
            )
            at += size
        stored = np.frombuffer(buffer, self.dtype)
        inner = self.chunks[1:]
        if _copy_tiled(destination, stored, band, inner):
            return
        at = 0
        for task, size in zip(band, sizes):
            rows = stored[at // self.dtype.itemsize : (at + size) // self.dtype.itemsize]
            box = (slice(None), *(slice(a, a + k) for a, k in zip(task.src_rest, task.count[1:])))
            destination[task.destination_box()] = rows.reshape(task.count[0], *inner)[box]
            at += size

    def _read_mapped_tiles(self, destination: np.ndarray, table: ChunkTable, runs: _Runs) -> bool:
        """The tasks of a 2-D result copied from the memory map of the file in tiles
        (:func:`_tiles`): a band of rows of the result filled at a time, the parts of
        the tasks in it that lie side by side with their stored rows equally far apart
        in the file (a band across chunks written in one go) copied with one numpy copy
        through a strided view of the map; the tiles shared out between threads in the
        order of their place in the result. False (nothing read) where the result is
        not 2-D, or the file is not mapped.

        Filled task by task instead (a column of chunks at a time), each page of a wide
        result is touched once per chunk column, each touch missing the cache: 100x100
        chunks of a 4000x4000 result cost a fifth more CPU time."""
        if destination.ndim != 2 or not len(runs) or not destination.flags.c_contiguous:
            return False
        starts = table.offsets[runs.slot] + runs.lo * self.row_bytes
        mapped = self._mapped(int((starts + runs.count[:, 0] * self.row_bytes).max()))
        if mapped is None:
            return False
        band_rows = max(1, MAP_BAND_BYTES // destination.strides[0])
        tiles = _tiles(
            starts + runs.src_rest[:, 0] * self.dtype.itemsize,
            runs.dst,
            runs.count,
            self.row_bytes,
            band_rows,
        )
        _copy_tiles(destination, mapped, self.row_bytes, tiles, self.dtype)
        return True

    def _read_plain(self, destination: np.ndarray, table: ChunkTable, task: _Task) -> None:
        """One piece of a run of uncompressed chunks adjacent in the file: copied into
        place from the memory map of the file, or read into this thread's buffer first."""
        n = task.count[0]
        start = int(table.offsets[task.slot]) + task.rows[0] * self.row_bytes
        mapped = self._mapped(start + n * self.row_bytes) if self.mappable else None
        if mapped is None:
            buffer = _scratch("rows", n * self.row_bytes)
            _pread_into(self.fd, as_bytes(buffer), start)
        else:
            buffer = mapped[start : start + n * self.row_bytes]
        rows = buffer.view(self.dtype).reshape(n, *self.chunks[1:])
        rest = (slice(None), *(slice(s, s + k) for s, k in zip(task.src_rest, task.count[1:])))
        destination[task.destination_box()] = rows[rest]

    def _read_compressed(
        self, destination: np.ndarray, table: ChunkTable, tasks: list[_Task]
    ) -> None:
        """Chunks read raw (adjacent ones together), decoded on all cores."""
        pipeline = self.pipeline
        assert pipeline is not None
        chunks, dtype, fd = self.chunks, self.dtype, self.fd

        whole = [0] * (len(chunks) - 1)

        def decode(item: tuple[_Task, Any]) -> None:
            try:
                decode_one(item)
            except CorruptDataError:
                raise
            except Exception as err:  # any codec's complaint about damaged bytes
                raise CorruptDataError(
                    f"{self.describe()}: the stored chunk in slot {item[0].slot} is damaged "
                    f"(expected a valid {pipeline!r} encoding): {err}"
                ) from err

        def decode_one(item: tuple[_Task, Any]) -> None:
            task, stored = item
            target = destination[task.destination_box()]
            mask = int(table.masks[task.slot])
            if (
                task.rows == (0, chunks[0])
                and task.src_rest == whole
                and target.shape == chunks
                and target.flags.c_contiguous
            ):
                pipeline.decode_into(stored, mask, target.reshape(-1).view(np.uint8))
                return
            raw = _scratch("chunk", pipeline.chunk_bytes)
            pipeline.decode_into(stored, mask, raw)
            buffer = raw.view(dtype).reshape(chunks)
            rest = [slice(s, s + n) for s, n in zip(task.src_rest, task.count[1:])]
            target[...] = buffer[tuple([slice(*task.rows), *rest])]

        # Runs of chunks adjacent in the file, of about BUFFER_BYTES stored bytes each:
        # each thread reads its run into its own small buffer (still in its cache when
        # the decoder reads it) and decodes it.
        runs = _runs(table, tasks, planner.BUFFER_BYTES)

        def fetch_and_decode(run: list[_Task]) -> None:
            for item in _fetch_run(fd, table, run):
                decode(item)

        for _ in parallel_groups(fetch_and_decode, runs):
            pass


def _map_file(fd: int, size: int) -> np.ndarray:
    """The first ``size`` bytes of the file of ``fd`` as a read-only memory map, unmapped
    on a thread of its own once the array and every view of it are gone.

    Unmapping takes as long as the pages the reads touched (4 ms for a file of 128 MB
    read whole), which would otherwise be paid where the last reader goes, in closing
    the file; the C library's ``mmap`` is called through :mod:`ctypes` so that no
    Python object exports the map when it is unmapped. Where there is no C library to
    call, Python's :mod:`mmap` maps the file (unmapped where it goes)."""
    functions = _mapping_functions()
    if functions is None:
        import mmap

        return np.frombuffer(mmap.mmap(fd, size, access=mmap.ACCESS_READ), np.uint8)
    map_bytes, unmap = functions
    address = map_bytes(None, size, _PROT_READ, _MAP_SHARED, fd, 0)
    if address is None or address == _MAP_FAILED:
        code = ctypes.get_errno()
        raise OSError(code, f"mmap: {os.strerror(code)}")
    try:
        pages: Any = (ctypes.c_uint8 * size).from_address(address)  # owns nothing
        mapped = np.frombuffer(pages, np.uint8)
        mapped.flags.writeable = False  # the pages may only be read
    except BaseException:
        unmap(address, size)
        raise
    finalizer = weakref.finalize(mapped, _unmap_aside, unmap, address, size)
    finalizer.atexit = False  # at exit, other threads may still copy from it
    return mapped


_PROT_READ = 1
_MAP_SHARED = 1
_MAP_FAILED = ctypes.c_void_p(-1).value


@functools.cache
def _mapping_functions() -> tuple[Any, Any] | None:
    """The C library's ``mmap`` and ``munmap``, or None where there are none to call."""
    libc = scatter.c_library()
    if libc is None:  # pragma: no cover - Windows maps with Python's mmap
        return None
    try:
        # Function objects of their own (not the library's shared attributes): their
        # types are set here.
        map_bytes, unmap = libc["mmap"], libc["munmap"]
    except AttributeError:  # pragma: no cover - a C library without them
        return None
    map_bytes.argtypes = [
        ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int64
    ]  # fmt: skip
    map_bytes.restype = ctypes.c_void_p
    unmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    unmap.restype = ctypes.c_int
    return map_bytes, unmap


def _unmap_aside(unmap: Any, address: int, size: int) -> None:
    """Unmap a map nothing refers to any more, on a thread of its own (ctypes lets go
    of the GIL meanwhile); here, where no thread can be started (interpreter shutdown)."""
    try:
        threading.Thread(target=unmap, args=(address, size), name="h5vc-unmap", daemon=True).start()
    except RuntimeError:
        unmap(address, size)


class _Runs:
    """Runs of chunks adjacent in the file, as arrays (one entry a run): rows ``lo`` to
    ``hi`` of the run from ``slot`` on, at ``src_rest`` past axis 0, to
    ``destination[dst : dst + count]``."""

    __slots__ = ("count", "dst", "hi", "lo", "slot", "src_rest")

    def __init__(
        self,
        slot: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
        src_rest: np.ndarray,
        dst: np.ndarray,
        count: np.ndarray,
    ):
        self.slot = slot
        self.lo = lo
        self.hi = hi
        self.src_rest = src_rest
        self.dst = dst
        self.count = count

    @classmethod
    def empty(cls, ndim: int) -> _Runs:
        none = np.zeros(0, np.int64)
        return cls(
            none, none, none, np.zeros((0, ndim - 1), np.int64), *[none.reshape(0, ndim)] * 2
        )

    def __len__(self) -> int:
        return len(self.slot)

    def select(self, which: np.ndarray) -> _Runs:
        """The runs ``which`` selects (a mask or positions)."""
        return _Runs(
            self.slot[which],
            self.lo[which],
            self.hi[which],
            self.src_rest[which],
            self.dst[which],
            self.count[which],
        )

    def tasks(self) -> list[_Task]:
        """The runs as :class:`_Task` objects, in order."""
        src_rest, dst, count = self.src_rest.tolist(), self.dst.tolist(), self.count.tolist()
        return [
            _Task(slot=s, rows=(lo, hi), src_rest=r, dst=d, count=c)
            for s, lo, hi, r, d, c in zip(
                self.slot.tolist(), self.lo.tolist(), self.hi.tolist(), src_rest, dst, count
            )
        ]


class _Task:
    """Rows ``rows`` of the run of chunks from ``slot`` on, to ``destination[dst...]``."""

    __slots__ = ("count", "dst", "rows", "slot", "src_rest")

    def __init__(
        self,
        slot: int,
        rows: tuple[int, int],
        src_rest: list[int],
        dst: list[int],
        count: list[int],
    ):
        self.slot = slot
        self.rows = rows
        self.src_rest = src_rest
        self.dst = dst
        self.count = count

    def destination_box(self) -> tuple[slice, ...]:
        return tuple(slice(d, d + n) for d, n in zip(self.dst, self.count))


def _split(tasks: list[_Task], rows: int) -> list[_Task]:
    """The tasks cut into pieces of at most ``rows`` rows (which threads share out)."""
    pieces = []
    for task in tasks:
        if task.count[0] <= rows:
            pieces.append(task)
            continue
        for row in range(0, task.count[0], rows):
            n = min(rows, task.count[0] - row)
            pieces.append(
                _Task(
                    slot=task.slot,
                    rows=(task.rows[0] + row, task.rows[0] + row + n),
                    src_rest=task.src_rest,
                    dst=[task.dst[0] + row, *task.dst[1:]],
                    count=[n, *task.count[1:]],
                )
            )
    return pieces


def _bands(tasks: list[_Task], band_rows: int) -> list[list[_Task]]:
    """The tasks cut at every ``band_rows``-th row of the result, grouped by band: a
    band holds the parts of the tasks crossing it, in the tasks' order."""
    starts = np.array([task.dst[0] for task in tasks], np.int64)
    counts = np.array([task.count[0] for task in tasks], np.int64)
    first = starts // band_rows
    spans = (starts + counts - 1) // band_rows - first + 1
    owner = np.repeat(np.arange(len(tasks)), spans)
    band = first[owner] + np.arange(len(owner)) - np.repeat(np.cumsum(spans) - spans, spans)
    low = np.maximum(starts[owner], band * band_rows)
    high = np.minimum(starts[owner] + counts[owner], (band + 1) * band_rows)
    order = np.lexsort((owner, band))
    bands: list[list[_Task]] = []
    current = -1
    for i, b, lo, hi in zip(
        owner[order].tolist(), band[order].tolist(), low[order].tolist(), high[order].tolist()
    ):
        if b != current:
            bands.append([])
            current = b
        task = tasks[i]
        skip = lo - task.dst[0]
        if skip == 0 and hi - lo == task.count[0]:
            bands[-1].append(task)
            continue
        bands[-1].append(
            _Task(
                slot=task.slot,
                rows=(task.rows[0] + skip, task.rows[0] + skip + hi - lo),
                src_rest=task.src_rest,
                dst=[lo, *task.dst[1:]],
                count=[hi - lo, *task.count[1:]],
            )
        )
    return bands


def _copy_tiled(
    destination: np.ndarray, stored: np.ndarray, band: list[_Task], inner: tuple[int, ...]
) -> bool:
    """Copy the stored rows of ``band`` (back to back in ``stored``, in the band's
    order) into a 2-D ``destination`` with one numpy copy if the tasks cover the same
    rows and columns of their chunks and lie side by side, in order; else False."""
    if destination.ndim != 2 or len(band) < 2:
        return False
    first = band[0]
    rows, width = first.count
    row, (column,), start = first.dst[0], first.src_rest, first.dst[1]
    for k, task in enumerate(band):
        if (
            task.count[0] != rows
            or task.count[1] != width
            or task.dst[0] != row
            or task.src_rest[0] != column
            or task.dst[1] != start + k * width
        ):
            return False
    tiles = destination[row : row + rows, start : start + len(band) * width].view()
    tiles.shape = (rows, len(band), width)  # a view of the band: raises rather than copy
    chunks = stored.reshape(len(band), rows, *inner)[:, :, column : column + width]
    np.copyto(tiles, chunks.transpose(1, 0, 2))
    return True


def _tiles(
    starts: np.ndarray, dst: np.ndarray, counts: np.ndarray, row_bytes: int, band_rows: int
) -> list[tuple[int, int, int, int, int, int, int]]:
    """Tiles of a 2-D result, each copied with one numpy copy from a strided view of the
    file's bytes, planned with numpy for all tasks at once.

    Task ``i`` puts ``counts[i]`` (rows, columns) stored ``row_bytes`` apart from file
    offset ``starts[i]`` on to ``result[dst[i] : dst[i] + counts[i]]``. Each is cut at
    every ``band_rows``-th row of the result; parts of one band that cover the same rows
    of the result, are equally wide, follow each other along its columns and start
    equally far apart in the file make one tile: ``(row, rows, column, n, width, start,
    step)``, ``n`` parts of ``width`` columns from ``column`` on, the first at file offset
    ``start``, each next ``step`` bytes further. Tiles come in the order of the result's
    rows, then columns."""
    rows0 = dst[:, 0]
    rows = counts[:, 0]
    first = rows0 // band_rows
    spans = (rows0 + rows - 1) // band_rows - first + 1
    owner = np.repeat(np.arange(len(rows0)), spans)
    band = first[owner] + np.arange(len(owner)) - np.repeat(np.cumsum(spans) - spans, spans)
    low = np.maximum(rows0[owner], band * band_rows)
    high = np.minimum(rows0[owner] + rows[owner], (band + 1) * band_rows)
    column = dst[owner, 1]
    width = counts[owner, 1]
    start = starts[owner] + (low - rows0[owner]) * row_bytes
    order = np.lexsort((column, high, low))
    low, high, column, width, start = (a[order] for a in (low, high, column, width, start))
    # Part i may join the tile of part i - 1 (same rows, same width, next columns) ...
    joins = np.zeros(len(low), bool)
    joins[1:] = (
        (low[1:] == low[:-1])
        & (high[1:] == high[:-1])
        & (width[1:] == width[:-1])
        & (column[1:] == column[:-1] + width[:-1])
    )
    # ... if its step in the file is that of part i - 1, when part i - 1 joined too.
    step = np.zeros(len(low), np.int64)
    step[1:] = start[1:] - start[:-1]
    same_step = np.ones(len(low), bool)
    same_step[2:] = step[2:] == step[1:-1]
    breaks = ~joins
    breaks[1:] |= joins[:-1] & ~same_step[1:]
    begin = np.flatnonzero(breaks)
    size = np.diff(np.append(begin, len(low)))
    tile_step = np.where(size > 1, step[np.minimum(begin + 1, len(low) - 1)], 0)
    return list(
        zip(
            low[begin].tolist(),
            (high - low)[begin].tolist(),
            column[begin].tolist(),
            size.tolist(),
            width[begin].tolist(),
            start[begin].tolist(),
            tile_step.tolist(),
        )
    )


def _copy_tiles(
    destination: np.ndarray,
    stored: np.ndarray,
    row_bytes: int,
    tiles: list[tuple[int, int, int, int, int, int, int]],
    dtype: np.dtype | None = None,
) -> None:
    """Copy every tile (:func:`_tiles`) from the bytes ``stored`` (items of ``dtype``,
    the destination's if None, in rows ``row_bytes`` apart) into the 2-D
    ``destination``, converted as numpy's assignment converts, the tiles shared out
    between threads; a tile reaching past ``stored`` raises (numpy checks the view's
    bounds)."""
    if dtype is None:
        dtype = destination.dtype

    def copy(tile: tuple[int, int, int, int, int, int, int]) -> None:
        row, rows, column, n, width, start, step = tile
        source = np.ndarray(
            (rows, n, width), dtype, buffer=stored, offset=start,
            strides=(row_bytes, step, dtype.itemsize),
        )  # fmt: skip
        target = destination[row : row + rows, column : column + n * width].view()
        target.shape = (rows, n, width)  # a view of the result: raises rather than copy
        np.copyto(target, source, casting="unsafe")

    for _ in parallel_groups(copy, tiles):
        pass


def _runs(table: ChunkTable, tasks: list[_Task], run_bytes: int) -> list[list[_Task]]:
    """The tasks in file order, cut into runs of chunks adjacent in the file of about
    ``run_bytes`` stored bytes (a larger chunk is a run of its own)."""
    offsets = table.offsets
    sizes = table.sizes
    ordered = sorted(tasks, key=lambda task: int(offsets[task.slot]))
    runs: list[list[_Task]] = []
    end = -1
    run_size = 0
    for task in ordered:
        start = int(offsets[task.slot])
        size = int(sizes[task.slot])
        if start != end or run_size + size > run_bytes:
            runs.append([])
            run_size = 0
        runs[-1].append(task)
        run_size += size
        end = start + size
    return runs


def _fetch_run(fd: int, table: ChunkTable, run: list[_Task]) -> list[tuple[_Task, memoryview]]:
    """The stored bytes of each chunk of a run (chunks adjacent in the file, in file
    order, as :func:`_runs` cuts them), read with one positioned read into this
    thread's buffer."""
    start = int(table.offsets[run[0].slot])
    sizes = [int(table.sizes[task.slot]) for task in run]
    buffer = as_bytes(_scratch("fetch", sum(sizes)))
    _pread_into(fd, buffer, start)
    out: list[tuple[_Task, memoryview]] = []
    at = 0
    for task, size in zip(run, sizes):
        out.append((task, buffer[at : at + size]))
        at += size
    return out


_LOCAL = threading.local()


def _scratch(key: str, nbytes: int) -> np.ndarray:
    """A byte buffer of ``nbytes`` owned by this thread, kept for its next use (its
    pages are then already mapped) unless larger than
    :data:`~h5vc.store.planner.KEEP_BYTES`."""
    buffers: dict[str, np.ndarray] | None = getattr(_LOCAL, "buffers", None)
    if buffers is None:
        buffers = _LOCAL.buffers = {}
    buffer = buffers.get(key)
    if buffer is None or len(buffer) < nbytes:
        buffer = np.empty(nbytes, dtype=np.uint8)
        if nbytes <= planner.KEEP_BYTES:
            buffers[key] = buffer
    return buffer[:nbytes]


def _pread_into(fd: int, buffer: memoryview, offset: int) -> None:
    """Fill ``buffer`` from ``fd`` at ``offset`` (short reads continued)."""
    done = 0
    total = len(buffer)
    while done < total:
        n = os.preadv(fd, [buffer[done:]], offset + done)
        if n <= 0:
            raise OSError(f"Expected {total - done} more bytes at offset {offset + done}. Got 0.")
        done += n
