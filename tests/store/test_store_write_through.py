"""Large datasets created with data are written to the file at once, not staged.

Their chunks must end up exactly as if they had been staged and committed (same
slots, same hash-table rows, same virtual datasets), and everything written must
be taken back if the version is not committed.
"""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_helpers import snapshot_group

import h5vc
from h5vc import MetadataMismatchError, VersionedHDF5File, delete_versions
from h5vc.store import layout


def write_through(monkeypatch: pytest.MonkeyPatch, nbytes: int = 0) -> None:
    monkeypatch.setattr(h5vc.wrappers.group, "WRITE_THROUGH_BYTES", nbytes)


def store_contents(f: h5py.File, path: str) -> tuple[np.ndarray, np.ndarray]:
    group = f[f"{layout.VERSION_DATA}/{path}"]
    n_rows = int(group[layout.HASH_TABLE].attrs[layout.ATTR_LARGEST_INDEX])
    return group[layout.RAW_DATA][()], group[layout.HASH_TABLE][:n_rows]


def commit(path: str, array: np.ndarray, chunks: tuple[int, ...], fillvalue) -> None:
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=array, chunks=chunks, fillvalue=fillvalue)


def mappings(dataset: h5py.Dataset) -> list[tuple[list, list]]:
    """The selections of every mapping of a virtual dataset, as block lists."""
    return [
        (
            m.vspace.get_select_hyper_blocklist().tolist(),
            m.src_space.get_select_hyper_blocklist().tolist(),
        )
        for m in dataset.virtual_sources()
    ]


@st.composite
def arrays_with_chunks(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(0, 9), min_size=ndim, max_size=ndim)))
    chunks = tuple(draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    dtype = draw(st.sampled_from(["f8", "i2", "u1", "?", "S3"]))
    # few distinct values: repeated chunks and chunks of only the fill value
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    array = rng.integers(0, draw(st.integers(1, 3)), size=shape).astype(dtype)
    fillvalue = draw(st.sampled_from([None, b"1" if dtype == "S3" else 1]))
    return array, chunks, fillvalue


@settings(settings.get_profile("h5vc-store"))
@given(case=arrays_with_chunks())
def test_written_through_equals_staged(tmp_path_factory, case) -> None:
    array, chunks, fillvalue = case
    directory = tmp_path_factory.mktemp("through")
    staged, through = str(directory / "staged.h5"), str(directory / "through.h5")
    commit(staged, array, chunks, fillvalue)
    with pytest.MonkeyPatch.context() as patch:
        write_through(patch)
        commit(through, array, chunks, fillvalue)
    with h5py.File(staged, "r") as a, h5py.File(through, "r") as b:
        raw_a, rows_a = store_contents(a, "x")
        raw_b, rows_b = store_contents(b, "x")
        np.testing.assert_array_equal(raw_b, raw_a)
        np.testing.assert_array_equal(rows_b, rows_a)
        versions = f"{layout.VERSION_DATA}/{layout.VERSIONS}/v1/x"
        assert mappings(b[versions]) == mappings(a[versions])
        np.testing.assert_array_equal(b[versions][()], array)
        np.testing.assert_array_equal(VersionedHDF5File(b)["v1"]["x"][()], array)


def test_large_array_is_written_before_the_commit(vf: VersionedHDF5File, h5file) -> None:
    data = np.random.default_rng(1).random((1100, 1000))  # 8.8 MB: more than one batch
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=data, chunks=(100, 300))
        raw_data = h5file[f"{layout.VERSION_DATA}/x/{layout.RAW_DATA}"]
        assert raw_data.shape == (11 * 4 * 100, 300)  # every chunk, before the commit
        np.testing.assert_array_equal(g["x"][()], data)
        data[5:7, 990:] = -1  # the caller's array is not referenced
    data[5:7, 990:] = g["x"][5:7, 990:]
    np.testing.assert_array_equal(vf["v1"]["x"][()], data)


def test_edits_and_resizes_in_the_same_stage(
    vf: VersionedHDF5File, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_through(monkeypatch)
    expected = np.arange(30.0)
    with vf.stage_version("v1") as g:
        x = g.create_dataset("x", data=expected, chunks=(4,))
        x[3:9] = -1
        x.resize((33,))
        x[31] = 5
    expected[3:9] = -1
    expected = np.concatenate([expected, [0, 5, 0]])
    np.testing.assert_array_equal(vf["v1"]["x"][()], expected)


def test_duplicates_and_fill_chunks_are_stored_once(
    vf: VersionedHDF5File, h5file, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_through(monkeypatch)
    block = np.arange(4.0) + 1
    data = np.concatenate([block, np.zeros(8), block, block, block[:2]])
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=data, chunks=(4,))
        g.create_dataset("y", data=data[:8], chunks=(4,))
    with vf.stage_version("v2") as g:
        g.create_dataset("z", data=data, chunks=(4,))
    raw, rows = store_contents(h5file, "x")
    assert len(rows) == 2 and raw.shape == (8,)  # the block and the 2-element tail
    assert store_contents(h5file, "y")[0].shape == (4,)
    np.testing.assert_array_equal(vf["v2"]["z"][()], data)
    np.testing.assert_array_equal(vf["v1"]["y"][()], data[:8])


@pytest.mark.parametrize("where", ["in the block", "in the commit"])
def test_abandoned_stage_takes_the_written_chunks_back(
    vf: VersionedHDF5File, h5file, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    write_through(monkeypatch)
    with vf.stage_version("v1") as g:
        g.create_dataset("a/x", data=np.arange(10.0), chunks=(4,))
    before = snapshot_group(h5file)

    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"), vf.stage_version("v2") as g:
        g.create_dataset("a/y", data=np.arange(10.0) + 0.5, chunks=(4,))
        del g["a/x"]
        g.create_dataset("a/x", data=np.arange(10.0) - 1, chunks=(4,))
        g.create_dataset("b/c/z", data=np.ones(3), chunks=(2,))
        if where == "in the block":
            raise RuntimeError("disk full")
        monkeypatch.setattr(h5vc.versions.commit, "create_virtual_dataset", fail)
    monkeypatch.undo()
    assert snapshot_group(h5file) == before
    with vf.stage_version("v2") as g:  # dedup must not find chunks that were taken back
        g.create_dataset("a/y", data=np.arange(10.0) - 1, chunks=(4,))
    np.testing.assert_array_equal(vf["v2"]["a/y"][()], np.arange(10.0) - 1)
    np.testing.assert_array_equal(vf["v2"]["a/x"][()], np.arange(10.0))


def test_incompatible_existing_store_gets_a_store_of_its_own(
    vf: VersionedHDF5File, h5file, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_through(monkeypatch)
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=np.arange(10), chunks=(4,))
    before = snapshot_group(h5file)
    with pytest.raises(RuntimeError, match="abandoned"), vf.stage_version("v2") as g:
        del g["x"]
        g.create_dataset("x", data=np.arange(10), chunks=(5,))
        assert "__h5vc_stores__/x/@1/raw_data" in h5file["_version_data"]  # written at once
        raise RuntimeError("abandoned")
    assert snapshot_group(h5file) == before  # and taken back
    with vf.stage_version("v2") as g:
        del g["x"]
        g.create_dataset("x", data=np.arange(10) + 1, chunks=(5,))
    assert vf["v2"]["x"].chunks == (5,)
    np.testing.assert_array_equal(vf["v2"]["x"][()], np.arange(10) + 1)
    np.testing.assert_array_equal(vf["v1"]["x"][()], np.arange(10))


def test_incompatible_existing_store_is_refused_in_layout_4(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_through(monkeypatch)
    with h5py.File(path, "w") as h5file:
        vf = VersionedHDF5File(h5file, data_version=4)
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(10), chunks=(4,))
        before = snapshot_group(h5file)
        with pytest.raises(MetadataMismatchError, match="chunks"), vf.stage_version("v2") as g:
            del g["x"]
            g.create_dataset("x", data=np.arange(10), chunks=(5,))
        assert snapshot_group(h5file) == before


def test_deleting_through_another_handle_keeps_dedup_correct(path: str) -> None:
    # delete_versions(f, ...) on the h5py file moves chunks to other slots; a
    # VersionedHDF5File opened before must not dedup against the old slots.
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(40.0), chunks=(4,))
        with vf.stage_version("v2") as g:
            g["x"][:] = np.arange(40.0) + 100
        delete_versions(f, ["v1"])
        with vf.stage_version("v3") as g:
            g["x"][:] = np.arange(40.0)
        np.testing.assert_array_equal(vf["v3"]["x"][()], np.arange(40.0))
        np.testing.assert_array_equal(vf["v2"]["x"][()], np.arange(40.0) + 100)


def test_store_of_a_dataset_deleted_before_the_commit_is_removed(
    vf: VersionedHDF5File, h5file, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_through(monkeypatch)
    with vf.stage_version("v1") as g:
        g.create_dataset("a/keep", data=np.arange(10.0), chunks=(4,))
        g.create_dataset("a/b/gone", data=np.arange(10.0), chunks=(4,))
        g.create_dataset("c/gone", data=np.arange(10.0), chunks=(4,))
        del g["a/b/gone"]
        del g["c"]
    version_data = h5file[layout.VERSION_DATA]
    assert "a/keep" in version_data
    assert "a/b" not in version_data and "c" not in version_data
    np.testing.assert_array_equal(vf["v1"]["a/keep"][()], np.arange(10.0))
    assert list(vf["v1"]["a"]["b"]) == [] and "c" not in vf["v1"]  # a/b stays, empty
