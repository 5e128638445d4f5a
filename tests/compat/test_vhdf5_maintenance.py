"""Maintenance of files shared with versioned-hdf5: hash tables rebuilt as its
``rebuild_object_dtype_hashtables`` rebuilds them, files its runs on older h5py
wrote, and branches or tags left dangling by its ``delete_versions``."""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import versioned_hdf5
from click.testing import CliRunner

import h5vc
from h5vc.cli import cli

STRINGS = np.array(["ab", "c", "a", "bc", "zz"], dtype=object)


def write_strings(path: Path, lib=versioned_hdf5, **options) -> None:
    """v1: strings ``s`` (chunks of 2) and numbers ``x``; v2: ``s[4]`` changed."""
    with h5py.File(path, "w") as f:
        vf = lib.VersionedHDF5File(f, **options)
        with vf.stage_version("v1") as g:
            g.create_dataset("s", data=STRINGS, dtype=h5py.string_dtype(), chunks=(2,))
            g.create_dataset("x", data=np.arange(7), chunks=(3,))
        with vf.stage_version("v2") as g:
            g["s"][4] = "q"


def spoil(path: Path, store: str) -> np.ndarray:
    """Overwrite every digest of ``store``'s hash table; return the table as it was."""
    with h5py.File(path, "r+") as f:
        table = f[f"_version_data/{store}/hash_table"]
        rows = table[()]
        spoiled = rows.copy()
        spoiled["hash"][:] = 7
        table[...] = spoiled
    return rows


def table_rows(path: Path, store: str) -> np.ndarray:
    with h5py.File(path, "r") as f:
        table = f[f"_version_data/{store}/hash_table"]
        return table[: int(table.attrs["largest_index"])]


def raw_rows(path: Path, store: str) -> int:
    with h5py.File(path, "r") as f:
        return f[f"_version_data/{store}/raw_data"].shape[0]


def test_rebuilt_string_hash_tables_equal_versioned_hdf5s(tmp_path) -> None:
    """Both libraries rebuild the same string hash table, and leave the others alone;
    afterwards an equal string chunk is stored once again."""
    vh_path, path = tmp_path / "vh.h5", tmp_path / "h5vc.h5"
    write_strings(vh_path)
    good = spoil(vh_path, "s")
    numbers = spoil(vh_path, "x")
    shutil.copyfile(vh_path, path)
    with h5py.File(vh_path, "r+") as f:
        versioned_hdf5.VersionedHDF5File(f).rebuild_object_dtype_hashtables()
    with h5vc.open(str(path), "r+") as vf:
        rebuilt = vf.rebuild_object_dtype_hashtables()
        assert (rebuilt.stores, rebuilt.chunks, rebuilt.wrong_rows) == (["s"], 4, 4)
    np.testing.assert_array_equal(table_rows(path, "s"), table_rows(vh_path, "s"))
    np.testing.assert_array_equal(table_rows(path, "s"), good[: len(table_rows(path, "s"))])
    assert not np.array_equal(table_rows(path, "x"), numbers[: len(table_rows(path, "x"))])
    stored = raw_rows(path, "s")
    with h5vc.open(str(path), "r+") as vf:
        with vf.stage_version("v3") as g:
            g["s"][4] = "zz"  # v1's last chunk again
        assert list(vf["v3"]["s"].asstr()[()]) == list(STRINGS)
        report = h5vc.verify(vf)  # x's table is still spoiled, s's is sound
        assert report.problems and {p.datasets for p in report.problems} == {("x",)}
    assert raw_rows(path, "s") == stored


@pytest.mark.parametrize("data_version", [1001, 4])
def test_rebuild_hash_tables_of_h5vc_files(tmp_path, data_version) -> None:
    """In either layout: the spoiled tables are rewritten from the chunks, a sound
    table is rewritten unchanged, and equal chunks are shared again afterwards."""
    path = tmp_path / "data.h5"
    write_strings(path, h5vc, data_version=data_version)
    good = {store: spoil(path, store) for store in ("s", "x")}
    with h5vc.open(str(path), "r+") as vf:
        assert not h5vc.verify(vf).ok
        assert vf.rebuild_object_dtype_hashtables().stores == ["s"]
        rebuilt = vf.rebuild_hashtables()
        assert (sorted(rebuilt.stores), rebuilt.wrong_rows) == (["s", "x"], 3)
        assert h5vc.verify(vf).ok
    for store, rows in good.items():
        np.testing.assert_array_equal(table_rows(path, store), rows[: len(table_rows(path, store))])
    stored = raw_rows(path, "x")
    with h5vc.open(str(path), "r+") as vf, vf.stage_version("v3") as g:
        g["x"][:3] = [9, 9, 9]
        g["x"][:3] = [0, 1, 2]  # the first chunk as stored in v1
    assert raw_rows(path, "x") == stored


def test_rebuild_is_refused_read_only_and_while_staging(tmp_path) -> None:
    path = tmp_path / "data.h5"
    write_strings(path, h5vc)
    spoil(path, "s")
    with h5vc.open(str(path), "r") as vf, pytest.raises(h5vc.ReadOnlyError, match="read-only"):
        vf.rebuild_object_dtype_hashtables()
    with (
        h5vc.open(str(path), "r+") as vf,
        vf.stage_version("v3"),
        pytest.raises(ValueError, match="being staged"),
    ):
        vf.rebuild_hashtables()
    with h5py.File(path, "r") as f:
        assert (f["_version_data/s/hash_table"]["hash"] == 7).all()  # not rebuilt


def test_plain_empty_datasets_in_an_old_layout_open_for_writing(copy_reference) -> None:
    """versioned-hdf5 on h5py before 3.14 wrote datasets mapping no chunk as plain
    datasets; in a file of its layout before data_version 4, opening it for writing
    rebuilds the hash tables, which reads every version's chunk map."""
    path, expected = copy_reference("plain_empty.h5")
    with h5py.File(path, "r+") as f:
        f["_version_data/versions"].attrs["data_version"] = np.int64(3)
        assert not f["_version_data/versions/v1/e"].is_virtual
    with h5vc.open(path, "r+") as vf:
        assert vf.data_version == 4
        for name in ("v1", "v2", "v3"):
            for dataset in ("e", "sp", "x"):
                np.testing.assert_array_equal(vf[name][dataset][()], expected[name][dataset])
        assert vf["v1"]["sp"].fillvalue == 3
        assert h5vc.verify(vf).ok
        h5vc.delete_versions(vf, ["v2"])
        h5vc.modify_metadata(vf, "sp", chunks=(2,))
        np.testing.assert_array_equal(vf["v1"]["sp"][()], expected["v1"]["sp"])
    with h5py.File(path, "r") as f:
        vf = versioned_hdf5.VersionedHDF5File(f)
        np.testing.assert_array_equal(vf["v3"]["e"][()], expected["v3"]["e"])
        np.testing.assert_array_equal(vf["v1"]["sp"][()], expected["v1"]["sp"])


def test_verify_reports_refs_to_versions_versioned_hdf5_deleted(tmp_path) -> None:
    path = tmp_path / "data.h5"
    with h5vc.open(str(path), "w", data_version=4) as vf:
        for i in range(3):
            with vf.stage_version(f"v{i}") as g:
                if i == 0:
                    g.create_dataset("x", data=np.arange(10), chunks=(4,))
                else:
                    g["x"][i] = 100
        vf.create_tag("release", "v1")
        vf.create_branch("side", "v1")
        vf.create_branch("main")
        assert h5vc.verify(vf).ok
    with h5py.File(path, "r+") as f:
        versioned_hdf5.delete_versions(f, ["v1"])
    with h5vc.open(str(path)) as vf:
        with pytest.raises(h5vc.VersionNotFoundError):
            vf["release"]
        report = h5vc.verify(vf)
    assert not report.ok
    found = sorted((p.kind, p.object) for p in report.problems)
    assert found == [("ref", "branch 'side'"), ("ref", "tag 'release'")]
    assert all("'v1'" in p.message for p in report.problems)
    result = CliRunner().invoke(cli, ["verify", str(path)], catch_exceptions=False)
    assert result.exit_code == 1
    assert "ref: tag 'release': points at version 'v1'" in result.output
    assert "ref: branch 'side': points at version 'v1'" in result.output
