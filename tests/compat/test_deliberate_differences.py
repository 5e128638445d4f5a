"""Where h5vc deliberately answers differently from versioned-hdf5 2.6.0.

Each test states the difference in its docstring, shows what versioned-hdf5 does,
and checks that h5vc's answer is still correct.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import versioned_hdf5

import h5vc


def new_files(tmp_path):
    """An empty versioned file per library."""
    paths = {}
    for name, lib in (("vh", versioned_hdf5), ("h5vc", h5vc)):
        paths[name] = str(tmp_path / f"{name}.h5")
        with h5py.File(paths[name], "w") as f:
            lib.VersionedHDF5File(f)
    return paths


def stage(lib, path, name, body, mode="r+"):
    with h5py.File(path, mode) as f:
        vf = lib.VersionedHDF5File(f)
        with vf.stage_version(name) as g:
            body(g)


def test_chunks_are_chosen_for_multidimensional_datasets(tmp_path) -> None:
    """versioned-hdf5 requires chunks= for datasets of 2+ dimensions; h5vc picks them."""
    paths = new_files(tmp_path)
    data = np.arange(600.0).reshape(20, 30)
    with pytest.raises(NotImplementedError, match="chunks must be specified"):
        stage(versioned_hdf5, paths["vh"], "v1", lambda g: g.create_dataset("x", data=data))
    stage(h5vc, paths["h5vc"], "v1", lambda g: g.create_dataset("x", data=data))
    with h5vc.open(paths["h5vc"]) as vf:
        x = vf["v1"]["x"]
        assert len(x.chunks) == 2 and min(x.chunks) >= 1
        np.testing.assert_array_equal(x[()], data)


def test_committed_version_attributes_are_read_only(tmp_path) -> None:
    """versioned-hdf5 lets a committed version's attributes be changed; h5vc refuses."""
    paths = new_files(tmp_path)
    for lib, path in ((versioned_hdf5, paths["vh"]), (h5vc, paths["h5vc"])):
        stage(lib, path, "v1", lambda g: g.create_dataset("x", data=np.arange(3), chunks=(2,)))
    with h5py.File(paths["vh"], "r+") as f:
        versioned_hdf5.VersionedHDF5File(f)["v1"].attrs["note"] = "changed afterwards"
        assert f["_version_data/versions/v1"].attrs["note"] == "changed afterwards"
    with h5vc.open(paths["h5vc"], "r+") as vf:
        with pytest.raises(ValueError, match="committed"):
            vf["v1"].attrs["note"] = "changed afterwards"
        assert "note" not in vf["v1"].attrs


def test_read_only_files_give_the_same_objects(tmp_path) -> None:
    """Opened read-only, versioned-hdf5 hands out h5py's raw objects (chunks None, layout
    attributes shown); h5vc hands out the same versioned objects as in r+ mode."""
    paths = new_files(tmp_path)
    for lib, path in ((versioned_hdf5, paths["vh"]), (h5vc, paths["h5vc"])):
        stage(lib, path, "v1", lambda g: g.create_dataset("x", data=np.arange(9), chunks=(4,)))
    with h5py.File(paths["vh"], "r") as f:
        x = versioned_hdf5.VersionedHDF5File(f)["v1"]["x"]
        assert x.chunks is None and "raw_data" in x.attrs
    with h5vc.open(paths["h5vc"], "r") as vf:
        x = vf["v1"]["x"]
        assert x.chunks == (4,) and "raw_data" not in x.attrs
        np.testing.assert_array_equal(x[()], np.arange(9))


def test_changing_the_compression_filter_drops_its_options(tmp_path) -> None:
    """modify_metadata to another compression filter drops the old filter's options;
    versioned-hdf5 keeps them (and gzip's level then breaks lzf)."""
    paths = new_files(tmp_path)
    for lib, path in ((versioned_hdf5, paths["vh"]), (h5vc, paths["h5vc"])):
        stage(lib, path, "v1", lambda g: g.create_dataset("x", data=np.arange(9), chunks=(4,)))
        with h5py.File(path, "r+") as f:
            lib.modify_metadata(f, "x", compression="gzip", compression_opts=1)
    with h5py.File(paths["vh"], "r+") as f, pytest.raises(ValueError, match="LZF"):
        versioned_hdf5.modify_metadata(f, "x", compression="lzf")
    with h5py.File(paths["h5vc"], "r+") as f:
        h5vc.modify_metadata(f, "x", compression="lzf")
    with h5vc.open(paths["h5vc"]) as vf:
        x = vf["v1"]["x"]
        assert (x.compression, x.compression_opts) == ("lzf", None)
        np.testing.assert_array_equal(x[()], np.arange(9))


def test_dtype_cast_that_loses_values_is_refused(tmp_path) -> None:
    """modify_metadata(dtype=...) that cannot hold every stored value raises and changes
    nothing; versioned-hdf5 casts anyway (200 as uint8 no longer reads 200)."""
    paths = new_files(tmp_path)
    data = np.array([1, 200, 3], dtype="u1")
    for lib, path in ((versioned_hdf5, paths["vh"]), (h5vc, paths["h5vc"])):
        stage(lib, path, "v1", lambda g: g.create_dataset("x", data=data, chunks=(2,)))
    with h5py.File(paths["vh"], "r+") as f:
        versioned_hdf5.modify_metadata(f, "x", dtype="i1")
        assert versioned_hdf5.VersionedHDF5File(f)["v1"]["x"][1] != 200
    before = Path(paths["h5vc"]).read_bytes()
    with h5py.File(paths["h5vc"], "r+") as f, pytest.raises(ValueError, match="int8"):
        h5vc.modify_metadata(f, "x", dtype="i1")
    assert Path(paths["h5vc"]).read_bytes() == before


def test_dataset_created_again_with_other_dtype_and_chunks(tmp_path) -> None:
    """After a delete, versioned-hdf5 refuses a dataset of the same name with another
    dtype or chunk shape; h5vc (its own layout) stores it apart, older versions intact."""
    paths = new_files(tmp_path)
    for lib, path in ((versioned_hdf5, paths["vh"]), (h5vc, paths["h5vc"])):
        stage(lib, path, "v1", lambda g: g.create_dataset("x", data=np.arange(9), chunks=(4,)))
        stage(lib, path, "v2", lambda g: g.__delitem__("x"))
    again = np.linspace(0, 1, 7, dtype="f4")
    with pytest.raises(ValueError, match="Chunk size"):
        stage(
            versioned_hdf5,
            paths["vh"],
            "v3",
            lambda g: g.create_dataset("x", data=again, chunks=(3,)),
        )
    stage(h5vc, paths["h5vc"], "v3", lambda g: g.create_dataset("x", data=again, chunks=(3,)))
    with h5vc.open(paths["h5vc"]) as vf:
        assert (vf["v1"]["x"].dtype, vf["v1"]["x"].chunks) == (np.dtype("i8"), (4,))
        assert (vf["v3"]["x"].dtype, vf["v3"]["x"].chunks) == (np.dtype("f4"), (3,))
        np.testing.assert_array_equal(vf["v1"]["x"][()], np.arange(9))
        np.testing.assert_array_equal(vf["v3"]["x"][()], again)
