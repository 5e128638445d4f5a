"""The rollback journal: a crash before any write leaves a file that recovers to the
last commit point, byte for byte."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest

import h5vc
from h5vc.durable import journal
from h5vc.durable.journal import JournaledFile, journal_path, recover


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


class Snapshots:
    """The file and its journal as they are on disk before every write."""

    def __init__(self, path: Path):
        self.path = str(path)
        self.taken: list[tuple[bytes | None, bytes | None]] = []

    def __call__(self, kind: str) -> None:
        self.taken.append((_read(self.path), _read(journal_path(self.path))))

    def recovered(self, scratch: Path) -> Iterator[bytes | None]:
        """What recovery makes of each snapshot."""
        for number, (data, log) in enumerate(self.taken):
            target = scratch / f"snap{number}.h5"
            for file, content in ((str(target), data), (journal_path(target), log)):
                if content is not None:
                    Path(file).write_bytes(content)
            recover(target)
            assert not os.path.exists(journal_path(target))
            yield _read(str(target))
            target.unlink(missing_ok=True)


def _operations() -> list[Callable[[h5vc.VersionedHDF5File], None]]:
    def commit(name: str, edit: Callable) -> Callable:
        def run(vf: h5vc.VersionedHDF5File) -> None:
            with vf.stage_version(name) as g:
                edit(g)

        return run

    def first(g):
        g.create_dataset("x", data=np.arange(20_000), chunks=(512,), maxshape=(None,))
        g.create_dataset("y", data=np.ones((40, 3)), chunks=(8, 3))

    def edit(g):
        g["x"][100:700] = -1
        g["y"].attrs["unit"] = "m"

    def grow(g):
        g["x"].resize((30_000,))
        g["x"][-5:] = 7
        g.create_dataset("z", data=np.random.default_rng(0).random(60_000))

    return [
        commit("v1", first),
        commit("v2", edit),
        commit("v3", grow),
        lambda vf: h5vc.delete_versions(vf, ["v2"]),
        lambda vf: h5vc.modify_metadata(vf, "x", chunks=(1024,)),
        commit("v4", lambda g: g["x"].__setitem__(slice(0, 5), 3)),
    ]


def test_a_crash_before_any_write_recovers_to_a_commit_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Old pages are held and, beyond three, spilled early: both paths are crossed.
    monkeypatch.setattr(journal, "SPILL_BYTES", 3 * journal.PAGE)
    path = tmp_path / "data.h5"
    snapshots = Snapshots(path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    handle = JournaledFile(path, create=True, durable=False, fault=snapshots)
    f = h5py.File(handle, "w")
    vf = h5vc.VersionedHDF5File(f)
    committed: bytes | None = b""  # before the first commit point the file is empty
    try:
        for operation in _operations():
            snapshots.taken.clear()
            operation(vf)
            f.flush()
            handle.commit()
            now = _read(str(path))
            outcomes = list(snapshots.recovered(scratch))
            assert outcomes, "every operation writes"
            # Before the commit point completes, recovery gives the previous state;
            # the last write of a commit point is the one that completes it.
            assert all(outcome == committed for outcome in outcomes)
            committed = now
    finally:
        f.close()
        handle.commit()
        handle.close()
    with h5vc.open(str(path)) as vf:
        assert vf.versions == ["v1", "v3", "v4"]
        assert vf["v4"]["x"][:6].tolist() == [3, 3, 3, 3, 3, 5]


def test_writes_below_the_base_reach_the_file_only_at_the_commit_point(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    path.write_bytes(b"a" * 10_000)
    handle = JournaledFile(path, durable=False)
    handle.seek(5000)
    handle.write(b"b" * 100)
    handle.seek(9990)
    handle.write(b"c" * 20)  # straddles the old end
    handle.seek(4990)
    assert handle.read(30) == b"a" * 10 + b"b" * 20
    assert path.read_bytes()[5000:5100] == b"a" * 100
    assert path.read_bytes()[10_000:] == b"c" * 10
    handle.commit()
    assert path.read_bytes()[4990:5110] == b"a" * 10 + b"b" * 100 + b"a" * 10
    assert path.read_bytes()[9990:] == b"c" * 20
    handle.close()
    assert not os.path.exists(journal_path(path))


def test_a_truncation_below_the_base_is_rolled_back(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    original = bytes(range(256)) * 100
    path.write_bytes(original)
    handle = JournaledFile(path, durable=False)
    handle.truncate(1000)
    handle.seek(2000)
    handle.write(b"x" * 10)
    assert path.stat().st_size == 2010
    handle.roll_back()
    assert path.read_bytes() == original
    handle.close()


def test_held_pages_journal_the_bytes_they_had_when_first_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page written several times before it is spilled journals its content at the
    last commit point (kept from its first write, not read again), also when a
    truncation then cuts into held pages; a crash after the spill recovers it."""
    path = tmp_path / "data.h5"
    original = bytes(range(256)) * 64  # four pages
    path.write_bytes(original)
    monkeypatch.setattr(journal, "SPILL_BYTES", 2 * journal.PAGE)
    handle = JournaledFile(path, durable=False)
    for offset, data in [(100, b"x" * 50), (120, b"y" * 10), (5000, b"z" * 9000)]:
        handle.seek(offset)
        handle.write(data)  # the third write holds a third page: spilled
    assert path.read_bytes()[100:150] == b"x" * 20 + b"y" * 10 + b"x" * 20
    handle.seek(200)
    handle.write(b"w" * 10)  # a journaled page: written through
    handle.truncate(6000)  # cuts into pages journaled already
    jfd = os.open(journal_path(path), os.O_RDONLY)
    try:
        records, _ = journal._read_records(jfd, handle._epoch, journal._HEADER.size)
    finally:
        os.close(jfd)
    assert {offset: data for offset, data in records} == {
        page * journal.PAGE: original[page * journal.PAGE : (page + 1) * journal.PAGE]
        for page in range(4)
    }
    for fd in (handle._fd, handle._jfd):  # killed: no commit, no roll-back of its own
        assert fd is not None
        os.close(fd)
    handle._fd, handle._jfd = -1, None
    assert recover(path, durable=False)
    assert path.read_bytes() == original


def test_pages_written_as_they_were_are_neither_journaled_nor_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HDF5 writes an object header's chunks whole when one message of them changes:
    only the pages whose bytes differ are held, journaled and written, before a spill
    and after it; a page changed and changed back is not written; a crash recovers
    the file to the last commit point all the same."""
    path = tmp_path / "data.h5"
    page = journal.PAGE
    original = bytes(range(256)) * 96  # six pages
    path.write_bytes(original)
    kinds: list[str] = []
    handle = JournaledFile(path, durable=False, fault=kinds.append)
    new = bytearray(original)
    new[2 * page + 5] ^= 0xFF
    handle.seek(0)
    handle.write(new[: 4 * page])  # four pages written whole, one of them changed
    handle.seek(3 * page + 7)
    handle.write(b"x" * 10)
    handle.seek(3 * page + 7)
    handle.write(original[3 * page + 7 : 3 * page + 17])  # and changed back
    assert list(handle._held) == [2, 3]
    handle.seek(0)
    assert handle.read(4 * page) == new[: 4 * page]
    handle.commit()
    assert path.read_bytes() == new
    assert kinds == ["journal", "journal", "write", "journal"]  # page 2 only
    kinds.clear()
    monkeypatch.setattr(journal, "SPILL_BYTES", 0)  # every write spills at once
    changed = bytearray(new)
    changed[4 * page + 1] ^= 0xFF
    handle.seek(0)
    handle.write(changed)  # journals and writes page 4 only
    handle.seek(4 * page)
    handle.write(changed[4 * page : 5 * page])  # journaled: as it is, not written again
    handle.seek(5 * page + 3)
    handle.write(b"y")
    assert kinds == ["journal", "journal", "write", "journal", "write"]
    jfd = os.open(journal_path(path), os.O_RDONLY)
    try:
        records, _ = journal._read_records(jfd, handle._epoch, journal._HEADER.size)
    finally:
        os.close(jfd)
    assert [offset for offset, _ in records] == [4 * page, 5 * page]
    for fd in (handle._fd, handle._jfd):  # killed: no commit, no roll-back of its own
        assert fd is not None
        os.close(fd)
    handle._fd, handle._jfd = -1, None
    assert recover(path, durable=False)
    assert path.read_bytes() == new


def test_a_truncation_to_the_current_end_begins_no_epoch(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    path.write_bytes(b"a" * 10_000)
    handle = JournaledFile(path, durable=False)
    handle.truncate(10_000)  # what HDF5 does at every flush, written or not
    assert not handle.in_epoch
    assert not os.path.exists(journal_path(path))
    handle.truncate(9_000)
    assert handle.in_epoch
    handle.roll_back()
    assert path.read_bytes() == b"a" * 10_000
    handle.close()


def test_creating_empties_a_file_only_when_it_holds_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An existing file is emptied; an empty one is not truncated (ext4 writes a file
    truncated to 0 back at close, whatever was written to it afterwards)."""
    path = tmp_path / "data.h5"
    path.write_bytes(b"old" * 1000)
    truncations: list[int] = []
    real = os.ftruncate
    monkeypatch.setattr(os, "ftruncate", lambda fd, n: (truncations.append(n), real(fd, n))[1])

    def create(target: Path) -> None:
        handle = JournaledFile(target, create=True, durable=False)
        handle.commit()  # else the next open rolls the new file back (to empty)
        handle.close()

    create(path)
    assert path.stat().st_size == 0
    assert truncations == [0]
    truncations.clear()
    create(path)
    create(tmp_path / "new.h5")
    assert truncations == []
    assert (tmp_path / "new.h5").stat().st_size == 0


def test_a_commit_syncs_the_disk_three_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One epoch per commit: the journal's records, the file, the journal's clean mark."""
    path = tmp_path / "data.h5"
    with h5vc.open(str(path), "w", durable_writes=True) as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(100_000.0), chunks=(10_000,))
        syncs: list[int] = []
        real = os.fdatasync
        monkeypatch.setattr(os, "fdatasync", lambda fd: (syncs.append(fd), real(fd))[1])
        for number in range(2, 5):
            with vf.stage_version(f"v{number}") as g:
                g["x"][number * 1000] = -number
        monkeypatch.undo()
    assert len(syncs) == 3 * 3
    with h5vc.open(str(path)) as vf:
        assert vf["v4"]["x"][4000] == -4


def test_a_file_whose_first_epoch_never_committed_is_left_empty(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    handle = JournaledFile(path, create=True, durable=False)
    f = h5py.File(handle, "w")
    f.create_dataset("x", data=np.arange(10))
    f.flush()
    # the process dies here: neither the file nor the journal is closed
    copy = tmp_path / "copy.h5"
    copy.write_bytes(path.read_bytes())
    Path(journal_path(copy)).write_bytes(Path(journal_path(path)).read_bytes())
    f.close()
    handle.close()
    assert recover(copy)
    assert copy.stat().st_size == 0
    assert not os.path.exists(journal_path(copy))


def test_a_failing_disk_leaves_the_last_commit_point(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    with h5vc.open(str(path), "w") as vf, vf.stage_version("v1") as g:
        g.create_dataset("x", data=np.arange(50_000), chunks=(1000,))
        g.create_dataset("y", data=np.arange(5_000), chunks=(1000,))
    before = path.read_bytes()
    for failing in range(1, 400):
        count = 0

        def full_disk(kind: str, failing: int = failing) -> None:
            nonlocal count
            count += 1
            if count == failing:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        handle = JournaledFile(path, durable=False, fault=full_disk)
        f = h5py.File(handle, "r+")
        committed = False
        try:
            vf = h5vc.VersionedHDF5File(f)
            with vf.stage_version("v2") as g:
                g["x"][10:20_000] = -1
                g["y"][:] = 1
            f.flush()
            handle.commit()
            committed = True
        except Exception:
            assert count >= failing, "only the failing write makes the commit fail"
            handle.roll_back()
            handle.discarding = True
            assert path.read_bytes() == before
        finally:
            with contextlib.suppress(Exception):
                f.close()
            handle.close()
        if committed:
            break  # the failing write came after the commit point, or never
        assert path.read_bytes() == before
    else:
        pytest.fail("the commit never got through")
    # every write of the commit was made to fail once (the loop ends past the last)
    assert failing > 10, "the commit writes many times"
    with h5vc.open(str(path)) as vf:
        assert vf.versions == ["v1", "v2"]
        assert vf["v2"]["x"][8:12].tolist() == [8, 9, -1, -1]
