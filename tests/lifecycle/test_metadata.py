"""modify_metadata: every version rewritten; strings, attributes and memory kept in check."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import h5py
import numpy as np
import pytest
from lifecycle_helpers import check_store, new_versioned, verify_hashes

from h5vc.errors import InvalidOptionError, MetadataMismatchError
from h5vc.lifecycle import DatasetNotFoundError, modify_metadata
from h5vc.lifecycle._tree import address
from h5vc.store import layout


def three_versions(vf) -> dict[str, np.ndarray]:
    data = np.arange(30 * 7, dtype=np.int64).reshape(30, 7)
    states = {}
    with vf.stage_version("v0") as group:
        dataset = group.create_dataset("a/x", data=data, chunks=(4, 3), fillvalue=0)
        dataset.attrs["unit"] = "m"
        dataset.attrs["scale"] = np.int16(3)
        dataset.attrs["bytes"] = np.bytes_(b"raw")
        group.create_dataset("other", data=np.arange(5), chunks=(5,))
    states["v0"] = data.copy()
    for number in (1, 2):
        data[number : number + 3, 2:5] = -number
        with vf.stage_version(f"v{number}") as group:
            group["a/x"][number : number + 3, 2:5] = -number
        states[f"v{number}"] = data.copy()
    return states


@pytest.mark.parametrize(
    "changes",
    [
        {"chunks": (5, 2)},
        {"chunks": (30, 7)},
        {"dtype": np.int32},
        {"compression": "gzip", "compression_opts": 6},
        {"chunks": (3, 4), "dtype": np.float64, "compression": "lzf"},
    ],
)
def test_every_version_rewritten(vfile, changes) -> None:
    states = three_versions(vfile)
    modify_metadata(vfile, "a/x", **changes)
    for name, expected in states.items():
        dataset = vfile[name]["a/x"]
        np.testing.assert_array_equal(dataset[:], expected)
        assert dataset.dtype == np.dtype(changes.get("dtype", np.int64))
        assert dataset.chunks == changes.get("chunks", (4, 3))
        assert dataset.compression == changes.get("compression")
        assert dict(dataset.attrs) == {"unit": "m", "scale": 3, "bytes": b"raw"}
        attrs = vfile.f[f"{layout.VERSION_DATA}/{layout.VERSIONS}/{name}/a/x"].attrs
        assert attrs.get_id("scale").dtype == np.int16
        assert h5py.check_string_dtype(attrs.get_id("unit").dtype) is not None
        np.testing.assert_array_equal(vfile[name]["other"][:], np.arange(5))
    check_store(vfile.f, "a/x")
    verify_hashes(vfile, "a/x")
    with vfile.stage_version("after") as group:  # still writable
        group["a/x"][0, 0] = 42
    assert vfile["after"]["a/x"][0, 0] == 42


def test_fill_value_change(vfile) -> None:
    with vfile.stage_version("v0") as group:
        group.create_dataset("x", shape=(20,), dtype="i4", chunks=(5,), fillvalue=0)
    with vfile.stage_version("v1") as group:
        group["x"][5:10] = np.arange(5)
    modify_metadata(vfile, "x", fillvalue=7)
    assert vfile["v1"]["x"].fillvalue == 7
    # versioned-hdf5's rule: stored values equal to the old fill take the new one too
    np.testing.assert_array_equal(vfile["v1"]["x"][:], [7] * 6 + [1, 2, 3, 4] + [7] * 10)
    np.testing.assert_array_equal(vfile["v0"]["x"][:], [7] * 20)


@pytest.mark.parametrize("chunks", [(3,), (8,)])
def test_variable_length_strings_survive(vfile, chunks) -> None:
    words = np.array(["a", "bé", "", "ünïcode", "x" * 40] * 3, dtype=object)
    with vfile.stage_version("v0") as group:
        dataset = group.create_dataset("s", data=words, dtype=h5py.string_dtype(), chunks=(4,))
        dataset.attrs["note"] = "kept"
    with vfile.stage_version("v1") as group:
        group["s"][1] = "changed"
    modify_metadata(vfile, "s", chunks=chunks)
    expected0 = [w.encode() for w in words]
    expected1 = list(expected0)
    expected1[1] = b"changed"
    assert list(vfile["v0"]["s"][:]) == expected0
    assert list(vfile["v1"]["s"][:]) == expected1
    assert vfile["v1"]["s"].attrs["note"] == "kept"
    assert h5py.check_string_dtype(vfile["v1"]["s"].dtype).encoding == "utf-8"
    with vfile.stage_version("v2") as group:
        group["s"][0] = "new"
    assert vfile["v2"]["s"][0] == b"new"
    verify_hashes(vfile, "s")


def test_fixed_length_strings_survive(vfile) -> None:
    values = np.array([b"ab", b"cde", b"", b"fghij"] * 3, dtype="S5")
    with vfile.stage_version("v0") as group:
        group.create_dataset("f", data=values, chunks=(4,))
    modify_metadata(vfile, "f", chunks=(5,), compression="gzip")
    np.testing.assert_array_equal(vfile["v0"]["f"][:], values)
    with vfile.stage_version("v1") as group:
        group["f"][1] = b"xy"
    assert vfile["v1"]["f"][1] == b"xy"
    assert vfile["v1"]["f"].dtype == np.dtype("S5")


def test_strings_to_fixed_length_and_back(vfile) -> None:
    with vfile.stage_version("v0") as group:
        group.create_dataset(
            "s", data=np.array(["ab", "c"], dtype=object), dtype=h5py.string_dtype(), chunks=(2,)
        )
    modify_metadata(vfile, "s", dtype="S4")
    assert vfile["v0"]["s"].dtype == np.dtype("S4")
    assert list(vfile["v0"]["s"][:]) == [b"ab", b"c"]
    with pytest.raises(MetadataMismatchError):
        modify_metadata(vfile, "s", dtype="S1")


def test_shared_objects_stay_shared(path: Path) -> None:
    f, vf = new_versioned(path, "h5vc")
    with f:
        with vf.stage_version("v0") as group:
            group.create_dataset("x", data=np.arange(100), chunks=(10,))
            group.create_dataset("y", data=np.arange(3), chunks=(3,))
        with vf.stage_version("v1") as group:
            group["y"][0] = 5
        modify_metadata(vf, "x", chunks=(25,))
        versions = vf.f[f"{layout.VERSION_DATA}/{layout.VERSIONS}"]
        assert address(versions["v0"]["x"]) == address(versions["v1"]["x"])
        np.testing.assert_array_equal(vf["v1"]["x"][:], np.arange(100))


def snapshot(vf) -> dict[str, object]:
    group = vf.f[f"{layout.VERSION_DATA}/a/x"]
    return {
        "members": sorted(vf.f[layout.VERSION_DATA]),
        "raw": group[layout.RAW_DATA][:].tolist(),
        "dtype": group[layout.RAW_DATA].dtype,
        "data": {name: vf[name]["a/x"][:].tolist() for name in vf.versions},
    }


@pytest.mark.parametrize(
    ("name", "changes", "error", "match"),
    [
        ("missing", {"chunks": (2,)}, DatasetNotFoundError, "missing"),
        ("a/x", {"chunks": (0, 3)}, InvalidOptionError, "positive"),
        ("a/x", {"chunks": (4,)}, InvalidOptionError, "2 positive"),
        ("a/x", {"dtype": np.uint8}, MetadataMismatchError, "uint8"),
        ("a/x", {"dtype": np.int8, "fillvalue": 1000}, MetadataMismatchError, "fill value"),
        ("a/x", {"compression": "no-such-filter"}, InvalidOptionError, "a/x"),
    ],
)
def test_bad_input_changes_nothing(vfile, name, changes, error, match) -> None:
    three_versions(vfile)
    with vfile.stage_version("big") as group:
        group["a/x"][0, 0] = 300  # does not fit uint8; -1 and -2 do not either
    before = snapshot(vfile)
    with pytest.raises(error, match=match):
        modify_metadata(vfile, name, **changes)
    assert snapshot(vfile) == before


def test_memory_stays_bounded(path: Path) -> None:
    f, vf = new_versioned(path, "h5vc")
    with f:
        data = np.arange(6_000_000, dtype=np.float64)  # 48 MB per version
        with vf.stage_version("v0") as group:
            group.create_dataset("x", data=data, chunks=(50_000,))
        with vf.stage_version("v1") as group:
            group["x"][:10] = -1
        del data
        tracemalloc.start()
        try:
            modify_metadata(vf, "x", chunks=(40_000,), dtype=np.float32)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 24 * 2**20, f"peak {peak / 2**20:.1f} MiB"
        assert vf["v1"]["x"][:12].tolist() == [-1.0] * 10 + [10.0, 11.0]


def test_a_version_longer_than_a_later_one_keeps_its_tail(vfile) -> None:
    """A chunk shared by a version and a later, shorter one is converted whole."""
    data = np.arange(1, 1185, dtype=np.float64)
    with vfile.stage_version("v1") as g:
        g.create_dataset("x", data=data, chunks=(256,), maxshape=(None,))
    with vfile.stage_version("v2") as g:
        g["x"].resize((493,))
    modify_metadata(vfile, "x", compression="gzip")
    np.testing.assert_array_equal(vfile["v1"]["x"][:], data)
    np.testing.assert_array_equal(vfile["v2"]["x"][:], data[:493])
