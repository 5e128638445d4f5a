"""Staged and committed groups behave like h5py groups."""

from __future__ import annotations

from collections.abc import ItemsView, KeysView, ValuesView
from typing import Any

import h5py
import numpy as np
import pytest
from store_helpers import assert_same_array

from h5vc import VersionedHDF5File


@pytest.fixture
def tree(vf: VersionedHDF5File) -> VersionedHDF5File:
    """v1 holds a/b/c, a/d, top and group attributes."""
    with vf.stage_version("v1") as g:
        g.create_dataset("a/b/c", data=np.arange(5), chunks=(2,))
        g["a/d"] = np.ones(3)
        g["top"] = np.array([7, 8])
        g["a"].attrs["level"] = "one"
        g["a/b"].attrs["level"] = 2
    return vf


def test_nested_paths(tree: VersionedHDF5File, h5file: h5py.File) -> None:
    v1 = tree["v1"]
    assert sorted(v1) == ["a", "top"]
    assert sorted(v1["a"]) == ["b", "d"]
    assert_same_array(v1["a/b/c"][()], np.arange(5))
    assert_same_array(v1["a"]["b"]["c"][()], np.arange(5))
    assert "a/b/c" in v1 and "a/b" in v1 and "a/x" not in v1 and "top/x" not in v1
    assert v1["a/b"].attrs["level"] == 2
    assert_same_array(h5file["_version_data/versions/v1/a/b/c"][()], np.arange(5))
    assert "raw_data" in h5file["_version_data/a/b/c"]


def test_keys_values_items(tree: VersionedHDF5File) -> None:
    for group in (tree["v1"]["a"],):
        assert sorted(group.keys()) == ["b", "d"]
        items = dict(group.items())
        assert set(items) == {"b", "d"}
        assert_same_array(items["d"][()], np.ones(3))
        assert len(group.values()) == 2
        assert len(group) == 2
    with tree.stage_version("v2") as g:
        assert sorted(g["a"].keys()) == ["b", "d"]
        assert_same_array(dict(g["a"].items())["d"][()], np.ones(3))


def check_live_views(group: Any) -> None:
    """keys(), values() and items() of ``group`` (holding b, d) are live views, as h5py's."""
    keys, values, items = group.keys(), group.values(), group.items()
    assert isinstance(keys, KeysView) and isinstance(values, ValuesView)
    assert isinstance(items, ItemsView)
    group["e"] = np.arange(2)  # the views made before see the change
    del group["d"]
    assert sorted(keys) == ["b", "e"] and len(keys) == 2 == len(values) == len(items)
    assert "e" in keys and "d" not in keys and "b/c" in keys  # paths, as h5py groups take
    assert keys & {"b", "x"} == {"b"} and keys - {"b"} == {"e"} and keys == {"b", "e"}
    assert group["e"] in values and ("e", group["e"]) in items and ("d", group["b"]) not in items
    assert sorted(name for name, _ in items) == ["b", "e"]
    assert repr(keys).endswith(" ['b', 'e']>")  # the names show, as h5py's <KeysViewHDF5 [...]>
    attribute_names = group.attrs.keys()
    group.attrs["level"] = 1
    assert isinstance(attribute_names, KeysView) and list(attribute_names) == ["level"]
    assert repr(attribute_names).endswith(" ['level']>")
    assert list(group.attrs.values()) == [1] and list(group.attrs.items()) == [("level", 1)]


def test_keys_values_items_are_live_views_like_h5py(
    tree: VersionedHDF5File, h5file: h5py.File
) -> None:
    plain = h5file.create_group("plain")  # the reference: an h5py group
    plain.create_group("b")["c"] = np.arange(5)
    plain["d"] = np.ones(3)
    check_live_views(plain)
    with tree.stage_version("v2") as g:
        check_live_views(g["a"])
    committed = tree["v2"]["a"]
    keys, values, items = committed.keys(), committed.values(), committed.items()
    assert keys == {"b", "e"} and keys | {"x"} == {"b", "e", "x"} and "b/c" in keys
    assert isinstance(values, ValuesView) and committed["e"] in values
    assert isinstance(items, ItemsView) and ("b", committed["b"]) in items
    assert list(committed.attrs.keys()) == ["level"] and ("level", 1) in committed.attrs.items()
    assert repr(keys) == "<NamesView ['b', 'e']>"


def test_visit(tree: VersionedHDF5File) -> None:
    seen: list[str] = []
    tree["v1"].visit(seen.append)
    assert seen == ["a", "a/b", "a/b/c", "a/d", "top"]  # h5py's order: depth first, sorted
    datasets: list[str] = []
    tree["v1"].visititems(
        lambda name, obj: datasets.append(name) if hasattr(obj, "dtype") else None
    )
    assert sorted(datasets) == ["a/b/c", "a/d", "top"]
    assert tree["v1"].visit(lambda name: name if name.endswith("c") else None) == "a/b/c"
    with tree.stage_version("v2") as g:
        g["a/e"] = np.arange(2)
        staged: list[str] = []
        g.visit(staged.append)
        assert staged == ["a", "a/b", "a/b/c", "a/d", "a/e", "top"]


def test_create_and_require_group(tree: VersionedHDF5File) -> None:
    with tree.stage_version("v2") as g:
        new = g.create_group("n/m")
        new["data"] = np.arange(4)
        assert sorted(g.require_group("a")) == ["b", "d"]
        assert sorted(g.require_group("fresh")) == []
        with pytest.raises(ValueError):
            g.create_group("a")
        with pytest.raises(TypeError):
            g.require_group("top")
    v2 = tree["v2"]
    assert sorted(v2) == ["a", "fresh", "n", "top"]
    assert_same_array(v2["n/m/data"][()], np.arange(4))


def test_delete(tree: VersionedHDF5File, h5file: h5py.File) -> None:
    with tree.stage_version("v2") as g:
        del g["a/b/c"]
        del g["top"]
        assert "top" not in g and "a/b/c" not in g and "a/b" in g
        with pytest.raises(KeyError):
            del g["top"]
    v2 = tree["v2"]
    assert sorted(v2) == ["a"]
    assert sorted(v2["a/b"]) == []
    assert "top" not in h5file["_version_data/versions/v2"]
    assert_same_array(tree["v1"]["top"][()], np.array([7, 8]))


def test_delete_group_and_recreate_dataset(tree: VersionedHDF5File) -> None:
    with tree.stage_version("v2") as g:
        del g["a"]
    with tree.stage_version("v3") as g:
        g.create_dataset("a/b/c", data=np.arange(10, 13), chunks=(2,))
    assert sorted(tree["v2"]) == ["top"]
    assert_same_array(tree["v3"]["a/b/c"][()], np.arange(10, 13))
    assert "level" not in tree["v3"]["a"].attrs
    assert_same_array(tree["v1"]["a/b/c"][()], np.arange(5))


def test_setitem_existing_name_replaces_create_dataset_refuses(tree: VersionedHDF5File) -> None:
    with tree.stage_version("v2") as g:
        g["top"].attrs["unit"] = "m"
        with pytest.raises(ValueError, match="dtypes are not compatible"):
            g["top"] = np.arange(3.0)
        assert_same_array(g["top"][()], np.array([7, 8]))
        g["top"] = np.arange(3, dtype=g["top"].dtype)  # versioned-hdf5's idiom: replace
        with pytest.raises(ValueError):
            g.create_dataset("a/d", data=np.arange(3))
    top = tree["v2"]["top"]
    assert_same_array(top[()], np.arange(3, dtype=top.dtype))
    assert top.attrs["unit"] == "m" and top.chunks == tree["v1"]["top"].chunks


def test_missing_member(tree: VersionedHDF5File) -> None:
    with pytest.raises(KeyError):
        tree["v1"]["nope"]
    assert tree["v1"].get("nope") is None
    with tree.stage_version("v2") as g, pytest.raises(KeyError):
        g["a/nope"]


def test_group_attrs_are_versioned(tree: VersionedHDF5File) -> None:
    with tree.stage_version("v2") as g:
        assert g["a"].attrs["level"] == "one"
        g["a"].attrs["level"] = "changed"
        g["a/b"].attrs["extra"] = np.arange(3)
    assert tree["v1"]["a"].attrs["level"] == "one"
    assert "extra" not in tree["v1"]["a/b"].attrs
    assert tree["v2"]["a"].attrs["level"] == "changed"
    assert tree["v2"]["a/b"].attrs["extra"].tolist() == [0, 1, 2]
    assert tree["v2"]["a/b"].attrs["level"] == 2


def test_committed_group_is_read_only(tree: VersionedHDF5File) -> None:
    v1 = tree["v1"]
    for action in (
        lambda: v1.create_dataset("y", data=[1]),
        lambda: v1.create_group("g"),
        lambda: v1.__setitem__("y", [1]),
        lambda: v1.__delitem__("top"),
        lambda: v1.attrs.__setitem__("k", 1),
        lambda: v1["a"].attrs.__setitem__("k", 1),
    ):
        with pytest.raises(ValueError, match="read-only"):
            action()
    assert sorted(tree["v1"]) == ["a", "top"]


def test_staged_reads_see_staged_writes(tree: VersionedHDF5File) -> None:
    with tree.stage_version("v2") as g:
        g["a/b/c"][1:3] = [10, 20]
        assert g["a/b/c"][:].tolist() == [0, 10, 20, 3, 4]
        x = g["a/b/c"]
        x[4] = 40
        assert g["a/b/c"][4] == 40
    assert tree["v2"]["a/b/c"][:].tolist() == [0, 10, 20, 3, 40]


ATTR_VALUES = {
    "int": 3,
    "float": 1.5,
    "text": "caf\u00e9",
    "bytes": b"raw",
    "ints": [1, 2, 3],
    "nested": [[1, 2], [3, 4]],
    "texts": ["a", "bc"],
    "object_texts": np.array(["x", "yz"], dtype=object),
    "float32": np.float32(0.25),
    "bools": np.array([True, False]),
}


@pytest.mark.parametrize("key", sorted(ATTR_VALUES))
def test_attribute_values_read_back_as_h5py_does(vf: VersionedHDF5File, tmp_path, key) -> None:
    value = ATTR_VALUES[key]
    with h5py.File(tmp_path / "plain.h5", "w") as plain:
        plain.attrs[key] = value
        expected = plain.attrs[key]
    with vf.stage_version("v1") as g:
        g.attrs[key] = value
        g.create_group("sub").attrs[key] = value
        g.create_dataset("x", data=[1]).attrs[key] = value
    for obj in (vf["v1"], vf["v1"]["sub"], vf["v1"]["x"]):
        got = obj.attrs[key]
        assert type(got) is type(expected)
        if isinstance(expected, np.ndarray):
            assert got.dtype == expected.dtype
            assert got.tolist() == expected.tolist()
        else:
            assert got == expected


@pytest.mark.parametrize("value", [{"a": 1}, None, np.array(["a", "b"]), object()])
def test_unstorable_attribute_is_refused_when_set(vf: VersionedHDF5File, value) -> None:
    with vf.stage_version("v1") as g:
        g["x"] = np.arange(3)
        for attrs in (g.attrs, g["x"].attrs):
            with pytest.raises(TypeError):
                attrs["bad"] = value
            assert "bad" not in attrs
        g.attrs["good"] = 1
    assert vf["v1"].attrs["good"] == 1
    assert "bad" not in vf["v1"].attrs and "bad" not in vf["v1"]["x"].attrs


@pytest.mark.parametrize("track_order", [False, True])
def test_member_names_in_h5pys_order(tmp_path: Any, track_order: bool) -> None:
    """The names a staged group lists of its base are h5py's, in h5py's order (by
    name, or by creation where the group tracks it), non-ASCII names included."""
    from h5vc.wrappers.group import member_names

    with h5py.File(tmp_path / "names.h5", "w") as f:
        group = f.create_group("g", track_order=track_order)
        for name in ["b", "a", "Z", "é", "a b", "10", "9"]:
            group.create_group(name)
        assert member_names(group) == list(group)
        assert member_names(f.create_group("empty")) == []


def test_staged_keys_list_the_base_once_edits_included(tree: VersionedHDF5File) -> None:
    names = set(tree[tree.current_version])
    with tree.stage_version("names") as g:
        assert set(g) == names
        g.create_dataset("zz", data=np.arange(3))
        first = sorted(names)[0]
        del g[first]
        assert set(g) == (names - {first}) | {"zz"}
        assert set(g.keys()) == set(g)
    assert set(tree["names"]) == (names - {first}) | {"zz"}
