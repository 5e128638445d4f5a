"""Files move between the libraries mid-history and still read the same in both.

A file is created by one library (h5vc with ``data_version=4``, the layout both
libraries write), the first steps of a scenario are applied by it and the rest by
the other library; the file must then read, in both libraries, exactly as a file
written by versioned-hdf5 alone.  Also: the layout options of new files.
"""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import versioned_hdf5
from differential import Pair, compare_snapshots, opened, run_step, snapshot
from scenarios import ALLOW, SCENARIOS, as_steps

import h5vc
from h5vc.errors import InvalidOptionError

ROUND_TRIP = [
    "quickstart",
    "fancy_indexing_and_attrs",
    "strings",
    "delete_versions",
    "modify_metadata_doc",
    "2_replace_existing_dataset",
    "4_modify_metadata_gzip_and_back",
    "4_modify_metadata_fill_value_rule",
    "staging_prev_version_and_make_current",
]


def apply(lib: str, path: str, steps: list) -> None:
    for step in steps:
        with opened(lib, path, step.mode) as ctx:
            run_step(ctx, step.func)


@pytest.mark.parametrize("first", ["h5vc", "versioned_hdf5"])
@pytest.mark.parametrize("name", ROUND_TRIP)
def test_round_trip(tmp_path, name: str, first: str) -> None:
    steps = as_steps(SCENARIOS[name])
    second = "h5vc" if first == "versioned_hdf5" else "versioned_hdf5"
    reference = str(tmp_path / "reference.h5")
    with opened("versioned_hdf5", reference, "w"):
        pass
    apply("versioned_hdf5", reference, steps)
    mixed = str(tmp_path / "mixed.h5")
    with h5py.File(mixed, "w") as f:  # created by the first library, in the shared layout
        if first == "h5vc":
            h5vc.VersionedHDF5File(f, data_version=4).close()
        else:
            versioned_hdf5.VersionedHDF5File(f)
    half = len(steps) // 2
    apply(first, mixed, steps[:half])
    apply(second, mixed, steps[half:])
    allow = frozenset(ALLOW.get(name, ()))
    with opened("versioned_hdf5", reference, "r+") as ctx:
        want = snapshot(ctx, allow)
    for lib in ("versioned_hdf5", "h5vc"):
        with opened(lib, mixed, "r+") as ctx:
            compare_snapshots(
                f"{name}: {first} then {second}, read by {lib}", want, snapshot(ctx, allow)
            )


def test_new_file_layouts(tmp_path) -> None:
    """h5vc's layout by default; versioned-hdf5's on request; an existing file keeps its own."""
    for data_version, expected in ((None, 1001), (4, 4), (1001, 1001)):
        path = str(tmp_path / f"{data_version}.h5")
        with h5vc.open(path, "w", data_version=data_version) as vf:
            assert vf.data_version == expected
            with vf.stage_version("v1") as g:
                g.create_dataset("x", data=np.arange(10), chunks=(4,))
        with h5py.File(path, "r") as f:
            assert sorted(f["_version_data"]) == ["versions", "x"]
            assert f["_version_data/versions"].attrs["data_version"] == expected
    existing = str(tmp_path / "4.h5")
    with pytest.raises(InvalidOptionError, match="existing file keeps its layout"):  # noqa: SIM117
        with h5vc.open(existing, "r+", data_version=1001):
            pass
    with pytest.raises(InvalidOptionError, match="data_version=1001"):  # noqa: SIM117
        with h5vc.open(str(tmp_path / "bad.h5"), "w", data_version=3):
            pass


def test_pair_created_by_versioned_hdf5(tmp_path) -> None:
    """Both libraries working on files versioned-hdf5 created agree as on their own files."""
    Pair(tmp_path, init="vhdf5").run_all(SCENARIOS["fancy_indexing_and_attrs"])
