"""The members of a group of many symbol nodes, read at once (FileBytes._many_symbols),
are those read node by node, in HDF5's order of names."""

from __future__ import annotations

from pathlib import Path

import h5py
import pytest

from h5vc.hdf5 import filebytes
from h5vc.hdf5.filebytes import FileBytes, Unreadable

#: ASCII names (a name of other characters makes HDF5 keep the links in the header).
NAMES = [f"m{n:04d}" for n in range(300)] + ["z", "Z", "_", "a b", "0"]


def _links(path: Path, group: str) -> list[tuple[str, int]] | None:
    with h5py.File(path, "r") as f:
        file_bytes = FileBytes.of(f)
        assert file_bytes is not None
        with file_bytes:
            address = h5py.h5o.get_info(f[group].id).addr
            return file_bytes.links(file_bytes.header(address))


@pytest.fixture
def many(tmp_path: Path) -> Path:
    path = tmp_path / "many.h5"
    with h5py.File(path, "w", libver="earliest") as f:  # a symbol table
        group = f.create_group("g")
        for name in NAMES:
            group.create_group(name)
    return path


@pytest.mark.parametrize("few", [4, 10**6])
def test_many_symbol_nodes_read_at_once_or_node_by_node(many, monkeypatch, few):
    monkeypatch.setattr(filebytes, "_FEW_NODES", few)
    links = _links(many, "g")
    assert links is not None
    with h5py.File(many, "r") as f:
        group = f["g"]
        expected = [(name, h5py.h5o.get_info(group[name].id).addr) for name in group]
    assert links == expected  # HDF5 lists them by name, in the bytes' order
    assert sorted(name for name, _ in links) == sorted(NAMES)


@pytest.mark.parametrize("few", [4, 10**6])
def test_a_soft_link_among_many_symbols_is_unreadable(many, monkeypatch, few):
    monkeypatch.setattr(filebytes, "_FEW_NODES", few)
    with h5py.File(many, "r+") as f:
        f["g"]["soft"] = h5py.SoftLink("/g/m0001")
    with pytest.raises(Unreadable):
        _links(many, "g")
