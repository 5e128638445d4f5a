"""A read-only handle opened right after the file was written (its stamp cannot name
the bytes yet, so nothing kept of them is taken) takes what later handles read of the
same bytes once the stamp can name them and its lock found no change since: a private
copy, to which what it reads itself is added, never to what other handles are given.
Any write in between (by h5vc, here or in another process, or by plain h5py) is seen,
both ways of opening."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from stamps import opened, settle

import h5vc
from h5vc import config
from h5vc.store import planner, refattrs
from h5vc.versions import reading


@pytest.fixture(autouse=True)
def _reads_as_in_use(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Small reads take the paths they take in use (this directory's conftest sends
    every read through positioned reads); nothing kept from other tests."""
    monkeypatch.setattr(planner, "FAST_READ_MIN_BYTES", config.FAST_READ_MIN_BYTES)
    monkeypatch.setattr(planner, "HDF5_READ_BYTES", config.HDF5_READ_BYTES)
    reading.forget_generations()
    yield
    reading.forget_generations()


def _make(path: Path, versions: int = 3) -> None:
    """Versions v0.. of a table ``x`` (row n of version n is -n), the file then
    written just now (its stamp names no bytes)."""
    with h5vc.open(path, "w") as vf:
        for n in range(versions):
            with vf.stage_version(f"v{n}") as g:
                if n == 0:
                    g.create_dataset("x", data=np.arange(40.0).reshape(10, 4), chunks=(4, 4))
                else:
                    g["x"][n] = -n
        vf.create_tag("t", "v1")
    os.utime(path)


def _kept(path: Path) -> reading.Generation:
    info = os.stat(path)
    return reading._GENERATIONS[(info.st_dev, info.st_ino)]


def _column(versions: int) -> list[float]:
    """Column 0 of ``x`` in version ``versions - 1`` of :func:`_make`."""
    return [float(-n if 0 < n < versions else 4 * n) for n in range(10)]


def _read_by_another_handle(path: Path) -> None:
    """Read the file through a handle of its own (handles of one path that h5py opens
    share their state)."""
    with h5vc.open(path) as other:
        assert other.file_state.guard.kept is not None  # the stamp names the bytes
        assert other["v2"]["x"][:, 0].tolist() == _column(3)
        assert other.tags == {"t": "v1"}


@pytest.mark.parametrize("way", ["open", "h5py"])
def test_a_handle_of_a_fresh_file_takes_what_later_handles_read(
    tmp_path: Path, way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f.h5"
    _make(path)
    with opened(path, way) as vf:
        guard = vf.file_state.guard
        assert guard is not None and guard.kept is None  # opened within a clock tick
        settle()
        _read_by_another_handle(path)
        kept = _kept(path)
        ref_reads: list[int] = []
        real = refattrs.read_refs
        monkeypatch.setattr(refattrs, "read_refs", lambda g: ref_reads.append(1) or real(g))
        group = vf["v2"]
        assert group._group_obj is None  # found committed by the other handle
        assert group["x"][:, 0].tolist() == _column(3)
        assert group["x"][2:4, 0].tolist() == [-2.0, 12.0]
        assert vf.tags == {"t": "v1"}
        assert vf["t"]["x"][1].tolist() == [-1.0, -1.0, -1.0, -1.0]
        assert not ref_reads  # the other handle's refs
        assert guard.kept is not None and guard.kept is not kept  # a private copy
        # What this handle reads itself is its own: not given to later handles.
        datasets = dict(kept.view._datasets)
        assert vf["v0"]["x"][:, 0].tolist() == _column(1)
        assert "v0" not in kept.root("/").committed
        assert kept.view._datasets == datasets
        assert len(guard.kept.view._datasets) > len(datasets)
    with opened(path, way) as vf:
        assert vf["v0"]["x"][1].tolist() == [4.0, 5.0, 6.0, 7.0]
        assert vf["v1"]["x"][1].tolist() == [-1.0, -1.0, -1.0, -1.0]


_COMMIT_V3 = """
import sys, h5vc
with h5vc.open(sys.argv[1], "a") as vf:
    with vf.stage_version("v3") as g:
        g["x"][3] = -3
    vf.create_tag("u", "v3")
"""

_PLAIN_WRITE = """
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:  # the same size: only the bytes of chunks change
    raw = f["_version_data/x/raw_data"]
    raw[: raw.shape[0]] = raw[:] + 100
"""


def _write(path: Path, writer: str) -> None:
    if writer == "here":
        with h5vc.open(path, "a") as vf:
            with vf.stage_version("v3") as g:
                g["x"][3] = -3
            vf.create_tag("u", "v3")
        return
    script = _COMMIT_V3 if writer == "process" else _PLAIN_WRITE
    # A handle opened by h5py holds HDF5's shared lock, which HDF5's writers ask for
    # exclusively: the plain writer goes without it (the bytes change all the same).
    env = {**os.environ, "HDF5_USE_FILE_LOCKING": "FALSE"}
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, env=env)


def _check(vf: h5vc.VersionedHDF5File, writer: str) -> None:
    """What ``vf`` reads after ``writer`` wrote."""
    if writer == "plain":
        assert vf["v2"]["x"][:, 0].tolist() == [x + 100 for x in _column(3)]
        assert vf["v0"]["x"][1].tolist() == [104.0, 105.0, 106.0, 107.0]
        assert "v3" not in vf
        return
    assert vf["v3"]["x"][:, 0].tolist() == _column(4)
    assert vf["u"]["x"][3, 0] == -3.0
    assert vf.tags == {"t": "v1", "u": "v3"}
    assert vf["v2"]["x"][:, 0].tolist() == _column(3)


@pytest.mark.parametrize("writer", ["here", "process", "plain"])
@pytest.mark.parametrize("way", ["open", "h5py"])
def test_a_write_after_the_handle_took_what_others_read_is_seen(
    tmp_path: Path, way: str, writer: str
) -> None:
    path = tmp_path / "f.h5"
    _make(path)
    with opened(path, way) as vf:
        guard = vf.file_state.guard
        assert guard is not None and guard.kept is None
        settle()
        _read_by_another_handle(path)
        assert vf["v2"]["x"][:, 0].tolist() == _column(3)
        assert vf.tags == {"t": "v1"}
        assert guard.kept is not None
        settle()  # the write lands in a later clock tick than the file's times
        _write(path, writer)
        _check(vf, writer)  # the file changed: read anew, right after the write
        settle()
        with h5vc.open(path) as other:  # what is kept of the new bytes
            _check(other, writer)
        _check(vf, writer)
        assert guard.kept is not None
    with opened(path, way) as vf:
        _check(vf, writer)


@pytest.mark.parametrize("way", ["open", "h5py"])
def test_a_handle_of_a_fresh_file_read_by_no_other_keeps_its_own(tmp_path: Path, way: str) -> None:
    """Nothing kept of the bytes as they are: the handle reads as before, and what it
    reads is not kept for later handles."""
    path = tmp_path / "f.h5"
    _make(path)
    with opened(path, way) as vf:
        assert vf["v2"]["x"][:, 0].tolist() == _column(3)
        settle()
        assert vf["v1"]["x"][:, 0].tolist() == _column(2)
        assert vf.file_state.guard.kept is None
        assert not reading._GENERATIONS
    with opened(path, way) as vf:
        assert vf["v2"]["x"][:, 0].tolist() == _column(3)
        assert vf.file_state.guard.kept is not None


@pytest.mark.parametrize("way", ["open", "h5py"])
def test_a_failed_reopening_is_tried_again_at_the_next_read(
    tmp_path: Path, way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file changed and opening it anew failed once: the next read opens it anew
    again and sees the change, not the handle from before it."""
    path = tmp_path / "f.h5"
    _make(path)
    with opened(path, way) as vf:
        assert vf["v2"]["x"][:, 0].tolist() == _column(3)
        _write(path, "process")
        real = reading.open_private
        failures: list[int] = []

        def failing_once(target):  # type: ignore[no-untyped-def]
            if not failures:
                failures.append(1)
                raise OSError("no more file handles")
            return real(target)

        monkeypatch.setattr(reading, "open_private", failing_once)
        with pytest.raises(OSError, match="no more file handles"):
            vf["v3"]
        assert failures
        _check(vf, "process")
