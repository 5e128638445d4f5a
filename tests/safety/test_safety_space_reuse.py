"""Chunks released by ``delete_versions`` are reused by later commits in every file,
however it was created or opened: they stay as free slots of raw_data, which commits
fill before raw_data grows (HDF5 forgets its own free space at close unless the file
was created to keep it)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

import h5py
import numpy as np
import pytest

import h5vc
from h5vc import VersionedHDF5File
from h5vc.store.compact import erase_slots
from h5vc.store.rawdata import RawDataStore
from h5vc.wrappers import group as group_module

N, CHUNK = 32_000, 1000  # 32 chunks of 8 kB
REWRITES = 16


def _data(rng: np.random.Generator) -> np.ndarray:
    return rng.random(N)


@contextlib.contextmanager
def _opened(path: str, how: str, mode: str) -> Iterator[VersionedHDF5File]:
    """The versioned file at ``path`` opened by ``h5vc.open`` or by plain h5py."""
    if how == "h5vc":
        with h5vc.open(path, mode) as vf:
            yield vf
    else:
        with h5py.File(path, mode) as f:
            yield VersionedHDF5File(f)


def _build(path: str, created_by: str, compression: str | None) -> dict[str, np.ndarray]:
    """A base version and REWRITES versions that each rewrite every chunk."""
    rng = np.random.default_rng(0)
    model = {}
    with _opened(path, created_by, "w") as vf:
        model["base"] = _data(rng)
        with vf.stage_version("base") as g:
            g.create_dataset("x", data=model["base"], chunks=(CHUNK,), compression=compression)
        for i in range(REWRITES):
            model[f"v{i}"] = _data(rng)
            with vf.stage_version(f"v{i}") as g:
                g["x"][:] = model[f"v{i}"]
    return model


def _rewrite(path: str, opened_by: str, count: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    model = {}
    with _opened(path, opened_by, "r+") as vf:
        for i in range(count):
            model[f"w{i}"] = _data(rng)
            with vf.stage_version(f"w{i}") as g:
                g["x"][:] = model[f"w{i}"]
    return model


def _check(path: str, model: dict[str, np.ndarray | None]) -> None:
    """Every version of ``model`` reads as given (None: it has no dataset x)."""
    with h5py.File(path, "r") as f:
        vf = VersionedHDF5File(f)
        assert sorted(vf.versions) == sorted(model)
        for name, expected in model.items():
            if expected is None:
                assert "x" not in vf[name]
            else:
                np.testing.assert_array_equal(vf[name]["x"][()], expected, err_msg=name)
        assert h5vc.verify(f).ok


@pytest.mark.parametrize("compression", [None, "gzip"])
@pytest.mark.parametrize(
    ("created_by", "opened_by"), [("h5py", "h5py"), ("h5vc", "h5py"), ("h5vc", "h5vc")]
)
def test_rewrites_after_delete_reuse_the_released_chunks(
    path: str, created_by: str, opened_by: str, compression: str | None
) -> None:
    """Half the versions deleted, the file reopened: 8 full rewrites grow it by at most
    10% of what the same rewrites add to a file without deletions."""
    model = _build(path, created_by, compression)
    reference = path + ".ref"
    shutil.copy(path, reference)
    before = os.path.getsize(reference)
    _rewrite(reference, opened_by, 8)
    added = os.path.getsize(reference) - before  # what the rewrites write
    assert added > 8 * N * 8 * (0.8 if compression else 1.0)
    doomed = [f"v{i}" for i in range(0, REWRITES, 2)]
    with _opened(path, opened_by, "r+") as vf:
        h5vc.delete_versions(vf, doomed)
    with h5py.File(path, "r") as f:
        released = h5vc.stats(f).datasets["x"]
    deleted = os.path.getsize(path)
    model = {k: v for k, v in model.items() if k not in doomed}
    model.update(_rewrite(path, opened_by, 8))
    grown = os.path.getsize(path) - deleted
    assert grown <= 0.10 * added, (grown, added)
    assert released.chunks == (1 + REWRITES // 2) * N // CHUNK
    assert released.free_chunks == len(doomed) * N // CHUNK
    with h5py.File(path, "r") as f:
        space = h5vc.stats(f).datasets["x"]
        assert space.free_chunks == 0
        assert space.chunks == (1 + REWRITES // 2 + 8) * N // CHUNK
    _check(path, model)


def test_free_slots_are_filled_before_raw_data_grows(path: str) -> None:
    model = _build(path, "h5py", None)
    with h5py.File(path, "r+") as f:
        h5vc.delete_versions(f, ["v0", "v1"])  # 64 chunks released
    raw_rows = 17 * N
    rng = np.random.default_rng(5)
    with h5py.File(path, "r+") as f:
        vf = VersionedHDF5File(f)
        raw_data = f["_version_data/x/raw_data"]
        for name, rows in (("a", raw_rows), ("b", raw_rows), ("c", raw_rows + N)):
            model[name] = _data(rng)
            with vf.stage_version(name) as g:
                g["x"][:] = model[name]
            assert raw_data.shape[0] == rows, name
    del model["v0"], model["v1"]
    _check(path, model)


def _gzip_with_edge_chunk(path: str) -> dict[str, np.ndarray]:
    """Versions of a gzip dataset whose last chunk is short (10,500 = 10.5 chunks)."""
    rng = np.random.default_rng(2)
    model = {}
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        for i in range(6):
            model[f"v{i}"] = rng.integers(0, 50, 10_500).astype("f8")
            with vf.stage_version(f"v{i}") as g:
                if i == 0:
                    g.create_dataset("x", data=model["v0"], chunks=(1000,), compression="gzip")
                else:
                    g["x"][:] = model[f"v{i}"]
    return model


@pytest.mark.parametrize("pipeline", ["h5vc", "hdf5"])
def test_edge_chunks_never_read_what_a_free_slot_held(
    path: str, monkeypatch: pytest.MonkeyPatch, pipeline: str
) -> None:
    """A short chunk written over a free slot is written whole (padded with the fill
    value): HDF5 never decodes the stale chunk there (here: bytes no filter decodes)."""
    if pipeline == "hdf5":  # HDF5 runs the filters, not h5vc
        monkeypatch.setattr(RawDataStore, "pipeline", property(lambda self: None))
    # create_dataset writes its data through to raw_data (the last chunk short)
    monkeypatch.setattr(group_module, "WRITE_THROUGH_BYTES", 0)
    model: dict[str, np.ndarray | None] = dict(_gzip_with_edge_chunk(path))
    with h5py.File(path, "r+") as f:
        h5vc.delete_versions(f, ["v1", "v2", "v3"])
        raw_data = f["_version_data/x/raw_data"]
        erase_slots(raw_data, np.arange(33, 66), 1000)  # the free slots: undecodable
    for name in ("v1", "v2", "v3"):
        del model[name]
    rng = np.random.default_rng(3)
    with h5py.File(path, "r+") as f:
        vf = VersionedHDF5File(f)
        for i in range(3):
            with vf.stage_version(f"gone{i}") as g:
                del g["x"]
            model[f"gone{i}"] = None
            model[f"w{i}"] = rng.integers(0, 50, 10_500).astype("f8")
            with vf.stage_version(f"w{i}") as g:
                g.create_dataset("x", data=model[f"w{i}"], chunks=(1000,), compression="gzip")
        assert f["_version_data/x/raw_data"].shape[0] == 66 * 1000  # the free slots, reused
    _check(path, model)


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_erase_leaves_raw_data_readable(path: str, compression: str | None) -> None:
    """Erased chunks (zero bytes) decode only without filters: there they stay free slots,
    a store with filters drops them, so every HDF5 tool still reads all of raw_data."""
    rng = np.random.default_rng(8)
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        for i in range(4):
            with vf.stage_version(f"v{i}") as g:
                if i == 0:
                    g.create_dataset("x", data=_data(rng), chunks=(CHUNK,), compression=compression)
                else:
                    g["x"][:] = _data(rng)
        h5vc.delete_versions(f, ["v1", "v2"], erase=True)
    with h5py.File(path, "r") as f:
        raw_data = f["_version_data/x/raw_data"]
        assert raw_data.shape[0] == (2 * N if compression else 4 * N)
        if compression is None:
            assert not raw_data[2 * N : 3 * N].any()  # v2's, erased in place
        raw_data[()]  # decodes
        assert h5vc.verify(f).ok


@pytest.mark.parametrize("opened_by", ["h5py", "h5vc"])
def test_a_failed_commit_leaves_its_slots_free(
    path: str, monkeypatch: pytest.MonkeyPatch, opened_by: str
) -> None:
    """A commit that fails after writing its chunks over free slots, before their
    hash-table rows: the versions read as before, the slots stay free, and the next
    commit fills them."""
    model = _build(path, "h5py", None)
    with h5py.File(path, "r+") as f:
        h5vc.delete_versions(f, ["v0", "v1"])
    del model["v0"], model["v1"]

    def fail(*args: object) -> None:
        raise OSError("disk gone")

    rng = np.random.default_rng(4)
    with _opened(path, opened_by, "r+") as vf:
        with monkeypatch.context() as patch:
            patch.setattr(RawDataStore, "_write_rows", fail)
            with pytest.raises(OSError, match="disk gone"), vf.stage_version("lost") as g:
                g["x"][:] = _data(rng)
        model["after"] = _data(rng)
        with vf.stage_version("after") as g:
            g["x"][:] = model["after"]
    with h5py.File(path, "r") as f:
        space = h5vc.stats(f).datasets["x"]
        assert f["_version_data/x/raw_data"].shape[0] == 17 * N
        assert space.free_chunks == N // CHUNK  # 2 deleted, 1 refilled
    _check(path, model)


_KILLED_COMMIT = """
import os, sys
import numpy as np
import h5vc
from h5vc.store.compact import erase_slots
from h5vc.store.rawdata import RawDataStore
from h5vc.wrappers import group as group_module

def killed(self, *args):
    self.raw_data.file.flush()
    os._exit(3)

RawDataStore._write_rows = killed
with h5vc.open(sys.argv[1], "r+") as vf:
    with vf.stage_version("killed") as g:
        g["x"][:] = np.full({n}, 7.0)
"""


def test_a_commit_killed_over_free_slots_is_rolled_back(path: str) -> None:
    """A process killed after writing chunks over free slots: the journal restores the
    file, the slots are free again and hold no version's data."""
    with h5vc.open(path, "w"):
        pass
    model = {}
    rng = np.random.default_rng(6)
    with h5vc.open(path, "r+") as vf:
        for i in range(4):
            model[f"v{i}"] = _data(rng)
            with vf.stage_version(f"v{i}") as g:
                if i == 0:
                    g.create_dataset("x", data=model["v0"], chunks=(CHUNK,))
                else:
                    g["x"][:] = model[f"v{i}"]
        h5vc.delete_versions(vf, ["v1"])
    del model["v1"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_COMMIT.format(n=N), path], env=env, check=False
    )
    assert done.returncode == 3
    with h5vc.open(path, "r+") as vf:
        assert sorted(vf.versions) == sorted(model)
        model["v4"] = _data(rng)
        with vf.stage_version("v4") as g:
            g["x"][:] = model["v4"]
    with h5py.File(path, "r") as f:
        assert f["_version_data/x/raw_data"].shape[0] == 4 * N  # the free slots, reused
    _check(path, model)


def test_repack_copies_only_the_slots_in_use(path: str, tmp_path) -> None:
    """Strings (copied as values) and 2-d chunks (copied as raw chunks) alike."""
    rng = np.random.default_rng(9)
    model: dict[str, dict[str, np.ndarray]] = {}
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        for i in range(4):
            words = np.array([f"w{i}-{k}-{rng.integers(1000)}" for k in range(50)], dtype=object)
            grid = rng.random((30, 12))
            model[f"v{i}"] = {"words": words, "grid": grid}
            with vf.stage_version(f"v{i}") as g:
                if i == 0:
                    g.create_dataset("words", data=words, dtype=h5py.string_dtype(), chunks=(8,))
                    g.create_dataset("grid", data=grid, chunks=(8, 5), compression="gzip")
                else:
                    g["words"][:] = words
                    g["grid"][:] = grid
        h5vc.delete_versions(f, ["v1", "v2"])
    del model["v1"], model["v2"]
    packed = str(tmp_path / "packed.h5")
    h5vc.repack(path, packed)
    with h5py.File(packed, "r") as f:
        report = h5vc.stats(f)
        for name in ("words", "grid"):
            assert report.datasets[name].free_chunks == 0
            assert report.datasets[name].chunks > 0
        vf = VersionedHDF5File(f)
        assert sorted(vf.versions) == sorted(model)
        for version, datasets in model.items():
            np.testing.assert_array_equal(vf[version]["grid"][()], datasets["grid"])
            words = [w.decode() for w in vf[version]["words"][()]]
            assert words == list(datasets["words"])
        assert h5vc.verify(f).ok
    with h5py.File(path, "r") as f:
        assert h5vc.stats(f).datasets["grid"].free_chunks == 2 * 4 * 3  # 4 x 3 chunks each


def test_verify_reports_a_version_that_maps_a_free_slot(path: str) -> None:
    """The free slots are those past the last hash-table row: a table that lost its last
    row (damage) leaves a mapped slot free, and verify says which."""
    _build(path, "h5py", None)
    with h5py.File(path, "r+") as f:
        h5vc.delete_versions(f, ["v0", "v1"])
        assert h5vc.verify(f).ok
        table = f["_version_data/x/hash_table"]
        table.attrs["largest_index"] = np.int64(table.attrs["largest_index"] - 1)
    with h5py.File(path, "r") as f:
        report = h5vc.verify(f)
        assert not report.ok
        assert any("without a hash-table row" in p.message for p in report.problems)
