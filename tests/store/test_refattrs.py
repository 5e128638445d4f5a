"""Refs written by h5vc.store.refattrs are the attributes h5py writes for a str, and
read back as written."""

from __future__ import annotations

from pathlib import Path

import h5py
import pytest

from h5vc.store import refattrs


def _same_as_h5py(group: h5py.Group, key: str, value: str) -> None:
    """``group.attrs[key]`` is what h5py's ``attrs[...] = value`` writes."""
    group.attrs["by_h5py"] = value
    mine, reference = group.attrs.get_id(key), group.attrs.get_id("by_h5py")
    assert mine.get_type() == reference.get_type()
    assert mine.get_type().get_cset() == reference.get_type().get_cset() == h5py.h5t.CSET_UTF8
    assert mine.get_type().is_variable_str()
    assert mine.get_space().get_simple_extent_type() == h5py.h5s.SCALAR
    assert mine.shape == reference.shape == ()
    assert group.attrs[key] == group.attrs["by_h5py"] == value
    assert type(group.attrs[key]) is str
    del group.attrs["by_h5py"]


@pytest.mark.parametrize("name", ["main", "feature/ünï ✓", "a" * 300])
def test_refs_are_stored_as_h5py_stores_a_str(tmp_path: Path, name: str) -> None:
    with h5py.File(tmp_path / "a.h5", "w") as f:
        versions = f.create_group("versions")
        versions.attrs["current_version"] = "v1"
        for version in ("v1", "a much longer version name ✓", "v2", ""):
            refattrs.write_ref(versions, "branch", name, version)
            _same_as_h5py(versions, f"h5vc_branch:{name}", version)
        refattrs.write_ref(versions, "tag", name, "v1")
        _same_as_h5py(versions, f"h5vc_tag:{name}", "v1")
        refattrs.set_current_branch(versions, name)
        _same_as_h5py(versions, "h5vc_current_branch", name)
        assert refattrs.read_refs(versions) == ({"branch": {name: ""}, "tag": {name: "v1"}}, name)
        refattrs.delete_ref(versions, "branch", name)
        refattrs.set_current_branch(versions, None)
        refattrs.set_current_branch(versions, None)  # none: nothing to delete
        assert refattrs.read_refs(versions) == ({"branch": {}, "tag": {name: "v1"}}, None)
        with pytest.raises(KeyError):
            refattrs.delete_ref(versions, "branch", name)
        assert sorted(versions.attrs) == ["current_version", f"h5vc_tag:{name}"]


def test_refs_written_by_h5py_are_read(tmp_path: Path) -> None:
    """Refs written through h5py (older files) read and move as h5vc's own."""
    with h5py.File(tmp_path / "a.h5", "w") as f:
        versions = f.create_group("versions")
        versions.attrs["h5vc_branch:main"] = "v1"
        versions.attrs["h5vc_current_branch"] = "main"
        assert refattrs.read_refs(versions) == ({"branch": {"main": "v1"}, "tag": {}}, "main")
        refattrs.write_ref(versions, "branch", "main", "v2")
        _same_as_h5py(versions, "h5vc_branch:main", "v2")
