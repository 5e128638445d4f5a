"""verify reads which versions hold each dataset object from a read-only file's bytes."""

from __future__ import annotations

import importlib
import struct
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from group_kinds import rebuild_groups

import h5vc
from h5vc.versions.state import resolve_state

verify_module = importlib.import_module("h5vc.lifecycle.verify")


@pytest.fixture(params=["symbol-table", "header-1", "header-2"])
def versioned(tmp_path: Path, request: Any) -> Path:
    """Versions sharing unchanged datasets and groups (hard links), a deleted version,
    and groups of the kind named by the parameter."""
    path = tmp_path / "shared.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(40), chunks=(10,))
            g.create_group("g").create_dataset("y", data=np.arange(6.0), chunks=(3,))
            g.create_group("deep").create_group("h").create_dataset("k", data=np.arange(4))
            g.create_group("empty")
        with vf.stage_version("v2") as g:
            g["x"][3] = -1
        with vf.stage_version("v3") as g:
            g["g"]["y"][0] = 2.0
            del g["deep"]
        with vf.stage_version("v4") as g:
            g.create_dataset("w", data=np.arange(5), chunks=(5,))
        h5vc.delete_versions(vf, ["v2"])
    if request.param != "symbol-table":
        with h5py.File(path, "r+") as f:
            rebuild_groups(f["_version_data/versions"], int(request.param[-1]))
    return path


def _holders_through_hdf5(state: Any, names: list[str], monkeypatch: Any) -> dict[int, set[str]]:
    with monkeypatch.context() as patch:
        patch.setattr(verify_module.FileBytes, "of", classmethod(lambda cls, f: None))
        return dict(verify_module._versions_by_object(state, names))


def test_holders_read_from_bytes_are_those_hdf5_walks(versioned, monkeypatch):
    """Every dataset object and the versions holding it, through shared groups: the
    same from the bytes as from HDF5's walk (which the bytes path does not call)."""
    from_bytes_calls: list[int] = []
    real = verify_module._holders_from_bytes

    def spy(*args: Any) -> Any:
        found = real(*args)
        from_bytes_calls.append(len(found))
        return found

    monkeypatch.setattr(verify_module, "_holders_from_bytes", spy)
    with h5py.File(versioned, "r") as f:
        state = resolve_state(f)
        names = state.log.names()
        from_bytes = dict(verify_module._versions_by_object(state, names))
        through_hdf5 = _holders_through_hdf5(state, names, monkeypatch)
    assert from_bytes_calls == [len(from_bytes)]
    assert from_bytes == through_hdf5
    held = sorted(sorted(versions) for versions in from_bytes.values())
    # x twice (v1; v3, v4), y twice (v1; v3, v4), k once, w once.
    assert held == [["v1"], ["v1"], ["v1"], ["v3", "v4"], ["v3", "v4"], ["v4"]]


def test_verify_reports_the_same_from_bytes_and_through_hdf5(versioned, monkeypatch):
    with h5py.File(versioned, "r") as f:
        report = h5vc.verify(f)
    with monkeypatch.context() as patch:
        patch.setattr(verify_module.FileBytes, "of", classmethod(lambda cls, f: None))
        with h5py.File(versioned, "r") as f:
            through_hdf5 = h5vc.verify(f)
    assert report.ok and through_hdf5.ok
    assert str(report) == str(through_hdf5)
    assert report.dataset_objects == 6


def test_a_damaged_group_read_from_bytes_is_left_to_hdf5(versioned, tmp_path, monkeypatch):
    """A group of a version whose bytes disagree with themselves is read through HDF5,
    which reports the damage as it did before (the bytes path raises nothing)."""
    with h5py.File(versioned, "r") as f:
        address = h5py.h5o.get_info(f["_version_data/versions/v4/g"].id).addr
    data = bytearray(versioned.read_bytes())
    data[address : address + 4] = b"\xff\xff\xff\xff"
    damaged = tmp_path / "damaged.h5"
    damaged.write_bytes(bytes(data))
    seen: list[str] = []

    def outcome(path: Path) -> str:
        try:
            with h5py.File(path, "r") as f:
                return str(h5vc.verify(f)).replace(str(path), "FILE")
        except Exception as error:  # compared below, not hidden
            return f"{type(error).__name__}"

    seen.append(outcome(damaged))
    monkeypatch.setattr(verify_module.FileBytes, "of", classmethod(lambda cls, f: None))
    seen.append(outcome(damaged))
    assert seen[0] == seen[1]
    assert "problem" in seen[0] or "Error" in seen[0]


def test_chunk_maps_read_without_opening_datasets_are_hdf5s(versioned, monkeypatch):
    """In a read-only file each dataset object's chunk map is read from its header's
    bytes and its chunks attribute: the same map HDF5 gives, and verify opens no
    dataset object for it."""
    from h5vc.store import tree

    with h5py.File(versioned, "r") as f:
        state = resolve_state(f)
        datasets = tree.collect_datasets(state.versions, state.log.names())
        objects = [obj for found in datasets.values() for obj in found.values()]
        collections: dict[int, dict[int, bytes]] = {}
        for obj in objects:
            fast = verify_module._chunk_map(state, obj, collections)
            slow = obj.chunk_map()
            assert (fast.shape, fast.chunks, fast.source, fast.blocks) == (
                slow.shape,
                slow.chunks,
                slow.source,
                slow.blocks,
            )
            np.testing.assert_array_equal(fast.slots, slow.slots)
        assert len(objects) == 6 and collections
    opened: list[str] = []
    real = tree.DatasetObject.chunk_map

    def spy(self: Any) -> Any:
        opened.append(self.path)
        return real(self)

    monkeypatch.setattr(tree.DatasetObject, "chunk_map", spy)
    with h5py.File(versioned, "r") as f:
        assert h5vc.verify(f).ok
    assert opened == []
    with h5py.File(versioned, "r+") as f:  # open for writing: HDF5 reads every map
        assert h5vc.verify(f).ok
    assert len(opened) == 6


def test_a_mapping_list_whose_checksum_disagrees_is_reported(versioned, tmp_path):
    """The mapping list decodes, but its checksum disagrees with it: verify (which
    reads it without HDF5 opening the dataset) reports the object as HDF5 does."""
    from h5vc.hdf5.filebytes import FileBytes

    with h5py.File(versioned, "r") as f:
        address = h5py.h5o.get_info(f["_version_data/versions/v4/w"].id).addr
        file_bytes = FileBytes.of(f)
        assert file_bytes is not None
        with file_bytes:
            header = file_bytes.header(address)
            assert file_bytes.mappings(header, 1) is not None  # a list of the plain form
            layout_at = header.messages[0x0008][0]
            heap, index = struct.unpack_from("<QI", file_bytes.map, layout_at + 2)
            start, length = file_bytes._collection(heap)[index]
            checksum_at = start + length - 4 - file_bytes.base
    data = bytearray(versioned.read_bytes())
    data[checksum_at] ^= 0xFF
    damaged = tmp_path / "damaged.h5"
    damaged.write_bytes(bytes(data))
    with h5py.File(damaged, "r") as f:
        report = h5vc.verify(f)
    [problem] = report.problems
    assert problem.kind == "mapping" and problem.datasets == ("w",)
    assert "checksum" in problem.message
