"""VersionedHDF5File: staging, committing, looking versions up, open/close."""

from __future__ import annotations

import datetime

import h5py
import numpy as np
import pytest

import h5vc
from h5vc import VersionedHDF5File

UTC = datetime.timezone.utc


def ts(day: int, second: int = 0) -> datetime.datetime:
    return datetime.datetime(2024, 5, day, 8, 0, second, tzinfo=UTC)


def commit(vf: VersionedHDF5File, name: str, value: int, **kwargs) -> None:
    """Stage ``name`` holding dataset ``x`` = [value] * 4."""
    with vf.stage_version(name, **kwargs) as g:
        if "x" in g:
            g["x"][:] = value
        else:
            g.create_dataset("x", data=np.full(4, value), chunks=(2,))


@pytest.fixture
def history(vf: VersionedHDF5File) -> VersionedHDF5File:
    """v1 -> v2 -> v3 at days 1, 2, 3; x holds the version number."""
    for i in (1, 2, 3):
        commit(vf, f"v{i}", i, timestamp=ts(i))
    return vf


def x_of(group) -> int:
    values = np.unique(group["x"][:])
    assert values.shape == (1,)
    return int(values[0])


def test_new_file_is_empty(vf: VersionedHDF5File, h5file: h5py.File) -> None:
    assert vf.versions == []
    assert list(vf) == []
    assert len(vf) == 0
    assert vf.current_version == "__first_version__"
    assert vf.data_version == 1001
    assert h5file["_version_data/versions"].attrs["data_version"] == 1001
    assert "v1" not in vf


def test_stage_and_commit(history: VersionedHDF5File) -> None:
    assert history.versions == ["v1", "v2", "v3"]
    assert list(history) == ["v1", "v2", "v3"]
    assert history.current_version == "v3"
    assert "v2" in history and "v4" not in history
    assert [x_of(history[f"v{i}"]) for i in (1, 2, 3)] == [1, 2, 3]


def test_lookup_by_none_and_ancestor(history: VersionedHDF5File) -> None:
    assert x_of(history[None]) == 3
    assert x_of(history[0]) == 3
    assert x_of(history[-1]) == 2
    assert x_of(history[-2]) == 1
    assert x_of(history[np.int64(-1)]) == 2


def test_ancestor_index_follows_prev_version_not_time(history: VersionedHDF5File) -> None:
    commit(history, "b", 9, prev_version="v1", timestamp=ts(4))
    assert history.current_version == "b"
    assert x_of(history[-1]) == 1


@pytest.mark.parametrize("key", [1, 5])
def test_positive_ancestor_index_is_an_index_error(history: VersionedHDF5File, key: int) -> None:
    with pytest.raises(IndexError):
        history[key]


def test_too_many_ancestors(history: VersionedHDF5File) -> None:
    # Both a KeyError (like an unknown name) and an IndexError (like versioned-hdf5).
    with pytest.raises(KeyError, match="v3"):
        history[-3]
    with pytest.raises(IndexError, match="fewer than 3 ancestors"):
        history[-3]


def test_lookup_by_timestamp(history: VersionedHDF5File) -> None:
    assert x_of(history[ts(2)]) == 2
    assert x_of(history[ts(2, 30)]) == 2  # just after v2: still v2
    assert x_of(history[ts(9)]) == 3
    assert x_of(history[np.datetime64("2024-05-02T08:00:00")]) == 2
    assert x_of(history[np.datetime64("2024-05-01T08:00:00.000001")]) == 1
    assert x_of(history.get_version_by_timestamp(ts(3))) == 3
    assert x_of(history.get_version_by_timestamp(ts(3), exact=True)) == 3


def test_timestamp_before_first_version(history: VersionedHDF5File) -> None:
    with pytest.raises(KeyError):
        history[ts(1) - datetime.timedelta(microseconds=1)]


def test_exact_timestamp_must_match(history: VersionedHDF5File) -> None:
    with pytest.raises(KeyError):
        history.get_version_by_timestamp(ts(2, 1), exact=True)


def test_timestamp_stored_in_versioned_hdf5_format(history: VersionedHDF5File, h5file) -> None:
    stamp = h5file["_version_data/versions/v2"].attrs["timestamp"]
    assert stamp == "2024-05-02 08:00:00.000000+0000"


def test_default_timestamp_is_now(vf: VersionedHDF5File) -> None:
    before = datetime.datetime.now(UTC)
    commit(vf, "v1", 1)
    after = datetime.datetime.now(UTC)
    assert x_of(vf[after]) == 1
    with pytest.raises(KeyError):
        vf[before - datetime.timedelta(seconds=1)]


def test_get_version_by_name(history: VersionedHDF5File) -> None:
    assert x_of(history.get_version_by_name("v1")) == 1
    with pytest.raises(KeyError, match="nope"):
        history.get_version_by_name("nope")


@pytest.mark.parametrize("name", ["nope", "__first_version__"])
def test_unknown_version_is_a_key_error_naming_it(history: VersionedHDF5File, name: str) -> None:
    with pytest.raises(KeyError, match=name):
        history[name]


@pytest.mark.parametrize("key", [1.5, b"v1", ["v1"]])
def test_bad_key_type(history: VersionedHDF5File, key: object) -> None:
    with pytest.raises(TypeError):
        history[key]


def test_prev_version_branches(history: VersionedHDF5File) -> None:
    with history.stage_version("b1", prev_version="v1") as g:
        assert x_of(g) == 1
        g["x"][0] = 7
    assert history["b1"]["x"][:].tolist() == [7, 1, 1, 1]
    assert x_of(history["v3"]) == 3


def test_empty_prev_version_starts_from_nothing(history: VersionedHDF5File) -> None:
    with history.stage_version("fresh", prev_version="") as g:
        assert list(g) == []
        g["y"] = np.arange(3)
    assert list(history["fresh"]) == ["y"]
    assert history.current_version == "fresh"


def test_make_current_false(history: VersionedHDF5File) -> None:
    commit(history, "side", 8, make_current=False)
    assert history.current_version == "v3"
    assert x_of(history["side"]) == 8
    assert x_of(history[None]) == 3


def test_unknown_prev_version(history: VersionedHDF5File) -> None:
    with pytest.raises(KeyError, match="nope"), history.stage_version("v4", prev_version="nope"):
        pass
    assert "v4" not in history


def test_set_current_version(history: VersionedHDF5File, h5file) -> None:
    history.current_version = "v1"
    assert history.current_version == "v1"
    assert h5file["_version_data/versions"].attrs["current_version"] == "v1"
    assert x_of(history[None]) == 1
    commit(history, "v4", 4)
    assert history.version_info("v4").prev_version == "v1"
    with pytest.raises(KeyError, match="nope"):
        history.current_version = "nope"
    assert history.current_version == "v4"


class Boom(Exception):
    pass


def test_exception_inside_stage_commits_nothing(history: VersionedHDF5File, h5file) -> None:
    with pytest.raises(Boom), history.stage_version("v4") as g:
        g["x"][:] = 99
        g["new"] = np.arange(5)
        raise Boom
    assert history.versions == ["v1", "v2", "v3"]
    assert history.current_version == "v3"
    assert "v4" not in h5file["_version_data/versions"]
    assert "new" not in h5file["_version_data"]
    # the name is still free
    commit(history, "v4", 4)
    assert x_of(history["v4"]) == 4


def test_staged_group_is_read_only_after_commit(vf: VersionedHDF5File) -> None:
    with vf.stage_version("v1") as g:
        g["x"] = np.arange(4)
        x = g["x"]
    with pytest.raises(ValueError):
        g["y"] = np.arange(3)
    with pytest.raises(ValueError):
        x[0] = 5
    assert vf["v1"]["x"][0] == 0


def test_unchanged_version_still_commits(history: VersionedHDF5File) -> None:
    with history.stage_version("same"):
        pass
    assert history.versions[-1] == "same"
    assert x_of(history["same"]) == 3


def test_versioned_root_in_a_subgroup(h5file: h5py.File) -> None:
    """A group as root works; h5vc cannot take the file's handle over for its journal
    (the caller's file object stays open beside it) and says so."""
    sub = h5file.create_group("deep/store")
    with pytest.warns(h5vc.errors.UnjournaledFileWarning, match="root is a group"):
        vf = VersionedHDF5File(sub)
    commit(vf, "v1", 5)
    assert "_version_data" in sub and "_version_data" not in h5file
    assert x_of(VersionedHDF5File(h5file["deep/store"])["v1"]) == 5


def test_versions_survive_reopen(path: str) -> None:
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        commit(vf, "v1", 1, timestamp=ts(1))
        commit(vf, "v2", 2, timestamp=ts(2))
    with h5py.File(path, "r") as f:
        vf = VersionedHDF5File(f)
        assert vf.versions == ["v1", "v2"]
        assert vf.current_version == "v2"
        assert x_of(vf[ts(1, 5)]) == 1


def test_open_owns_the_file(path: str) -> None:
    with h5vc.open(path, "w") as vf:
        commit(vf, "v1", 1)
        inner = vf.f
    assert not inner.id.valid
    assert vf.closed
    with h5vc.open(path) as vf:
        assert x_of(vf["v1"]) == 1
        with pytest.raises(ValueError, match="read-only"), vf.stage_version("v2"):
            pass


def test_open_closes_the_file_on_error(path: str) -> None:
    with pytest.raises(Boom), h5vc.open(path, "w") as vf:
        raise Boom
    assert not vf.f.id.valid


def test_close(vf: VersionedHDF5File, h5file) -> None:
    commit(vf, "v1", 1)
    assert not vf.closed
    vf.close()
    assert vf.closed
    assert h5file.id.valid  # the caller still owns the h5py file
    with pytest.raises(ValueError):
        vf["v1"]


def test_closed_h5py_file(path: str) -> None:
    f = h5py.File(path, "w")
    vf = VersionedHDF5File(f)
    commit(vf, "v1", 1)
    f.close()
    assert vf.closed
    for action in (
        lambda: vf["v1"],
        lambda: vf.versions,
        lambda: vf.stage_version("v2").__enter__(),
    ):
        with pytest.raises(ValueError, match="closed"):
            action()


def test_version_info(history: VersionedHDF5File) -> None:
    info = history.version_info("v2")
    assert info.name == "v2"
    assert info.prev_version == "v1"
    assert info.timestamp == np.datetime64("2024-05-02T08:00:00", "us")
    assert history.version_info("v1").prev_version is None


def test_version_attrs_belong_to_their_version(vf: VersionedHDF5File) -> None:
    with vf.stage_version("v1") as g:
        g.attrs["author"] = "ann"
        g["x"] = np.arange(3)
    with vf.stage_version("v2") as g:
        assert "author" not in g.attrs
    assert vf["v1"].attrs["author"] == "ann"
    assert "author" not in vf["v2"].attrs
    # versioned-hdf5's version attributes show next to the user's (as it shows them)
    assert set(vf["v1"].attrs) == {"author", "prev_version", "committed", "timestamp"}
    assert vf["v1"].attrs["prev_version"] == "__first_version__"
    assert vf["v2"].attrs["prev_version"] == "v1"


def test_delete_versions(history: VersionedHDF5File, h5file) -> None:
    del history["v2"]
    assert history.versions == ["v1", "v3"]
    assert "v2" not in history and "v2" not in h5file["_version_data/versions"]
    assert history.version_info("v3").prev_version == "v1"
    assert x_of(history["v3"]) == 3 and x_of(history["v1"]) == 1
    assert x_of(history[-1]) == 1
    del history["v3"]  # the current version: its parent becomes current
    assert history.current_version == "v1"
    assert h5file["_version_data/versions/v1/x"][()].tolist() == [1] * 4
    with pytest.raises(KeyError, match="v9"):
        del history["v9"]
    assert history.versions == ["v1"]
