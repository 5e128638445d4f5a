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


@pytest.mark.parametrize("chunks", [None, True])
def test_chunks_are_chosen_for_multidimensional_datasets(tmp_path, chunks) -> None:
    """versioned-hdf5 requires chunks= for datasets of 2+ dimensions (chunks=True, h5py's
    "choose for me", included); h5vc picks them."""
    paths = new_files(tmp_path)
    data = np.arange(600.0).reshape(20, 30)
    with pytest.raises(NotImplementedError, match="chunks must be specified"):
        stage(
            versioned_hdf5,
            paths["vh"],
            "v1",
            lambda g: g.create_dataset("x", data=data, chunks=chunks),
        )
    stage(h5vc, paths["h5vc"], "v1", lambda g: g.create_dataset("x", data=data, chunks=chunks))
    with h5vc.open(paths["h5vc"]) as vf:
        x = vf["v1"]["x"]
        assert len(x.chunks) == 2 and min(x.chunks) >= 1
        np.testing.assert_array_equal(x[()], data)


def test_chunks_true_rechunks_multidimensional_datasets(tmp_path) -> None:
    """modify_metadata(chunks=True) of a 2-d dataset: versioned-hdf5 refuses (it chooses
    chunks for 1-d data only); h5vc chooses them, and the data reads the same."""
    paths = new_files(tmp_path)
    data = np.arange(600.0).reshape(20, 30)
    for lib, path in ((versioned_hdf5, paths["vh"]), (h5vc, paths["h5vc"])):
        stage(lib, path, "v1", lambda g: g.create_dataset("m", data=data, chunks=(2, 3)))
    with h5py.File(paths["vh"], "r+") as f, pytest.raises(NotImplementedError, match="chunks"):
        versioned_hdf5.modify_metadata(f, "m", chunks=True)
    with h5py.File(paths["h5vc"], "r+") as f:
        h5vc.modify_metadata(f, "m", chunks=True)
    with h5vc.open(paths["h5vc"]) as vf:
        m = vf["v1"]["m"]
        assert len(m.chunks) == 2 and m.chunks != (2, 3)
        np.testing.assert_array_equal(m[()], data)


def test_chunks_given_as_a_list(tmp_path) -> None:
    """create_dataset(chunks=[2, 5]): versioned-hdf5 fails an internal assertion (it
    takes tuples only); h5vc takes any sequence of the dataset's rank, as h5py."""
    paths = new_files(tmp_path)
    data = np.ones((4, 5))
    with pytest.raises(AssertionError):
        stage(
            versioned_hdf5,
            paths["vh"],
            "v1",
            lambda g: g.create_dataset("m", data=data, chunks=[2, 5]),
        )
    stage(h5vc, paths["h5vc"], "v1", lambda g: g.create_dataset("m", data=data, chunks=[2, 5]))
    with h5vc.open(paths["h5vc"]) as vf:
        assert vf["v1"]["m"].chunks == (2, 5)
        np.testing.assert_array_equal(vf["v1"]["m"][()], data)


@pytest.mark.parametrize("chunks", [3, [3]])
def test_rechunk_to_an_int_or_a_list(tmp_path, chunks) -> None:
    """modify_metadata(chunks=3) or chunks=[3] of a 1-d dataset: versioned-hdf5 takes
    it, except for a dataset created from a shape in the same open file, which it
    refuses (it still holds the staged object); h5vc takes it always, as
    create_dataset does."""
    paths = new_files(tmp_path)
    for lib, path in ((versioned_hdf5, paths["vh"]), (h5vc, paths["h5vc"])):
        with h5py.File(path, "r+") as f:
            vf = lib.VersionedHDF5File(f)
            with vf.stage_version("v1") as g:
                g.create_dataset("from_shape", shape=(7,), dtype="f8", chunks=(2,))
            if lib is versioned_hdf5:
                with pytest.raises(ValueError, match="tuple"):
                    lib.modify_metadata(f, "from_shape", chunks=chunks)
            else:
                lib.modify_metadata(f, "from_shape", chunks=chunks)
    with h5py.File(paths["vh"], "r+") as f:  # opened again: taken
        versioned_hdf5.modify_metadata(f, "from_shape", chunks=chunks)
        assert tuple(versioned_hdf5.VersionedHDF5File(f)["v1"]["from_shape"].chunks) == (3,)
    with h5vc.open(paths["h5vc"]) as vf:
        assert vf["v1"]["from_shape"].chunks == (3,)
        np.testing.assert_array_equal(vf["v1"]["from_shape"][()], np.zeros(7))


def test_resize_to_a_fraction_is_refused(tmp_path) -> None:
    """resize(9.5): versioned-hdf5 (and h5py) truncate to 9; h5vc takes whole floats
    (9.0) but refuses a fraction, which is a mistake in the caller's arithmetic."""
    paths = new_files(tmp_path)
    for lib, path in ((versioned_hdf5, paths["vh"]), (h5vc, paths["h5vc"])):
        stage(lib, path, "v1", lambda g: g.create_dataset("x", data=np.arange(12), chunks=(4,)))

    def shrink(g):
        g["x"].resize(9.5, axis=0)

    stage(versioned_hdf5, paths["vh"], "v2", shrink)
    with h5py.File(paths["vh"], "r") as f:
        assert f["_version_data/versions/v2/x"].shape == (9,)
    with pytest.raises(ValueError, match="whole number"):
        stage(h5vc, paths["h5vc"], "v2", shrink)
    with h5vc.open(paths["h5vc"]) as vf:
        assert vf.versions == ["v1"] and vf["v1"]["x"].shape == (12,)


def test_complex_fill_value_for_a_real_dtype_is_refused(tmp_path) -> None:
    """A NumPy complex fill value for a float dataset: versioned-hdf5 drops its
    imaginary part (with NumPy's warning) and the dataset reads 0.0; h5vc raises
    TypeError (as both do for a Python complex)."""
    paths = new_files(tmp_path)
    fill = np.complex64(1j)

    def create(g):
        g.create_dataset("x", shape=(4,), dtype="f8", fillvalue=fill, chunks=(2,))

    with pytest.warns(np.exceptions.ComplexWarning):
        stage(versioned_hdf5, paths["vh"], "v1", create)
    with h5py.File(paths["vh"], "r") as f:
        np.testing.assert_array_equal(f["_version_data/versions/v1/x"][()], np.zeros(4))
    with pytest.raises(TypeError, match="complex"):
        stage(h5vc, paths["h5vc"], "v1", create)
    with h5vc.open(paths["h5vc"]) as vf:
        assert vf.versions == []


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


def test_elements_never_written_take_the_new_fill_value(tmp_path) -> None:
    """modify_metadata(dtype="i8", fillvalue=2) of a dataset of fill value 0.1 whose
    elements were never written: they read 2 in h5vc (values equal to the old fill value
    become the new one, as versioned-hdf5 documents); versioned-hdf5 casts the old fill
    value first, and they read 0, neither fill value."""
    paths = new_files(tmp_path)
    for lib, path in ((versioned_hdf5, paths["vh"]), (h5vc, paths["h5vc"])):
        stage(
            lib,
            path,
            "v1",
            lambda g: g.create_dataset("x", shape=(5,), dtype="f8", fillvalue=0.1, chunks=(2,)),
        )
        with h5py.File(path, "r+") as f:
            lib.modify_metadata(f, "x", dtype="i8", fillvalue=2)
    with h5py.File(paths["vh"], "r") as f:
        np.testing.assert_array_equal(f["_version_data/versions/v1/x"][()], np.zeros(5))
    with h5vc.open(paths["h5vc"]) as vf:
        x = vf["v1"]["x"]
        assert (x.dtype, x.fillvalue) == (np.dtype("i8"), 2)
        np.testing.assert_array_equal(x[()], np.full(5, 2))


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
