"""Workload 3: block edits to a 2-d dataset.

A 4000x4000 float64 array with 100x100 chunks is committed once, then 50 commits each
overwrite a 10x10 block at a random position (touching one to four chunks). Measures the
initial commit, every commit, the file size, full reads of the newest and an old version
and 50 reads of unaligned 100x100 blocks from an old version. The plain h5py reference
writes the same array with the same chunks and applies the same edits in place. Icechunk
commits the same array and edits to a zarr array with the same chunks (``_icechunk.py``).
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

NAME = "two_d"
LIBRARIES = ("h5vc", "versioned_hdf5", "h5py", "icechunk")
H5PY_BASELINE = {"initial_commit_s": "write_s"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizes:
    side: int
    chunk: int
    commits: int
    edit_side: int
    window: int
    block_reads: int
    read_side: int


FULL = Sizes(
    side=4000, chunk=100, commits=50, edit_side=10, window=10, block_reads=50, read_side=100
)
QUICK = Sizes(
    side=1000, chunk=100, commits=10, edit_side=10, window=3, block_reads=10, read_side=100
)


@dataclass(frozen=True, slots=True)
class Plan:
    initial: np.ndarray
    edit_corners: np.ndarray  # (commits, 2)
    edit_values: np.ndarray  # (commits, edit_side, edit_side)
    read_corners: np.ndarray  # (block_reads, 2)

    def state_after(self, commits: int) -> np.ndarray:
        state = self.initial.copy()
        side = self.edit_values.shape[1]
        for (row, col), values in zip(self.edit_corners[:commits], self.edit_values[:commits]):
            state[row : row + side, col : col + side] = values
        return state


def make_plan(sizes: Sizes) -> Plan:
    rng = np.random.default_rng(20240503)
    return Plan(
        initial=rng.random((sizes.side, sizes.side)),
        edit_corners=rng.integers(0, sizes.side - sizes.edit_side, (sizes.commits, 2)),
        edit_values=rng.random((sizes.commits, sizes.edit_side, sizes.edit_side)),
        read_corners=rng.integers(0, sizes.side - sizes.read_side, (sizes.block_reads, 2)),
    )


def block_reads(open_dataset: Callable[[], Any], plan: Plan, sizes: Sizes) -> list[np.ndarray]:
    """Each read looks the dataset up again, as in ``vf[version]["x"][a:b, c:d]``."""
    side = sizes.read_side
    return [open_dataset()[row : row + side, col : col + side] for row, col in plan.read_corners]


def check_block_reads(
    got: list[np.ndarray], expected: np.ndarray, plan: Plan, sizes: Sizes
) -> None:
    side = sizes.read_side
    for (row, col), block in zip(plan.read_corners, got):
        check_equal(block, expected[row : row + side, col : col + side], f"block at {row},{col}")


def run_versioned(lib: str, path: pathlib.Path, sizes: Sizes, plan: Plan) -> Metrics:
    commits = Stopwatch()
    side = sizes.edit_side
    chunks = (sizes.chunk, sizes.chunk)
    with versioned_file(lib, path, "w") as vf:
        with commits.lap(), vf.stage_version("v0") as group:
            group.create_dataset("x", data=plan.initial, chunks=chunks, maxshape=(None, None))
        initial_commit = commits.last
        commits.laps.clear()
        for number in range(sizes.commits):
            row, col = plan.edit_corners[number]
            with commits.lap(), vf.stage_version(f"v{number + 1}") as group:
                group["x"][row : row + side, col : col + side] = plan.edit_values[number]

    old_name, latest_name = f"v{sizes.commits // 2}", f"v{sizes.commits}"
    old_state = plan.state_after(sizes.commits // 2)
    with versioned_file(lib, path, "r") as vf:
        full_read, latest = best_of(lambda: read_version(lib, path, latest_name, "x"))
        full_read_old, old = best_of(lambda: read_version(lib, path, old_name, "x"))
        reads_time, reads = timed(lambda: block_reads(lambda: vf[old_name]["x"], plan, sizes))
        check_equal(latest, plan.state_after(sizes.commits), f"full read of {latest_name}")
        check_equal(old, old_state, f"full read of {old_name}")
        check_block_reads(reads, old_state, plan, sizes)
        check_equal(vf["v0"]["x"][:], plan.initial, "full read of v0")
    return {
        "initial_commit_s": initial_commit,
        **commit_summary(commits.laps, sizes.window),
        "file_bytes": file_bytes(path),
        "full_read_s": full_read,
        "full_read_old_s": full_read_old,
        "block_reads_s": reads_time,
    }


def run_h5py(path: pathlib.Path, sizes: Sizes, plan: Plan) -> Metrics:
    edits = Stopwatch()
    side = sizes.edit_side
    chunks = (sizes.chunk, sizes.chunk)
    with h5py.File(path, "w") as h5file:
        write, dataset = timed(
            lambda: h5file.create_dataset(
                "x", data=plan.initial, chunks=chunks, maxshape=(None, None)
            )
        )
        for number in range(sizes.commits):
            row, col = plan.edit_corners[number]
            with edits.lap():
                dataset[row : row + side, col : col + side] = plan.edit_values[number]
    latest_state = plan.state_after(sizes.commits)
    with h5py.File(path, "r") as h5file:
        full_read, latest = best_of(lambda: read_plain(path, "x"))
        reads_time, reads = timed(lambda: block_reads(lambda: h5file["x"], plan, sizes))
    check_equal(latest, latest_state, "full read")
    check_block_reads(reads, latest_state, plan, sizes)
    return {
        "write_s": write,
        **commit_summary(edits.laps, sizes.window),
        "file_bytes": file_bytes(path),
        "full_read_s": full_read,
        "block_reads_s": reads_time,
    }


def run_icechunk(path: pathlib.Path, sizes: Sizes, plan: Plan) -> Metrics:
    import _icechunk as ic

    commits = Stopwatch()
    side = sizes.edit_side
    chunks = (sizes.chunk, sizes.chunk)
    repo = ic.create_repo(path)
    snapshots = []
    with commits.lap():
        snapshots.append(
            ic.commit(repo, lambda s: ic.create_array(s, "x", plan.initial, chunks), "v0")
        )
    initial_commit = commits.last
    commits.laps.clear()
    for number in range(sizes.commits):
        row, col = plan.edit_corners[number]

        def edit(store: Any, row: int = row, col: int = col, number: int = number) -> None:
            array = ic.open_array(store, "x", writable=True)
            array[row : row + side, col : col + side] = plan.edit_values[number]

        with commits.lap():
            snapshots.append(ic.commit(repo, edit, f"v{number + 1}"))

    full_read, full_read_old, store = ic.read_back(path, snapshots, plan.state_after)
    reads_time, reads = timed(lambda: block_reads(lambda: ic.open_array(store, "x"), plan, sizes))
    check_block_reads(reads, plan.state_after(sizes.commits // 2), plan, sizes)
    return {
        "initial_commit_s": initial_commit,
        **commit_summary(commits.laps, sizes.window),
        "file_bytes": ic.directory_bytes(path),
        "full_read_s": full_read,
        "full_read_old_s": full_read_old,
        "block_reads_s": reads_time,
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
