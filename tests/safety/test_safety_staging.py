"""Bad calls while staging: refused at once, and nothing of them reaches the file."""

from __future__ import annotations

import datetime
import os

import h5py
import numpy as np
import pytest

import h5vc
from h5vc import VersionedHDF5File
from h5vc.errors import InvalidOptionError, ReadOnlyError, UnsupportedDtypeError

UTC = datetime.timezone.utc


def _two_versions(path: str) -> tuple[h5py.File, VersionedHDF5File, h5vc.wrappers.StagedGroup]:
    f = h5py.File(path, "w")
    vf = VersionedHDF5File(f)
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=np.arange(10), chunks=(4,))
        g.create_group("sub").create_dataset("z", data=[1, 2])
    with vf.stage_version("v2") as g:
        pass  # nothing opened inside the block
    return f, vf, g


@pytest.mark.parametrize(
    "write",
    [
        lambda g: g["x"].__setitem__(0, 5),
        lambda g: g["x"].resize((20,)),
        lambda g: g["x"].attrs.__setitem__("a", 1),
        lambda g: g["sub"].create_dataset("y", data=[1]),
        lambda g: g["sub"]["z"].__setitem__(0, 7),
        lambda g: g["sub"].attrs.__setitem__("a", 1),
        lambda g: g["sub"].create_group("deeper"),
    ],
    ids=["setitem", "resize", "attrs", "create_dataset", "nested", "group attrs", "group"],
)
def test_write_after_the_block_raises(path: str, write) -> None:
    f, vf, g = _two_versions(path)
    with f:
        with pytest.raises(ReadOnlyError, match="'v2' is committed") as info:
            write(g)
        assert isinstance(info.value, ValueError)
        assert vf["v2"]["x"][0] == 0
        assert "y" not in vf["v2"]["sub"]
        assert list(vf["v2"]["sub"]["z"][:]) == [1, 2]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"data": [1], "compression": "zzz"}, InvalidOptionError, "'zzz' is unavailable|zzz"),
        ({"data": [1], "compression": "gzip", "compression_opts": 12}, InvalidOptionError, "0-9"),
        ({"data": [1.0], "compression": "lzf", "compression_opts": 3}, InvalidOptionError, "LZF"),
        (
            {"data": np.array(["2020-01-01"], dtype="datetime64[s]")},
            UnsupportedDtypeError,
            "datetime64|M8",
        ),
        ({"shape": (3,), "dtype": "m8[ns]"}, UnsupportedDtypeError, "m8"),
        ({"shape": (3,), "dtype": [("a", "i4"), ("t", "M8[s]")]}, UnsupportedDtypeError, "M8"),
    ],
)
def test_unstorable_dataset_is_refused_when_staged(path: str, kwargs, error, match) -> None:
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=[1])
        with pytest.raises(error, match=match), vf.stage_version("v2") as g:
            g.create_dataset("q", **kwargs)
        assert "q" not in f["_version_data"]
        assert vf.versions == ["v1"]
        with vf.stage_version("v2") as g:
            g.create_dataset("q", data=[3])
        assert list(vf["v2"]["q"][:]) == [3]


def test_failed_commit_leaves_no_store_behind(path: str, monkeypatch) -> None:
    """A commit that fails while creating a store (here: a filter HDF5 refuses that
    slipped past the staging checks) leaves the file as it was."""
    import h5vc.wrappers.group as group_module

    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=[1])
        monkeypatch.setattr(group_module, "check_storable", lambda *a: None, raising=False)
        with pytest.raises(ValueError), vf.stage_version("v2") as g:
            g.create_dataset("q", data=[1], compression="zzz")
        monkeypatch.undo()
        assert "q" not in f["_version_data"]
        assert vf.versions == ["v1"]
        with vf.stage_version("v2") as g:
            g.create_dataset("q", data=[2])
        assert list(vf["v2"]["q"][:]) == [2]


def test_group_replaced_by_dataset_and_back(path: str) -> None:
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v1") as g:
            g.create_group("a").create_dataset("b", data=[1, 2])
        with vf.stage_version("v2") as g:
            del g["a"]
            g.create_dataset("a", data=[3, 4, 5])
        with vf.stage_version("v3") as g:
            del g["a"]
            g.create_group("a").create_dataset("b", data=[6, 0])
        with vf.stage_version("v4") as g:
            del g["a"]
            g.create_dataset("a", data=[7, 8, 9])
        assert list(vf["v1"]["a"]["b"][:]) == [1, 2]
        assert list(vf["v2"]["a"][:]) == [3, 4, 5]
        assert list(vf["v3"]["a"]["b"][:]) == [6, 0]
        assert list(vf["v4"]["a"][:]) == [7, 8, 9]
    with h5py.File(path, "r") as f:
        vf = VersionedHDF5File(f)
        assert list(vf["v2"]["a"][:]) == [3, 4, 5]
        assert list(vf["v3"]["a"]["b"][:]) == [6, 0]


def test_group_replaced_by_dataset_in_a_failed_stage_is_undone(path: str) -> None:
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v1") as g:
            g.create_group("a").create_dataset("b", data=[1, 2])
        with pytest.raises(KeyError), vf.stage_version("v2") as g:
            del g["a"]
            g.create_dataset("a", data=np.arange(1_000_000.0))  # written through
            raise KeyError("abandon")
        assert sorted(f["_version_data/a"]) == ["b"]
        with vf.stage_version("v2") as g:
            del g["a"]
            g.create_dataset("a", data=[5])
        assert list(vf["v2"]["a"][:]) == [5]


@pytest.mark.parametrize("delta", [datetime.timedelta(0), datetime.timedelta(seconds=-1)])
def test_timestamp_not_after_parent_is_refused(path: str, delta) -> None:
    t0 = datetime.datetime(2020, 1, 1, tzinfo=UTC)
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v1", timestamp=t0) as g:
            g.create_dataset("x", data=[1])
        later = "later than that of its parent"
        with (
            pytest.raises(h5vc.TimestampOrderError, match=later),
            vf.stage_version("v2", timestamp=t0 + delta) as g,
        ):
            g["x"][0] = 2
        assert isinstance(h5vc.TimestampOrderError("x"), h5vc.InvalidTimestampError)
        assert "strictly later" in (h5vc.TimestampOrderError.__doc__ or "")
        assert vf.versions == ["v1"]
        with vf.stage_version("v2", timestamp=t0 + datetime.timedelta(microseconds=1)) as g:
            g["x"][0] = 2
        assert vf[t0 + datetime.timedelta(microseconds=1)]["x"][0] == 2
        assert vf[t0]["x"][0] == 1


def test_small_datasets_make_a_small_file(path: str) -> None:
    """100 datasets of 3 int64: hash tables start small (was 20.4 MB)."""
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v1") as g:
            for i in range(100):
                g.create_dataset(f"d{i}", data=np.arange(3) + i)
        assert f["_version_data/d0/hash_table"].chunks[0] <= 256
    assert os.path.getsize(path) < 4_000_000
    with h5py.File(path, "r") as f:
        vf = VersionedHDF5File(f)
        assert list(vf["v1"]["d99"][:]) == [99, 100, 101]


def test_old_hash_table_chunking_still_read_and_appended(path: str, monkeypatch) -> None:
    import h5vc.store.layout as layout

    monkeypatch.setattr(layout, "HASH_TABLE_CHUNKS", (4096,))
    monkeypatch.setattr(layout, "HASH_TABLE_MIN_ROWS", 4096)
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(100), chunks=(10,))
    monkeypatch.undo()
    with h5py.File(path, "r+") as f:
        assert f["_version_data/x/hash_table"].chunks == (4096,)
        vf = VersionedHDF5File(f)
        with vf.stage_version("v2") as g:
            g["x"][:10] = np.arange(100, 110)
            g["x"][10:20] = np.arange(10)  # deduplicates onto an old chunk
        assert list(vf["v2"]["x"][:20]) == [*range(100, 110), *range(10)]
        assert list(vf["v1"]["x"][:10]) == list(range(10))
