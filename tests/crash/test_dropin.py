"""Code written for versioned-hdf5 (``h5py.File`` then ``VersionedHDF5File``) gets the
journal and the writer lock of ``h5vc.open``, and the two ways of opening a file meet
without losing a version."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

import h5py
import numpy as np
import pytest
from killharness import open_versioned
from pyrun import run_python

import h5vc
from h5vc.durable import journal
from h5vc.durable.journal import journal_path
from h5vc.errors import (
    JournalConflictError,
    JournalPendingError,
    UnjournaledFileWarning,
)


def _make(
    path: Path,
    opener: str = "h5vc",
    data: np.ndarray | None = None,
    chunks: tuple[int, ...] = (1000,),
) -> None:
    """One version ``v1`` holding ``x`` (default 0..99999), opened as ``opener`` says."""
    data = np.arange(100_000.0) if data is None else data
    with contextlib.ExitStack() as stack:
        vf = open_versioned(stack, str(path), "w", opener)
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=data, chunks=chunks)


#: A writer killed between writing its pages and marking its journal clean.
_CRASHING_WRITER = """
import os, h5py, h5vc
from h5vc.durable import journal
def _commit(self):
    self._spill(); os._exit(9)
journal.JournaledFile._commit = _commit
{open}
    with vf.stage_version('v2') as g:
        g['x'][:10] = -1
"""
_OPENS = {
    "h5vc": "with h5vc.open({path!r}, 'r+') as vf:",
    "h5py": "with h5py.File({path!r}, 'r+') as f:\n    vf = h5vc.VersionedHDF5File(f)",
}


@pytest.mark.parametrize("crashed", ["h5vc", "h5py"])
def test_a_plain_h5py_writer_after_a_crash_rolls_back_first(tmp_path: Path, crashed: str) -> None:
    """The crashed writer's journal is rolled back before the drop-in writer commits:
    its commit is kept by every later open (it was lost to the next h5vc.open)."""
    path = tmp_path / "data.h5"
    _make(path)
    opened = _OPENS[crashed].format(path=str(path))
    killed = run_python(_CRASHING_WRITER.format(open=opened))
    assert killed.returncode == 9, killed.stderr
    assert os.path.exists(journal_path(path))
    with h5py.File(path, "r+") as f:
        vf = h5vc.VersionedHDF5File(f)
        assert vf.versions == ["v1"]
        with vf.stage_version("v3") as g:
            g["x"][500] = 42
    assert not os.path.exists(journal_path(path))
    with h5vc.open(str(path)) as vf:
        assert vf.versions == ["v1", "v3"]
        assert vf["v3"]["x"][499:501].tolist() == [499.0, 42.0]
        np.testing.assert_array_equal(vf["v1"]["x"][:], np.arange(100_000.0))
        assert h5vc.verify(vf).ok


def test_a_caller_opened_file_is_written_through_the_journal(tmp_path: Path) -> None:
    """Mid-commit, the drop-in writer's changes to committed bytes sit in the journal:
    a copy of the file and its journal taken then recovers to the last commit point."""
    path = tmp_path / "data.h5"
    _make(path, "h5py")
    before = path.read_bytes()
    with h5py.File(path, "r+") as f:
        vf = h5vc.VersionedHDF5File(f)
        with vf.stage_version("v2") as g:
            g["x"][:10] = -1
            # Large enough to be stored at once, before the commit (WRITE_THROUGH_BYTES).
            g.create_dataset("y", data=np.ones(600_000))
            f.flush()  # HDF5 writes all it holds; the journal keeps the old pages
            snapshot = tmp_path / "snapshot.h5"
            snapshot.write_bytes(path.read_bytes())
            Path(journal_path(snapshot)).write_bytes(Path(journal_path(path)).read_bytes())
    assert journal.recover(snapshot)
    assert snapshot.read_bytes() == before
    with h5vc.open(str(path)) as vf:
        assert vf["v2"]["x"][:11].tolist() == [-1.0] * 10 + [10.0]


def test_a_drop_in_writer_holds_the_file(tmp_path: Path) -> None:
    """While code written for plain h5py writes the file, neither h5vc nor plain h5py
    can open it for writing in another process; readers read; its commits go on."""
    path = tmp_path / "data.h5"
    _make(path, "h5py")
    with h5py.File(path, "r+") as f:
        vf = h5vc.VersionedHDF5File(f)
        other = run_python(
            f"""
            import h5py, h5vc
            try:
                with h5vc.open({str(path)!r}, "a"):
                    pass
            except h5vc.errors.WriterActiveError as err:
                print("h5vc refused")
            try:
                h5py.File({str(path)!r}, "r+")
            except OSError as err:
                print("h5py refused")
            try:
                h5vc.VersionedHDF5File(h5py.File({str(path)!r}, "r+", locking=False))
            except h5vc.errors.WriterActiveError as err:
                print("unlocked h5py refused")
            with h5vc.open({str(path)!r}) as vf:
                print("read", vf["v1"]["x"][7])
            """
        )
        assert other.returncode == 0, other.stderr
        assert other.stdout.split("\n")[:4] == [
            "h5vc refused",
            "h5py refused",
            "unlocked h5py refused",
            "read 7.0",
        ]
        with vf.stage_version("v2") as g:
            g["x"][7] = -7
    with h5vc.open(str(path)) as vf:
        assert vf["v2"]["x"][7] == -7 and vf["v1"]["x"][7] == 7


def test_an_h5vc_writer_keeps_plain_h5py_writers_out(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    _make(path)
    with h5vc.open(str(path), "r+") as vf:
        other = run_python(
            f"""
            import h5py, h5vc
            try:
                h5py.File({str(path)!r}, "r+")
            except OSError as err:
                print("h5py refused")
            try:
                h5vc.VersionedHDF5File(h5py.File({str(path)!r}, "r+", locking=False))
            except h5vc.errors.WriterActiveError as err:
                print("unlocked h5py refused:", err)
            with h5py.File({str(path)!r}, "r") as f:
                print("read", f["_version_data/versions/v1/x"][3])
            """
        )
        assert other.returncode == 0, other.stderr
        lines = other.stdout.splitlines()
        assert lines[0] == "h5py refused"
        assert lines[1].startswith("unlocked h5py refused:") and str(path) in lines[1]
        assert lines[2] == "read 3.0"
        with vf.stage_version("v2") as g:
            g["x"][3] = -3
    with h5py.File(path, "r+") as f:  # the lock went with the writer
        vf = h5vc.VersionedHDF5File(f)
        assert vf["v2"]["x"][3] == -3


def test_an_h5vc_writer_is_refused_while_plain_h5py_writes(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    _make(path)
    with h5py.File(path, "r+") as f:
        f.attrs["note"] = "plain h5py"
        other = run_python(
            f"""
            import h5vc
            try:
                with h5vc.open({str(path)!r}, "a"):
                    pass
            except h5vc.errors.WriterActiveError as err:
                print("refused:", err)
            """
        )
        assert other.returncode == 0, other.stderr
        assert other.stdout.startswith("refused:") and "through HDF5" in other.stdout


def test_a_file_changed_after_a_crash_is_not_rolled_back(tmp_path: Path) -> None:
    """Recovery refuses to undo what another program wrote after the crash, and
    changes nothing."""
    path = tmp_path / "data.h5"
    _make(path)
    killed = run_python(_CRASHING_WRITER.format(open=_OPENS["h5vc"].format(path=str(path))))
    assert killed.returncode == 9, killed.stderr
    with h5py.File(path, "r+", locking=False) as f:  # ignores the journal
        f.create_dataset("elsewhere", data=np.arange(5000))
    changed = path.read_bytes()
    with (
        pytest.raises(JournalConflictError, match="changed after the writer"),
        h5vc.open(str(path), "r+"),
    ):
        pass
    assert path.read_bytes() == changed
    assert os.path.exists(journal_path(path))


def test_a_file_that_cannot_be_taken_over_says_so(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    _make(path)
    with h5py.File(path, "r+") as f:
        x = f["_version_data/versions/v1/x"]  # another object of the file is open
        with pytest.warns(UnjournaledFileWarning, match="without h5vc's rollback journal"):
            vf = h5vc.VersionedHDF5File(f)
        with vf.stage_version("v2") as g:
            g["x"][0] = 5
        assert x[0] == 0
    killed = run_python(_CRASHING_WRITER.format(open=_OPENS["h5vc"].format(path=str(path))))
    assert killed.returncode == 9, killed.stderr
    with h5py.File(path, "r+") as f:
        x = f["_version_data/versions/v1/x"]
        with pytest.raises(JournalPendingError, match=r"h5vc\.open"):
            h5vc.VersionedHDF5File(f)
    assert os.path.exists(journal_path(path))  # nothing was written past it
    with h5vc.open(str(path)) as vf:  # recovers
        assert vf.versions == ["v1", "v2"] and vf["v2"]["x"][0] == 5


@pytest.mark.parametrize("opener", ["h5vc", "h5py"])
def test_short_writes_are_completed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opener: str
) -> None:
    """The kernel writes part of a chunk when the disk fills: the rest is written (it
    read as zeros before, with no error)."""
    data = np.arange(4096.0)
    real = os.pwrite

    def short(fd: int, buffer: bytes, offset: int) -> int:
        view = memoryview(buffer).cast("B")
        if bytes(view[:64]) == data.tobytes()[:64]:
            return real(fd, view[:20480], offset)
        return real(fd, view, offset)

    path = tmp_path / "data.h5"
    monkeypatch.setattr(os, "pwrite", short)
    _make(path, opener, data, chunks=(4096,))
    monkeypatch.undo()
    with h5vc.open(str(path)) as vf:
        np.testing.assert_array_equal(vf["v1"]["x"][:], data)


def test_a_write_that_makes_no_progress_fails_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "data.h5"
    _make(path, "h5py")
    real = os.pwrite
    marker = np.full(1000, 7.5).tobytes()[:64]

    def full(fd: int, buffer: bytes, offset: int) -> int:
        view = memoryview(buffer).cast("B")
        return 0 if bytes(view[:64]) == marker else real(fd, view, offset)

    monkeypatch.setattr(os, "pwrite", full)
    with h5py.File(path, "r+") as f:
        vf = h5vc.VersionedHDF5File(f)
        with pytest.raises(OSError) as raised, vf.stage_version("v2") as g:
            g["x"][:1000] = 7.5
        assert raised.value.errno == errno.ENOSPC, raised.value
        monkeypatch.undo()
        assert vf.versions == ["v1"]
        with vf.stage_version("v3") as g:
            g["x"][0] = 1
    with h5vc.open(str(path)) as vf:
        assert vf.versions == ["v1", "v3"]
        np.testing.assert_array_equal(vf["v1"]["x"][:], np.arange(100_000.0))
        assert vf["v3"]["x"][:2].tolist() == [1.0, 1.0]


def test_recovery_under_a_drop_in_writer_leaves_no_stale_handle(tmp_path: Path) -> None:
    """HDF5's handle of the crashed file is closed for good: HDF5 reads metadata as it
    closes a file that keeps its free space, and a close that failed left the file
    open inside HDF5, where the next open of the path shared its stale view ('bad
    local heap signature' and wrong reads)."""
    path = tmp_path / "data.h5"
    with h5vc.open(str(path), "w") as vf:
        for number in range(6):
            with vf.stage_version(f"v{number}") as g:
                data = np.arange(100_000.0) + number
                if number == 0:
                    g.create_dataset("x", data=data, chunks=(1000,), compression="gzip")
                else:
                    g["x"][:] = data
        h5vc.delete_versions(vf, ["v1", "v2", "v3"])  # free space the file keeps
    killed = run_python(_CRASHING_WRITER.format(open=_OPENS["h5vc"].format(path=str(path))))
    assert killed.returncode == 9, killed.stderr
    open_files = h5py.h5f.get_obj_count(h5py.h5f.OBJ_ALL, h5py.h5f.OBJ_FILE)
    with h5py.File(path, "r+") as f:
        assert h5vc.VersionedHDF5File(f).versions == ["v0", "v4", "v5"]
    assert h5py.h5f.get_obj_count(h5py.h5f.OBJ_ALL, h5py.h5f.OBJ_FILE) == open_files
    with h5py.File(path, "r+") as f:
        vf = h5vc.VersionedHDF5File(f)
        np.testing.assert_array_equal(vf["v5"]["x"][:], np.arange(100_000.0) + 5)
        with vf.stage_version("v6") as g:
            g["x"][:3] = -1
        assert h5vc.verify(vf).ok


@pytest.mark.parametrize("maker", ["h5py", "h5vc"])
def test_a_handle_closed_without_writing_is_closed_for_good(tmp_path: Path, maker: str) -> None:
    """HDF5 lets go of the file (a close that failed kept it open inside HDF5, and the
    next open of the path shared that stale view), and the file keeps its bytes."""
    from h5vc.durable import files

    path = tmp_path / "data.h5"
    _make(path, maker)
    open_files = h5py.h5f.get_obj_count(h5py.h5f.OBJ_ALL, h5py.h5f.OBJ_FILE)
    f = h5py.File(path, "r+")
    before = path.read_bytes()  # HDF5 has marked its superblock open for writing
    files._close_without_writing(f, str(path))
    assert h5py.h5f.get_obj_count(h5py.h5f.OBJ_ALL, h5py.h5f.OBJ_FILE) == open_files
    assert path.read_bytes() == before
