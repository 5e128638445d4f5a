"""The persisted log column: listing versions reads no version group."""

from __future__ import annotations

import numpy as np
import pytest

import h5vc
from h5vc.store import timeindex
from h5vc.versions import VersionLog


def _no_group_reads(monkeypatch):
    def fail(self, name):
        raise AssertionError(f"read version group {name!r}")

    monkeypatch.setattr(VersionLog, "_read", fail)


def _scanned(path):
    """Every version's (name, parents, message, author), read from the version groups."""
    with h5vc.open(str(path)) as vf:
        log = vf.file_state.log
        return sorted(
            (name, log._read(name).parents, log._read(name).message, log._read(name).author)
            for name in vf.file_state.versions
            if name != "__first_version__"
        )


def test_log_of_every_version_comes_from_the_index(path, vf, monkeypatch):
    vf.create_branch("dev")
    with vf.stage_version("v2", message="two", author="ann") as g:
        g["x"][0] = 1
    with vf.stage_version("d1", branch="dev", make_current=False) as g:
        g["x"][50] = 1
    vf.merge("dev", name="m")
    vf.close()
    vf.f.file.close()
    expected = _scanned(path)
    with h5vc.open(str(path)) as again:
        _no_group_reads(monkeypatch)
        infos = sorted(
            (i.name, i.parents, i.message, i.author)
            for i in map(again.version_info, again.versions)
        )
        assert infos == expected
        assert [i.name for i in again.log(first_parent=True)] == ["m", "v2", "v1"]
        assert [i.name for i in again.log()] == ["m", "d1", "v2", "v1"]
        assert again.version_info("m").merge_parents == ("d1",)


@pytest.mark.parametrize("doomed", [["v2"], ["d1"], ["v2", "d1"]])
def test_delete_keeps_the_log_column_in_step(path, vf, doomed):
    vf.create_branch("dev")
    with vf.stage_version("v2") as g:
        g["x"][0] = 1
    with vf.stage_version("d1", branch="dev", make_current=False) as g:
        g["x"][50] = 1
    with vf.stage_version("d2", branch="dev", make_current=False) as g:
        g["x"][60] = 1
    vf.merge("dev", name="m")
    h5vc.delete_versions(vf, doomed, force=True)
    vf.close()
    vf.f.file.close()
    expected = _scanned(path)
    with h5vc.open(str(path)) as again:
        rows = timeindex.read_log(again.file_state.version_data)
        assert rows is not None
        from_index = sorted(
            (name, tuple(e["parents"]), e["message"], e["author"]) for _, name, e in rows
        )
        assert from_index == expected
        assert np.array_equal(again["m"]["x"][[0, 50, 60]], [1, 1, 1])
