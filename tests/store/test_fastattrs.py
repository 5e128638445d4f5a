"""Attributes written by h5vc.store.fastattrs are those h5py writes for the same value."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from h5vc.hdf5.clib import short_writes, string_buffer
from h5vc.store import fastattrs, tree

VALUES = [
    "v1",
    "ünïcode ✓",
    "",
    np.int64(-(2**40)),
    np.bool_(True),
    np.bool_(False),
    np.asarray([4096, 8], dtype=np.int64),
    np.asarray([7], dtype=np.int64),
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_an_attribute_is_written_as_h5py_writes_it(tmp_path: Path, value: object) -> None:
    with h5py.File(tmp_path / "a.h5", "w") as f:
        ours, theirs = f.create_group("ours"), f.create_group("theirs")
        ours.attrs["a"] = 3.5  # replaced, type and all
        assert fastattrs.write(ours, "a", value)
        theirs.attrs["a"] = value
        mine, reference = ours.attrs.get_id("a"), theirs.attrs.get_id("a")
        assert mine.get_type() == reference.get_type()
        assert mine.get_type().get_class() == reference.get_type().get_class()
        assert mine.shape == reference.shape
        assert mine.get_space().get_simple_extent_type() == (
            reference.get_space().get_simple_extent_type()
        )
        got, expected = ours.attrs["a"], theirs.attrs["a"]
        assert type(got) is type(expected)
        assert np.array_equal(got, expected)
        assert list(ours.attrs) == ["a"]


@pytest.mark.parametrize("value", VALUES, ids=repr)
@pytest.mark.parametrize("hdf5_calls", [True, False], ids=["hdf5 calls", "h5py"])
def test_an_attribute_of_a_new_object_is_written_as_h5py_writes_it(
    tmp_path: Path, value: object, hdf5_calls: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``new=True`` (an object just created: no attribute looked for) writes the same,
    with HDF5's calls alone (where the library is found) or through h5py."""
    if not hdf5_calls:
        monkeypatch.setattr(fastattrs, "short_writes", lambda: None)
    with h5py.File(tmp_path / "a.h5", "w") as f:
        ours, theirs = f.create_group("ours"), f.create_group("theirs")
        assert fastattrs.write(ours, "a", value, new=True)
        tree.write_attrs(ours, {"b": value, "c": [1.5]}, new=True)
        theirs.attrs["a"] = value
        for name in ("a", "b"):
            mine, reference = ours.attrs.get_id(name), theirs.attrs.get_id("a")
            assert mine.get_type() == reference.get_type()
            assert mine.shape == reference.shape
            assert np.array_equal(ours.attrs[name], theirs.attrs["a"])
        assert list(ours.attrs) == ["a", "b", "c"]


@pytest.mark.parametrize(
    "value",
    [1, 2.5, np.float64(1.0), np.int32(3), np.asarray([1.0]), np.zeros((2, 2), dtype=np.int64)],
    ids=repr,
)
def test_other_values_are_left_to_h5py(tmp_path: Path, value: object) -> None:
    with h5py.File(tmp_path / "a.h5", "w") as f:
        assert not fastattrs.write(f, "a", value)
        assert "a" not in f.attrs
        tree.write_attrs(f, {"a": value})
        assert np.array_equal(f.attrs["a"], value)


@pytest.mark.parametrize(
    ("before", "value"),
    [
        (np.int64(5), np.int64(-(2**40))),  # the same kind: written in place
        (np.bool_(False), np.bool_(True)),
        (np.int32(5), np.int64(7)),  # another type: replaced
        (np.asarray([1], dtype=np.int64), np.int64(7)),  # not scalar: replaced
        (np.int64(5), "text"),
        ("text", np.int64(3)),
        ("text", "other text, longer"),  # a string over a string: in place
        ("text", ""),
        (np.bytes_(b"text"), "text"),  # a fixed-length string: replaced
        (np.asarray(["a"], dtype=h5py.string_dtype()), "a"),
        (np.asarray([1, 2], dtype=np.int64), np.asarray([3, 4], dtype=np.int64)),  # in place
        (np.asarray([1, 2], dtype=np.int64), np.asarray([3, 4, 5], dtype=np.int64)),
        (np.asarray([[1, 2]], dtype=np.int64), np.asarray([3, 4], dtype=np.int64)),
    ],
    ids=repr,
)
def test_an_attribute_written_again_is_as_h5py_writes_it(
    tmp_path: Path, before: object, value: object
) -> None:
    with h5py.File(tmp_path / "a.h5", "w") as f:
        ours, theirs = f.create_group("ours"), f.create_group("theirs")
        ours.attrs["z"] = 1.0
        ours.attrs["a"] = before
        assert fastattrs.write(ours, "a", value)
        theirs.attrs["a"] = value
        mine, reference = ours.attrs.get_id("a"), theirs.attrs.get_id("a")
        assert mine.get_type() == reference.get_type()
        assert mine.shape == reference.shape
        got, expected = ours.attrs["a"], theirs.attrs["a"]
        assert type(got) is type(expected)
        assert np.array_equal(got, expected)
        assert sorted(ours.attrs) == ["a", "z"]


def test_read_str_reads_what_h5py_reads(tmp_path: Path) -> None:
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f.attrs["s"] = "ünïcode ✓"
        f.attrs["e"] = ""
        f.attrs["fixed"] = np.bytes_(b"v1")  # fixed-length: left to h5py
        f.attrs["n"] = np.int64(3)
        f.attrs["a"] = np.array(["x", "y"], dtype=h5py.string_dtype())
        assert fastattrs.read_str(f, "s") == f.attrs["s"] == "ünïcode ✓"
        assert fastattrs.read_str(f, "e") == ""
        for name in ("fixed", "n", "a", "missing"):
            assert fastattrs.read_str(f, name) is None
        versions = f.create_group("versions")
        versions.attrs["current_version"] = np.bytes_(b"v7")
        assert tree.current_version(versions) == b"v7"
        tree.set_current_version(versions, "v8")
        assert tree.current_version(versions) == "v8"
        del versions.attrs["current_version"]
        with pytest.raises(KeyError):
            tree.current_version(versions)


@pytest.mark.parametrize(
    "values",
    [
        ["v1", "a longer version name ✓", "v2"],
        [np.asarray([4096, i], dtype=np.int64) for i in (1, 2)],
    ],
    ids=["str", "int64 array"],
)
def test_an_attribute_written_again_keeps_its_place(tmp_path: Path, values: list) -> None:
    """Written over in place: the file stops growing however often a value is written
    again (a string deleted with its attribute stays in the file's global heap)."""
    with h5py.File(tmp_path / "a.h5", "w") as f:
        group = f.create_group("versions")
        group.attrs["before"] = "x"
        group.attrs["after"] = "y"
        sizes = []
        for number in range(3000):
            assert fastattrs.write(group, "a", values[number % len(values)])
            if number % 1000 == 999:
                f.flush()
                sizes.append(f.id.get_filesize())
        assert sizes[0] == sizes[1] == sizes[2]
        assert sorted(group.attrs) == ["a", "after", "before"]
        assert np.array_equal(group.attrs["a"], values[2999 % len(values)])


def test_a_string_written_over_is_as_h5py_writes_it(tmp_path: Path) -> None:
    with h5py.File(tmp_path / "a.h5", "w") as f:
        assert fastattrs.write(f, "a", "v1")
        for value in ("a longer value ✓", "v2"):
            fastattrs.write_str_over(f, "a", value)
            f.attrs["by_h5py"] = value
            assert f.attrs.get_id("a").get_type() == f.attrs.get_id("by_h5py").get_type()
            assert f.attrs.get_id("a").shape == ()
            assert f.attrs["a"] == value and type(f.attrs["a"]) is str
        with pytest.raises(KeyError):
            fastattrs.write_str_over(f, "missing", "v1")


@pytest.mark.parametrize("text", ["nul \0 inside", "surrogate \udcff"], ids=repr)
def test_strings_hdf5_takes_no_c_string_of_are_left_to_h5py(text: str) -> None:
    assert string_buffer(text) is None
    assert string_buffer("ü✓") is not None


def test_the_hdf5_calls_are_those_of_h5pys_library() -> None:
    calls = short_writes()
    assert calls is not None  # h5py's library is found among the mapped files here
    assert calls is short_writes()


@pytest.mark.parametrize("hdf5_calls", [True, False], ids=["hdf5 calls", "h5py"])
def test_a_new_attribute_of_a_name_taken_raises_and_changes_nothing(
    tmp_path: Path, hdf5_calls: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not hdf5_calls:
        monkeypatch.setattr(fastattrs, "short_writes", lambda: None)
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f.attrs["a"] = "kept"
        for value in ("other", np.int64(3), np.asarray([1, 2], dtype=np.int64)):
            with pytest.raises(OSError):
                fastattrs.write(f, "a", value, new=True)
            assert f.attrs["a"] == "kept"
            assert list(f.attrs) == ["a"]
