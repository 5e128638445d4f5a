"""The layout's groups are new-style HDF5 groups with their links in the header.

An old-style group (symbol table) holding 100 links costs about 10 KB of B-tree and
local heap; these tests read the object headers back through h5py's low-level
interface to check what kind of group the layout wrote, and that plain h5py reads
every version as it was written.
"""

from __future__ import annotations

import h5py
import numpy as np
import pytest

import h5vc
from h5vc import VersionedHDF5File
from h5vc.store import groups

DATASETS = 100


def _link_storage(group: h5py.Group) -> tuple[int, int]:
    """(B-tree or index bytes, heap bytes) of ``group``'s link storage."""
    info = h5py.h5o.get_info(group.id)
    return info.meta_size.obj.index_size, info.meta_size.obj.heap_size


def _write_tiny(path: str, commits: int = 5) -> np.ndarray:
    data = np.arange(DATASETS * 3, dtype=np.int64).reshape(DATASETS, 3)
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v0") as g:
            for i in range(DATASETS):
                g.create_dataset(f"d{i:03d}", data=data[i], chunks=(3,))
        for n in range(1, commits + 1):
            with vf.stage_version(f"v{n}") as g:
                g[f"d{n - 1:03d}"][n % 3] = -n
            data[n - 1, n % 3] = -n
    return data


def test_version_and_store_groups_keep_links_in_their_header(path: str) -> None:
    _write_tiny(path)
    with h5py.File(path, "r") as f:
        version = f["_version_data/versions/v5"]
        assert len(version) == DATASETS
        assert _link_storage(version) == (0, 0)
        header = h5py.h5o.get_info(version.id).hdr.space.total
        assert header < 40 * DATASETS  # about 25 bytes a link, no B-tree or heap
        assert _link_storage(f["_version_data"]) == (0, 0)
        assert _link_storage(f["_version_data/d000"]) == (0, 0)
        # Members are listed by name (not by creation order), as in old-style groups.
        assert list(version) == sorted(version)
        assert list(f["_version_data/d000"]) == ["hash_table", "raw_data"]


def test_plain_h5py_reads_every_version(path: str) -> None:
    data = _write_tiny(path)
    with h5py.File(path, "r") as f:
        got = np.stack([f[f"_version_data/versions/v5/d{i:03d}"][()] for i in range(DATASETS)])
    np.testing.assert_array_equal(got, data)
    with h5py.File(path, "r") as f:
        vf = VersionedHDF5File(f)
        assert vf["v2"]["d001"][()].tolist() == [3, 4, -2]
        assert vf["v1"]["d001"][()].tolist() == [3, 4, 5]


def test_large_group_moves_to_dense_storage_and_back(tmp_path) -> None:
    with h5py.File(tmp_path / "g.h5", "w") as f:
        target = f.create_dataset("x", data=[1])
        group = groups.new_group(f, "g")
        for i in range(groups.COMPACT_LINKS + 1):
            group[f"n{i:05d}"] = target
        assert _link_storage(group)[0] > 0  # a v2 B-tree indexes the names now
        assert list(group)[:2] == ["n00000", "n00001"]
        for i in range(groups.COMPACT_LINKS // 2):
            del group[f"n{i:05d}"]
        assert _link_storage(group) == (0, 0)
        assert len(group) == groups.COMPACT_LINKS + 1 - groups.COMPACT_LINKS // 2
        assert group[f"n{groups.COMPACT_LINKS:05d}"][()].tolist() == [1]


def test_require_groups_refuses_a_dataset_on_the_path(tmp_path) -> None:
    with h5py.File(tmp_path / "g.h5", "w") as f:
        f["a/b"] = [1]
        with pytest.raises(TypeError, match="/a/b"):
            groups.require_groups(f, "a/b/c")
        assert groups.require_groups(f, "a/c/d").name == "/a/c/d"
        assert "d" in f["a/c"]


def test_hash_table_chunks_follow_small_chunks(path: str) -> None:
    with h5vc.open(path, "w") as vf, vf.stage_version("v1") as g:
        g.create_dataset("tiny", data=np.arange(3), chunks=(3,))
        g.create_dataset("small", data=np.arange(2000, dtype=np.int32), chunks=(256,))
        g.create_dataset("big", data=np.arange(5000.0), chunks=(1000,))
    with h5py.File(path, "r") as f:
        assert f["_version_data/tiny/hash_table"].chunks == (8,)  # the least
        assert f["_version_data/small/hash_table"].chunks == (16,)  # 768 <= 1024 bytes
        assert f["_version_data/big/hash_table"].chunks == (64,)  # the most
    with h5vc.open(path, "r+") as vf:
        for n in range(2, 14):  # more chunks than one hash-table chunk holds
            with vf.stage_version(f"v{n}") as g:
                g["tiny"][0] = n
        assert vf["v13"]["tiny"][()].tolist() == [13, 1, 2]
        assert vf["v5"]["tiny"][()].tolist() == [5, 1, 2]
    with h5py.File(path, "r") as f:
        assert f["_version_data/tiny/hash_table"].attrs["largest_index"] == 13
