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
from h5vc.errors import CorruptDataError, VersionNotFoundError
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
