"""Sample columns: staging, committing, reading back, later stages, bad input."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

import h5vc
from h5vc.errors import (
    ColumnKeyError,
    ColumnKeyTypeError,
    InvalidOptionError,
    ReadOnlyError,
    SampleDtypeError,
    SampleShapeError,
)


def images(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 255, (n, 28, 28), dtype=np.uint8)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "columns.h5"


def test_round_trip_of_images_and_labels(path: Path) -> None:
    data = images(50)
    with h5vc.open(path, "a") as vf, vf.stage_version("v1") as g:
        col = g.create_column("images", shape=(28, 28), dtype="uint8")
        col["first"] = data[0]
        col.set_many([f"k{i}" for i in range(1, 50)], data[1:])
        labels = g.create_column("sub/labels", shape=(), dtype="int64")
        labels.update({i: i * 10 for i in range(50)})
        assert len(col) == 50 and "k3" in col
        np.testing.assert_array_equal(col["k3"], data[3])  # staged read
    with h5vc.open(path, "r") as vf:
        col = vf["v1"]["images"]
        assert (col.shape, col.dtype, col.backend, col.variable_shape) == (
            (28, 28),
            np.dtype("uint8"),
            "01",
            False,
        )
        assert list(col) == ["first", *(f"k{i}" for i in range(1, 50))]
        np.testing.assert_array_equal(col["first"], data[0])
        many = col.get_many(["k7", "first", "k7", "k49"])
        np.testing.assert_array_equal(many, data[[7, 0, 7, 49]])
        labels = vf["v1"]["sub"]["labels"]
        assert labels[7] == 70 and labels.get(99) is None and 99 not in labels
        assert dict(labels.items())[3] == 30
        assert vf["v1"]["sub/labels"].key_type == "int"


def test_later_stages_edit_and_earlier_versions_keep_their_samples(path: Path) -> None:
    data = images(20)
    with h5vc.open(path, "a") as vf:
        with vf.stage_version("v1") as g:
            g.create_column("c", shape=(28, 28), dtype="uint8").set_many(range(20), data)
        with vf.stage_version("v2") as g:
            col = g["c"]
            del col[3]
            col[5] = data[0]
            col[100] = data[1]
            col.pop(7)
        with vf.stage_version("v3") as g:
            g["c"][3] = data[3]  # back again
    with h5vc.open(path, "r") as vf:
        v1, v2, v3 = (vf[v]["c"] for v in ("v1", "v2", "v3"))
        assert sorted(v1) == list(range(20))
        assert sorted(v2) == sorted(set(range(20)) - {3, 7} | {100})
        np.testing.assert_array_equal(v2[5], data[0])
        np.testing.assert_array_equal(v1[5], data[5])
        np.testing.assert_array_equal(v2[100], data[1])
        assert sorted(v3) == sorted(set(v2) | {3})
        np.testing.assert_array_equal(v3[3], data[3])


def test_identical_samples_are_stored_once(path: Path) -> None:
    sample = images(1)[0]
    with h5vc.open(path, "a") as vf:
        with vf.stage_version("v1") as g:
            g.create_column("a", shape=(28, 28), dtype="uint8").set_many(range(5), [sample] * 5)
        with vf.stage_version("v2") as g:
            g.create_column("b", shape=(28, 28), dtype="uint8")["x"] = sample
        store = next(iter(vf.f["_h5vc_samples"].values()))
        assert int(store.attrs["count"]) == 1
        assert {int(r) for r in vf["v2"]["a"].records()["index"]} == {0}


def test_variable_shape_column(path: Path) -> None:
    shapes = [(3, 5), (10, 1), (0, 4), (10, 10)]
    rng = np.random.default_rng(1)
    samples = [rng.random(s).astype("f4") for s in shapes]
    with h5vc.open(path, "a") as vf, vf.stage_version("v1") as g:
        col = g.create_column(
            "spectra", shape=(10, 10), dtype="f4", backend="00", variable_shape=True
        )
        col.set_many(["a", "b", "c", "d"], samples)
        with pytest.raises(SampleShapeError, match=r"at most \(10, 10\)"):
            col["e"] = np.zeros((11, 2), "f4")
    with h5vc.open(path, "r") as vf:
        col = vf["v1"]["spectra"]
        got = col.get_many(["d", "a", "c", "b"])
        for sample, expected in zip(got, [samples[3], samples[0], samples[2], samples[1]]):
            np.testing.assert_array_equal(sample, expected)
        assert col.backend == "00" and col.variable_shape


def test_committed_columns_are_read_only(path: Path) -> None:
    with h5vc.open(path, "a") as vf:
        with vf.stage_version("v1") as g:
            staged = g.create_column("c", shape=(2,), dtype="i4")
            staged["a"] = np.array([1, 2], "i4")
        col = vf["v1"]["c"]
        for write in (
            lambda: col.__setitem__("b", np.zeros(2, "i4")),
            lambda: col.__delitem__("a"),
            lambda: col.set_many(["b"], np.zeros((1, 2), "i4")),
            lambda: staged.__setitem__("b", np.zeros(2, "i4")),
        ):
            with pytest.raises(ReadOnlyError):
                write()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


BAD_INPUTS = [
    ("unknown key", lambda col: col["nope"], ColumnKeyError),
    ("unknown key deleted", lambda col: col.__delitem__("nope"), ColumnKeyError),
    ("wrong shape", lambda col: col.__setitem__("a", np.zeros((3, 3), "u1")), SampleShapeError),
    ("wrong dtype", lambda col: col.__setitem__("a", np.zeros((2, 2), "f8")), SampleDtypeError),
    (
        "int key in str column",
        lambda col: col.__setitem__(5, np.zeros((2, 2), "u1")),
        ColumnKeyTypeError,
    ),
    ("float key", lambda col: col.__setitem__(1.5, np.zeros((2, 2), "u1")), ColumnKeyTypeError),
    (
        "bulk with one bad sample",
        lambda col: col.set_many(["x", "y"], [np.zeros((2, 2), "u1"), np.zeros((2, 3), "u1")]),
        SampleShapeError,
    ),
    (
        "bulk with one bad key",
        lambda col: col.set_many(["x", 3], np.zeros((2, 2, 2), "u1")),
        ColumnKeyTypeError,
    ),
    (
        "bulk of wrong dtype",
        lambda col: col.set_many(["x"], np.zeros((1, 2, 2), "i8")),
        SampleDtypeError,
    ),
    (
        "bulk count mismatch",
        lambda col: col.set_many(["x", "y"], np.zeros((1, 2, 2), "u1")),
        SampleShapeError,
    ),
]


@pytest.mark.parametrize(("what", "action", "error"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_raises_its_error_and_changes_nothing(
    path: Path, what: str, action, error: type[Exception]
) -> None:
    with h5vc.open(path, "a") as vf, vf.stage_version("v1") as g:
        g.create_column("c", shape=(2, 2), dtype="u1")["a"] = np.ones((2, 2), "u1")
    with h5vc.open(path, "a") as vf, vf.stage_version("v2") as g:
        col = g["c"]
        with pytest.raises(error):
            action(col)
        assert list(col) == ["a"] and not col.pending
        np.testing.assert_array_equal(col["a"], np.ones((2, 2), "u1"))
    with h5vc.open(path, "r") as vf:  # v2 links v1's column: nothing was written for it
        versions = vf.f["_version_data/versions"]
        assert versions["v2/c"].id == versions["v1/c"].id
        assert int(next(iter(vf.f["_h5vc_samples"].values())).attrs["count"]) == 1


@pytest.mark.parametrize(
    "options",
    [
        {"backend": "02"},
        {"backend": "01", "variable_shape": True},
        {"compression": {"complib": "nope", "complevel": 1, "shuffle": None}},
        {"variable_shape": "yes"},
    ],
)
def test_bad_column_settings_raise_and_leave_the_file_unchanged(path: Path, options) -> None:
    with h5vc.open(path, "a") as vf, vf.stage_version("v1") as g:
        g.create_column("c", shape=(2,), dtype="u1")
    before = digest(path)
    with h5vc.open(path, "a") as vf:
        with pytest.raises(InvalidOptionError), vf.stage_version("v2") as g:
            g.create_column("d", shape=(2,), dtype="u1", **options)
        assert "d" not in g
    assert digest(path) == before


@pytest.mark.parametrize("mode", ["r", "a"])
def test_get_many_of_many_scattered_keys(path: Path, mode: str) -> None:
    data = images(300, seed=4)
    with h5vc.open(path, "a") as vf, vf.stage_version("v1") as g:
        g.create_column("c", shape=(28, 28), dtype="uint8").set_many(range(300), data)
    wanted = np.random.default_rng(5).choice(300, 200).tolist()  # repeats too
    with h5vc.open(path, mode) as vf:
        np.testing.assert_array_equal(vf["v1"]["c"].get_many(wanted), data[wanted])


def test_get_many_reports_a_damaged_chunk_read_by_offset(path: Path) -> None:
    data = images(100, seed=6)
    with h5vc.open(path, "a") as vf:
        with vf.stage_version("v1") as g:
            g.create_column("c", shape=(28, 28), dtype="uint8").set_many(range(100), data)
        row = int(vf["v1"]["c"].records()["index"][50])
        (store,) = vf.f["_h5vc_samples"].values()
        mask, stored = store["0"].id.read_direct_chunk((row, 0, 0))
        damaged = bytearray(stored)
        damaged[len(damaged) // 2] ^= 0x55
        store["0"].id.write_direct_chunk((row, 0, 0), bytes(damaged), mask)
    with h5vc.open(path, "r") as vf, pytest.raises(h5vc.CorruptDataError, match=r"decode|xxhash64"):
        vf["v1"]["c"].get_many(list(range(0, 100, 2)))


def test_columns_in_the_versioned_hdf5_layout(path: Path) -> None:
    """Files in versioned-hdf5's layout (data_version 4) hold columns too: their tables
    are copied into each version instead of hard-linked."""
    import h5py

    data = images(10, seed=8)
    with h5py.File(path, "w") as f:
        vf = h5vc.VersionedHDF5File(f)
        f["_version_data/versions"].attrs["data_version"] = np.int64(4)
        vf = h5vc.VersionedHDF5File(f)
        with vf.stage_version("v1") as g:
            g.create_column("c", shape=(28, 28), dtype="uint8").set_many(range(10), data)
        with vf.stage_version("v2") as g:
            del g["c"][3]
    with h5vc.open(path, "r") as vf:
        assert vf.data_version == 4
        assert sorted(vf["v2"]["c"]) == [0, 1, 2, 4, 5, 6, 7, 8, 9]
        np.testing.assert_array_equal(vf["v1"]["c"].get_many([3, 9]), data[[3, 9]])
        assert h5vc.verify(vf).ok
