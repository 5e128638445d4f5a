"""Lookups of paths that may not exist walk one link at a time: HDF5 is never asked
for a multi-link path that fails halfway (h5py has been seen to raise
UnicodeDecodeError decoding the error stack of such a lookup, not KeyError)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import h5vc
from h5vc.store.tree import find, find_group


@pytest.fixture
def tree_file(tmp_path: Path):
    with h5py.File(tmp_path / "t.h5", "w") as f:
        f.create_group("a/b").create_dataset("d", data=[1, 2])
        f["a"].create_dataset("x", data=3)
        yield f


def _single_links_only(monkeypatch: pytest.MonkeyPatch) -> None:
    real = h5py.Group._get  # behind both [] and get()

    def lookup(self: h5py.Group, name: Any, *args: Any) -> Any:
        if isinstance(name, str) and "/" in name.strip("/") and name not in self:
            raise AssertionError(f"a multi-link lookup of {name!r}, which fails halfway")
        return real(self, name, *args)

    monkeypatch.setattr(h5py.Group, "_get", lookup)


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("a/b/d", h5py.Dataset),
        ("a/b", h5py.Group),
        ("/a/b/", h5py.Group),
        ("a/x", h5py.Dataset),
        ("a/missing/d", None),
        ("missing/b", None),
        ("a/x/below", None),  # through a dataset
        ("a/b/d/below", None),
    ],
)
def test_find_walks_link_by_link(tree_file, monkeypatch, path: str, kind: Any) -> None:
    _single_links_only(monkeypatch)
    found = find(tree_file, path)
    assert found is None if kind is None else isinstance(found, kind)
    group = find_group(tree_file, path)
    assert (group is not None) == (kind is h5py.Group)


def test_store_lookups_of_missing_parents(tmp_path: Path, monkeypatch) -> None:
    """Staging a dataset under a new group asks for its store through missing groups."""
    path = tmp_path / "v.h5"
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(4))
        _single_links_only(monkeypatch)
        with vf.stage_version("v2") as g:
            g.create_group("g").create_dataset("c", data=np.arange(3))
        assert vf.file_state.stores.get("g/missing/c") is None
        assert vf.file_state.stores.get("x/below") is None
    with h5vc.open(path, "r") as vf:
        np.testing.assert_array_equal(vf["v2"]["g"]["c"][:], np.arange(3))
