"""Workload 1: many small edits to one large 1-d dataset.

A float64 array (10M elements, 1024-element chunks) is committed once, then edited by
200 commits that each overwrite 100 consecutive elements at a random offset. Measures the
initial commit, every commit, the file size, full reads of the newest and an old version,
and 200 reads of 100 elements from an old version. The plain h5py reference writes the
same array with the same chunks, applies the same edits in place and reads it the same way.
Icechunk commits the same array and edits to a zarr array with the same chunks, one commit
per version (see ``_icechunk.py`` for its settings).
"""

from __future__ import annotations

import pathlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _common import (
    Metrics,
    Stopwatch,
    best_of,
    check_equal,
    commit_summary,
    file_bytes,
    main,
    read_plain,
    read_version,
    require_library,
    timed,
    versioned_file,
)

NAME = "small_edits"
LIBRARIES = ("h5vc", "versioned_hdf5", "h5py", "icechunk")
#: Metric of this workload -> the plain-h5py metric it is compared with.
H5PY_BASELINE = {"initial_commit_s": "write_s"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizes:
    length: int
    chunk: int
    commits: int
    edit_length: int
    window: int
    small_reads: int
    read_length: int


FULL = Sizes(
    length=10_000_000,
    chunk=1024,
    commits=200,
    edit_length=100,
    window=20,
    small_reads=200,
    read_length=100,
)
QUICK = Sizes(
    length=1_000_000,
    chunk=1024,
    commits=20,
    edit_length=100,
    window=5,
    small_reads=50,
    read_length=100,
)


@dataclass(frozen=True, slots=True)
class Plan:
    """The data of the workload, fixed by a seed so that every library sees the same."""

    initial: np.ndarray
    edit_starts: np.ndarray
    edit_values: np.ndarray
    read_starts: np.ndarray

    def state_after(self, commits: int) -> np.ndarray:
        """The array as it is after the first ``commits`` edits."""
        state = self.initial.copy()
        width = self.edit_values.shape[1]
        for start, values in zip(self.edit_starts[:commits], self.edit_values[:commits]):
            state[start : start + width] = values
        return state


def make_plan(sizes: Sizes) -> Plan:
    rng = np.random.default_rng(20240501)
    return Plan(
        initial=rng.random(sizes.length),
        edit_starts=rng.integers(0, sizes.length - sizes.edit_length, sizes.commits),
        edit_values=rng.random((sizes.commits, sizes.edit_length)),
        read_starts=rng.integers(0, sizes.length - sizes.read_length, sizes.small_reads),
    )


def small_reads(open_dataset: Callable[[], Any], plan: Plan, sizes: Sizes) -> list[np.ndarray]:
    """Each read looks the dataset up again, as in ``vf[version]["x"][a:b]``."""
    width = sizes.read_length
    return [open_dataset()[start : start + width] for start in plan.read_starts]


def small_reads_open_once(dataset: Any, plan: Plan, sizes: Sizes) -> list[np.ndarray]:
    """The dataset is looked up once, then read ``dataset[a:b]`` repeatedly."""
    width = sizes.read_length
    return [dataset[start : start + width] for start in plan.read_starts]


def check_small_reads(
    got: list[np.ndarray], expected: np.ndarray, plan: Plan, sizes: Sizes
) -> None:
    width = sizes.read_length
    for start, block in zip(plan.read_starts, got):
        check_equal(block, expected[start : start + width], f"small read at {start}")


def run_versioned(lib: str, path: pathlib.Path, sizes: Sizes, plan: Plan) -> Metrics:
    commits = Stopwatch()
    width = sizes.edit_length
    with versioned_file(lib, path, "w") as vf:
        with commits.lap(), vf.stage_version("v0") as group:
            group.create_dataset("x", data=plan.initial, chunks=(sizes.chunk,), maxshape=(None,))
        initial_commit = commits.last
        commits.laps.clear()
        for number in range(sizes.commits):
            start = plan.edit_starts[number]
            with commits.lap(), vf.stage_version(f"v{number + 1}") as group:
                group["x"][start : start + width] = plan.edit_values[number]

    old_name = f"v{sizes.commits // 2}"
    latest_name = f"v{sizes.commits}"
    old_state = plan.state_after(sizes.commits // 2)
    latest_state = plan.state_after(sizes.commits)
    with versioned_file(lib, path, "r") as vf:
        full_read, latest = best_of(lambda: read_version(lib, path, latest_name, "x"))
        full_read_old, old = best_of(lambda: read_version(lib, path, old_name, "x"))
        reads_time, reads = timed(lambda: small_reads(lambda: vf[old_name]["x"], plan, sizes))
        check_small_reads(reads, old_state, plan, sizes)
        once_time, reads = timed(lambda: small_reads_open_once(vf[old_name]["x"], plan, sizes))
        check_equal(latest, latest_state, f"full read of {latest_name}")
        check_equal(old, old_state, f"full read of {old_name}")
        check_small_reads(reads, old_state, plan, sizes)
        check_equal(vf["v0"]["x"][:], plan.initial, "full read of v0")
    return {
        "initial_commit_s": initial_commit,
        **commit_summary(commits.laps, sizes.window),
        "file_bytes": file_bytes(path),
        "full_read_s": full_read,
        "full_read_old_s": full_read_old,
        "small_reads_s": reads_time,
        "small_reads_open_once_s": once_time,
    }


def run_h5py(path: pathlib.Path, sizes: Sizes, plan: Plan) -> Metrics:
    edits = Stopwatch()
    width = sizes.edit_length
    with h5py.File(path, "w") as h5file:
        write, dataset = timed(
            lambda: h5file.create_dataset(
                "x", data=plan.initial, chunks=(sizes.chunk,), maxshape=(None,)
            )
        )
        for number in range(sizes.commits):
            start = plan.edit_starts[number]
            with edits.lap():
                dataset[start : start + width] = plan.edit_values[number]
    latest_state = plan.state_after(sizes.commits)
    with h5py.File(path, "r") as h5file:
        full_read, latest = best_of(lambda: read_plain(path, "x"))
        reads_time, reads = timed(lambda: small_reads(lambda: h5file["x"], plan, sizes))
        check_small_reads(reads, latest_state, plan, sizes)
        once_time, reads = timed(lambda: small_reads_open_once(h5file["x"], plan, sizes))
    check_equal(latest, latest_state, "full read")
    check_small_reads(reads, latest_state, plan, sizes)
    return {
        "write_s": write,
        **commit_summary(edits.laps, sizes.window),
        "file_bytes": file_bytes(path),
        "full_read_s": full_read,
        "small_reads_s": reads_time,
        "small_reads_open_once_s": once_time,
    }


def run_icechunk(path: pathlib.Path, sizes: Sizes, plan: Plan) -> Metrics:
    import _icechunk as ic

    commits = Stopwatch()
    width = sizes.edit_length
    repo = ic.create_repo(path)
    snapshots = []
    with commits.lap():
        snapshots.append(
            ic.commit(repo, lambda s: ic.create_array(s, "x", plan.initial, (sizes.chunk,)), "v0")
        )
    initial_commit = commits.last
    commits.laps.clear()
    for number in range(sizes.commits):
        start = plan.edit_starts[number]

        def edit(store: Any, start: int = start, number: int = number) -> None:
            ic.open_array(store, "x", writable=True)[start : start + width] = plan.edit_values[
                number
            ]

        with commits.lap():
            snapshots.append(ic.commit(repo, edit, f"v{number + 1}"))

    full_read, full_read_old, store = ic.read_back(path, snapshots, plan.state_after)
    old_state = plan.state_after(sizes.commits // 2)
    reads_time, reads = timed(lambda: small_reads(lambda: ic.open_array(store, "x"), plan, sizes))
    check_small_reads(reads, old_state, plan, sizes)
    array = ic.open_array(store, "x")
    once_time, reads = timed(lambda: small_reads_open_once(array, plan, sizes))
    check_small_reads(reads, old_state, plan, sizes)
    return {
        "initial_commit_s": initial_commit,
        **commit_summary(commits.laps, sizes.window),
        "file_bytes": ic.directory_bytes(path),
        "full_read_s": full_read,
        "full_read_old_s": full_read_old,
        "small_reads_s": reads_time,
        "small_reads_open_once_s": once_time,
    }


def run_sized(lib: str, workdir: pathlib.Path, name: str, sizes: Sizes) -> Metrics:
    plan = make_plan(sizes)
    path = workdir / f"{name}-{lib}.h5"
    if lib == "h5py":
        return run_h5py(path, sizes, plan)
    if lib == "icechunk":
        return run_icechunk(path.with_suffix(".icechunk"), sizes, plan)
    return run_versioned(lib, path, sizes, plan)


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    return run_sized(lib, workdir, NAME, QUICK if quick else FULL)


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
