"""h5vc.verify: stored chunks against their digests, mappings against stored slots."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

import h5vc
from h5vc.store import layout


def _make(path: Path) -> None:
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(1000), chunks=(100,), maxshape=(None,))
            g.create_dataset("m", data=np.arange(70.0).reshape(7, 10), chunks=(4, 4))
        with vf.stage_version("v2") as g:
            g["x"][150] = -1
            g["x"].resize((1050,))


def test_a_sound_file_has_no_problem(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    _make(path)
    calls = []
    with h5vc.open(str(path)) as vf:
        report = h5vc.verify(vf, progress=lambda done, total: calls.append((done, total)))
    assert report.ok, report.describe()
    assert report.versions == 2 and report.datasets == 2
    assert report.chunks == 10 + 1 + 6  # x: 10 and the edited one (the tail is fill); m: 6
    assert calls[-1] == (2, 2)


def test_an_altered_chunk_is_reported_with_its_versions(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    _make(path)
    with h5py.File(path, "r+") as f:
        f[f"{layout.VERSION_DATA}/x/{layout.RAW_DATA}"][5] = 12345  # slot 0, v1 and v2
    with h5vc.open(str(path)) as vf:
        report = h5vc.verify(vf)
    assert [p.kind for p in report.problems] == ["digest"]
    assert report.problems[0].path == "x"
    assert report.problems[0].versions == ("v1", "v2")
    assert "slot 0" in report.describe()


def test_a_mapped_slot_without_hash_row_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    _make(path)
    with h5py.File(path, "r+") as f:
        table = f[f"{layout.VERSION_DATA}/x/{layout.HASH_TABLE}"]
        table.attrs[layout.ATTR_LARGEST_INDEX] = np.int64(10)  # the v2 rows are gone
    with h5vc.open(str(path)) as vf:
        report = h5vc.verify(vf)
    kinds = {(p.kind, p.versions) for p in report.problems}
    assert kinds == {("no hash row", ("v2",))}
