"""A write that fails at any point of a commit, ``delete_versions`` or
``modify_metadata`` leaves every earlier version intact, the operation undone, and the
file ready for the next operation: in files opened by ``h5vc.open`` and in files that
code written for plain h5py opens (``h5py.File`` then ``VersionedHDF5File``)."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from killharness import open_versioned

import h5vc
from h5vc.durable import files
from h5vc.durable.journal import JournaledFile

Operation = Callable[[h5vc.VersionedHDF5File], None]
#: Fail every EVERY-th write (1: every one, as a long run does).
EVERY = int(os.environ.get("H5VC_FAULT_EVERY", "4"))


class _FailAt:
    """A journal fault hook: counts the writes and fails the ``failing``-th one (ENOSPC
    for odd positions, EIO for even ones)."""

    def __init__(self, failing: int):
        self.failing = failing
        self.count = 0

    def __call__(self, kind: str) -> None:
        self.count += 1
        if self.count == self.failing:
            code = errno.ENOSPC if self.failing % 2 else errno.EIO
            raise OSError(code, os.strerror(code))


def _fail_at(monkeypatch: pytest.MonkeyPatch, failing: int) -> _FailAt:
    """Files opened from now on fail their ``failing``-th write."""
    fault = _FailAt(failing)
    monkeypatch.setattr(files, "JournaledFile", functools.partial(JournaledFile, fault=fault))
    return fault


def _build(path: Path) -> dict[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(3)
    model: dict[str, dict[str, np.ndarray]] = {}
    with h5vc.open(str(path), "w") as vf:
        x = rng.integers(0, 1000, 6000)
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=x, chunks=(256,), maxshape=(None,))
            g.create_dataset("y", data=np.ones((30, 4)), chunks=(8, 4))
        model["v1"] = {"x": x.copy(), "y": np.ones((30, 4))}
        for number in range(2, 5):
            x[number * 100 : number * 100 + 300] = number
            with vf.stage_version(f"v{number}") as g:
                g["x"][number * 100 : number * 100 + 300] = number
            model[f"v{number}"] = {"x": x.copy(), "y": np.ones((30, 4))}
    return model


def _commit(vf: h5vc.VersionedHDF5File) -> None:
    with vf.stage_version("new") as g:
        g["x"].resize((7000,))
        g["x"][5990:6010] = -5
        g.create_dataset("z", data=np.arange(2000.0), chunks=(100,))


def _commit_column(vf: h5vc.VersionedHDF5File) -> None:
    samples = np.arange(60 * 64, dtype=np.int64).reshape(60, 8, 8) % 251
    with vf.stage_version("new-column") as g:
        column = g.create_column("images", shape=(8, 8), dtype="uint8")
        column.set_many(range(60), samples.astype(np.uint8))
        column[7] = np.full((8, 8), 7, np.uint8)


OPERATIONS: dict[str, Operation] = {
    "commit": _commit,
    "column commit": _commit_column,
    "delete_versions": lambda vf: h5vc.delete_versions(vf, ["v2", "v3"]),
    "modify_metadata": lambda vf: h5vc.modify_metadata(vf, "x", chunks=(512,)),
}


def _check(vf: h5vc.VersionedHDF5File, model: dict[str, dict[str, np.ndarray]]) -> None:
    assert vf.versions == list(model)
    _check_versions(vf, model)


@contextlib.contextmanager
def _open(path: Path, opener: str) -> Iterator[h5vc.VersionedHDF5File]:
    with contextlib.ExitStack() as stack:
        yield open_versioned(stack, str(path), "r+", opener)


@pytest.mark.parametrize("opener", ["h5vc", "h5py"])
@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_a_failing_write_anywhere_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operation: str, opener: str
) -> None:
    """The k-th write fails, for every k: an I/O error or, every other k, a full disk."""
    original = tmp_path / "original.h5"
    model = _build(original)
    path = tmp_path / "data.h5"
    failing = 0
    while True:
        failing += EVERY
        shutil.copy(original, path)
        fault = _fail_at(monkeypatch, failing)
        succeeded = False
        with contextlib.suppress(OSError), _open(path, opener) as vf:
            try:
                OPERATIONS[operation](vf)
            except OSError:
                assert fault.count >= failing
                _check(vf, model)  # the operation is undone, in the same handle
                assert "_h5vc_samples" not in vf.f  # with the samples it stored
                _commit(vf)  # and the next one succeeds
                assert vf["new"]["x"][5995] == -5
            else:
                succeeded = True
            writes = fault.count
        # A write failing as the file is closed (HDF5's last flush) raises, and the
        # file stays at the commit point before it.
        monkeypatch.undo()
        if succeeded:
            assert writes < failing, "an operation whose write failed must raise"
            if fault.count < failing:
                break
            continue
        with h5vc.open(str(path)) as vf:
            assert vf.versions == [*model, "new"]
            _check_versions(vf, model)
    assert failing > 5, "the operation writes"


def _check_versions(vf: h5vc.VersionedHDF5File, model: dict[str, dict[str, np.ndarray]]) -> None:
    for name, datasets in model.items():
        for path, expected in datasets.items():
            np.testing.assert_array_equal(vf[name][path][()], expected, err_msg=f"{name}/{path}")


def _file_bytes(path: Path) -> bytes:
    return path.read_bytes()


def test_repack_whose_write_fails_anywhere_leaves_no_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The k-th write of ``repack`` fails, for every k: the source is untouched, the
    target does not exist (nor any partial copy), and the repeated call succeeds."""
    source = tmp_path / "source.h5"
    model = _build(source)
    with h5vc.open(str(source), "r+") as vf:
        h5vc.delete_versions(vf, ["v2"])
    del model["v2"]
    before = _file_bytes(source)
    target = tmp_path / "packed.h5"
    failing = 0
    while True:
        failing += max(1, EVERY // 2)
        fault = _fail_at(monkeypatch, failing)
        try:
            h5vc.repack(source, target)
        except OSError:
            assert fault.count >= failing
            assert not target.exists()
            assert sorted(p.name for p in tmp_path.iterdir()) == ["source.h5"]
            assert _file_bytes(source) == before
            monkeypatch.undo()
            h5vc.repack(source, target)  # the repeated call succeeds
        else:
            monkeypatch.undo()
            assert fault.count < failing, "a repack whose write failed must raise"
            break
        finally:
            monkeypatch.undo()
        with h5vc.open(str(target)) as vf:
            _check(vf, model)
            assert h5vc.verify(vf).ok
        target.unlink()
    assert failing > 3, "repack writes"
    assert _file_bytes(source) == before


def test_repack_killed_anywhere_leaves_no_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process killed before any write of ``repack`` leaves no target file (only a
    partial copy under another name), and a later ``repack`` to the same target
    succeeds over that leftover."""
    source = tmp_path / "source.h5"
    model = _build(source)
    target = tmp_path / "packed.h5"
    leftovers: list[dict[str, bytes]] = []

    def snapshot(kind: str) -> None:
        assert not target.exists()
        leftovers.append({p.name: p.read_bytes() for p in tmp_path.iterdir() if p != source})

    monkeypatch.setattr(files, "JournaledFile", functools.partial(JournaledFile, fault=snapshot))
    h5vc.repack(source, target)
    monkeypatch.undo()
    assert len(leftovers) > 3
    for state in leftovers[:: max(1, len(leftovers) // 8)]:
        target.unlink(missing_ok=True)
        for name, content in state.items():
            (tmp_path / name).write_bytes(content)
        h5vc.repack(source, target)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["packed.h5", "source.h5"]
        with h5vc.open(str(target)) as vf:
            _check(vf, model)
