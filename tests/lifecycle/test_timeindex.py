"""The persisted timestamp index: sorted, appendable, kept in step with deletes."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
from lifecycle_helpers import new_versioned

from h5vc.lifecycle import delete_versions
from h5vc.store import timeindex

BASE = np.datetime64("2024-01-01T00:00:00", "us")


def at(seconds: float) -> np.datetime64:
    return BASE + np.timedelta64(int(seconds * 1_000_000), "us")


@pytest.fixture
def version_data(tmp_path: Path):
    with h5py.File(tmp_path / "index.h5", "w") as f:
        yield f.create_group("_version_data")


def test_lookup_bisects_the_sorted_index(version_data) -> None:
    timeindex.write_index(version_data, [(at(i), f"v{i}") for i in (5, 1, 3)])
    timeindex.append_entry(version_data, at(7), "v7")
    timeindex.append_entry(version_data, at(2), "v2")  # out of order: re-sorted
    assert [name for _, name in timeindex.read_index(version_data)] == [
        "v1",
        "v2",
        "v3",
        "v5",
        "v7",
    ]
    assert timeindex.lookup(version_data, at(3.5)) == "v3"
    assert timeindex.lookup(version_data, at(3)) == "v3"
    assert timeindex.lookup(version_data, at(100)) == "v7"
    assert timeindex.lookup(version_data, at(0.5)) is None
    assert timeindex.lookup(version_data, at(3.5), exact=True) is None
    assert timeindex.lookup(version_data, at(5), exact=True) == "v5"


def test_without_an_index(version_data) -> None:
    assert not timeindex.has_index(version_data)
    assert timeindex.read_index(version_data) is None
    timeindex.append_entry(version_data, at(1), "v1")  # nothing to keep up to date
    assert not timeindex.has_index(version_data)
    with pytest.raises(LookupError):
        timeindex.lookup(version_data, at(1))


def test_delete_versions_keeps_the_index_in_step(tmp_path: Path) -> None:
    f, vf = new_versioned(tmp_path / "v.h5", "h5vc")
    with f:
        for number in range(4):
            with vf.stage_version(f"v{number}", timestamp=at(number)) as group:
                if number == 0:
                    group.create_dataset("x", data=np.arange(3), chunks=(3,))
                else:
                    group["x"][0] = number
        version_data = f["_version_data"]
        timeindex.write_index(version_data, [(at(n), f"v{n}") for n in range(4)])
        delete_versions(vf, ["v1", "v2"])
        assert timeindex.lookup(version_data, at(2.5)) == "v0"
        assert [name for _, name in timeindex.read_index(version_data)] == ["v0", "v3"]


def test_appends_store_what_a_rewrite_stores(tmp_path: Path) -> None:
    """Entries appended one by one (the commit path) read back, through plain h5py,
    exactly as the same entries written at once: UTF-8 names and log rows included,
    and a tie of timestamps is ordered by name."""
    entries = [
        (at(1), "v1", {"parents": [], "message": "first"}),
        (at(2), "vé", {"parents": ["v1"], "message": "ünïcode"}),
        (at(2), "vz", {"parents": ["vé"], "message": None}),  # a tie: "vz" < "vé"
        (at(3), "v3", {"parents": ["vz"], "message": "x" * 300}),
    ]
    contents = []
    for mode in ("append", "rewrite"):
        with h5py.File(tmp_path / f"{mode}.h5", "w") as f:
            version_data = f.create_group("_version_data")
            if mode == "append":
                first = entries[0]
                timeindex.write_index(version_data, [first[:2]], {first[1]: first[2]})
                for ts, name, log in entries[1:]:
                    timeindex.append_entry(version_data, ts, name, log)
            else:
                timeindex.write_index(
                    version_data, [e[:2] for e in entries], {e[1]: e[2] for e in entries}
                )
        with h5py.File(tmp_path / f"{mode}.h5", "r") as f:
            group = f[timeindex.INDEX_NAME]
            assert group["names"].id.get_type().get_cset() == h5py.h5t.CSET_UTF8
            contents.append(
                (
                    group["timestamps"][()].tolist(),
                    group["names"].asstr()[()].tolist(),
                    group["log"].asstr()[()].tolist(),
                )
            )
    assert contents[0] == contents[1]
    assert contents[0][1] == ["v1", "vz", "vé", "v3"]


def test_an_appender_follows_a_rewritten_index(version_data) -> None:
    """The columns an appender keeps open between commits are looked up again once the
    index was written anew (as deleting versions does)."""

    def log(name: str) -> dict:
        return {"parents": [], "message": name}

    timeindex.write_index(version_data, [(at(1), "v1")], {"v1": log("v1")})
    appender = timeindex.IndexAppender(version_data)
    appender.append(at(2), "v2", log("v2"))
    timeindex.write_index(version_data, [(at(1), "v1")], {"v1": log("v1")})  # v2 deleted
    appender.append(at(3), "v3", log("v3"))
    appender.append(at(2.5), "v25", log("v25"))  # before the newest: re-sorted
    appender.append(at(4), "v4", log("v4"))
    assert [name for _, name in timeindex.read_index(version_data)] == ["v1", "v25", "v3", "v4"]
    assert [entry[2]["message"] for entry in timeindex.read_log(version_data)] == [
        "v1",
        "v25",
        "v3",
        "v4",
    ]


def test_commits_after_a_deletion_are_found_by_time(tmp_path: Path) -> None:
    f, vf = new_versioned(tmp_path / "v.h5", "h5vc")
    with f:
        for number in range(3):
            with vf.stage_version(f"v{number}", timestamp=at(number)) as group:
                if number == 0:
                    group.create_dataset("x", data=np.arange(3), chunks=(3,))
                else:
                    group["x"][0] = number
        delete_versions(vf, ["v1"])
        for number in range(3, 5):
            with vf.stage_version(f"v{number}", timestamp=at(number)) as group:
                group["x"][0] = number
        version_data = f["_version_data"]
        assert [name for _, name in timeindex.read_index(version_data)] == ["v0", "v2", "v3", "v4"]
        assert timeindex.lookup(version_data, at(3.5)) == "v3"
        assert vf[at(4.5)]["x"][0] == 4


@pytest.mark.parametrize("hdf5_calls", [True, False], ids=["hdf5 calls", "h5py"])
def test_the_small_transfer_list_writes_strings_as_the_default_one(
    tmp_path: Path, hdf5_calls: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appends write through a transfer list with a small conversion buffer (with HDF5's
    calls alone, or through h5py): a string longer than the buffer is written whole,
    and the columns read back as written."""
    if not hdf5_calls:
        monkeypatch.setattr(timeindex, "short_writes", lambda: None)
    from h5vc.hdf5.clib import SMALL_TRANSFER_BUFFER

    long_name = "v" * (3 * SMALL_TRANSFER_BUFFER)
    with h5py.File(tmp_path / "f.h5", "w") as f:
        version_data = f.create_group("_version_data")
        timeindex.write_index(version_data, [], {})
        stamps = [
            np.datetime64("2030-01-01T00:00:00", "us") + np.timedelta64(i, "s") for i in range(3)
        ]
        names = ["a", long_name, "ü✓"]
        logs = [{"parents": [], "message": "m" * 5000, "author": None}, {}, {"x": 1}]
        for ts, name, log in zip(stamps, names, logs):
            timeindex.append_entry(version_data, ts, name, log)
        assert timeindex.read_index(version_data) == list(zip(stamps, names))
        assert timeindex.read_log(version_data) == list(zip(stamps, names, logs))
