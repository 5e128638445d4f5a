"""A writable versioned file keeps HDF5's metadata cache small: HDF5's flush at every
commit point takes time in the number of entries cached."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

import h5vc
import h5vc.config as config


def _make(path: Path) -> None:
    with h5vc.open(str(path), "w") as vf, vf.stage_version("v1") as group:
        group.create_dataset("x", data=np.arange(10.0), chunks=(5,))


def test_both_ways_of_opening_for_writing_limit_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    _make(path)
    with h5vc.open(str(path), "r+") as vf:
        assert vf.f.file.id.get_mdc_config().max_size == config.WRITE_METADATA_CACHE_BYTES
        with vf.stage_version("v2") as group:
            group["x"][0] = -1.0
    with h5py.File(path, "r+") as f:
        assert f.id.get_mdc_config().max_size > config.WRITE_METADATA_CACHE_BYTES
        vf = h5vc.VersionedHDF5File(f)
        assert f.id.get_mdc_config().max_size == config.WRITE_METADATA_CACHE_BYTES
        with vf.stage_version("v3") as group:
            group["x"][1] = -2.0
    with h5vc.open(str(path)) as vf:
        assert vf["v3"]["x"][:3].tolist() == [-1.0, -2.0, 2.0]


def test_a_read_only_file_and_a_smaller_cache_are_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    _make(path)
    with h5py.File(path, "r") as f:
        before = f.id.get_mdc_config().max_size
        h5vc.VersionedHDF5File(f)["v1"]["x"][:]
        assert f.id.get_mdc_config().max_size == before
    with h5py.File(path, "r+") as f:
        settings = f.id.get_mdc_config()
        settings.max_size = settings.min_size = settings.initial_size = 64 * 1024
        settings.set_initial_size = True
        f.id.set_mdc_config(settings)
        vf = h5vc.VersionedHDF5File(f)
        with vf.stage_version("v2") as group:
            group["x"][0] = -1.0
        assert f.id.get_mdc_config().max_size == 64 * 1024
