"""First reads of committed datasets served from the file's bytes: HDF5's metadata
checksum called in C, and small reads that give what h5py reads of the same version
(or an error on damaged bytes), however the file was opened."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import h5vc
import h5vc.config as config
from h5vc.errors import ClosedError, CorruptDataError, VersionNotFoundError
from h5vc.hdf5 import clib
from h5vc.hdf5.filebytes import FileBytes
from h5vc.hdf5.header import checksum, checksum_python
from h5vc.store import planner, reading
from h5vc.wrappers import dataset as dataset_module


def test_lookup3_in_c_equals_python() -> None:
    compiled = clib.lookup3()
    assert compiled is not None  # h5py's HDF5 is loaded in every test process
    for size in (0, 1, 3, 11, 12, 13, 23, 24, 25, 100, 1000, 4099):
        data = os.urandom(size)
        assert compiled(data) == checksum_python(data) == checksum(data), size
    assert checksum(bytearray(b"abc")) == checksum_python(b"abc")
    # The published test value of lookup3's hashlittle.
    assert checksum(b"Four score and seven years ago") == 0x17770551


def test_loaded_hdf5_is_h5pys() -> None:
    path = clib.loaded_hdf5()
    assert path is not None and os.path.basename(path).startswith("libhdf5")
    assert os.path.isfile(path)


@pytest.mark.parametrize("size", [4, 1024 * 12 + 5])
def test_lookup3_any_length(size: int) -> None:
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    assert checksum(data) == checksum_python(data)


# First reads from the file's bytes ----------------------------------------------------

OPENERS = ["h5vc.open", "h5py.File"]


@pytest.fixture(autouse=True)
def _small_reads_as_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small selections are read as in use (this folder's conftest turns that off)."""
    monkeypatch.setattr(planner, "HDF5_READ_BYTES", config.HDF5_READ_BYTES)


@contextlib.contextmanager
def opened(path: Path, opener: str) -> Iterator[Any]:
    if opener == "h5vc.open":
        with h5vc.open(path, "r") as vf:
            yield vf
        return
    with h5py.File(path, "r") as file:
        vf = h5vc.VersionedHDF5File(file)
        try:
            yield vf
        finally:
            vf.close()


@pytest.fixture
def byte_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every first read served from the file's bytes is listed; any other read of a
    dataset never opened by HDF5 fails the test (so the bytes served it)."""
    served: list[str] = []
    real = dataset_module.first_read

    def counted(view: Any, dataset: Any, index: Any) -> Any:
        result = real(view, dataset, index)
        if result is not NotImplemented:
            served.append(repr(index))
        return result

    monkeypatch.setattr(dataset_module, "first_read", counted)
    return served


def _expected(path: Path, version: str, name: str) -> np.ndarray:
    with h5py.File(path, "r") as file:
        return np.asarray(file[f"_version_data/versions/{version}/{name}"][()])


def _tree(path: Path) -> None:
    """Versions of datasets of several dtypes, ranks and chunk shapes: small stores
    (extensible-array chunk indexes), a larger one (version-1 B-tree) and an
    appended table (one mapping block per rewritten chunk)."""
    rng = np.random.default_rng(5)
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("i8", data=np.arange(3, dtype="<i8"), chunks=(3,))
            g.create_dataset("u1", data=np.arange(10, dtype="u1"), chunks=(4,))
            g.create_dataset("f4", data=rng.random((7, 3), dtype="f4"), chunks=(2, 3))
            g.create_dataset(
                "i2", data=np.arange(60, dtype="i2").reshape(5, 4, 3), chunks=(2, 4, 3)
            )
            g.create_dataset("big", data=rng.random((5000, 4)), chunks=(256, 4))
            g.create_dataset("f2", data=np.arange(6, dtype="f2"), chunks=(6,))
            g.create_dataset("table", data=rng.random((100, 8)), chunks=(64, 8))
            g.create_group("sub").create_dataset("deep", data=np.arange(5.0), chunks=(5,))
        for k in range(2, 12):
            with vf.stage_version(f"v{k}") as g:
                g["i8"][k % 3] = -k
                table = g["table"]
                n = table.shape[0]
                table.resize((n + 50, 8))
                table[n:] = rng.random((50, 8))
                g["big"][k * 100 : k * 100 + 3] = k


SELECTIONS: list[Any] = [
    slice(None),
    0,
    -1,
    slice(1, 3),
    (slice(None), 0),
    Ellipsis,
    (slice(0, 2), slice(1, 3)),
    (-1, Ellipsis),
]


@pytest.mark.parametrize("listed", [16, 0], ids=["python", "numpy"])
@pytest.mark.parametrize("opener", OPENERS)
def test_first_reads_from_the_bytes_equal_h5pys_reads(
    tmp_path: Path, opener: str, listed: int, byte_reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reading, "_LISTED_BLOCKS", listed)
    path = tmp_path / "data.h5"
    _tree(path)
    names = ["i8", "u1", "f4", "i2", "big", "f2", "table", "sub/deep"]
    for version in ("v1", "v2", "v7", "v11"):
        expected = {name: _expected(path, version, name) for name in names}
        for selection in SELECTIONS:
            with opened(path, opener) as vf:
                group = vf[version]
                for name in names:
                    want = expected[name]
                    try:
                        numpy_result = want[selection]
                    except IndexError:
                        continue
                    got = group[name][selection]
                    assert np.asarray(got).dtype == want.dtype, (name, selection)
                    assert np.array_equal(got, numpy_result), (version, name, selection)
                    assert type(got) is type(numpy_result), (name, selection)
    assert len(byte_reads) > 100


@pytest.mark.parametrize("opener", OPENERS)
def test_many_first_reads_of_an_appended_table(tmp_path: Path, opener: str) -> None:
    path = tmp_path / "data.h5"
    _tree(path)
    want = _expected(path, "v11", "table")
    rng = np.random.default_rng(1)
    with opened(path, opener) as vf:
        table = vf["v11"]["table"]
        for _ in range(200):
            start = int(rng.integers(0, len(want)))
            stop = int(rng.integers(start + 1, len(want) + 1))
            assert np.array_equal(table[start:stop], want[start:stop])
        assert np.array_equal(table[-1000:], want[-1000:])
        assert table._opened is None  # HDF5 never opened it


def test_the_bytes_serve_first_reads_without_hdf5_opening_the_dataset(
    tmp_path: Path, byte_reads: list[str]
) -> None:
    path = tmp_path / "data.h5"
    _tree(path)
    with h5vc.open(path, "r") as vf:
        for name in ("i8", "big", "table", "sub/deep"):
            dataset = vf["v5"][name]
            dataset[:2]
            assert dataset._opened is None and dataset._loaded is None, name
    assert len(byte_reads) == 4


def _flip(path: Path, offset: int) -> Path:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    damaged = path.with_name("damaged.h5")
    damaged.write_bytes(bytes(data))
    return damaged


def _mapping_list(path: Path, name: str) -> tuple[int, int]:
    """(file offset, length) of the mapping list of ``name`` in version v1."""
    with h5py.File(path, "r") as file:
        fb = FileBytes.of(file)
        assert fb is not None
        address = h5py.h5o.get_info(file[f"_version_data/versions/v1/{name}"].id).addr
        blob = fb.mapping_list(fb.header(address))
        assert blob
        where = fb.map.find(blob)
        fb.close()
        return where, len(blob)


@pytest.mark.parametrize("opener", OPENERS)
def test_a_damaged_mapping_list_checksum_is_damage(tmp_path: Path, opener: str) -> None:
    path = tmp_path / "data.h5"
    _tree(path)
    where, length = _mapping_list(path, "i8")
    for offset in (where + length - 2, where + length - 10):  # the checksum, a coordinate
        damaged = _flip(path, offset)
        with opened(damaged, opener) as vf, pytest.raises(CorruptDataError):
            vf["v1"]["i8"][:]


@pytest.mark.parametrize("opener", OPENERS)
def test_a_damaged_chunk_index_block_is_damage(tmp_path: Path, opener: str) -> None:
    path = tmp_path / "data.h5"
    _tree(path)
    data = path.read_bytes()
    with h5py.File(path, "r") as file:
        chunk = file["_version_data/u1/raw_data"].id.get_chunk_info(0).byte_offset
    # The index block holding the first chunk's address: flip a byte of that address.
    address = chunk.to_bytes(8, "little")
    found = [
        at
        for at in range(len(data))
        if data[at : at + 8] == address and b"EAIB" in data[max(0, at - 64) : at]
    ]
    assert len(found) == 1
    damaged = _flip(path, found[0])
    with opened(damaged, opener) as vf, pytest.raises(CorruptDataError):
        vf["v1"]["u1"][:]


def _commit_in_another_process(path: Path, code: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("opener", OPENERS)
def test_a_file_changed_by_another_writer_is_read_fresh(
    tmp_path: Path, opener: str, byte_reads: list[str]
) -> None:
    path = tmp_path / "data.h5"
    _tree(path)
    # Read with h5py before: a handle of the file open in this process while another
    # writes it reads through HDF5's stale metadata (which h5vc never does).
    before = _expected(path, "v11", "i8").tolist()
    with opened(path, opener) as vf:
        assert vf["v11"]["i8"][:].tolist() == before
        kept = vf["v11"]["i8"]
        _commit_in_another_process(
            path,
            f"""
            import h5vc
            with h5vc.open({str(path)!r}, "a") as vf:
                h5vc.delete_versions(vf, ["v2", "v3", "v4", "v5", "v6", "v7"])
                for k in range(12, 20):
                    with vf.stage_version(f"v{{k}}") as g:
                        g["i8"][:] = [k, k + 1, k + 2]
                        g["u1"][:] = k
            """,
        )
        for k in range(12, 20):
            assert vf[f"v{k}"]["i8"][:].tolist() == [k, k + 1, k + 2]
            assert vf[f"v{k}"]["u1"][:].tolist() == [k] * 10
        assert kept[:].tolist() == before
        with pytest.raises(VersionNotFoundError):
            vf["v5"]["i8"][:]
    assert len(byte_reads) >= 17


def test_h5vc_open_reads_through_the_one_handle_it_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from h5vc import remote

    path = tmp_path / "data.h5"
    _tree(path)
    opens: list[str] = []
    real = remote.open_private

    def counted(where: str, *args: Any) -> Any:
        opens.append(where)
        return real(where, *args)

    monkeypatch.setattr(remote, "open_private", counted)
    with h5vc.open(path, "r") as vf:
        assert vf["v11"]["i8"][:].tolist() == [-9, -10, -11]
        assert vf["v3"]["big"][300:303].tolist() == [[3.0] * 4] * 3
    assert len(opens) == 1


@pytest.mark.parametrize("opener", OPENERS)
def test_a_file_changed_between_opening_and_the_first_read_is_read_fresh(
    tmp_path: Path, opener: str
) -> None:
    path = tmp_path / "data.h5"
    _tree(path)
    with opened(path, opener) as vf:
        _commit_in_another_process(
            path,
            f"""
            import h5vc
            with h5vc.open({str(path)!r}, "a") as vf:
                h5vc.delete_versions(vf, ["v2", "v3", "v4"])
                with vf.stage_version("v12") as g:
                    g["i8"][:] = [1, 2, 3]
            """,
        )
        assert vf["v12"]["i8"][:].tolist() == [1, 2, 3]
        assert vf["v11"]["i8"][:].tolist() == [-9, -10, -11]
        with pytest.raises(VersionNotFoundError):
            vf["v3"]["i8"][:]


@pytest.mark.parametrize("listed", [16, 0], ids=["python", "numpy"])
@pytest.mark.parametrize("opener", OPENERS)
def test_first_reads_of_a_table_of_many_mappings(
    tmp_path: Path, opener: str, listed: int, byte_reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appends rewrite the last chunk each time: the newest version maps one block per
    chunk rewritten, looked at one by one (a few) or at once with numpy (many)."""
    monkeypatch.setattr(reading, "_LISTED_BLOCKS", listed)
    path = tmp_path / "data.h5"
    rows = np.arange(400 * 3, dtype=np.int32).reshape(400, 3)
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v0") as g:
            g.create_dataset("t", data=rows[:10], chunks=(8, 3))
        for k in range(1, 40):
            with vf.stage_version(f"v{k}") as g:
                g["t"].resize((10 * (k + 1), 3))
                g["t"][10 * k :] = rows[10 * k : 10 * (k + 1)]
    with h5py.File(path, "r") as file:
        mappings = file["_version_data/versions/v39/t"].virtual_sources()
        # Runs of chunks merged: a virtual block read from several source blocks.
        assert any(m.src_space.get_select_hyper_nblocks() > 1 for m in mappings)
    rng = np.random.default_rng(3)
    with opened(path, opener) as vf:
        table = vf["v39"]["t"]
        for _ in range(100):
            start = int(rng.integers(0, 400))
            stop = int(rng.integers(start + 1, 401))
            assert np.array_equal(table[start:stop], rows[start:stop])
            assert np.array_equal(table[start], rows[start])
            assert np.array_equal(table[start:stop, 1:], rows[start:stop, 1:])
        assert np.array_equal(vf["v20"]["t"][-25:], rows[185:210])
        assert table._loaded is None and table._opened is None
    assert len(byte_reads) >= 301


@pytest.mark.filterwarnings("ignore::h5vc.errors.UnjournaledFileWarning")  # a group root
def test_a_tree_copied_with_h5py_reads_its_own_chunks(tmp_path: Path) -> None:
    """A versioned tree copied within the file keeps the original's source names: the
    copy is read from its own chunk stores, not the original's (as before)."""
    path = tmp_path / "data.h5"
    with h5py.File(path, "w") as file:
        vf = h5vc.VersionedHDF5File(file.create_group("a"))
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(6), chunks=(3,))
        vf.close()
    with h5py.File(path, "r+") as file:
        file.copy("a", "b")
        file["a/_version_data/x/raw_data"][:] = -1  # the original's chunks change
    with h5py.File(path, "r") as file:
        vf = h5vc.VersionedHDF5File(file["b"])
        assert vf["v1"]["x"][:].tolist() == [0, 1, 2, 3, 4, 5]
        assert vf["v1"]["x"][2] == 2
        vf.close()


# Merged runs, chunk indexes and reads without the lock --------------------------------


def _edited(path: Path) -> None:
    """h5vc's layout after small edits: mappings of several blocks a side (merged
    runs), a one-dimensional store of many chunks and a table of whole-row chunks."""
    rng = np.random.default_rng(11)
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=rng.random(20_000), chunks=(64,), maxshape=(None,))
            g.create_dataset("y", data=rng.random((300, 4)), chunks=(16, 4))
            g.create_dataset("z", data=rng.random((20, 12)), chunks=(1, 3))
            g.create_dataset("w", data=rng.random((1, 60)), chunks=(1, 4))
        for k in range(1, 31):
            with vf.stage_version(f"v{k}") as g:
                start = int(rng.integers(0, 19_800))
                g["x"][start : start + int(rng.integers(5, 150))] = -k
                row = int(rng.integers(0, 290))
                g["y"][row : row + int(rng.integers(1, 10))] = k
                if k % 3 == 0:
                    g["z"][k % 20, int(rng.integers(0, 12))] = k
                    g["w"][0, k] = k


def _several_blocks_a_mapping(path: Path, version: str, name: str) -> bool:
    from h5vc.hdf5.mappings import decode_mappings

    with h5py.File(path, "r") as file:
        fb = FileBytes.of(file)
        assert fb is not None
        dataset = file[f"_version_data/versions/{version}/{name}"]
        blob = fb.mapping_list(fb.header(h5py.h5o.get_info(dataset.id).addr))
        assert blob
        found = decode_mappings(blob, dataset.ndim, fb.sizeof_size)
        fb.close()
    return bool((found.counts > 1).any() or (found.source_counts > 1).any())


@pytest.mark.parametrize("listed", [16, 0], ids=["python", "numpy"])
@pytest.mark.parametrize("opener", OPENERS)
def test_merged_runs_are_read_from_the_bytes(
    tmp_path: Path, opener: str, listed: int, byte_reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reading, "_LISTED_BLOCKS", listed)
    path = tmp_path / "data.h5"
    _edited(path)
    assert _several_blocks_a_mapping(path, "v30", "x")
    rng = np.random.default_rng(3)
    reads = 0
    for version in ("v1", "v15", "v30"):
        want_x = _expected(path, version, "x")
        want_y = _expected(path, version, "y")
        selections_x: list[Any] = [0, -1, 19_999, slice(None, 10), slice(-7, None)]
        for _ in range(40):
            start = int(rng.integers(0, 20_000))
            selections_x.append(slice(start, start + int(rng.integers(1, 700))))
        want_z = _expected(path, version, "z")
        selections_y: list[Any] = [0, -1, slice(3, 40), (slice(10, 20), 2), (-1, slice(1, 3))]
        selections_z: list[Any] = [
            (slice(None), slice(None)),
            0,
            (-1, -1),
            (slice(3, 9), slice(2, 8)),
            (slice(None, None), 5),
            (slice(17, 20), slice(10, 12)),
        ]
        want_w = _expected(path, version, "w")
        selections_w: list[Any] = [(0, slice(5, 40)), (slice(None), slice(30, 33)), (0, -1)]
        with opened(path, opener) as vf:
            w = vf[version]["w"]
            for selection in selections_w:
                assert np.array_equal(w[selection], want_w[selection]), (version, selection)
            x, y, z = vf[version]["x"], vf[version]["y"], vf[version]["z"]
            for selection in selections_x:
                assert np.array_equal(x[selection], want_x[selection]), (version, selection)
            for selection in selections_y:
                assert np.array_equal(y[selection], want_y[selection]), (version, selection)
            for selection in selections_z:
                assert np.array_equal(z[selection], want_z[selection]), (version, selection)
        reads += len(selections_x) + len(selections_y) + len(selections_z) + len(selections_w)
    assert len(byte_reads) == reads  # every one from the bytes, none by HDF5


def test_chunk_addresses_from_the_index_equal_hdf5s(tmp_path: Path) -> None:
    """Both kinds of chunk index read here (a version-1 B-tree of several levels,
    searched node by node, and extensible arrays) give HDF5's chunk addresses."""
    from h5vc.hdf5.chunkbytes import ChunkLocator

    path = tmp_path / "data.h5"
    _edited(path)
    _tree(tmp_path / "tree.h5")
    checked = set()
    nodes = 0
    for name in (path, tmp_path / "tree.h5"):
        with h5py.File(name, "r") as file:
            fb = FileBytes.of(file)
            assert fb is not None
            for store in file["_version_data"].values():
                if not isinstance(store, h5py.Group) or "raw_data" not in store:
                    continue
                raw = store["raw_data"]
                header = fb.header(h5py.h5o.get_info(raw.id).addr, whole=True)
                at, length = header.messages[8]  # the layout message
                locator = ChunkLocator(fb, fb.map[at : at + length], raw.name, str(name))
                c0 = raw.chunks[0]
                for slot in range(raw.shape[0] // c0):
                    info = raw.id.get_chunk_info_by_coord((slot * c0,) + (0,) * (raw.ndim - 1))
                    assert locator.address(slot) == info.byte_offset, (raw.name, slot)
                checked.add(locator.layout_version)
                if locator.layout_version == 3:
                    nodes = max(nodes, len(locator._nodes))
            fb.close()
    assert checked == {3, 4}
    assert nodes > 2  # a tree of several levels


def _settled(path: Path) -> None:
    """Wait until the file's times are older than the read lock's clock tick (a
    stamp it trusts to tell a later write)."""
    import time

    while True:
        info = os.stat(path)
        age = time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns)
        if age > 60_000_000:
            return
        time.sleep((60_000_000 - age) / 1e9 + 0.001)


@pytest.fixture
def quick_reads(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each read tried without the lock: True if it was served that way."""
    served: list[bool] = []
    real = dataset_module.CommittedDataset._quick_read

    def counted(self: Any, quick: Any, index: Any) -> Any:
        result = real(self, quick, index)
        served.append(result is not NotImplemented)
        return result

    monkeypatch.setattr(dataset_module.CommittedDataset, "_quick_read", counted)
    return served


@pytest.mark.parametrize("opener", OPENERS)
def test_reads_without_the_lock_stop_at_another_writers_change(
    tmp_path: Path, opener: str, quick_reads: list[bool]
) -> None:
    path = tmp_path / "data.h5"
    _edited(path)
    before = _expected(path, "v30", "x")
    _settled(path)
    with opened(path, opener) as vf:
        kept, gone = vf["v30"]["x"], vf["v5"]["x"]
        assert np.array_equal(kept[100:300], before[100:300])  # under the lock
        assert np.array_equal(kept[5000:5100], before[5000:5100])
        assert gone[7] == _expected(path, "v5", "x")[7]
        assert gone[8] == _expected(path, "v5", "x")[8]
        assert quick_reads == [True, True]
        _commit_in_another_process(
            path,
            f"""
            import h5vc
            with h5vc.open({str(path)!r}, "a") as vf:
                h5vc.delete_versions(vf, [f"v{{k}}" for k in range(1, 29)])
                for k in range(31, 40):
                    with vf.stage_version(f"v{{k}}") as g:
                        g["x"][:] = k
            """,
        )
        assert np.array_equal(kept[100:300], before[100:300])
        with pytest.raises(VersionNotFoundError):
            gone[7]
        assert quick_reads[2:] == [False, False]
        assert vf["v39"]["x"][:50].tolist() == [39.0] * 50
        _settled(path)
        again = vf["v39"]["x"]
        assert again[:5].tolist() == again[5:10].tolist() == [39.0] * 5
        assert quick_reads[-1]  # the second read took no lock
    with pytest.raises(ClosedError):
        again[:5]  # a read without the lock finds the file closed too
    with pytest.raises(ClosedError):
        vf["v39"]


@pytest.mark.parametrize("opener", OPENERS)
def test_a_read_without_the_lock_that_meets_a_write_is_made_again(
    tmp_path: Path, opener: str, quick_reads: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write between the copy of the bytes and the look at the stamp: the copy is
    dropped (here, bytes of another version stand for what it may hold)."""
    path = tmp_path / "data.h5"
    _edited(path)
    want = _expected(path, "v30", "x")
    _settled(path)
    real = dataset_module.first_read
    meddle = [False]

    def written_meanwhile(view: Any, dataset: Any, index: Any) -> Any:
        result = real(view, dataset, index)
        if meddle[0]:
            meddle[0] = False
            os.utime(path)  # as a writer's first write moves the times
            return np.full_like(result, -1.0)
        return result

    monkeypatch.setattr(dataset_module, "first_read", written_meanwhile)
    with opened(path, opener) as vf:
        x = vf["v30"]["x"]
        assert np.array_equal(x[10:20], want[10:20])
        meddle[0] = True
        assert np.array_equal(x[10:20], want[10:20])
        assert quick_reads == [False]
        assert not meddle[0]


@pytest.mark.parametrize("opener", OPENERS)
def test_version_lookups_without_the_lock_stop_at_another_writers_change(
    tmp_path: Path, opener: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "data.h5"
    _edited(path)
    _settled(path)
    locked: list[str] = []
    real = h5vc.VersionedHDF5File._lookup

    def counted(self: Any, key: Any) -> Any:
        locked.append(key)
        return real(self, key)

    monkeypatch.setattr(h5vc.VersionedHDF5File, "_lookup", counted)
    with opened(path, opener) as vf:
        first = vf["v5"]
        assert vf["v5"] is first and vf["v5"] is first
        assert locked == ["v5"]  # the later lookups took no lock
        _commit_in_another_process(
            path,
            f"""
            import h5vc
            with h5vc.open({str(path)!r}, "a") as vf:
                h5vc.delete_versions(vf, ["v5"])
                with vf.stage_version("v31") as g:
                    g["x"][:3] = 31
            """,
        )
        with pytest.raises(VersionNotFoundError):
            vf["v5"]
        assert vf["v31"]["x"][:3].tolist() == [31.0] * 3
        assert locked == ["v5", "v5", "v31"]


def _with_fill(path: Path) -> None:
    """Datasets whose chunks of the fill value are left unmapped (h5vc's layout)."""
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v0") as g:
            g.create_dataset("zeros", data=np.zeros(5000), chunks=(100,))
            g.create_dataset("minus", shape=(3000,), dtype="i4", chunks=(64,), fillvalue=-7)
            g.create_dataset("table", data=np.zeros((400, 3), "f4"), chunks=(16, 3))
            g.create_dataset("tiles", data=np.zeros((40, 40)), chunks=(10, 10))
        for k in range(1, 6):
            with vf.stage_version(f"v{k}") as g:
                g["zeros"][k * 700 : k * 700 + 150] = k
                g["minus"][k * 400 : k * 400 + 10] = k
                g["table"][k * 50 : k * 50 + 20] = k
                g["tiles"][k * 5, k * 3] = k
                g["tiles"][k * 5, 35] = -k  # two tiles of one band of rows


@pytest.mark.parametrize("opener", OPENERS)
def test_elements_no_mapping_covers_read_as_the_fill_value(
    tmp_path: Path, opener: str, byte_reads: list[str]
) -> None:
    path = tmp_path / "data.h5"
    _with_fill(path)
    rng = np.random.default_rng(2)
    served = {}
    for version in ("v1", "v5"):
        with opened(path, opener) as vf:
            for name, size in (("zeros", 5000), ("minus", 3000), ("table", 400), ("tiles", 40)):
                want = _expected(path, version, name)
                dataset = vf[version][name]
                before = len(byte_reads)
                selections: list[Any] = [0, -1, slice(None, 30), slice(size - 5, None)]
                for _ in range(25):
                    start = int(rng.integers(0, size))
                    selections.append(slice(start, start + int(rng.integers(1, 400))))
                for selection in selections:
                    assert np.array_equal(dataset[selection], want[selection]), (name, selection)
                served[name] = len(byte_reads) - before
    assert _expected(path, "v5", "minus")[0] == -7
    # One dimension and whole rows: every read from the bytes, the fill included.
    assert served["zeros"] == served["minus"] == served["table"] == 29
    assert served["tiles"] == 0  # blocks side by side: HDF5 fills them


def test_the_fill_value_of_a_fill_value_message() -> None:
    from h5vc.hdf5.header import fill_value

    value = np.float64(-1.5).tobytes()
    assert fill_value(bytes([2, 2, 2, 1]) + (8).to_bytes(4, "little") + value) == value
    assert fill_value(bytes([2, 2, 2, 0])) == b""  # none defined: zeros
    assert fill_value(bytes([3, 0x20 | 0x02]) + (8).to_bytes(4, "little") + value) == value
    assert fill_value(bytes([3, 0x02])) == b""
    assert fill_value(bytes([3, 0x10])) is None  # undefined: left to HDF5
    assert fill_value(bytes([3, 0x20]) + (9).to_bytes(4, "little") + value) is None  # cut
    assert fill_value(bytes([7, 0])) is None


def test_a_read_without_the_lock_finds_the_callers_file_closed(
    tmp_path: Path, quick_reads: list[bool]
) -> None:
    path = tmp_path / "data.h5"
    _edited(path)
    _settled(path)
    file = h5py.File(path, "r")
    vf = h5vc.VersionedHDF5File(file)
    x = vf["v30"]["x"]
    assert x[:5].tolist() == x[:5].tolist()
    assert quick_reads == [True]  # the first under the lock, the second without
    file.close()  # the caller's file, not the VersionedHDF5File
    with pytest.raises(ClosedError):
        x[:5]
