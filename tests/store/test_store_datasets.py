"""Versioned datasets: metadata, dtypes, resize, conversions, the numpy protocol."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from store_helpers import assert_same_array

from h5vc import VersionedHDF5File

pytestmark = pytest.mark.usefixtures("creation_path")

NUMERIC = [
    "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8",
    "f2", "f4", "f8", "c8", "c16", "bool",
]  # fmt: skip


def sample(dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    if dtype.kind == "b":
        return (np.arange(n) % 3 == 1).reshape(shape)
    if dtype.kind == "c":
        return (np.arange(n) + 1j * np.arange(n)[::-1]).astype(dtype).reshape(shape)
    return (np.arange(n) % 100).astype(dtype).reshape(shape)


@pytest.mark.parametrize("dtype", NUMERIC)
def test_numeric_dtypes_round_trip(vf: VersionedHDF5File, h5file: h5py.File, dtype: str) -> None:
    data = sample(np.dtype(dtype), (9, 4))
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=data, chunks=(4, 3))
        assert g["x"].dtype == np.dtype(dtype)
    with vf.stage_version("v2") as g:
        g["x"][8, 3] = data[0, 0]
        g["x"].resize((10, 4))
    assert_same_array(vf["v1"]["x"][()], data)
    changed = np.zeros((10, 4), dtype=dtype)
    changed[:9] = data
    changed[8, 3] = data[0, 0]
    assert_same_array(vf["v2"]["x"][()], changed)
    assert_same_array(h5file["_version_data/versions/v2/x"][()], changed)


def test_fixed_length_bytes(vf: VersionedHDF5File, h5file: h5py.File) -> None:
    data = np.array([b"a", b"bcd", b"", b"xyzzy", b"q"], dtype="S5")
    with vf.stage_version("v1") as g:
        g.create_dataset("s", data=data, chunks=(2,))
    with vf.stage_version("v2") as g:
        g["s"][2] = b"new"
        assert g["s"].dtype == np.dtype("S5")
    assert_same_array(vf["v1"]["s"][:], data)
    data[2] = b"new"
    assert_same_array(vf["v2"]["s"][:], data)
    assert_same_array(h5file["_version_data/versions/v2/s"][:], data)


def test_fixed_length_bytes_fill_value_in_plain_hdf5(vf: VersionedHDF5File, h5file) -> None:
    # chunks equal to the fill value are not stored: HDF5 reads the virtual dataset's fill
    data = np.array([b"fil", b"abc", b"fil", b"fil"], dtype="S3")
    with vf.stage_version("v1") as g:
        g.create_dataset("s", data=data, chunks=(1,), fillvalue=b"fil")
    virtual = h5file["_version_data/versions/v1/s"]
    assert virtual.fillvalue == b"fil"
    assert_same_array(virtual[:], data)
    assert_same_array(vf["v1"]["s"][:], data)


def test_variable_length_strings(vf: VersionedHDF5File, h5file: h5py.File) -> None:
    words = ["alpha", "", "\u00e9t\u00e9", "a rather longer string", "\u2603"]
    with vf.stage_version("v1") as g:
        g.create_dataset(
            "w", data=np.array(words, dtype=object), dtype=h5py.string_dtype(), chunks=(2,)
        )
    with vf.stage_version("v2") as g:
        g["w"][1] = "filled"
        g["w"].resize((7,))
        g["w"][6] = b"bytes too"
        assert g["w"][1] == b"filled"
    assert h5py.check_string_dtype(vf["v2"]["w"].dtype) is not None
    assert vf["v1"]["w"].asstr()[()].tolist() == words
    new = ["alpha", "filled", *words[2:], "", "bytes too"]
    assert vf["v2"]["w"].asstr()[()].tolist() == new
    assert vf["v2"]["w"][()].tolist() == [w.encode() for w in new]
    assert h5file["_version_data/versions/v2/w"].asstr()[()].tolist() == new


def test_str_data_makes_a_string_dataset(vf: VersionedHDF5File) -> None:
    with vf.stage_version("v1") as g:
        g["names"] = np.array(["ab", "c"])
    assert vf["v1"]["names"].asstr()[:].tolist() == ["ab", "c"]


@pytest.mark.parametrize("shape", [(0,), (0, 3), (4, 0)])
def test_zero_extent(vf: VersionedHDF5File, h5file: h5py.File, shape) -> None:
    with vf.stage_version("v1") as g:
        g.create_dataset("z", shape=shape, dtype="f8")
        assert g["z"].size == 0
    with vf.stage_version("v2") as g:
        g["z"].resize(tuple(max(n, 2) for n in shape))
        g["z"][...] = 5
    assert vf["v1"]["z"].shape == shape
    assert_same_array(vf["v1"]["z"][()], np.zeros(shape))
    assert_same_array(
        vf["v2"]["z"][()], np.full((max(shape[0], 2), *[max(n, 2) for n in shape[1:]]), 5.0)
    )
    assert h5file["_version_data/versions/v1/z"].shape == shape


def test_metadata(vf: VersionedHDF5File) -> None:
    with vf.stage_version("v1") as g:
        d = g.create_dataset(
            "x", data=np.arange(30.0).reshape(6, 5), chunks=(4, 5), fillvalue=2.5,
            compression="gzip", compression_opts=3, shuffle=True,
        )  # fmt: skip
        staged = (d.shape, d.dtype, d.chunks, d.fillvalue, d.size, d.ndim, len(d))
        assert (d.compression, d.compression_opts, d.shuffle) == ("gzip", 3, True)
    x = vf["v1"]["x"]
    assert staged == ((6, 5), np.dtype("f8"), (4, 5), 2.5, 30, 2, 6)
    assert (x.shape, x.dtype, x.chunks, x.fillvalue, x.size, x.ndim, len(x)) == staged
    assert (x.compression, x.compression_opts, x.shuffle) == ("gzip", 3, True)
    assert x.name == "/x"
    assert x.nbytes == 240
    with vf.stage_version("v2") as g:
        d = g["x"]
        assert (d.chunks, d.fillvalue, d.compression) == ((4, 5), 2.5, "gzip")


def test_fill_value_shows_after_growing(vf: VersionedHDF5File) -> None:
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=[1, 2, 3], chunks=(2,), fillvalue=-9)
    with vf.stage_version("v2") as g:
        g["x"].resize((6,))
    assert vf["v2"]["x"][:].tolist() == [1, 2, 3, -9, -9, -9]


def test_create_from_shape_and_dtype(vf: VersionedHDF5File) -> None:
    with vf.stage_version("v1") as g:
        g.create_dataset("x", (3, 2), "u2")
        g.create_dataset("y", shape=4)
    assert_same_array(vf["v1"]["x"][()], np.zeros((3, 2), "u2"))
    assert vf["v1"]["y"].dtype == np.dtype("f8")  # versioned-hdf5's default (h5py: f4)


def test_data_is_converted_to_dtype(vf: VersionedHDF5File) -> None:
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=[1.7, 2.2], dtype="i4")
    assert_same_array(vf["v1"]["x"][()], np.array([1, 2], dtype="i4"))


@pytest.mark.parametrize(
    "shape, dtype",
    [((10,), "f8"), ((1000, 1000), "f4"), ((3, 4, 5), "i2"), ((10**7,), "u1"), ((50, 0), "f8")],
)
def test_chunks_chosen_automatically(vf: VersionedHDF5File, shape, dtype) -> None:
    with vf.stage_version("v1") as g:
        g.create_dataset("x", shape=shape, dtype=dtype)
    chunks = vf["v1"]["x"].chunks
    assert len(chunks) == len(shape)
    assert all(c >= 1 for c in chunks)
    assert all(c <= max(n, 1024) for c, n in zip(chunks, shape))
    assert np.prod(chunks) * np.dtype(dtype).itemsize <= 1024 * 1024
    assert np.prod(chunks) > 1  # not degenerate


@pytest.mark.parametrize(
    "old, new, axis",
    [
        ((10,), (25,), None),
        ((10,), (3,), None),
        ((10,), (0,), None),
        ((7, 5), (9, 2), None),
        ((7, 5), (2, 9), None),
        ((7, 5), (7, 8), None),
        ((7, 5), 3, 0),
        ((7, 5), 11, 1),
        ((4, 3, 5), (5, 1, 6), None),
    ],
)
def test_resize_any_axis(vf: VersionedHDF5File, h5file: h5py.File, old, new, axis) -> None:
    data = np.arange(1, int(np.prod(old)) + 1, dtype="i4").reshape(old)
    chunks = tuple(min(2, n) for n in old)
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=data, chunks=chunks)
    with vf.stage_version("v2") as g:
        g["x"].resize(new, axis=axis)
        target = list(old)
        if axis is None:
            target = list(new)
        else:
            target[axis] = new
        target = tuple(target)
        assert g["x"].shape == target
    expected = np.zeros(target, dtype="i4")
    common = tuple(slice(0, min(a, b)) for a, b in zip(old, target))
    expected[common] = data[common]
    assert_same_array(vf["v2"]["x"][()], expected)
    assert_same_array(h5file["_version_data/versions/v2/x"][()], expected)
    assert_same_array(vf["v1"]["x"][()], data)


def test_shrink_then_grow_does_not_resurrect(vf: VersionedHDF5File) -> None:
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=np.arange(1, 11), chunks=(4,))
    with vf.stage_version("v2") as g:
        g["x"].resize((3,))
        g["x"].resize((10,))
        assert g["x"][:].tolist() == [1, 2, 3] + [0] * 7
    with vf.stage_version("v3") as g:
        g["x"].resize((5,))
    assert vf["v2"]["x"][:].tolist() == [1, 2, 3] + [0] * 7
    assert vf["v3"]["x"][:].tolist() == [1, 2, 3, 0, 0]


@pytest.mark.parametrize("chunk", [1, 3, 8, 16])
@pytest.mark.parametrize("kept", [0, 1, 3, 5])
@pytest.mark.parametrize("edit_first", [False, True])
def test_shrink_then_grow_back_to_the_same_shape(
    vf: VersionedHDF5File, h5file: h5py.File, chunk: int, kept: int, edit_first: bool
) -> None:
    """Growing back to the committed shape after cutting off whole chunks (stored or
    staged) commits fill values there, not a link to the parent version."""
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=np.arange(1, 9), chunks=(chunk,))
    with vf.stage_version("v2") as g:
        if edit_first:
            g["x"][7] = 70
        g["x"].resize((kept,))
        g["x"].resize((8,))
    expected = np.r_[np.arange(1, 9)[:kept], np.zeros(8 - kept, dtype=int)]
    assert_same_array(vf["v2"]["x"][()], expected)
    assert_same_array(h5file["_version_data/versions/v2/x"][()], expected)
    assert_same_array(vf["v1"]["x"][()], np.arange(1, 9))


def test_shrink_then_grow_back_in_two_dimensions(vf: VersionedHDF5File) -> None:
    data = np.arange(1, 37).reshape(6, 6)
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=data, chunks=(2, 3))
    with vf.stage_version("v2") as g:
        g["x"].resize((6, 3))
        g["x"].resize((6, 6))
    expected = data.copy()
    expected[:, 3:] = 0
    assert_same_array(vf["v2"]["x"][()], expected)


@pytest.mark.parametrize(
    "args, error",
    [
        (((3,),), TypeError),
        (((-1, 2),), ValueError),
        ((5, 2), ValueError),
        (((3, 3), 0), TypeError),
    ],
)
def test_bad_resize(vf: VersionedHDF5File, args, error) -> None:
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=np.ones((2, 2)), chunks=(2, 2))
        with pytest.raises(error):
            g["x"].resize(*args)
        assert g["x"].shape == (2, 2)


@pytest.mark.parametrize("staged", [True, False])
def test_astype_array_read_direct_iteration(vf: VersionedHDF5File, staged: bool) -> None:
    data = np.arange(12, dtype="i2").reshape(4, 3)
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=data, chunks=(3, 2))
    with vf.stage_version("v2") as g:
        x = g["x"] if staged else vf["v1"]["x"]
        assert_same_array(x.astype("f8")[1:3], data[1:3].astype("f8"))
        assert_same_array(np.asarray(x.astype("u1")), data.astype("u1"))
        assert_same_array(np.asarray(x), data)
        assert_same_array(np.array(x, dtype="f4"), data.astype("f4"))
        out = np.full((5, 3), -1, dtype="i2")
        x.read_direct(out, np.s_[1:3], np.s_[2:4])
        expected = np.full((5, 3), -1, dtype="i2")
        expected[2:4] = data[1:3]
        assert_same_array(out, expected)
        rows = list(x)
        assert len(rows) == 4
        for row, want in zip(rows, data):
            assert_same_array(row, want)
        assert_same_array(x[...] + 1, data + 1)
        assert_same_array(np.add(x, 1), data + 1)


def test_dataset_attrs_are_versioned(vf: VersionedHDF5File, h5file: h5py.File) -> None:
    with vf.stage_version("v1") as g:
        d = g.create_dataset("x", data=np.arange(3))
        d.attrs["units"] = "m"
        d.attrs["scale"] = np.float32(0.5)
    with vf.stage_version("v2") as g:
        assert g["x"].attrs["units"] == "m"
        g["x"].attrs["units"] = "km"
        del g["x"].attrs["scale"]
        g["x"].attrs["list"] = [1, 2, 3]
    assert dict(vf["v1"]["x"].attrs) == {"units": "m", "scale": np.float32(0.5)}
    v2 = vf["v2"]["x"].attrs
    assert set(v2) == {"units", "list"}
    assert v2["units"] == "km"
    assert v2["list"].tolist() == [1, 2, 3]
    assert h5file["_version_data/versions/v2/x"].attrs["units"] == "km"
    # data did not change, only attributes: the values are still shared
    assert_same_array(vf["v2"]["x"][()], np.arange(3))
    with pytest.raises(ValueError, match="read-only"):
        vf["v2"]["x"].attrs["units"] = "mm"
    with pytest.raises(KeyError):
        vf["v1"]["x"].attrs["raw_data"]


def test_attributes_follow_commits_with_and_without_them(vf: VersionedHDF5File) -> None:
    """Each commit's dataset is staged from the last one with the attributes it has,
    whether the last commit wrote none (then they are not looked up) or some."""
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=np.arange(6), chunks=(2,))
    with vf.stage_version("v2") as g:
        assert dict(g["x"].attrs) == {}
        g["x"][0] = 10
        g["x"].attrs["units"] = "m"
    with vf.stage_version("v3") as g:
        assert dict(g["x"].attrs) == {"units": "m"}
        g["x"][1] = 11
        del g["x"].attrs["units"]
    with vf.stage_version("v4") as g:
        assert dict(g["x"].attrs) == {}
        g["x"][2] = 12
    assert dict(vf["v2"]["x"].attrs) == {"units": "m"}
    assert dict(vf["v4"]["x"].attrs) == {}
    assert_same_array(vf["v4"]["x"][()], np.array([10, 11, 12, 3, 4, 5]))


def test_scalar_dataset_is_refused(vf: VersionedHDF5File) -> None:
    # NotImplementedError, as versioned-hdf5 raises
    with vf.stage_version("v1") as g, pytest.raises(NotImplementedError, match="Scalar"):
        g.create_dataset("s", data=np.float64(3.0))
    assert "v1" in vf


@pytest.mark.parametrize(
    "kwargs, attr, value",
    [
        ({"scaleoffset": 0}, "scaleoffset", 0),
        ({"scaleoffset": 4}, "scaleoffset", 4),
        ({"compression": "gzip", "compression_opts": 0}, "compression_opts", 0),
        ({"compression": "lzf"}, "compression", "lzf"),
        ({"fletcher32": True}, "fletcher32", True),
    ],
)
def test_filters_reach_raw_data(
    vf: VersionedHDF5File, h5file: h5py.File, kwargs, attr, value
) -> None:
    data = np.arange(100, dtype="i4")
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=data, chunks=(10,), **kwargs)
    assert getattr(h5file["_version_data/x/raw_data"], attr) == value
    assert getattr(vf["v1"]["x"], attr) == value
    assert_same_array(vf["v1"]["x"][()], data)
