"""Dask arrays pinned to committed versions: chunks, schedulers, pickling, errors."""

from __future__ import annotations

import os
import pathlib
import pickle
import threading

import dask
import dask.array as da
import numpy as np
import pytest
from scale_helpers import TIMES, expected_x

import h5vc
import h5vc.dask as hd
from h5vc import filecache


@pytest.mark.parametrize(
    ("version", "name"),
    [("v1", "v1"), ("v2", "v2"), (None, "v3"), (0, "v3"), (-1, "v2"), (-2, "v1")],
)
def test_from_version_reads_the_version_named(
    versioned: pathlib.Path, version: object, name: str
) -> None:
    x = hd.from_version(versioned, version, "grid/x")
    assert isinstance(x, da.Array)
    assert x.shape == (300, 40) and x.dtype == np.float64
    np.testing.assert_array_equal(x.compute(scheduler="sync"), expected_x(name))


def test_from_version_by_timestamp(versioned: pathlib.Path) -> None:
    between = TIMES["v2"].replace(day=15)  # after v2, before v3
    x = hd.from_version(versioned, between, "/grid/x")
    np.testing.assert_array_equal(x[:20].compute(), expected_x("v2")[:20])


def test_from_version_by_tag(versioned: pathlib.Path) -> None:
    with h5vc.open(versioned, "r+") as vf:
        vf.create_tag("release", "v2")
    x = hd.from_version(versioned, "release", "grid/x")
    np.testing.assert_array_equal(x.compute(), expected_x("v2"))


def test_array_stays_pinned_when_versions_are_added(versioned: pathlib.Path) -> None:
    current = hd.from_version(versioned, None, "grid/x")
    with h5vc.open(versioned, "r+") as vf, vf.stage_version("v4") as g:
        g["grid/x"][...] = 7
    np.testing.assert_array_equal(current.compute(), expected_x("v3"))
    np.testing.assert_array_equal(hd.from_version(versioned, None, "grid/x").compute(), 7)


def test_default_blocks_are_whole_stored_chunks() -> None:
    chunks = hd.block_chunks((300, 40), (10, 8), np.dtype("f8"), target_bytes=8 * 40 * 30)
    assert all(size % 10 == 0 for size in chunks[0][:-1])
    assert all(size % 8 == 0 for size in chunks[1][:-1])
    assert sum(chunks[0]) == 300 and sum(chunks[1]) == 40
    block = chunks[0][0] * chunks[1][0] * 8
    assert 10 * 8 * 8 < block <= 8 * 40 * 30  # more than one chunk, at most the target
    # A stored chunk larger than the target is one block.
    assert hd.block_chunks((100,), (50,), np.dtype("f8"), target_bytes=8) == ((50, 50),)


def test_default_blocks_of_a_small_dataset(versioned: pathlib.Path) -> None:
    x = hd.from_version(versioned, "v1", "grid/x")
    assert x.chunks == ((300,), (40,))  # 96 kB: far below DEFAULT_BLOCK_BYTES
    y = hd.from_version(versioned, "v1", "grid/x", chunks=(30, 16))
    assert y.chunks[0] == (30,) * 10 and y.chunks[1] == (16, 16, 8)
    np.testing.assert_array_equal(y.compute(), expected_x("v1"))


def test_auto_chunks_are_whole_stored_chunks(versioned: pathlib.Path) -> None:
    with dask.config.set({"array.chunk-size": "10KiB"}):
        x = hd.from_version(versioned, "v1", "grid/x", chunks="auto")
    assert all(size % 10 == 0 for size in x.chunks[0][:-1])
    assert all(size % 8 == 0 for size in x.chunks[1][:-1])
    assert x.npartitions > 1
    np.testing.assert_array_equal(x.compute(), expected_x("v1"))


def test_dask_indexing_matches_numpy(versioned: pathlib.Path) -> None:
    x = hd.from_version(versioned, "v3", "grid/x", chunks=(64, 16))
    want = expected_x("v3")
    for index in [
        (slice(3, 250, 7), 5),
        (slice(None), slice(30, None)),
        (-1,),
        (np.array([0, 7, 299]), slice(2, 9)),
        (slice(240, 260), np.array([1, 39])),
    ]:
        np.testing.assert_array_equal(x[index].compute(scheduler="threads"), want[index])


def test_graph_carries_names_not_handles(versioned: pathlib.Path) -> None:
    x = hd.from_version(versioned, "v2", "grid/x", chunks=(100, 40))
    graph = dict(x.__dask_graph__())
    payload = pickle.dumps(graph)  # an h5py object in a task would not pickle
    assert str(versioned).encode() in payload
    filecache.clear()  # a worker starts with nothing open
    np.testing.assert_array_equal(dask.compute(x, scheduler="sync")[0], expected_x("v2"))


@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_schedulers(versioned: pathlib.Path, scheduler: str) -> None:
    x = hd.from_version(versioned, "v2", "grid/x", chunks=(50, 20))
    total = x.sum().compute(scheduler=scheduler, num_workers=2)
    assert total == expected_x("v2").sum()


def test_distributed_local_cluster(versioned: pathlib.Path) -> None:
    distributed = pytest.importorskip("distributed")
    x = hd.from_version(versioned, "v3", "grid/x", chunks=(50, 40))
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",  # any free port: others may run clusters here
            worker_dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster, timeout=60) as client,
    ):
        total = client.compute(x.sum()).result(timeout=120)
        pids = set(client.run(os.getpid).values())
    assert total == expected_x("v3").sum()
    assert len(pids) == 2 and os.getpid() not in pids


def test_one_open_file_per_process(versioned: pathlib.Path) -> None:
    x = hd.from_version(versioned, "v1", "grid/x", chunks=(10, 8))
    x.sum().compute(scheduler="threads")
    y = hd.from_version(versioned, "v2", "y")
    y.compute()
    assert len(filecache._CACHE.files) == 1


def test_forked_cache_starts_empty_and_leaves_parent_handles_open(
    versioned: pathlib.Path,
) -> None:
    hd.from_version(versioned, "v1", "grid/x").compute()
    (inherited,) = filecache._CACHE.files.values()
    filecache._CACHE.pid = -1  # as seen by a forked child: another process's cache
    np.testing.assert_array_equal(hd.from_version(versioned, "v1", "y").compute(), np.arange(1000))
    assert inherited.file.id.valid  # not closed: it belongs to the parent
    assert inherited not in filecache._CACHE.files.values()
    inherited.close()


def test_writing_after_reading_in_the_same_process(versioned: pathlib.Path) -> None:
    hd.from_version(versioned, "v1", "grid/x").compute()
    assert filecache._CACHE.files
    with h5vc.open(versioned, "r+") as vf, vf.stage_version("v4") as g:
        g["y"][:10] = 0  # the cached read-only handle does not stand in the way
    np.testing.assert_array_equal(
        hd.from_version(versioned, "v4", "y")[:12].compute()[-3:], [0, 10, 11]
    )


def test_committed_dataset_works_with_from_array_and_pickle(versioned: pathlib.Path) -> None:
    with h5vc.open(versioned) as vf:
        dataset = vf["v2"]["grid/x"]
        x = da.from_array(dataset, chunks=(100, 40))
        assert x.sum().compute(scheduler="processes", num_workers=2) == expected_x("v2").sum()
        clone = pickle.loads(pickle.dumps(dataset))
    np.testing.assert_array_equal(clone[5:15], expected_x("v2")[5:15])
    assert clone.version_name == "v2"


def test_unpickled_dataset_outlives_new_versions_and_closed_handles(
    versioned: pathlib.Path,
) -> None:
    with h5vc.open(versioned) as vf:
        payload = pickle.dumps(vf["v1"]["grid/x"])
    clone = pickle.loads(payload)
    with h5vc.open(versioned, "r+") as vf, vf.stage_version("v4") as g:
        g["y"][:10] = 0  # the file changes: the cache opens it afresh next time
    np.testing.assert_array_equal(hd.from_version(versioned, "v4", "y")[:3].compute(), 0)
    np.testing.assert_array_equal(clone[:2], expected_x("v1")[:2])  # still readable


def test_version_array_pickles_as_names(versioned: pathlib.Path) -> None:
    source = hd.Source(str(versioned), "v1", "grid/x")
    payload = pickle.dumps(hd.VersionArray(source, (300, 40), np.dtype("f8"), (10, 8)))
    assert len(payload) < 1000
    clone = pickle.loads(payload)
    np.testing.assert_array_equal(clone[:3], expected_x("v1")[:3])
    np.testing.assert_array_equal(np.asarray(clone), expected_x("v1"))


def test_unknown_version_lists_versions(versioned: pathlib.Path) -> None:
    with pytest.raises(h5vc.VersionNotFoundError, match=r"'v9'.*\['v1', 'v2', 'v3'\]"):
        hd.from_version(versioned, "v9", "grid/x")
    with pytest.raises(h5vc.AncestorNotFoundError, match=r"-5.*\['v1', 'v2', 'v3'\]"):
        hd.from_version(versioned, -5, "grid/x")


def test_unknown_dataset_lists_datasets(versioned: pathlib.Path) -> None:
    with pytest.raises(h5vc.DatasetNotFoundError, match=r"'grid/z'.*\['grid/x', 'y'\]"):
        hd.from_version(versioned, "v1", "grid/z")
    with pytest.raises(h5vc.DatasetNotFoundError, match=r"'grid'.*\['grid/x', 'y'\]"):
        hd.from_version(versioned, "v1", "grid")  # a group, not a dataset


def test_missing_file_and_wrong_path_type(tmp_path: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError):
        hd.from_version(tmp_path / "nope.h5", "v1", "x")
    with pytest.raises(TypeError, match="path or URL"):
        hd.from_version(123, "v1", "x")  # type: ignore[arg-type]


def test_cached_files_are_read_with_positioned_reads(versioned: pathlib.Path) -> None:
    from h5vc.remote import stream_descriptor
    from h5vc.store import layout
    from h5vc.store.fastread import fast_reader

    source = hd.Source(str(versioned), "v3", "grid/x")
    np.testing.assert_array_equal(hd.committed_dataset(source)[:], expected_x("v3"))
    opened = hd.open_source(source)
    assert opened.file.driver == "fileobj"  # a private handle, read through a stream
    fd = stream_descriptor(opened.file)
    assert isinstance(fd, int) and os.path.samefile(f"/proc/self/fd/{fd}", versioned)
    raw_data = opened.root[f"{layout.VERSION_DATA}/grid/x/{layout.RAW_DATA}"]
    assert fast_reader(raw_data) is not None
    file = opened.file
    hd.close_files()
    assert stream_descriptor(file) is None


def test_tasks_read_in_their_own_thread(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside a task, reads are shared out over h5vc's pool; a Dask task reads alone in
    its thread (Dask already runs one task per core)."""
    from h5vc.hdf5 import codecs, scatter
    from h5vc.store import planner

    monkeypatch.setattr(planner, "HDF5_READ_BYTES", -1)  # positioned reads at every size
    path = tmp_path / "big.h5"
    values = np.arange(400_000, dtype=np.float64)
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=values, chunks=(10_000,))
        with vf.stage_version("v2") as g:
            g["x"][200_000:200_010] = -1.0  # v2's chunks: two runs apart in the file
    values[200_000:200_010] = -1.0
    monkeypatch.setattr(codecs, "workers", lambda: 2)  # a pool even on one core
    pread = os.preadv
    readers: list[str] = []

    def spy(fd: int, buffers: list[memoryview], offset: int) -> int:
        readers.append(threading.current_thread().name)
        return pread(fd, buffers, offset)

    monkeypatch.setattr(os, "preadv", spy)
    if scatter.available():  # stretches read straight into the result
        scattered = scatter._preadv

        def scatter_spy(*args: int) -> int:
            readers.append(threading.current_thread().name)
            return scattered(*args)

        monkeypatch.setattr(scatter, "_preadv", scatter_spy)
    source = hd.Source(str(path), "v2", "x")
    np.testing.assert_array_equal(hd.committed_dataset(source)[:], values)
    assert any(name.startswith("h5vc-codec") for name in readers)  # the pool was used

    readers.clear()
    array = hd.VersionArray(source, values.shape, values.dtype, (10_000,))
    np.testing.assert_array_equal(array[:], values)
    assert set(readers) == {threading.current_thread().name}

    readers.clear()
    got = hd.from_version(path, "v2", "x", chunks=100_000)
    np.testing.assert_array_equal(got.compute(scheduler="threads"), values)
    assert readers and not any(name.startswith("h5vc-codec") for name in readers)
