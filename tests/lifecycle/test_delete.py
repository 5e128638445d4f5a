"""delete_versions: survivors intact, DAG re-pointed, chunks released and reused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lifecycle_helpers import check_store, new_versioned, verify_hashes

import h5vc
from h5vc.errors import VersionNotFoundError
from h5vc.lifecycle import delete_version, delete_versions
from h5vc.lifecycle._tree import address
from h5vc.store import layout


def versions_group(vf: h5vc.VersionedHDF5File) -> h5py.Group:
    return vf.f[f"{layout.VERSION_DATA}/{layout.VERSIONS}"]


def test_survivors_read_back_and_parents_repointed(vfile, commit_series: Callable) -> None:
    states = commit_series(vfile, 10)
    delete_versions(vfile, ["v3", "v4", "v9"])
    assert vfile.versions == ["v0", "v1", "v2", "v5", "v6", "v7", "v8"]
    assert vfile.version_info("v5").prev_version == "v2"
    assert vfile.version_info("v6").prev_version == "v5"
    assert vfile.current_version == "v8"
    for name in vfile.versions:
        np.testing.assert_array_equal(vfile[name]["x"][:], states[name])
        # Plain HDF5 reads through the rebuilt virtual datasets agree.
        np.testing.assert_array_equal(versions_group(vfile)[name]["x"][:], states[name])
    check_store(vfile.f, "x")
    verify_hashes(vfile, "x")


def test_released_slots_are_reused_and_dedup_stays_correct(vfile) -> None:
    base = np.arange(1000, dtype=np.float64)
    with vfile.stage_version("v0") as group:
        group.create_dataset("x", data=base, chunks=(100,))
    with vfile.stage_version("v1") as group:
        group["x"][0:100] = 12345.0  # a chunk only v1 references
    with vfile.stage_version("v2") as group:
        group["x"][0:100] = base[0:100]
        group["x"][500:600] = -1.0
    slots_before = check_store(vfile.f, "x")
    delete_versions(vfile, "v1")
    assert check_store(vfile.f, "x") == slots_before - 1
    raw = vfile.f[f"{layout.VERSION_DATA}/x/{layout.RAW_DATA}"][:]
    assert not np.any(raw == 12345.0), "released bytes must not stay in raw_data"
    # The same content again must be stored anew, not matched to a stale slot.
    with vfile.stage_version("v3") as group:
        group["x"][0:100] = 12345.0
    expected = base.copy()
    expected[0:100] = 12345.0
    expected[500:600] = -1.0
    np.testing.assert_array_equal(vfile["v3"]["x"][:], expected)
    assert check_store(vfile.f, "x") == slots_before
    verify_hashes(vfile, "x")


def test_slots_left_without_rows_by_an_interrupted_write_are_released(vfile) -> None:
    with vfile.stage_version("v0") as group:
        group.create_dataset("x", data=np.arange(40.0), chunks=(4,))
    raw_data = vfile.f[f"{layout.VERSION_DATA}/x/{layout.RAW_DATA}"]
    raw_data.resize((raw_data.shape[0] + 8,))  # two chunks written, their rows never
    vfile.close()
    vfile = h5vc.VersionedHDF5File(raw_data.file)
    with vfile.stage_version("v1") as group:
        group["x"][:] = np.arange(40.0) + 100  # stored after the two orphan slots
    with vfile.stage_version("v2") as group:
        group["x"][:8] = 7
    delete_versions(vfile, ["v1"])
    expected = np.arange(40.0) + 100
    expected[:8] = 7
    np.testing.assert_array_equal(vfile["v2"]["x"][:], expected)
    np.testing.assert_array_equal(vfile["v0"]["x"][:], np.arange(40.0))
    assert check_store(vfile.f, "x") == 10 + 9  # v0; v2 (its two chunks of 7 are one); no orphans
    verify_hashes(vfile, "x")


def test_current_version_moves_to_nearest_survivor(vfile, commit_series: Callable) -> None:
    commit_series(vfile, 4)
    delete_versions(vfile, ["v3", "v2"])
    assert vfile.current_version == "v1"
    delete_version(vfile, "v0")
    assert vfile.version_info("v1").prev_version is None
    assert versions_group(vfile)["v1"].attrs[layout.ATTR_PREV_VERSION] == layout.FIRST_VERSION


def test_branches_keep_their_data(vfile) -> None:
    with vfile.stage_version("root") as group:
        group.create_dataset("x", data=np.zeros(300), chunks=(100,))
    with vfile.stage_version("a", prev_version="root") as group:
        group["x"][:100] = 1
    with vfile.stage_version("b", prev_version="root", make_current=False) as group:
        group["x"][100:200] = 2
    with vfile.stage_version("a2", prev_version="a") as group:
        group["x"][200:] = 3
    delete_versions(vfile, ["a", "root"])
    assert vfile.version_info("a2").prev_version is None
    assert vfile.version_info("b").prev_version is None
    np.testing.assert_array_equal(vfile["a2"]["x"][:], np.repeat([1.0, 0.0, 3.0], 100))
    np.testing.assert_array_equal(vfile["b"]["x"][:], np.repeat([0.0, 2.0, 0.0], 100))
    verify_hashes(vfile, "x")


def test_two_dimensional_dataset(vfile) -> None:
    rng = np.random.default_rng(1)
    data = rng.random((45, 33))
    states = {}
    for number in range(6):
        with vfile.stage_version(f"v{number}") as group:
            if number == 0:
                group.create_dataset("m", data=data, chunks=(10, 7))
            else:
                r, c = int(rng.integers(0, 40)), int(rng.integers(0, 28))
                data[r : r + 5, c : c + 5] = rng.random((5, 5))
                group["m"][r : r + 5, c : c + 5] = data[r : r + 5, c : c + 5]
        states[f"v{number}"] = data.copy()
    delete_versions(vfile, ["v1", "v2", "v4"])
    for name in vfile.versions:
        np.testing.assert_array_equal(vfile[name]["m"][:], states[name])
    check_store(vfile.f, "m")
    verify_hashes(vfile, "m")


def test_dataset_only_in_deleted_versions_loses_its_store(vfile) -> None:
    with vfile.stage_version("v0") as group:
        group.create_dataset("keep", data=np.arange(10), chunks=(5,))
        group.create_dataset("g/gone", data=np.arange(10), chunks=(5,))
    with vfile.stage_version("v1") as group:
        del group["g"]
    delete_versions(vfile, ["v0"])
    assert "g" not in vfile.f[layout.VERSION_DATA]
    np.testing.assert_array_equal(vfile["v1"]["keep"][:], np.arange(10))


def test_shared_objects_stay_shared(path: Path) -> None:
    f, vf = new_versioned(path, "h5vc")
    with f:
        with vf.stage_version("v0") as group:
            group.create_dataset("x", data=np.arange(500.0), chunks=(50,))
            group.create_dataset("y", data=np.arange(20.0), chunks=(5,))
        with vf.stage_version("v1") as group:
            group["y"][:5] = -1
        with vf.stage_version("v2") as group:
            group["y"][:5] = 7
        with vf.stage_version("v3") as group:
            group["x"][0] = 99  # v3 and v4 share this x
        with vf.stage_version("v4") as group:
            group["y"][5] = 8
        delete_versions(vf, ["v1"])
        versions = versions_group(vf)
        assert address(versions["v3"]["x"]) == address(versions["v4"]["x"])
        assert address(versions["v0"]["x"]) == address(versions["v2"]["x"])
        expected = np.arange(500.0)
        expected[0] = 99
        np.testing.assert_array_equal(vf["v4"]["x"][:], expected)
        verify_hashes(vf, "y")


def test_deleting_every_version_leaves_an_empty_file(vfile, commit_series: Callable) -> None:
    commit_series(vfile, 3)
    delete_versions(vfile, vfile.versions)
    assert vfile.versions == []
    assert vfile.current_version == layout.FIRST_VERSION
    assert "x" not in vfile.f[layout.VERSION_DATA]
    with vfile.stage_version("again") as group:
        group.create_dataset("x", data=np.arange(5), chunks=(5,))
    np.testing.assert_array_equal(vfile["again"]["x"][:], np.arange(5))


@pytest.mark.parametrize(
    ("names", "error"),
    [
        (["v1", "nope"], VersionNotFoundError),
        (["v1", layout.FIRST_VERSION], ValueError),
        ([3], TypeError),
    ],
)
def test_bad_names_change_nothing(vfile, commit_series: Callable, names, error) -> None:
    commit_series(vfile, 3)
    raw_shape = vfile.f[f"{layout.VERSION_DATA}/x/{layout.RAW_DATA}"].shape
    with pytest.raises(error, match=r"nope|__first_version__|3"):
        delete_versions(vfile, names)
    assert vfile.versions == ["v0", "v1", "v2"]
    assert vfile.f[f"{layout.VERSION_DATA}/x/{layout.RAW_DATA}"].shape == raw_shape


def test_accepts_h5py_file_and_delitem(path: Path, commit_series: Callable) -> None:
    f, vf = new_versioned(path, "h5vc")
    with f:
        states = commit_series(vf, 4)
        delete_versions(f, "v1")
        del h5vc.VersionedHDF5File(f)["v2"]
    with h5vc.open(str(path), "r") as vf:
        assert vf.versions == ["v0", "v3"]
        np.testing.assert_array_equal(vf["v3"]["x"][:], states["v3"])


def test_read_only_file_is_refused(path: Path, commit_series: Callable) -> None:
    f, vf = new_versioned(path, "h5vc")
    with f:
        commit_series(vf, 2)
    with h5py.File(path, "r") as f, pytest.raises(ValueError, match="read-only"):
        delete_versions(f, "v0")


@settings(max_examples=15, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.booleans(), st.integers(0, 1900), st.integers(0, 10)), min_size=3, max_size=12
    ),
    layout_name=st.sampled_from(["h5vc", "compat"]),
)
def test_random_commits_and_deletes_match_a_model(tmp_path_factory, steps, layout_name) -> None:
    path = tmp_path_factory.mktemp("model") / "model.h5"
    f, vf = new_versioned(path, layout_name)
    model: dict[str, np.ndarray] = {}
    with f:
        for number, (delete, start, pick) in enumerate(steps):
            if delete and model:
                doomed = sorted(model)[pick % len(model)]
                delete_versions(vf, doomed)
                del model[doomed]
            else:
                current = model.get(vf.current_version, np.zeros(2000))
                data = current.copy()
                data[start : start + 100] = number
                with vf.stage_version(f"n{number}") as group:
                    if "x" in group:
                        group["x"][start : start + 100] = number
                    else:
                        group.create_dataset("x", data=data, chunks=(100,))
                model[f"n{number}"] = data
            assert sorted(vf.versions) == sorted(model)
            for name, expected in model.items():
                np.testing.assert_array_equal(vf[name]["x"][:], expected)
        if model:
            verify_hashes(vf, "x")


def test_deleting_loads_the_columns_and_the_merge_only_when_needed(path: Path) -> None:
    """A file without sample columns and with one branch is deleted from without
    importing h5vc.columns (0.1-0.2 s) or the merge (which finds merge bases of two
    branches or more); the group it looks for is the columns' own."""
    import subprocess
    import sys

    from h5vc.columns.storage import SAMPLES_GROUP
    from h5vc.lifecycle import delete

    assert delete._SAMPLES_GROUP == SAMPLES_GROUP
    with h5vc.open(str(path), "w") as vf:
        for number in range(3):
            with vf.stage_version(f"v{number}") as g:
                if number == 0:
                    g.create_dataset("x", data=np.arange(10), chunks=(5,))
                g["x"][number] = -1
        vf.create_branch("main")
    code = (
        "import sys, h5py, h5vc\n"
        f"with h5py.File({str(path)!r}, 'r+') as f:\n"
        "    h5vc.delete_versions(f, ['v1'])\n"
        "    assert h5vc.VersionedHDF5File(f).versions == ['v0', 'v2']\n"
        "print(sorted(m for m in ('h5vc.columns', 'h5vc.lifecycle.merge') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"
