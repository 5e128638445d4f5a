"""Opening a committed dataset defers HDF5's open of it (and the checks of its
mappings) to the first read, and small datasets are read without a chunk map: the
first read still gives the data of the version it names, as the file is then, or the
documented error."""

from __future__ import annotations

import contextlib
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
from h5vc.errors import VersionNotFoundError
from h5vc.store import planner
from h5vc.wrappers import dataset as dataset_module

OPENERS = ["h5vc.open", "h5py.File"]


@contextlib.contextmanager
def opened(path: Path, opener: str, mode: str = "r") -> Iterator[Any]:
    if opener == "h5vc.open":
        with h5vc.open(path, mode) as vf:
            yield vf
        return
    with h5py.File(path, mode) as file:
        vf = h5vc.VersionedHDF5File(file)
        try:
            yield vf
        finally:
            vf.close()


def _commits(path: Path, first: int, last: int, size: int, chunks: int) -> None:
    """Versions v<first>..v<last>: ``x`` (every element k) and ``tiny`` ([k, k, k])."""
    with h5vc.open(path, "a") as vf:
        for k in range(first, last + 1):
            with vf.stage_version(f"v{k}") as g:
                if "x" in g:
                    g["x"][:] = k
                    g["tiny"][:] = k
                else:
                    g.create_dataset("x", data=np.full(size, k), chunks=(chunks,))
                    g.create_dataset("tiny", data=np.full(3, k))
                g["x"].attrs["k"] = k


def _in_another_process(code: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.usefixtures("hdf5_reads_small_selections")
@pytest.mark.parametrize("opener", OPENERS)
def test_datasets_opened_before_another_process_deletes_and_commits_read_as_then(
    tmp_path: Path, opener: str
) -> None:
    """Datasets opened (not read) before another process deleted their version, or
    deleted others and committed more reusing the freed space, read the file as it is
    at their first read: their version's data, or VersionNotFoundError."""
    path = tmp_path / "data.h5"
    _commits(path, 1, 6, size=5000, chunks=100)
    with opened(path, opener) as vf:
        gone = {name: vf["v5"][name] for name in ("x", "tiny")}
        kept = {name: vf["v6"][name] for name in ("x", "tiny")}
        _in_another_process(
            f"""
            import h5vc
            with h5vc.open({str(path)!r}, "a") as vf:
                h5vc.delete_versions(vf, ["v2", "v3", "v4", "v5"])
                for k in range(7, 12):
                    with vf.stage_version(f"v{{k}}") as g:
                        g["x"][:] = k
                        g["tiny"][:] = k
            """
        )
        for dataset in gone.values():
            with pytest.raises(VersionNotFoundError, match="'v5' was deleted"):
                dataset[:]
        assert np.array_equal(kept["x"][:], np.full(5000, 6))
        assert np.array_equal(kept["tiny"][:], np.full(3, 6))
        assert kept["x"].attrs["k"] == 6
        assert kept["x"].shape == (5000,)
        assert np.array_equal(vf["v11"]["tiny"][:], np.full(3, 11))


@pytest.mark.parametrize("opener", OPENERS)
def test_a_dataset_opened_is_opened_by_hdf5_on_its_first_read_only(
    tmp_path: Path, opener: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "data.h5"
    _commits(path, 1, 2, size=1000, chunks=100)
    opens: list[str] = []
    real = dataset_module.open_member

    def counted(state: Any, version: str, path: str, parent: Any, **options: Any) -> Any:
        opens.append(path)
        return real(state, version, path, parent, **options)

    monkeypatch.setattr(dataset_module, "open_member", counted)
    with opened(path, opener) as vf:
        x = vf["v2"]["x"]
        assert opens == []
        assert x[5] == 2
        assert x[:3].tolist() == [2, 2, 2]
        assert x.shape == (1000,)
        assert opens == ["x"]


@pytest.fixture
def hdf5_reads_small_selections(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small selections read by HDF5, as in use (this directory's conftest sends every
    read to positioned reads)."""
    monkeypatch.setattr(planner, "HDF5_READ_BYTES", config.HDF5_READ_BYTES)


@pytest.mark.usefixtures("hdf5_reads_small_selections")
@pytest.mark.parametrize("opener", OPENERS)
def test_small_datasets_read_without_a_chunk_map_as_numpy_reads(
    tmp_path: Path, opener: str
) -> None:
    """Basic selections of a small dataset are read by HDF5 before (and without) its
    chunk map; other indices through the chunk map; both as numpy gives them."""
    path = tmp_path / "data.h5"
    data = np.arange(24, dtype=np.int64).reshape(4, 6)
    with h5vc.open(path, "w") as vf, vf.stage_version("v1") as g:
        g.create_dataset("small", data=data)
    indices: list[Any] = [
        (),
        Ellipsis,
        slice(None),
        1,
        -1,
        (2, 3),
        (-4, -6),
        (slice(1, 3), slice(2, 5)),
        (Ellipsis, 2),
        (1, Ellipsis),
        (slice(None), slice(4, 100)),
        (slice(None, None, 2), 1),
        [0, 2],
        np.int64(1),
    ]
    with opened(path, opener) as vf:
        for index in indices:
            small = vf["v1"]["small"]
            got = small[index]
            expected = data[index]
            assert np.array_equal(got, expected), index
            assert np.shape(got) == np.shape(expected), index
            assert (
                small._loaded is None
                or isinstance(index, list | np.integer)
                or (
                    isinstance(index, tuple) and any(isinstance(i, slice) and i.step for i in index)
                )
            ), index
        for index in [4, (0, 6), (-5, 0)]:
            with pytest.raises(IndexError):
                vf["v1"]["small"][index]


@pytest.mark.usefixtures("hdf5_reads_small_selections")
def test_a_dataset_mapping_past_its_store_is_reported_as_damage(tmp_path: Path) -> None:
    """Small reads check the mappings against the store as the chunk map does."""
    path = tmp_path / "data.h5"
    with h5vc.open(path, "w") as vf, vf.stage_version("v1") as g:
        g.create_dataset("small", data=np.arange(3))
    with h5py.File(path, "r+") as file:
        file["_version_data/small/raw_data"].resize((0,))
    with h5vc.open(path, "r") as vf, pytest.raises(h5vc.CorruptDataError, match="raw_data"):
        vf["v1"]["small"][:]


def _mapping_list(path: Path, group: str, name: str) -> bytes:
    """The stored mapping list (global heap object) of virtual dataset group/name."""
    from h5vc.hdf5.header import LAYOUT, stored_messages
    from h5vc.hdf5.mappings import _heap_object

    with h5py.File(path, "r") as f:
        stored = stored_messages(f[group], name, frozenset((LAYOUT,)))
        assert stored is not None
        blob = _heap_object(
            stored.reader, stored.messages[LAYOUT], stored.sizeof_addr, stored.sizeof_size
        )
        assert blob is not None
        return blob


def test_the_checksum_of_mapping_lists_is_hdf5_s(tmp_path: Path) -> None:
    """h5vc computes HDF5's checksum (lookup3) of a mapping list: it agrees with the
    one HDF5 stored, for lists of one and of several mappings of any length."""
    from h5vc.hdf5.mappings import checksum, stored_virtual

    path = tmp_path / "data.h5"
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            for length in (1, 3, 11, 12, 13, 40):
                g.create_dataset(f"a{length}", data=np.arange(1, length + 1), chunks=(4,))
        with vf.stage_version("v2") as g:
            g["a40"][5] = -1
    for version in ("v1", "v2"):
        group = f"/_version_data/versions/{version}"
        with h5py.File(path, "r") as f:
            names = list(f[group])
        for name in names:
            blob = _mapping_list(path, group, name)
            assert checksum(blob[:-4]) == int.from_bytes(blob[-4:], "little"), name
            with h5py.File(path, "r") as f:
                stored = stored_virtual(f[group], name)
            assert stored is not None and stored.checksum_verified, name
    assert checksum(b"") == 0xDEADBEEF
    assert checksum(b"Four score and seven years ago") == 0x17770551  # lookup3's own test


@pytest.mark.usefixtures("hdf5_reads_small_selections")
@pytest.mark.parametrize("opener", OPENERS)
def test_a_damaged_coordinate_of_a_small_dataset_is_damage_not_other_data(
    tmp_path: Path, opener: str
) -> None:
    """A flipped byte in the source coordinates of a one-mapping list still decodes;
    its checksum tells (as HDF5's open would): the read raises CorruptDataError
    instead of returning the other slot's data."""
    path = tmp_path / "data.h5"
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("small", data=np.arange(4), chunks=(4,))
        with vf.stage_version("v2") as g:
            g["small"][:] = 7
    blob = _mapping_list(path, "/_version_data/versions/v2", "small")
    data = path.read_bytes()
    at = data.find(blob)
    assert at > 0 and data.find(blob, at + 1) < 0
    # The source selection's start coordinate on axis 0 (slot 1: row 4): make it row
    # 0, slot 0, which holds v1's data.
    source_start = blob.find((4).to_bytes(4, "little") + (7).to_bytes(4, "little"))
    assert source_start > 0
    damaged = bytearray(data)
    damaged[at + source_start] = 0
    damaged[at + source_start + 4] = 3
    path.write_bytes(bytes(damaged))
    with opened(path, opener) as vf:
        assert vf["v1"]["small"][:].tolist() == [0, 1, 2, 3]
        with pytest.raises(h5vc.CorruptDataError):
            vf["v2"]["small"][:]


@pytest.mark.usefixtures("hdf5_reads_small_selections")
@pytest.mark.parametrize("opener", OPENERS)
def test_the_first_read_of_a_table_of_many_mappings_needs_no_chunk_map(
    tmp_path: Path, opener: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table grown by appends maps one block per rewritten chunk: its small reads
    (the newest rows, on a fresh open) are served from the file's bytes (a file
    opened read-only), without a chunk map; a large read makes the chunk map; all
    give the rows appended."""
    monkeypatch.setattr(planner, "HDF5_READ_BLOCKS", 2)
    path = tmp_path / "data.h5"
    rows = np.arange(70 * 3, dtype=np.float64).reshape(70, 3)
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v0") as g:
            g.create_dataset("t", data=rows[:10], chunks=(8, 3))
        for k in range(1, 7):
            with vf.stage_version(f"v{k}") as g:
                g["t"].resize((10 * (k + 1), 3))
                g["t"][10 * k :] = rows[10 * k : 10 * (k + 1)]
    with opened(path, opener) as vf:
        table = vf["v6"]["t"]
        assert np.array_equal(table[-15:], rows[-15:])
        assert table._loaded is None  # no chunk map made
        assert np.array_equal(table[-15:-3], rows[-15:-3])
        assert table._loaded is None
        assert np.array_equal(table[[0, 5, 69]], rows[[0, 5, 69]])
        assert table._loaded is not None  # a fancy index made it
        assert np.array_equal(table[:], rows)
        assert np.array_equal(vf["v3"]["t"][5:], rows[5:40])
