"""Chunks h5vc compresses itself are read by versioned-hdf5 and by plain h5py."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import versioned_hdf5

import h5vc


def test_versioned_hdf5_reads_chunks_h5vc_compressed(tmp_path: Path) -> None:
    path = tmp_path / "f.h5"
    data = np.arange(100_000, dtype="f8")
    with h5py.File(path, "w") as f:  # a data_version 4 file: versioned-hdf5 keeps reading it
        vf = versioned_hdf5.VersionedHDF5File(f)
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=data, chunks=(1000,), compression="gzip")
    with h5py.File(path, "r+") as f:
        vf = h5vc.VersionedHDF5File(f)
        with vf.stage_version("v2") as g:
            g["x"][500:2500] = -1
            g.create_dataset(
                "y",
                data=np.arange(50_000, dtype="i4"),
                chunks=(4096,),
                compression="gzip",
                shuffle=True,
            )
    expected = data.copy()
    expected[500:2500] = -1
    with h5py.File(path, "r") as f:
        vf = versioned_hdf5.VersionedHDF5File(f)
        np.testing.assert_array_equal(vf["v1"]["x"][:], data)
        np.testing.assert_array_equal(vf["v2"]["x"][:], expected)
        np.testing.assert_array_equal(vf["v2"]["y"][:], np.arange(50_000, dtype="i4"))
        np.testing.assert_array_equal(f["_version_data/versions/v2/y"][:], np.arange(50_000))


def test_plugin_filters_are_loaded_when_a_file_needs_them(tmp_path: Path) -> None:
    """A program that never imports hdf5plugin reads and verifies a Blosc file: h5vc
    registers hdf5plugin's filters with HDF5 when a chunk store uses one HDF5 lacks
    (else HDF5 fails on every chunk, and verify called each one unreadable)."""
    import subprocess
    import sys

    import hdf5plugin

    path = tmp_path / "z.h5"
    with h5vc.open(path, "w") as vf, vf.stage_version("v1") as g:
        g.create_dataset(
            "x", data=np.arange(50_000.0), chunks=(1000,), **hdf5plugin.Blosc(cname="zstd")
        )
    script = f"""
import sys
import h5py, numpy as np
import h5vc
assert "hdf5plugin" not in sys.modules
with h5vc.open({str(path)!r}, "r") as vf:
    assert np.array_equal(vf["v1"]["x"][5:17], np.arange(5.0, 17.0))
    assert np.array_equal(vf["v1"]["x"][:], np.arange(50_000.0))
with h5py.File({str(path)!r}, "r") as f:
    report = h5vc.verify(f)
print(report.ok, report.chunks, "hdf5plugin" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "50", "True"]
