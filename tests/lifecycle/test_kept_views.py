"""Objects of committed versions kept across operations that move chunks and rebuild
virtual datasets read what their version holds afterwards, or fail clearly when their
version was deleted; they never read other data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import h5vc
from h5vc import VersionNotFoundError, delete_versions, modify_metadata
from h5vc.errors import ClosedError
from h5vc.store import planner

N = 100


@pytest.fixture(params=["hdf5", "positioned"])
def read_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Small selections read by HDF5 from the virtual dataset, or by positioned reads."""
    if request.param == "positioned":
        monkeypatch.setattr(planner, "HDF5_READ_BYTES", -1)
    yield request.param


def _versions(path: Path) -> dict[str, np.ndarray]:
    """v1, v2 and v3 each rewrite every chunk of ``x``: deleting one releases slots and
    moves the chunks stored after them."""
    expected = {}
    with h5vc.open(path, "w") as vf:
        for number in (1, 2, 3):
            values = np.arange(N, dtype=np.float64) + 1000 * number
            with vf.stage_version(f"v{number}") as g:
                if number == 1:
                    g.create_dataset("x", data=values, chunks=(10,), fillvalue=-1.0)
                    g.create_group("sub").create_dataset("y", data=values[:20], chunks=(10,))
                else:
                    g["x"][:] = values
                    g["sub"]["y"][:] = values[:20]
                g["x"].attrs["number"] = number
            expected[f"v{number}"] = values
    return expected


def test_a_kept_dataset_reads_its_version_after_others_are_deleted(
    tmp_path: Path, read_path: str
) -> None:
    path = tmp_path / "kept.h5"
    expected = _versions(path)
    with h5vc.open(path, "r+") as vf:  # chunk maps read from the file
        kept = vf["v3"]["x"]
        group = vf["v3"]["sub"]
        np.testing.assert_array_equal(kept[:], expected["v3"])
        delete_versions(vf, ["v1"])
        np.testing.assert_array_equal(kept[:], expected["v3"])
        np.testing.assert_array_equal(kept[5:15], expected["v3"][5:15])
        np.testing.assert_array_equal(np.asarray(kept), expected["v3"])
        assert kept.attrs["number"] == 3
        assert kept.shape == (N,)
        np.testing.assert_array_equal(group["y"][:], expected["v3"][:20])
        with h5vc.open(path, "r") as fresh:  # what the file holds
            np.testing.assert_array_equal(fresh["v3"]["x"][:], expected["v3"])


def test_a_kept_object_of_a_deleted_version_raises(tmp_path: Path, read_path: str) -> None:
    path = tmp_path / "deleted.h5"
    expected = _versions(path)
    with h5vc.open(path, "r+") as vf:
        doomed = vf["v1"]["x"]
        doomed_group = vf["v1"]
        np.testing.assert_array_equal(doomed[:], expected["v1"])
        delete_versions(vf, ["v1"])
        with pytest.raises(VersionNotFoundError, match=r"'/x' of version 'v1'.*deleted"):
            doomed[:]
        with pytest.raises(VersionNotFoundError, match=r"'v1'.*deleted"):
            doomed_group["x"]
        with pytest.raises(VersionNotFoundError, match=r"'v1'"):
            doomed.attrs["number"]
        np.testing.assert_array_equal(vf["v2"]["x"][:], expected["v2"])


def test_a_kept_dataset_follows_modify_metadata(tmp_path: Path, read_path: str) -> None:
    path = tmp_path / "modified.h5"
    expected = _versions(path)
    with h5vc.open(path, "r+") as vf:
        kept = vf["v2"]["x"]
        assert kept.dtype == np.float64 and kept.fillvalue == -1.0
        modify_metadata(vf, "x", dtype=np.float32, fillvalue=7.0, compression="gzip")
        assert kept.dtype == np.float32
        assert kept.fillvalue == 7.0
        assert kept.compression == "gzip"
        np.testing.assert_array_equal(kept[:], expected["v2"].astype(np.float32))
        assert kept[:].dtype == np.float32


def test_a_kept_dataset_reads_after_an_abandoned_stage(tmp_path: Path, read_path: str) -> None:
    path = tmp_path / "abandoned.h5"
    expected = _versions(path)
    with h5vc.open(path, "r+") as vf:
        kept = vf["v3"]["x"]
        with pytest.raises(RuntimeError, match="changed my mind"), vf.stage_version("v4") as g:
            g["x"][:] = -5.0
            g.create_dataset("big", data=np.ones(1_000_000))  # written through
            raise RuntimeError("changed my mind")
        np.testing.assert_array_equal(kept[:], expected["v3"])
        assert "v4" not in vf


def test_a_kept_object_of_a_closed_file_says_so(tmp_path: Path) -> None:
    path = tmp_path / "closed.h5"
    _versions(path)
    with h5vc.open(path, "r") as vf:
        kept = vf["v2"]["x"]
        group = vf["v2"]
    with pytest.raises(ClosedError, match=r"'/x' of version 'v2'.*closed"):
        kept[:]
    with pytest.raises(ClosedError, match=r"'v2'.*closed"):
        group["x"]
