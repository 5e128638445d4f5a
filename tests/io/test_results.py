"""Large read results are made on the memory of results their callers dropped
(:mod:`h5vc.store.results`): the data is right, memory still seen through any view
of an earlier result is never handed out again, and small results are numpy's own."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

import h5vc
from h5vc.store import results


@pytest.fixture
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Results of 1 MiB and more count as large; no free maps from other tests."""
    monkeypatch.setattr(results, "MIN_BYTES", 1 << 20)
    monkeypatch.setattr(results, "_free", [])
    monkeypatch.setattr(results, "_free_bytes", 0)


def address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


def test_a_dropped_result_is_used_again(small_threshold: None) -> None:
    first = results.empty((512, 1024), np.dtype("f8"))
    assert first.flags.c_contiguous and first.flags.writeable
    assert first.shape == (512, 1024) and first.dtype == np.float64
    first[...] = 1.0
    where = address(first)
    del first
    gc.collect()
    second = results.empty((512, 1024), np.dtype("f8"))
    assert address(second) == where
    third = results.empty((512, 1024), np.dtype("f8"))  # the other one is in use
    assert address(third) != where


def test_a_view_keeps_the_memory_of_its_result(small_threshold: None) -> None:
    first = results.empty((512, 1024), np.dtype("f8"))
    first[...] = 7.0
    view = first[100:200, 3:5]
    where = address(first)
    del first
    gc.collect()
    second = results.empty((512, 1024), np.dtype("f8"))
    second[...] = -1.0
    assert address(second) != where
    assert (view == 7.0).all()
    del view, second
    gc.collect()
    again = [results.empty((512, 1024), np.dtype("f8")) for _ in range(2)]
    assert where in {address(array) for array in again}  # free once the view is gone


def test_small_and_object_results_are_numpys_own(small_threshold: None) -> None:
    small = results.empty((10, 10), np.dtype("f8"))
    assert small.flags.owndata
    strings = results.empty((1 << 18,), np.dtype(object))
    assert strings.flags.owndata and strings[0] is None


def test_nothing_is_kept_beyond_the_limit(
    small_threshold: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(results, "KEEP_BYTES", 2 << 20)
    arrays = [results.empty((1 << 17,), np.dtype("f8")) for _ in range(3)]  # 1 MiB each
    del arrays
    gc.collect()
    assert results._free_bytes <= 2 << 20
    assert len(results._free) == 1  # maps are rounded up to 2 MiB


@pytest.mark.parametrize("how", ["open", "h5py_file"])
def test_fill_value_chunks_are_written_on_reused_memory(
    small_threshold: None, tmp_path: Path, how: str
) -> None:
    """Chunks never written (read as the fill value, 0 or not) and the part a resize
    added come out as the fill value, not as the bytes of the dropped result."""
    import h5py

    path = tmp_path / "sparse.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1") as group:
            x = group.create_dataset("x", shape=(600, 500), dtype="f8", chunks=(100, 100))
            x[150:160, 220:230] = 3.0
            y = group.create_dataset(
                "y", shape=(600, 500), dtype="f8", chunks=(100, 100), fillvalue=2.5
            )
            y[:10, :10] = 1.0
        with vf.stage_version("v2") as group:
            group["x"].resize((700, 600))
    expected_x = np.zeros((600, 500))
    expected_x[150:160, 220:230] = 3.0
    expected_y = np.full((600, 500), 2.5)
    expected_y[:10, :10] = 1.0
    expected_x2 = np.zeros((700, 600))
    expected_x2[:600, :500] = expected_x
    for version, name, expected in (
        ("v1", "x", expected_x),
        ("v1", "y", expected_y),
        ("v2", "x", expected_x2),
    ):
        junk = results.empty(expected.shape, np.dtype("f8"))
        junk[...] = 7.0
        del junk
        gc.collect()
        if how == "open":
            with h5vc.open(str(path)) as vf:
                got = vf[version][name][:]
        else:
            with h5py.File(path, "r") as f:
                got = h5vc.VersionedHDF5File(f)[version][name][:]
        assert not got.base.flags.owndata  # made on the dropped result's memory
        np.testing.assert_array_equal(got, expected)
        del got
        gc.collect()


@pytest.mark.parametrize("how", ["open", "h5py_file"])
def test_reads_on_reused_memory_are_right(small_threshold: None, tmp_path: Path, how: str) -> None:
    """Full and partial reads of two versions, each result dropped before the next
    read: every read returns its own version's data, however the file is opened."""
    import h5py

    path = tmp_path / "data.h5"
    rng = np.random.default_rng(7)
    first = rng.random((600, 500))
    second = first.copy()
    second[150:160, 220:230] = -1.0
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1") as group:
            group.create_dataset("x", data=first, chunks=(100, 100))
        with vf.stage_version("v2") as group:
            group["x"][150:160, 220:230] = -1.0
    expected = {"v1": first, "v2": second}
    for _ in range(3):
        for version in ("v1", "v2", "v1"):
            if how == "open":
                with h5vc.open(str(path)) as vf:
                    got = vf[version]["x"][:]
                    part = vf[version]["x"][50:550, 10:490]
            else:
                with h5py.File(path, "r") as f:
                    vf = h5vc.VersionedHDF5File(f)
                    got = vf[version]["x"][:]
                    part = vf[version]["x"][50:550, 10:490]
            np.testing.assert_array_equal(got, expected[version])
            np.testing.assert_array_equal(part, expected[version][50:550, 10:490])
            del got, part
            gc.collect()
    assert results._free  # the reads' results were made here


def test_a_forked_child_makes_its_own(small_threshold: None) -> None:
    """A child forked while a result is free and another in use reads its own large
    results right; the parent's memory is untouched by the child's writes."""
    import os

    kept = results.empty((512, 1024), np.dtype("f8"))
    kept[...] = 3.0
    dropped = results.empty((512, 1024), np.dtype("f8"))
    del dropped
    gc.collect()
    pid = os.fork()
    if pid == 0:  # the child: exits 0 only if all is right
        ok = not results._free
        child = results.empty((512, 1024), np.dtype("f8"))
        child[...] = -2.0
        kept[...] = -5.0  # its own copy of the parent's pages
        ok = ok and bool((child == -2.0).all())
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert (kept == 3.0).all()
