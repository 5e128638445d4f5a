"""h5vc.verify: a sound file gives no problem; every kind of damage is named."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

import h5vc
from h5vc import VersionedHDF5File
from h5vc.store.rawdata import RawDataStore


def _make(path: str) -> None:
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(100.0), chunks=(10,))
            g.create_dataset("y", data=np.arange(35.0).reshape(5, 7), chunks=(2, 3))
            g.create_dataset("s", data=["a", "bb", "ccc"], dtype=h5py.string_dtype(), chunks=(2,))
            g.create_group("sub").create_dataset("z", data=np.arange(6), chunks=(4,))
        with vf.stage_version("v2") as g:
            g["x"][5] = -1.0
            g["y"][4, 6] = 9.0
        with vf.stage_version("v3") as g:
            g["sub"]["z"][0] = 7


def test_sound_file_has_no_problem(path: str) -> None:
    _make(path)
    calls: list[tuple[int, int]] = []
    with h5py.File(path, "r") as f:
        report = h5vc.verify(f, progress=lambda done, total: calls.append((done, total)))
    assert report.ok, str(report)
    assert report.versions == 3
    assert report.chunks >= 20
    assert calls and calls[-1][0] == calls[-1][1]
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
    assert "no problems" in str(report)


def test_sound_file_through_the_handle(path: str) -> None:
    _make(path)
    with h5py.File(path, "r") as f:
        assert h5vc.verify(VersionedHDF5File(f)).ok


def _hash_out_of_order(func, items, ahead=1):
    """prefetch's contract allows any order of computation: compute the last first."""
    items = list(items)
    results = [func(item) for item in reversed(items)]
    yield from reversed(results)


def test_windows_hashed_in_any_order_find_their_rows(path: str, monkeypatch) -> None:
    """Appends leave chunks of different fill in the hash table; the stored chunks are
    hashed in windows, possibly out of order on background threads. Each window must
    hash its own chunks' rows: a sound file has no problem whatever the order."""
    import importlib

    from h5vc.store import compact

    verify_module = importlib.import_module("h5vc.lifecycle.verify")

    rows = np.arange(4000.0 * 3).reshape(-1, 3)
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v0") as g:
            g.create_dataset("t", data=rows[:100], chunks=(256, 3))
        for k in range(1, 12):
            with vf.stage_version(f"v{k}") as g:
                t = g["t"]
                old = t.shape[0]
                t.resize((old + 300, 3))
                t[old:] = rows[old : old + 300]
    monkeypatch.setattr(compact, "COPY_BUDGET_BYTES", 256 * 3 * 8 * 3)  # 3 slots a window
    monkeypatch.setattr(verify_module, "prefetch", _hash_out_of_order)
    with h5py.File(path, "r") as f:
        report = h5vc.verify(f)
    assert report.ok, str(report)
    assert report.chunks >= 12
    assert report.bytes == sum(  # every slot's used rows, counted once
        int(stop - start) * 3 * 8 for start, stop in _used_rows(path, "t")
    )


def _used_rows(path: str, name: str) -> list[tuple[int, int]]:
    with h5py.File(path, "r") as f:
        shape = RawDataStore(f[f"_version_data/{name}"]).rows()["shape"]
    return [(int(a), int(b)) for a, b in shape]


@pytest.mark.parametrize(
    ("dataset", "row", "versions"),
    [("x", 3, ("v1",)), ("x", 95, ("v1", "v2", "v3")), ("y", (4, 6), ("v2", "v3"))],
)
def test_altered_chunk_is_reported_with_its_versions(path: str, dataset, row, versions) -> None:
    _make(path)
    with h5py.File(path, "r+") as f:
        raw = f[f"_version_data/{dataset}/raw_data"]
        if dataset == "y":  # the edited edge chunk of v2: last slot
            raw[raw.shape[0] - 2, 0] = 1234.0
        else:
            raw[row] = 77.0
    with h5py.File(path, "r") as f:
        report = h5vc.verify(f)
    assert not report.ok
    [problem] = report.problems
    assert problem.kind == "chunk-digest"
    assert problem.datasets == (dataset,)
    assert problem.versions == versions
    assert f"/_version_data/{dataset}/raw_data" in problem.object


def test_mapping_to_a_slot_without_row(path: str) -> None:
    _make(path)
    with h5py.File(path, "r+") as f:
        table = f["_version_data/sub/z/hash_table"]
        table.attrs["largest_index"] = np.int64(int(table.attrs["largest_index"]) - 1)
    with h5py.File(path, "r") as f:
        report = h5vc.verify(f)
    kinds = {p.kind for p in report.problems}
    assert "mapping" in kinds
    problem = next(p for p in report.problems if p.kind == "mapping")
    assert problem.datasets == ("sub/z",)
    assert "v3" in problem.versions


def test_hash_row_outside_raw_data(path: str) -> None:
    _make(path)
    with h5py.File(path, "r+") as f:
        table = f["_version_data/x/hash_table"]
        row = table[0]
        row["shape"] = (10_000, 10_010)
        table[0] = row
    with h5py.File(path, "r") as f:
        report = h5vc.verify(f)
    assert any(p.kind == "hash-table" and p.datasets == ("x",) for p in report.problems)


def test_version_metadata(path: str) -> None:
    _make(path)
    with h5py.File(path, "r+") as f:
        f["_version_data/versions/v3"].attrs["prev_version"] = "gone"
        f["_version_data/versions"].attrs["current_version"] = "nowhere"
    with h5py.File(path, "r") as f:
        report = h5vc.verify(f)
    messages = [str(p) for p in report.problems if p.kind == "version-metadata"]
    assert any("'gone'" in m and "v3" in m for m in messages)
    assert any("'nowhere'" in m for m in messages)


def test_timestamps_out_of_order(path: str) -> None:
    _make(path)
    with h5py.File(path, "r+") as f:
        v1 = f["_version_data/versions/v1"].attrs["timestamp"]
        f["_version_data/versions/v2"].attrs["timestamp"] = v1
    with h5py.File(path, "r") as f:
        report = h5vc.verify(f)
    assert any("not after parent 'v1'" in p.message for p in report.problems)


def test_missing_store(path: str) -> None:
    _make(path)
    with h5py.File(path, "r+") as f:
        del f["_version_data/sub/z/raw_data"]
    with h5py.File(path, "r") as f:
        report = h5vc.verify(f)
    assert any(p.kind == "store" and p.datasets == ("sub/z",) for p in report.problems)
    assert {"v1", "v2", "v3"} <= set(report.affected_versions())


@pytest.mark.parametrize("write_through", [False, True])
def test_commit_never_shares_an_altered_chunk(path: str, write_through: bool) -> None:
    data = np.arange(600_000.0) if write_through else np.arange(100.0)
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=data, chunks=(10,))
    with h5py.File(path, "r+") as f:
        f["_version_data/x/raw_data"][3] = 77.0
    with h5py.File(path, "r+") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v2", prev_version="") as g:
            g.create_dataset("x", data=data, chunks=(10,))
        assert vf["v2"]["x"][3] == 3.0
        with vf.stage_version("v3") as g:  # and the index now points to the good copy
            g["x"][50] = -1.0
            g["x"][0:10] = data[0:10]
        assert vf["v3"]["x"][3] == 3.0
        report = h5vc.verify(f)
    assert [p.versions for p in report.problems] == [("v1",)]


def test_reuse_check_can_be_turned_off(path: str, monkeypatch) -> None:
    monkeypatch.setattr(RawDataStore, "check_reused", False)
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(100.0), chunks=(10,))
    with h5py.File(path, "r+") as f:
        f["_version_data/x/raw_data"][3] = 77.0
    with h5py.File(path, "r+") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v2", prev_version="") as g:
            g.create_dataset("x", data=np.arange(100.0), chunks=(10,))
        assert vf["v2"]["x"][3] == 77.0  # shared, as documented for this setting
