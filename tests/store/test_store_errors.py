"""Bad input: each case raises a specific error and leaves the file unchanged."""

from __future__ import annotations

import datetime
from collections.abc import Callable

import h5py
import numpy as np
import pytest
from store_helpers import file_digest, snapshot_group

import h5vc
from h5vc import (
    InvalidTimestampError,
    MetadataMismatchError,
    NotVersionedError,
    ReadOnlyError,
    UnsupportedFormatError,
    VersionedHDF5File,
    VersionExistsError,
    VersionNotFoundError,
)

pytestmark = pytest.mark.usefixtures("creation_path")

UTC = datetime.timezone.utc


@pytest.fixture
def filled(vf: VersionedHDF5File) -> VersionedHDF5File:
    """v1: x = arange(10) in chunks of 4, s = strings."""
    with vf.stage_version("v1", timestamp=datetime.datetime(2024, 1, 1, tzinfo=UTC)) as g:
        g.create_dataset("x", data=np.arange(10), chunks=(4,))
        g.create_dataset("m", data=np.zeros((3, 4)), chunks=(2, 2))
    return vf


@pytest.fixture
def filled4(tmp_path) -> object:
    """``filled`` in versioned-hdf5's layout (data_version 4): (file, versioned file)."""
    with h5py.File(tmp_path / "layout4.h5", "w") as f:
        vf = VersionedHDF5File(f, data_version=4)
        with vf.stage_version("v1", timestamp=datetime.datetime(2024, 1, 1, tzinfo=UTC)) as g:
            g.create_dataset("x", data=np.arange(10), chunks=(4,))
            g.create_dataset("m", data=np.zeros((3, 4)), chunks=(2, 2))
        yield f, vf


def assert_unchanged(f: h5py.Group, action: Callable[[], object], error, match: str | None = None):
    """``action()`` raises ``error`` (message matching ``match``) and ``f`` is as before."""
    before = snapshot_group(f)
    with pytest.raises(error, match=match) as info:
        action()
    assert snapshot_group(f) == before
    return info


def stage(vf: VersionedHDF5File, name: str, edit: Callable, **kwargs) -> Callable[[], None]:
    def run() -> None:
        with vf.stage_version(name, **kwargs) as g:
            edit(g)

    return run


def test_unknown_version(filled: VersionedHDF5File, h5file) -> None:
    for lookup in (lambda: filled["v9"], lambda: filled.get_version_by_name("v9")):
        info = assert_unchanged(h5file, lookup, VersionNotFoundError, "v9")
        assert isinstance(info.value, KeyError)
        assert "'v9'" in str(info.value)


def test_duplicate_version_name(filled: VersionedHDF5File, h5file) -> None:
    def edit(g):
        g["x"][0] = 100

    info = assert_unchanged(h5file, stage(filled, "v1", edit), VersionExistsError, "v1")
    assert isinstance(info.value, ValueError)
    assert filled["v1"]["x"][0] == 0


@pytest.mark.parametrize("name", ["", "a/b", "__first_version__", 5])
def test_bad_version_name(filled: VersionedHDF5File, h5file, name) -> None:
    assert_unchanged(h5file, stage(filled, name, lambda g: None), (ValueError, TypeError))


def test_staging_on_a_read_only_file(path: str) -> None:
    with h5vc.open(path, "w") as vf, vf.stage_version("v1") as g:
        g["x"] = np.arange(3)
    digest = file_digest(path)
    with h5py.File(path, "r") as f:
        vf = VersionedHDF5File(f)
        with pytest.raises(ReadOnlyError, match="read-only"):
            stage(vf, "v2", lambda g: None)()
        with pytest.raises(ReadOnlyError):
            vf.current_version = "v1"
        assert vf.versions == ["v1"]
    assert file_digest(path) == digest


def test_writing_to_a_committed_version(filled: VersionedHDF5File, h5file) -> None:
    x = filled["v1"]["x"]
    for write in (
        lambda: x.__setitem__(0, 5),
        lambda: x.resize((20,)),
        lambda: x.attrs.__setitem__("a", 1),
        lambda: filled["v1"].create_dataset("y", data=[1]),
        lambda: filled["v1"].__delitem__("x"),
    ):
        info = assert_unchanged(h5file, write, ReadOnlyError, "read-only")
        assert "v1" in str(info.value)


@pytest.mark.parametrize(
    "index, value",
    [
        (slice(0, 3), np.arange(4)),
        ((slice(None), 0), np.ones(3)),
        (slice(None), np.ones((2, 10))),
        (0, "not a number"),
        (15, 1),
        (-11, 1),
        ((1, 2), 1),
        ([1, 12], 1),
        (np.ones(9, dtype=bool), 1),
    ],
)
def test_bad_write_raises_numpy_error(filled: VersionedHDF5File, h5file, index, value) -> None:
    expected = np.arange(10)
    with pytest.raises(Exception) as numpy_error:
        expected[index] = value

    def edit(g):
        with pytest.raises(type(numpy_error.value)) as ours:
            g["x"][index] = value
        assert str(ours.value) == str(numpy_error.value)
        assert g["x"][()].tolist() == list(range(10))  # nothing was written
        raise ours.value

    assert_unchanged(h5file, stage(filled, "v2", edit), type(numpy_error.value))
    assert "v2" not in filled


@pytest.mark.parametrize("index", [10, -11, (0, 0), (slice(None), slice(None))])
def test_out_of_bounds_read(filled: VersionedHDF5File, index) -> None:
    with pytest.raises(IndexError) as numpy_error:
        np.arange(10)[index]
    with pytest.raises(IndexError) as ours:
        filled["v1"]["x"][index]
    assert str(ours.value) == str(numpy_error.value)


@pytest.mark.parametrize(
    "kwargs",
    [{"chunks": (5,)}, {"dtype": "f4"}, {"chunks": (4,), "dtype": "i2"}],
)
def test_changing_dtype_or_chunks_later(filled4, kwargs) -> None:
    """versioned-hdf5's layout has one chunk store per name: refused, as versioned-hdf5
    does (h5vc's layout gives the new dataset a store of its own, see
    tests/compat/test_recreated_datasets.py)."""
    h5file, filled = filled4

    def edit(g):
        del g["x"]
        g.create_dataset("x", data=np.arange(10), **kwargs)

    info = assert_unchanged(h5file, stage(filled, "v2", edit), MetadataMismatchError)
    assert isinstance(info.value, ValueError)
    assert "x" in str(info.value)
    assert "v2" not in filled


@pytest.mark.parametrize(
    "kwargs",
    [{"chunks": (5,)}, {"dtype": "f4"}, {"chunks": (4,), "dtype": "i2"}],
)
def test_changing_dtype_or_chunks_later_in_h5vc_layout(filled: VersionedHDF5File, kwargs) -> None:
    with filled.stage_version("v2") as g:
        del g["x"]
        g.create_dataset("x", data=np.arange(10, 20), **kwargs)
    x = filled["v2"]["x"]
    assert x.dtype == np.dtype(kwargs.get("dtype", "i8"))
    if "chunks" in kwargs:
        assert x.chunks == kwargs["chunks"]
    assert x[()].tolist() == list(range(10, 20))
    assert filled["v1"]["x"][()].tolist() == list(range(10))
    assert (filled["v1"]["x"].dtype, filled["v1"]["x"].chunks) == (np.dtype("i8"), (4,))


def test_commit_failing_after_a_write_leaves_later_commits_correct(filled4) -> None:
    h5file, filled = filled4

    # "m" is written (and its chunk map cached) before "x" fails; the partial version's
    # objects are freed, and objects of later commits may reuse their file space.
    def edit(g):
        g["m"][0, :] = 7
        del g["x"]
        g.create_dataset("x", data=np.arange(10), chunks=(5,))

    assert_unchanged(h5file, stage(filled, "v2", edit), MetadataMismatchError)
    expected = np.zeros((3, 4))
    for number in range(2, 6):
        with filled.stage_version(f"v{number}") as g:
            g["m"][number % 3, number % 4] = number
            g["x"][number] = -number
        expected[number % 3, number % 4] = number
        np.testing.assert_array_equal(filled[f"v{number}"]["m"][:], expected)
    np.testing.assert_array_equal(filled["v1"]["m"][:], np.zeros((3, 4)))
    np.testing.assert_array_equal(filled["v5"]["x"][:], [0, 1, -2, -3, -4, -5, 6, 7, 8, 9])


def test_same_dtype_and_chunks_may_be_recreated(filled: VersionedHDF5File) -> None:
    with filled.stage_version("v2") as g:
        del g["x"]
    with filled.stage_version("v3") as g:
        g.create_dataset("x", data=np.arange(5, 0, -1), chunks=(4,))
    assert filled["v3"]["x"][()].tolist() == [5, 4, 3, 2, 1]


@pytest.mark.parametrize(
    "timestamp",
    [
        datetime.datetime(2024, 2, 1),
        datetime.datetime(2024, 2, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=2))),
        "2024-02-01",
        1706745600,
    ],
)
def test_bad_timestamp(filled: VersionedHDF5File, h5file, timestamp) -> None:
    info = assert_unchanged(
        h5file, stage(filled, "v2", lambda g: None, timestamp=timestamp), InvalidTimestampError
    )
    assert isinstance(info.value, ValueError)
    if isinstance(timestamp, datetime.datetime):
        assert_unchanged(h5file, lambda: filled[timestamp], InvalidTimestampError)
        assert_unchanged(
            h5file, lambda: filled.get_version_by_timestamp(timestamp), InvalidTimestampError
        )


def test_plain_hdf5_file_opened_read_only(path: str) -> None:
    with h5py.File(path, "w") as f:
        f["data"] = np.arange(3)
    digest = file_digest(path)
    with h5py.File(path, "r") as f:
        with pytest.raises(NotVersionedError, match="versioned") as info:
            VersionedHDF5File(f)
        assert isinstance(info.value, ValueError)
    with pytest.raises(NotVersionedError), h5vc.open(path, "r"):
        pass
    assert file_digest(path) == digest


def test_not_a_group() -> None:
    with pytest.raises(TypeError):
        VersionedHDF5File("data.h5")  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["r", "r+"])
def test_newer_format_is_refused(path: str, mode: str) -> None:
    with h5vc.open(path, "w") as vf, vf.stage_version("v1") as g:
        g["x"] = np.arange(3)
    with h5py.File(path, "r+") as f:
        f["_version_data/versions"].attrs["data_version"] = np.int64(2000)
    digest = file_digest(path)
    with h5py.File(path, mode) as f:
        with pytest.raises(UnsupportedFormatError, match="2000") as info:
            VersionedHDF5File(f)
        assert isinstance(info.value, ValueError)
    assert file_digest(path) == digest


def test_writable_plain_file_is_initialized(path: str) -> None:
    with h5py.File(path, "w") as f:
        f["data"] = np.arange(3)
        vf = VersionedHDF5File(f)
        assert vf.versions == []
        assert f["data"][()].tolist() == [0, 1, 2]


def test_staging_a_second_version_at_once(filled: VersionedHDF5File, h5file) -> None:
    other = VersionedHDF5File(h5file)  # another handle on the same file shares its state
    with filled.stage_version("v2") as g:
        g["x"][0] = 100
        for handle in (filled, other):
            with (
                pytest.raises(ValueError, match=r"'v3'.*'v2' is being staged"),
                handle.stage_version("v3"),
            ):
                pass
    assert filled.versions == ["v1", "v2"]
    assert filled["v2"]["x"][0] == 100
    with other.stage_version("v3") as g:  # once the first stage is over
        g["x"][1] = 101
    assert filled["v3"]["x"][:2].tolist() == [100, 101]
