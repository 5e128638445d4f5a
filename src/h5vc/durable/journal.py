"""A rollback journal under HDF5: the file is always its last committed state, or
can be brought back to it.

HDF5 writes metadata in place, at moments of its choosing (cache evictions, flushes,
file-space reuse), and keeps no journal: a process killed while it writes leaves torn
metadata. h5vc therefore opens writable files through HDF5's ``fileobj`` driver with a
:class:`JournaledFile`, which sees every read and write HDF5 makes.

Between two *commit points* (an epoch), bytes beyond the size the file had when the
epoch began (its *base*) are written straight to the file: nothing committed refers to
them. Bytes below the base are *old*: a write to them is held in memory (an overlay of
4 KiB pages, which reads see; a page the write leaves as it is on disk is not held, as
HDF5 rewrites whole object-header chunks of which a few bytes changed) until
:meth:`JournaledFile.commit`, which

1. appends the original content of every such page to ``<file>.h5vc-journal`` and
   fsyncs it (the header, written first in an epoch, records the base);
2. writes the held pages into the file and fsyncs it;
3. marks the journal clean (one in-place header write, fsync'd).

The fsyncs are made with ``durable=True`` (``durable_writes=True``) only. Without them
a killed process still loses nothing committed (the kernel's page cache keeps every
write, in order); what a power loss or kernel crash leaves is then not guaranteed.

A process killed anywhere before step 3 leaves a journal whose records restore every
old page it overwrote; :func:`recover` (run when the file is next opened) puts them
back and truncates the file to the base: the file is exactly as at the last commit
point. Recovery first checks that the file is still as the writer left it: the
journal records the checksum of the file's first page (HDF5's superblock, rewritten by
any program that allocates space in the file) at the start of the epoch and before
every write of that page; a first page matching none of them means another program
changed the file after the crash, and recovery refuses (:class:`~h5vc.errors.
JournalConflictError`) rather than undo that program's work. If the held pages exceed a budget, they are spilled early the same way (steps
1 and 2), and the epoch stays open. A truncation below the base journals the bytes it
cuts off first.
"""

from __future__ import annotations

import contextlib
import errno
import os
import struct
import zlib
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

import h5vc.config as config
from h5vc.errors import CorruptDataError, JournalConflictError

__all__ = ["JOURNAL_SUFFIX", "JournaledFile", "journal_path", "recover"]

JOURNAL_SUFFIX = ".h5vc-journal"
PAGE = 4096
#: Old pages held in memory before they are spilled (journaled and written) early.
SPILL_BYTES = config.SPILL_BYTES

_MAGIC = b"H5VCJRN2"
_MAGIC_V1 = b"H5VCJRN1"  # written by earlier versions: no first-page checksum
# magic, state, epoch, base size, crc32 of the first page when the epoch began
_HEADER = struct.Struct("<8sBQQI")
_HEADER_V1 = struct.Struct("<8sBQQ")
_RECORD = struct.Struct("<QQII")  # epoch, offset, length, crc32 of the bytes
#: A record's offset that marks no page but the checksum the first page is about to
#: get (in the record's crc field, with length 0).
_FIRST_PAGE_MARK = (1 << 64) - 1
_DIRTY, _CLEAN = 1, 0


def journal_path(path: str | os.PathLike[str]) -> str:
    return os.fspath(path) + JOURNAL_SUFFIX


def _sync(fd: int, durable: bool) -> None:
    if durable:
        os.fdatasync(fd)


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, offset: int) -> None:
    """Write all of ``data`` at ``offset``: a short write (the kernel's answer when the
    disk fills) is continued, and one that writes nothing raises ``ENOSPC``."""
    view = memoryview(data).cast("B")
    while len(view):
        written = os.pwrite(fd, view, offset)
        if written <= 0:
            raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (a write made no progress)")
        view = view[written:]
        offset += written


_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _first_page_crc(fd: int, base: int) -> int:
    """Checksum of the file's first page, as far as it lies below ``base``."""
    return _first_page_content_crc(os.pread(fd, min(PAGE, base), 0))


def _first_page_content_crc(content: bytes | bytearray) -> int:
    """Checksum of ``content``, the file's first page.

    HDF5 marks its superblock as open for writing (the file consistency flags, and in
    superblocks of version 2 and 3 the checksum over them) as soon as a program opens
    the file for writing: those bytes are left out, so opening the file after a crash
    is no change to it.
    """
    page = bytearray(content)
    if page[:8] == _HDF5_SIGNATURE and len(page) >= 48:
        if page[8] in (0, 1):
            page[20:24] = bytes(4)  # the flags, after the B-tree K values
        elif page[8] in (2, 3):
            checksum = 12 + 4 * page[9]  # after four addresses
            page[11] = 0
            page[checksum : checksum + 4] = bytes(4)
    return zlib.crc32(page)


def _read_records(fd: int, epoch: int, start: int) -> tuple[list[tuple[int, bytes]], set[int]]:
    """Every complete record of ``epoch``, in order, and the checksums the first page
    was about to get; stops at the first record that is not complete."""
    records = []
    first_page: set[int] = set()
    position = start
    while True:
        head = os.pread(fd, _RECORD.size, position)
        if len(head) < _RECORD.size:
            break
        rec_epoch, offset, length, crc = _RECORD.unpack(head)
        if rec_epoch != epoch:
            break
        if offset == _FIRST_PAGE_MARK:
            first_page.add(crc)
            position += _RECORD.size
            continue
        data = os.pread(fd, length, position + _RECORD.size)
        if len(data) != length or zlib.crc32(data) != crc:
            break
        records.append((offset, data))
        position += _RECORD.size + length
    return records, first_page


def _read_header(fd: int, jpath: str) -> tuple[int, int, int, int | None, int] | None:
    """(state, epoch, base, first-page checksum or None, header size), or None for a
    journal cut short before its header."""
    head = os.pread(fd, _HEADER.size, 0)
    if len(head) >= _HEADER_V1.size and head[:8] == _MAGIC_V1:
        _, state, epoch, base = _HEADER_V1.unpack(head[: _HEADER_V1.size])
        return state, epoch, base, None, _HEADER_V1.size
    if len(head) < _HEADER.size and (len(head) < 8 or head[:8] == _MAGIC):
        return None
    if head[:8] != _MAGIC:
        raise CorruptDataError(
            f"Expected an h5vc journal at {jpath!r}; its header is not one. Move it "
            f"away only if the file beside it was never written by h5vc."
        )
    _, state, epoch, base, first_crc = _HEADER.unpack(head)
    return state, epoch, base, first_crc, _HEADER.size


def recover(path: str | os.PathLike[str], *, durable: bool = True) -> bool:
    """Roll ``path`` back to its last commit point if a journal says it was left
    mid-epoch; remove the journal. Returns True if anything was rolled back.

    A file created in an epoch that never committed (base 0) is left empty: a writer
    may hold a lock on it, so it is not removed.
    """
    jpath = journal_path(path)
    try:
        jfd = os.open(jpath, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        header = _read_header(jfd, jpath)
        dirty = header is not None and header[0] == _DIRTY
        if header is not None and dirty:
            _, epoch, base, first_crc, start = header
            records, first_page = _read_records(jfd, epoch, start)
            _roll_back(os.fspath(path), records, base, durable, first_crc, first_page)
    finally:
        os.close(jfd)
    os.unlink(jpath)
    return dirty


def _roll_back(
    path: str,
    records: list[tuple[int, bytes]],
    base: int,
    durable: bool,
    first_crc: int | None,
    first_page: set[int],
) -> None:
    if not os.path.exists(path):
        return
    fd = os.open(path, os.O_RDWR)
    try:
        if first_crc is not None and os.fstat(fd).st_size > 0:
            found = _first_page_crc(fd, base)
            if found != first_crc and found not in first_page:
                raise JournalConflictError(
                    f"Cannot roll {path!r} back to its last commit point: the file was "
                    f"changed after the writer that left {journal_path(path)!r} stopped "
                    f"(its first page is not as that writer left it), and rolling back "
                    f"would undo those changes. Restore the file from a copy, or move the "
                    f"journal away to keep the file as it is and run `h5vc verify "
                    f"{path}` to see what is damaged."
                )
        _roll_back_open(fd, records, base, durable)
    finally:
        os.close(fd)


class JournaledFile:
    """A binary file object for HDF5's ``fileobj`` driver that journals old bytes.

    ``fault`` (tests only) is called before every write to the file or the journal
    with the kind of write; raising from it simulates a failing disk.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = False,
        durable: bool = True,
        fault: Callable[[str], None] | None = None,
        apply_lock: Callable[[bool], None] | None = None,
        on_close: Callable[[], None] | None = None,
    ):
        self.path = os.fspath(path)
        #: Called once when the file is closed (releases what the opener holds).
        self.on_close = on_close
        #: A weak reference to the caller's ``h5py.File`` that h5vc took over, if any
        #: (it gets the new handle when the file is reopened after a roll-back).
        self.owner: Callable[[], Any] | None = None
        #: Called with True before bytes of the last commit point change on disk (a
        #: spill, a commit point, a roll-back) and with False once they are consistent
        #: again: readers are kept out meanwhile (see h5vc.durable.files).
        self.apply_lock = apply_lock
        self._applying = False
        self.durable = durable
        self.fault = fault
        recover(self.path, durable=durable)
        self._fd = os.open(self.path, os.O_RDWR | (os.O_CREAT if create else 0), 0o666)
        if create and os.fstat(self._fd).st_size:
            # Emptied only when it holds anything: ext4 writes back at close every file
            # truncated to 0 (its guard for programs that rewrite a file in place), which
            # took 85-100 ms after a 128 MB first commit into a file the lock had just made.
            os.ftruncate(self._fd, 0)
        self._jfd: int | None = None
        self._epoch = 0
        self._position = 0
        self._size = os.fstat(self._fd).st_size
        self._base = self._size
        self._journaled: set[int] = set()  # old pages whose original is in the journal
        self._held: dict[int, bytearray] = {}  # old page -> its new content
        #: The content on disk of each held page (below the base), read when it was
        #: first held: the disk keeps it until the spill, which journals it.
        self._originals: dict[int, bytes] = {}
        self._held_sorted: list[int] = []
        self._memory: dict[int, bytearray] = {}  # after a failed write: every page written
        self._journal_end = _HEADER.size
        self._started = False
        self._first_crc = 0  # of the first page as on disk when the epoch began
        #: Set when HDF5 closes the file after a roll-back: its last writes go nowhere.
        self.discarding = False
        #: The first write that failed in this epoch: the epoch can only be rolled back
        #: (HDF5 sometimes swallows the error of a write it makes on its own).
        self.failed: BaseException | None = None
        if create:
            self._start_epoch()  # a new file is removed if its first epoch does not commit

    def __repr__(self) -> str:
        return self.path  # h5py shows it as the file's name

    # -- the file-object protocol HDF5's fileobj driver uses --------------------------

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 0:
            self._position = offset
        elif whence == 1:
            self._position += offset
        else:
            self._position = self._size + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def readinto(self, buffer: memoryview | bytearray) -> int:
        count = self._read_raw(memoryview(buffer).cast("B"), self._position)
        self._position += count
        return count

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            size = max(0, self._size - self._position)
        buffer = bytearray(size)
        count = self.readinto(buffer)
        return bytes(buffer[:count])

    # -- positioned reads of what HDF5 sees (hdf5.header.ByteSource) ----------------------

    @property
    def descriptor(self) -> int:
        """The OS file descriptor of the file (-1 once closed). What it reads is the
        file as on disk: pages held for this epoch are not there yet."""
        return self._fd

    @property
    def size(self) -> int:
        """The size of the file as HDF5 sees it."""
        return self._size

    def pread(self, nbytes: int, offset: int) -> bytes:
        """Up to ``nbytes`` at ``offset`` as HDF5 reads them (held pages included),
        without moving the position HDF5 reads from."""
        buffer = bytearray(max(0, min(nbytes, self._size - offset)))
        count = self._read_raw(memoryview(buffer), offset) if buffer else 0
        return bytes(buffer[:count])

    def write(self, data: bytes | memoryview | bytearray) -> int:
        view = memoryview(data).cast("B")
        if self.failed is not None:
            return self._write_to_memory(view)
        try:
            return self._write(view)
        except Exception as err:
            # Not raised: h5py leaves an error raised here set for the next call into
            # Python. The disk is left alone from now on, HDF5 goes on seeing what it
            # wrote, and the next commit point raises.
            self.failed = err
            return self._write_to_memory(view)

    def _write(self, view: memoryview) -> int:
        start = self._position
        stop = start + len(view)
        if self.discarding:
            self._position = stop
            return len(view)
        self._start_epoch()
        cut = min(max(start, self._base), stop)
        if start < cut:
            self._hold(view[: cut - start], start)
        if cut < stop:
            self._check_fault("write")
            pwrite_all(self._fd, view[cut - start :], cut)
        self._size = max(self._size, stop)
        self._position = stop
        if len(self._held) * PAGE > SPILL_BYTES:
            self._spill()
        return len(view)

    def truncate(self, size: int | None = None) -> int:
        size = self._position if size is None else size
        if self.discarding:
            return size
        if self.failed is not None:
            self._size = size
            return size
        try:
            return self._truncate(size)
        except Exception as err:
            self.failed = err
            self._size = size
            return size

    def _truncate(self, size: int) -> int:
        if size == self._size:
            # HDF5 truncates the file to its end at every flush: no change, and no
            # epoch begun for it (an epoch costs a journal header and, durably, syncs).
            return size
        self._start_epoch()
        if size < self._base:
            self._spill(extra=range(size // PAGE, (self._base + PAGE - 1) // PAGE))
        self._check_fault("truncate")
        os.ftruncate(self._fd, size)
        self._size = size
        return size

    def flush(self) -> None:
        """HDF5 flushed its caches: nothing to do, old pages stay held until commit."""

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    @property
    def closed(self) -> bool:
        return self._fd < 0

    # -- epochs -----------------------------------------------------------------------

    @property
    def in_epoch(self) -> bool:
        """True if anything was written since the last commit point."""
        return self._started

    def commit(self) -> None:
        """Make everything written so far the file's committed state.

        Raises ``OSError`` if a write failed since the last commit point.
        """
        if self.discarding:
            return
        if self.failed is not None:
            raise self._failed_commit(self.failed) from self.failed
        if not self._started:
            return
        try:
            self._commit()
        except OSError as err:  # a write of the commit itself: name the file too
            self.failed = self.failed or err
            raise self._failed_commit(err) from err
        except BaseException as err:
            self.failed = self.failed or err
            raise

    def _failed_commit(self, error: BaseException) -> OSError:
        error_number = getattr(error, "errno", None) or errno.EIO
        return OSError(
            error_number,
            f"Cannot commit the changes to {self.path!r}: a write to it failed "
            f"({error}); they must be rolled back.",
        )

    def _commit(self) -> None:
        self._spill()
        _sync(self._fd, self.durable)
        assert self._jfd is not None
        self._check_fault("journal")
        pwrite_all(self._jfd, self._header(_CLEAN, self._size), 0)
        _sync(self._jfd, self.durable)
        self._started = False
        self._base = self._size
        self._journaled.clear()
        self._leave_apply()

    def _enter_apply(self) -> None:
        if not self._applying and self.apply_lock is not None:
            self.apply_lock(True)
            self._applying = True

    def _leave_apply(self) -> None:
        if self._applying and self.apply_lock is not None:
            self._applying = False
            self.apply_lock(False)

    def roll_back(self) -> None:
        """Undo everything written since the last commit point, in the file itself.

        HDF5's view of the file is stale afterwards: the h5py file must be closed
        (with :attr:`discarding` set, so its last writes go nowhere) and reopened.
        """
        self._held.clear()
        self._held_sorted.clear()
        self._originals.clear()
        self._memory.clear()
        if self._started:
            assert self._jfd is not None
            records, _ = _read_records(self._jfd, self._epoch, _HEADER.size)
            self._enter_apply()
            _roll_back_open(self._fd, records, self._base, self.durable)
            pwrite_all(self._jfd, self._header(_CLEAN, self._base), 0)
            _sync(self._jfd, self.durable)
        self._size = self._base
        self._journaled.clear()
        self._started = False
        self.failed = None
        self._leave_apply()

    def close(self) -> None:
        """Close the file; a clean journal is removed. Does not commit."""
        if self._fd < 0:
            return
        try:
            self._leave_apply()
            os.close(self._fd)
            self._fd = -1
            if self._jfd is not None:
                os.close(self._jfd)
                self._jfd = None
                if not self._started:
                    os.unlink(journal_path(self.path))
        finally:
            on_close, self.on_close = self.on_close, None
            if on_close is not None:
                on_close()

    def finish(self) -> None:
        """HDF5 has closed the file: what it wrote last (at its close) becomes the
        committed state, or, if a write failed, the file goes back to its last commit
        point; then the file is closed."""
        if self._fd < 0:
            return
        try:
            try:
                if self.failed is not None or self.discarding:
                    raise OSError("the file is to be rolled back")
                self.commit()
            except Exception:
                self.roll_back()
        except Exception:
            pass  # the journal stays dirty: the next open rolls the file back
        finally:
            self.close()

    def __del__(self) -> None:
        # A file HDF5 opened through this object and closed without h5vc's close (a
        # caller's h5py.File that h5vc took over) is finished when HDF5 lets it go.
        with contextlib.suppress(Exception):
            self.finish()

    # -- internals --------------------------------------------------------------------

    def _write_to_memory(self, view: memoryview) -> int:
        """After a failed write: keep what HDF5 writes in memory, for it to read back."""
        start = self._position
        position = start
        while position < start + len(view):
            page = position // PAGE
            offset = position - page * PAGE
            count = min(PAGE - offset, start + len(view) - position)
            held = self._memory.get(page)
            if held is None:
                held = bytearray(PAGE)
                self._read_raw(memoryview(held), page * PAGE)
                self._memory[page] = held
            held[offset : offset + count] = view[position - start : position - start + count]
            position += count
        self._size = max(self._size, position)
        self._position = position
        return len(view)

    def _read_raw(self, view: memoryview, start: int) -> int:
        """Read from the file, then what is held, then what is in memory."""
        count = os.preadv(self._fd, [view], start)
        stop = start + len(view)
        if (self._held and start < self._base) or self._memory:
            count = max(count, min(stop, self._size) - start)
            if self._held and start < self._base:
                self._patch(view, start, stop, self._held, self._held_sorted)
            if self._memory:
                pages = sorted(p for p in self._memory if start // PAGE <= p <= stop // PAGE)
                self._patch(view, start, stop, self._memory, pages)
        return count

    def _check_fault(self, kind: str) -> None:
        if self.fault is not None:
            self.fault(kind)

    def _header(self, state: int, size: int) -> bytes:
        return _HEADER.pack(_MAGIC, state, self._epoch, size, self._first_crc)

    def _start_epoch(self) -> None:
        if self._started:
            return
        if self._jfd is None:
            self._jfd = os.open(journal_path(self.path), os.O_RDWR | os.O_CREAT, 0o666)
        self._epoch += 1
        self._first_crc = _first_page_crc(self._fd, self._base)
        self._check_fault("journal")
        pwrite_all(self._jfd, self._header(_DIRTY, self._base), 0)
        if self._base == 0:
            _sync(self._jfd, self.durable)  # else the first spill syncs it with its records
        self._journal_end = _HEADER.size
        self._started = True

    def _old_page(self, page: int) -> bytes:
        """The content on disk of old page ``page`` (up to the base)."""
        start = page * PAGE
        length = min(PAGE, self._base - start)
        content = os.pread(self._fd, length, start)
        return content if len(content) == length else content + bytes(length - len(content))

    def _hold(self, view: memoryview, start: int) -> None:
        """Apply the write of ``view`` at ``start`` (below the base): to the held
        pages, straight to the file for pages journaled already, else by holding the
        page in memory. A page the write leaves as it is on disk is neither held nor
        written: HDF5 writes an object header's chunks whole when one message of them
        changes (the versions group's attributes, one per ref: for 200 refs a few
        bytes differ of the 16 KiB written)."""
        data = view.tobytes()
        stop = start + len(data)
        # The pages the write falls in, as on disk, in one read (stop <= the base).
        first = start - start % PAGE
        disk = os.pread(self._fd, min(self._base, -(-stop // PAGE) * PAGE) - first, first)
        held_pages = self._held
        position = start
        while position < stop:
            page, offset = divmod(position, PAGE)
            count = min(PAGE - offset, stop - position)
            lo = position - start
            hi = lo + count
            held = held_pages.get(page)
            if held is not None:
                held[offset : offset + count] = view[lo:hi]
            elif disk[position - first : position - first + count] != data[lo:hi]:  # memcmp
                if page in self._journaled:
                    if page == 0:
                        self._mark_first_page(offset, view[lo:hi])
                    self._check_fault("write")
                    pwrite_all(self._fd, view[lo:hi], position)
                else:
                    length = min(PAGE, self._base - page * PAGE)
                    original = disk[page * PAGE - first : page * PAGE - first + length]
                    if len(original) < length:  # the file is shorter than its base
                        original += bytes(length - len(original))
                    held = held_pages[page] = bytearray(original)
                    held[offset : offset + count] = view[lo:hi]
                    self._originals[page] = original
                    self._held_sorted.insert(bisect_left(self._held_sorted, page), page)
            position += count

    def _first_page_mark(self, content: bytes | bytearray) -> bytes:
        """The record saying the first page is about to hold ``content``."""
        return _RECORD.pack(self._epoch, _FIRST_PAGE_MARK, 0, _first_page_content_crc(content))

    def _mark_first_page(self, offset: int, chunk: memoryview) -> None:
        """Before a direct write to the (journaled) first page: journal its checksum
        after the write, so recovery knows the page as this writer leaves it."""
        assert self._jfd is not None
        page = bytearray(self._old_page(0))
        page[offset : offset + len(chunk)] = chunk
        mark = self._first_page_mark(page)
        self._check_fault("journal")
        pwrite_all(self._jfd, mark, self._journal_end)
        self._journal_end += len(mark)
        _sync(self._jfd, self.durable)

    @staticmethod
    def _patch(
        view: memoryview, start: int, stop: int, pages: dict[int, bytearray], order: list[int]
    ) -> None:
        first = bisect_left(order, start // PAGE)
        for page in order[first:]:
            page_start = page * PAGE
            if page_start >= stop:
                break
            held = pages[page]
            lo = max(start, page_start)
            hi = min(stop, page_start + len(held))
            view[lo - start : hi - start] = held[lo - page_start : hi - page_start]

    def _spill(self, extra: range = range(0)) -> None:
        """Journal the originals of the held pages (and of ``extra`` pages), sync the
        journal, then write the held pages into the file. A held page written back
        as it was on disk is neither journaled nor written."""
        held, originals = self._held, self._originals
        changed = [page for page in self._held_sorted if held[page] != originals[page]]
        cut = {p for p in extra if p not in self._journaled and p * PAGE < self._base}
        pages = sorted(cut.union(changed)) if cut else changed
        if pages:
            self._enter_apply()  # held until the commit point ends
            assert self._jfd is not None
            parts = []
            for page in pages:
                original = originals.get(page)
                if original is None:  # a page not held (cut off by a truncation)
                    original = self._old_page(page)
                parts.append(
                    _RECORD.pack(self._epoch, page * PAGE, len(original), zlib.crc32(original))
                )
                parts.append(original)
            if changed and changed[0] == 0:
                parts.append(self._first_page_mark(held[0]))
            self._check_fault("journal")
            blob = b"".join(parts)
            pwrite_all(self._jfd, blob, self._journal_end)
            self._journal_end += len(blob)
            _sync(self._jfd, self.durable)
            self._journaled.update(pages)
        for page in changed:
            self._check_fault("write")
            pwrite_all(self._fd, held[page], page * PAGE)
        held.clear()
        self._held_sorted.clear()
        originals.clear()


def _roll_back_open(fd: int, records: list[tuple[int, bytes]], base: int, durable: bool) -> None:
    os.ftruncate(fd, base)
    for offset, data in records:
        pwrite_all(fd, data, offset)
    _sync(fd, durable)
