"""``current_version`` of a writable file is kept in memory once read or written: it
stays right across a failed operation (rolled back), a commit, a deletion, and a
caller's own write through h5py followed by a new handle."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest

import h5vc
from h5vc.versions.state import Operation


def _build(path: Path) -> None:
    """v1; branch main at v1 (current); branch dev one commit ahead (d1)."""
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(100), chunks=(10,))
        vf.create_branch("main")
        vf.create_branch("dev")
        with vf.stage_version("d1", branch="dev", make_current=False) as g:
            g["x"][0] = -1
        vf.switch_branch("main")


@contextlib.contextmanager
def _opened(path: Path, opened_by: str) -> Iterator[h5vc.VersionedHDF5File]:
    if opened_by == "h5vc":
        with h5vc.open(str(path), "r+") as vf:
            yield vf
    else:
        with h5py.File(path, "r+") as f:
            yield h5vc.VersionedHDF5File(f)


def _stored(path: Path) -> tuple[str, dict[str, str]]:
    """``current_version`` and the branches, each checked to be stored as h5py stores
    a ``str`` (however often it was written over)."""
    with h5py.File(path, "r+") as f:
        versions = f["_version_data/versions"]
        versions.attrs["by_h5py"] = "v"
        expected = versions.attrs.get_id("by_h5py").get_type()
        keys = [k for k in versions.attrs if k.startswith("h5vc_branch:")]
        for key in ["current_version", *keys]:
            attr = versions.attrs.get_id(key)
            assert attr.get_type() == expected and attr.shape == ()
            assert type(versions.attrs[key]) is str
        return versions.attrs["current_version"], {k: versions.attrs[k] for k in keys}


@pytest.mark.parametrize("opened_by", ["h5vc", "h5py"])
def test_a_failed_fast_forward_leaves_the_current_version(
    path: Path, monkeypatch: pytest.MonkeyPatch, opened_by: str
) -> None:
    _build(path)
    with _opened(path, opened_by) as vf:
        assert vf.current_version == "v1"

        def fail(self: Operation) -> None:
            raise OSError("disk gone")

        with monkeypatch.context() as patch:
            patch.setattr(Operation, "commit", fail)
            with pytest.raises(OSError, match="disk gone"):
                vf.merge("dev", into="main")
        assert vf.current_version == "v1" and vf.branches["main"] == "v1"
        assert vf.current_branch == "main"
        for _ in range(3):  # written over again and again
            assert vf.merge("dev", into="main").kind == "fast-forward"
            assert vf.current_version == "d1" and vf.current_branch == "main"
            vf.reset_branch("main", "v1")
            assert vf.current_version == "v1"
    assert _stored(path) == ("v1", {"h5vc_branch:main": "v1", "h5vc_branch:dev": "d1"})


@pytest.mark.parametrize("opened_by", ["h5vc", "h5py"])
def test_commits_and_deletions_move_the_current_version(path: Path, opened_by: str) -> None:
    _build(path)
    with _opened(path, opened_by) as vf:
        assert vf.current_version == "v1"
        with vf.stage_version("v2") as g:
            g["x"][1] = -2
        assert vf.current_version == "v2"
        vf.delete_branch("dev")
        h5vc.delete_versions(vf, ["d1", "v2"], force=True)
        assert vf.current_version == "v1"
        vf.current_version = "v1"
        with vf.stage_version("v3", branch="main") as g:
            g["x"][2] = -3
        assert vf.current_version == "v3"
    assert _stored(path) == ("v3", {"h5vc_branch:main": "v3"})


def test_a_new_handle_reads_what_the_caller_wrote(path: Path) -> None:
    _build(path)
    with h5py.File(path, "r+") as f:
        vf = h5vc.VersionedHDF5File(f)
        assert vf.current_version == "v1"
        f["_version_data/versions"].attrs["current_version"] = "d1"
        assert h5vc.VersionedHDF5File(f).current_version == "d1"
