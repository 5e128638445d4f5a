"""The commit path's shortcuts: what a commit skips must not change what is stored.

Appends (a short last chunk rewritten at every commit), fill chunks of shapes never
seen before, chunks kept in memory from the last commit and read back by the next.
"""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from store_helpers import assert_same_array

from h5vc import VersionedHDF5File


def largest_index(f: h5py.File, path: str) -> int:
    return int(f[f"_version_data/{path}/hash_table"].attrs["largest_index"])


@pytest.mark.parametrize("fillvalue", [0.0, 7.5, np.nan])
def test_short_chunks_equal_to_fill_are_not_stored(
    vf: VersionedHDF5File, h5file: h5py.File, fillvalue: float
) -> None:
    """Every short last chunk has a shape of its own: all fill, it is left unstored;
    starting with the fill value but not all fill, or not starting with it, it is
    stored."""
    with vf.stage_version("v0") as g:
        g.create_dataset("x", data=np.arange(8.0) + 100, chunks=(8,), fillvalue=fillvalue)
    assert largest_index(h5file, "x") == 1
    with vf.stage_version("v1") as g:  # a short chunk of fill values: unstored
        g["x"].resize((11,))
    assert largest_index(h5file, "x") == 1
    with vf.stage_version("v2") as g:  # first element the fill value, the rest not
        g["x"].resize((13,))
        g["x"][8:] = [fillvalue, fillvalue, fillvalue, 1.0, 2.0]
    assert largest_index(h5file, "x") == 2
    with vf.stage_version("v3") as g:  # first element not the fill value
        g["x"].resize((14,))
        g["x"][8:] = [3.0, fillvalue, fillvalue, fillvalue, fillvalue, fillvalue]
    assert largest_index(h5file, "x") == 3
    base = np.arange(8.0) + 100
    assert_same_array(vf["v1"]["x"][()], np.concatenate([base, [fillvalue] * 3]))
    assert_same_array(vf["v2"]["x"][()], np.concatenate([base, [fillvalue] * 3, [1.0, 2.0]]))
    assert_same_array(vf["v3"]["x"][()], np.concatenate([base, [3.0], [fillvalue] * 5]))
    assert_same_array(h5file["_version_data/versions/v3/x"][()], vf["v3"]["x"][()])


def test_fill_chunks_of_structured_and_string_dtypes(
    vf: VersionedHDF5File, h5file: h5py.File
) -> None:
    """Fill chunks are recognised for compound and variable-length string types."""
    dtype = np.dtype([("a", "i4"), ("b", "f8")])
    strings = h5py.string_dtype()
    with vf.stage_version("v0") as g:
        g.create_dataset("c", data=np.zeros(4, dtype=dtype), chunks=(4,))
        g.create_dataset("s", data=np.array([b"", b""], dtype=object), dtype=strings, chunks=(4,))
    assert largest_index(h5file, "c") == 0
    with vf.stage_version("v1") as g:
        g["c"].resize((6,))
        g["c"][5] = (1, 2.0)
        g["s"][1] = b"x"
    assert largest_index(h5file, "c") == 1
    assert largest_index(h5file, "s") == 1
    assert vf["v1"]["c"][5].tolist() == (1, 2.0)
    assert vf["v1"]["s"][1] == b"x"


# -- chunks of the last commit, read back from memory -----------------------------------


def _appended(vf: VersionedHDF5File, rows: np.ndarray, **options: object) -> list[np.ndarray]:
    """Commit ``rows`` 3 rows at a time (chunks of 4 rows); return each version's data."""
    expected = []
    with vf.stage_version("v0") as g:
        g.create_dataset("t", data=rows[:3], chunks=(4, *rows.shape[1:]), **options)
    expected.append(rows[:3])
    for n in range(1, len(rows) // 3):
        with vf.stage_version(f"v{n}") as g:
            t = g["t"]
            old = t.shape[0]
            t.resize((old + 3, *rows.shape[1:]))
            t[old:] = rows[old : old + 3]
        expected.append(rows[: old + 3])
    return expected


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_appends_read_the_last_commits_chunk_from_memory(
    vf: VersionedHDF5File, h5file: h5py.File, monkeypatch: pytest.MonkeyPatch, compression: str
) -> None:
    from h5vc.store import reading

    from_file = []
    original = reading.RawDataSlab.read_hyperslabs

    def counting(self: reading.RawDataSlab, destination: np.ndarray, *args: object) -> bool:
        from_file.append(type(self).__name__)
        return original(self, destination, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(reading.RawDataSlab, "read_hyperslabs", counting)
    rows = np.arange(30 * 2, dtype="f8").reshape(30, 2)
    expected = _appended(vf, rows, compression=compression)
    assert from_file == []  # every partly filled chunk came from memory
    for n, data in enumerate(expected):
        assert_same_array(vf[f"v{n}"]["t"][()], data)
        assert_same_array(h5file[f"_version_data/versions/v{n}/t"][()], data)


def test_recent_chunks_serve_strided_and_2d_reads(vf: VersionedHDF5File) -> None:
    data = np.arange(6 * 10, dtype="i4").reshape(6, 10)
    with vf.stage_version("v0") as g:
        g.create_dataset("x", data=data, chunks=(4, 4))
    with vf.stage_version("v1") as g:
        g["x"][5, 9] = -1
        data[5, 9] = -1
    with vf.stage_version("v2") as g:
        assert_same_array(g["x"][::2, 1::3], data[::2, 1::3])
        assert_same_array(g["x"][3:6, 2:9], data[3:6, 2:9])
        g["x"][4, ::4] = 7
        data[4, ::4] = 7
        g["x"].resize((8, 10))
        data = np.concatenate([data, np.zeros((2, 10), dtype="i4")])
    assert_same_array(vf["v2"]["x"][()], data)
    assert_same_array(vf["v1"]["x"][5], np.r_[np.arange(50, 59), -1].astype("i4"))


def test_recent_chunks_are_forgotten_when_their_slots_change(path: str) -> None:
    """After delete_versions moves chunks, and after an abandoned stage, the next
    commits read what the file holds."""
    import h5vc

    rows = np.arange(15.0)
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v0") as g:
            g.create_dataset("t", data=rows[:5], chunks=(4,))
        with vf.stage_version("v1") as g:
            g["t"][4] = -1.0
        with vf.stage_version("v2") as g:
            g["t"][0] = -2.0
        h5vc.delete_versions(vf, ["v1"])
        with vf.stage_version("v3") as g:
            g["t"].resize((7,))
            g["t"][5:] = [8.0, 9.0]
        with pytest.raises(RuntimeError), vf.stage_version("v4") as g:
            g["t"][6] = 100.0
            raise RuntimeError("abandoned")
        with vf.stage_version("v5") as g:
            g["t"][0] = 3.0
        assert_same_array(vf["v2"]["t"][()], np.array([-2.0, 1, 2, 3, -1.0]))
        assert_same_array(vf["v3"]["t"][()], np.array([-2.0, 1, 2, 3, -1.0, 8, 9]))
        assert_same_array(vf["v5"]["t"][()], np.array([3.0, 1, 2, 3, -1.0, 8, 9]))


@pytest.mark.parametrize("journaled", [True, False])
def test_a_failed_commit_forgets_recent_chunks(
    path: str, monkeypatch: pytest.MonkeyPatch, journaled: bool
) -> None:
    """A commit that fails after storing its chunks is taken back (rolled back, or the
    store cut back where h5vc does not journal the file): what it kept is forgotten and
    later commits read the file."""
    import warnings

    from h5vc.errors import UnjournaledFileWarning
    from h5vc.versions import commit

    with h5py.File(path, "w") as f:
        held = None if journaled else f["/"]  # another open object: not journaled
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnjournaledFileWarning)
            vf = VersionedHDF5File(f)
        with vf.stage_version("v0") as g:
            g.create_dataset("t", data=np.arange(6.0), chunks=(4,))
        with vf.stage_version("v1") as g:
            g["t"][5] = -5.0

        def failing(*args: object, **kwargs: object) -> None:
            raise RuntimeError("failed")

        with monkeypatch.context() as patch:
            patch.setattr(commit, "create_virtual_dataset", failing)
            with pytest.raises(RuntimeError), vf.stage_version("v2") as g:
                g["t"][5] = 50.0
        assert not vf.file_state.stores.require("t", "v1").recent
        with vf.stage_version("v3") as g:
            g["t"][4] = 40.0
        assert_same_array(vf["v3"]["t"][()], np.array([0.0, 1, 2, 3, 40, -5]))
        assert_same_array(f["_version_data/versions/v3/t"][()], vf["v3"]["t"][()])
        del held


def test_store_keeps_only_the_last_store_chunks_call(path: str) -> None:
    import h5vc
    from h5vc.store import RawDataStore, recent

    with h5py.File(path, "w") as f:
        store = RawDataStore.create(f, "s", dtype=np.dtype("f8"), chunks=(4,))
        slots = store.store_chunks([np.arange(4.0), np.arange(2.0) + 10])
        assert sorted(store.recent) == slots.tolist()
        assert_same_array(store.recent[int(slots[1])], np.array([10.0, 11.0, 0.0, 0.0]))
        store.store_array(np.arange(8.0) + 100)  # write-through: kept chunks stay
        assert sorted(store.recent) == slots.tolist()
        more = store.store_chunks([np.arange(4.0) + 20])
        assert sorted(store.recent) == more.tolist()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(recent, "RECENT_CHUNK_BYTES", 40)
            store.store_chunks([np.arange(4.0) + 30, np.arange(4.0) + 40])
        assert store.recent == {}  # more than the bytes kept
        store.reload()
        assert store.recent == {}
    del h5vc


def test_object_address_is_hdf5s_address(vf: VersionedHDF5File, h5file: h5py.File) -> None:
    """The address read with H5Gget_objinfo is H5Oget_info's, equal across hard links,
    also for objects written in the same session."""
    from h5vc.store import tree

    with vf.stage_version("v0") as g:
        g.create_dataset("a", data=np.arange(10.0), chunks=(4,))
        g.create_group("g").create_dataset("b", data=np.arange(3))
    with vf.stage_version("v1") as g:
        g["a"][0] = 5.0
    versions = h5file["_version_data/versions"]
    objects = [versions["v0/a"], versions["v1/a"], versions["v0/g"], versions["v1/g/b"], versions]
    for obj in objects:
        assert tree.object_address(obj) == h5py.h5o.get_info(obj.id).addr
    assert tree.object_address(versions["v0/g"]) == tree.object_address(versions["v1/g"])
    assert tree.object_address(versions["v0/a"]) != tree.object_address(versions["v1/a"])


def test_lossy_filters_read_back_what_the_file_holds(
    vf: VersionedHDF5File, h5file: h5py.File
) -> None:
    """HDF5's scale-offset filter may round what it stores: a store with a filter h5vc
    does not run itself keeps nothing, so the next stage sees what the file holds."""
    rows = np.linspace(0, 1, 12)
    with vf.stage_version("v0") as g:
        g.create_dataset("t", data=rows[:3], chunks=(8,), scaleoffset=2)
    with vf.stage_version("v1") as g:
        g["t"].resize((6,))
        g["t"][3:] = rows[3:6]
    assert vf.file_state.stores.require("t", "v1").recent == {}
    stored = h5file["_version_data/versions/v1/t"][()]
    with vf.stage_version("v2") as g:
        assert_same_array(g["t"][()], stored)
        g["t"].resize((7,))
        g["t"][6] = 0.5
    assert_same_array(vf["v2"]["t"][:6], stored)


def test_kept_chunks_do_not_change_with_the_callers_arrays(vf: VersionedHDF5File) -> None:
    """What a commit keeps is its own copy: arrays written in the stage and changed
    afterwards do not change what the next stage reads."""
    full, short = np.arange(4.0), np.arange(3.0) + 10
    with vf.stage_version("v0") as g:
        g.create_dataset("x", data=np.zeros(7), chunks=(4,))
    with vf.stage_version("v1") as g:
        g["x"][:4] = full
        g["x"][4:] = short
    full[:] = -1
    short[:] = -1
    with vf.stage_version("v2") as g:
        assert_same_array(g["x"][()], np.r_[np.arange(4.0), np.arange(3.0) + 10])
        g["x"][0] = 5.0
    assert_same_array(vf["v2"]["x"][()], np.r_[5.0, 1, 2, 3, 10, 11, 12])


def test_next_stage_reads_a_just_committed_dataset_without_opening_it(
    vf: VersionedHDF5File, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dataset the last commit wrote, without attributes of its own, is staged again
    from its known chunk map (HDF5 does not open it); one with attributes is opened
    and keeps them; either way the data and attributes of every version stay."""
    from h5vc.wrappers import group as group_module

    opened: list[str] = []
    real_open = group_module._open_writable

    def counting_open(parent: h5py.Group, name: str) -> h5py.HLObject:
        opened.append(name)
        return real_open(parent, name)

    monkeypatch.setattr(group_module, "_open_writable", counting_open)
    with vf.stage_version("v0") as g:
        g.create_dataset("plain", data=np.arange(10.0), chunks=(4,))
        g.create_dataset("tagged", data=np.arange(10.0), chunks=(4,))
        g["tagged"].attrs["unit"] = "m"
    with vf.stage_version("v1") as g:
        g["plain"].resize((12,))
        g["plain"][10:] = [10.0, 11.0]
        g["tagged"][0] = -1.0
        assert dict(g["plain"].attrs) == {}
        assert dict(g["tagged"].attrs) == {"unit": "m"}
    assert opened == ["tagged"]
    with vf.stage_version("v2") as g:
        g["plain"].attrs["unit"] = "s"
        g["tagged"].attrs["scale"] = 2
    with vf.stage_version("v3") as g:
        g["plain"][0] = -2.0
        assert dict(g["plain"].attrs) == {"unit": "s"}
        assert dict(g["tagged"].attrs) == {"unit": "m", "scale": 2}
    assert_same_array(vf["v0"]["plain"][()], np.arange(10.0))
    assert_same_array(vf["v1"]["plain"][()], np.arange(12.0))
    assert_same_array(vf["v3"]["plain"][()], np.concatenate([[-2.0], np.arange(1.0, 12.0)]))
    assert dict(vf["v1"]["plain"].attrs) == {}
    assert dict(vf["v3"]["plain"].attrs) == {"unit": "s"}
    assert dict(vf["v3"]["tagged"].attrs) == {"unit": "m", "scale": 2}
    assert_same_array(vf["v3"]["tagged"][()], np.concatenate([[-1.0], np.arange(1.0, 10.0)]))
