"""Every error is an H5vcError that is also the built-in a caller would catch, and a
damaged file raises CorruptDataError naming the file, the object and the expectation."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

import h5vc
from h5vc.errors import (
    ChunkDecodeError,
    ClosedError,
    CorruptDataError,
    H5vcError,
    InvalidVersionNameError,
    StageInProgressError,
)
from h5vc.store import layout


def one_version(path: Path) -> tuple[h5py.File, h5vc.VersionedHDF5File]:
    f = h5py.File(path, "w")
    vf = h5vc.VersionedHDF5File(f)
    with vf.stage_version("v1") as group:
        group.create_dataset("x", data=np.arange(20), chunks=(4,))
    return f, vf


@pytest.mark.parametrize(
    "error", [ClosedError, StageInProgressError, InvalidVersionNameError, ChunkDecodeError]
)
def test_errors_are_h5vc_errors_and_value_errors(error: type[Exception]) -> None:
    assert issubclass(error, H5vcError) and issubclass(error, ValueError)


def test_closed_handle_stage_in_progress_and_bad_names(tmp_path: Path) -> None:
    f, vf = one_version(tmp_path / "v.h5")
    with f:
        with pytest.raises(InvalidVersionNameError, match="non-empty"), vf.stage_version(""):
            pass
        with pytest.raises(InvalidVersionNameError, match="without '/'"), vf.stage_version("a/b"):
            pass
        with pytest.raises(InvalidVersionNameError, match=layout.FIRST_VERSION):
            h5vc.delete_versions(f, [layout.FIRST_VERSION])
        stage_v3 = pytest.raises(StageInProgressError, match="'v2'")
        with vf.stage_version("v2"), stage_v3, vf.stage_version("v3"):
            pass
        vf.close()
        with pytest.raises(ClosedError, match="closed"):
            vf["v1"]
        with pytest.raises(ClosedError, match="closed"):
            h5vc.log(vf)


def test_a_missing_chunk_store_is_corrupt_data(tmp_path: Path) -> None:
    path = tmp_path / "v.h5"
    f, _ = one_version(path)
    with f:
        del f[f"{layout.VERSION_DATA}/x"]
    with h5py.File(path, "r") as f:
        vf = h5vc.VersionedHDF5File(f)
        dataset = vf["v1"]["x"]  # the store is looked for on first use
        with pytest.raises(CorruptDataError, match=r"chunk store.*'x'.*'v1'") as info:
            dataset[:]
        assert str(path) in str(info.value)
    corrupt = pytest.raises(CorruptDataError, match="chunk store")
    with h5py.File(path, "r+") as f, corrupt, h5vc.VersionedHDF5File(f).stage_version("v2") as g:
        g["x"][0] = 1


def test_a_hash_table_row_past_raw_data_is_corrupt_data(tmp_path: Path) -> None:
    path = tmp_path / "v.h5"
    f, _ = one_version(path)
    with f:
        table = f[f"{layout.VERSION_DATA}/x/{layout.HASH_TABLE}"]
        row = table[0]
        row["shape"] = (400, 404)
        table[0] = row
    with h5py.File(path, "r+") as f:
        vf = h5vc.VersionedHDF5File(f)
        corrupt = pytest.raises(CorruptDataError, match=r"hash_table.*multiple of 4 below 20")
        with corrupt, vf.stage_version("v2") as group:
            group["x"][:] = np.arange(20) + 1


def test_a_mapping_past_raw_data_is_corrupt_data(tmp_path: Path) -> None:
    path = tmp_path / "v.h5"
    f, _ = one_version(path)
    with f:
        f[f"{layout.VERSION_DATA}/x/{layout.RAW_DATA}"].resize((8,))
    with h5py.File(path, "r") as f:
        vf = h5vc.VersionedHDF5File(f)
        dataset = vf["v1"]["x"]  # the chunk map is made on first use
        with pytest.raises(CorruptDataError, match=r"'x' of version 'v1'.*8\)\. Got .* slot 4"):
            dataset[:]
