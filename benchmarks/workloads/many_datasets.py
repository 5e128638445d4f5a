"""Workload 5: many datasets, each commit touching one.

A file holds 100 float64 datasets (16384 elements, 1024-element chunks); 200 commits each
overwrite 100 elements of one dataset (round robin), leaving the other 99 untouched. The
same 200 commits are also made against a file holding a single dataset, so that the cost
of untouched datasets reads off as ``commit_many_over_one`` (1.0 means none). Also
measures the file size and a read of every dataset of an old version right after
opening the file (median of five openings). The plain h5py
reference does the same writes in place.
"""

from __future__ import annotations

import pathlib
import sys
from dataclasses import dataclass

import h5py
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _common import (
    Metrics,
    Stopwatch,
    check_equal,
    commit_summary,
    file_bytes,
    main,
    median,
    require_library,
    timed,
    versioned_file,
)

NAME = "many_datasets"
#: The read of every dataset right after opening the file is timed this many times
#: (the file opened anew each time); the median is reported.
READ_TRIALS = 5
LIBRARIES = ("h5vc", "versioned_hdf5", "h5py")
H5PY_BASELINE = {"initial_commit_s": "write_s"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizes:
    datasets: int
    length: int
    chunk: int
    commits: int
    edit_length: int
    window: int


FULL = Sizes(datasets=100, length=16384, chunk=1024, commits=200, edit_length=100, window=20)
QUICK = Sizes(datasets=10, length=16384, chunk=1024, commits=20, edit_length=100, window=5)


@dataclass(frozen=True, slots=True)
class Plan:
    initial: np.ndarray  # (datasets, length)
    edit_starts: np.ndarray
    edit_values: np.ndarray

    @property
    def datasets(self) -> int:
        return self.initial.shape[0]

    def target(self, commit: int) -> int:
        """Index of the dataset that commit number ``commit`` edits."""
        return commit % self.datasets

    def state_after(self, commits: int) -> np.ndarray:
        state = self.initial.copy()
        width = self.edit_values.shape[1]
        for number in range(commits):
            start = self.edit_starts[number]
            state[self.target(number), start : start + width] = self.edit_values[number]
        return state

    def restricted(self, datasets: int) -> Plan:
        """The same edits applied to a file holding only the first ``datasets`` datasets."""
        return Plan(self.initial[:datasets], self.edit_starts, self.edit_values)


def dataset_name(index: int) -> str:
    return f"d{index:03d}"


def make_plan(sizes: Sizes) -> Plan:
    rng = np.random.default_rng(20240505)
    return Plan(
        initial=rng.random((sizes.datasets, sizes.length)),
        edit_starts=rng.integers(0, sizes.length - sizes.edit_length, sizes.commits),
        edit_values=rng.random((sizes.commits, sizes.edit_length)),
    )


def read_all(group: object, datasets: int) -> np.ndarray:
    return np.stack([group[dataset_name(index)][:] for index in range(datasets)])  # type: ignore[index]


def write_versioned(
    lib: str, path: pathlib.Path, sizes: Sizes, plan: Plan
) -> tuple[float, list[float]]:
    """Create the datasets in v0, then make the edit commits; return (initial, per-commit)."""
    commits = Stopwatch()
    width = sizes.edit_length
    with versioned_file(lib, path, "w") as vf:
        with commits.lap(), vf.stage_version("v0") as group:
            for index in range(plan.datasets):
                group.create_dataset(
                    dataset_name(index),
                    data=plan.initial[index],
                    chunks=(sizes.chunk,),
                    maxshape=(None,),
                )
        initial_commit = commits.last
        commits.laps.clear()
        for number in range(sizes.commits):
            start = plan.edit_starts[number]
            name = dataset_name(plan.target(number))
            with commits.lap(), vf.stage_version(f"v{number + 1}") as group:
                group[name][start : start + width] = plan.edit_values[number]
    return initial_commit, commits.laps


def run_versioned(lib: str, workdir: pathlib.Path, sizes: Sizes, plan: Plan) -> Metrics:
    single = plan.restricted(1)
    single_path = workdir / f"{NAME}-{lib}-one.h5"
    _, single_commits = write_versioned(lib, single_path, sizes, single)
    with versioned_file(lib, single_path, "r") as vf:
        check_equal(
            read_all(vf[f"v{sizes.commits}"], 1), single.state_after(sizes.commits), "one dataset"
        )

    path = workdir / f"{NAME}-{lib}.h5"
    initial_commit, many_commits = write_versioned(lib, path, sizes, plan)
    old_number = sizes.commits // 2
    read_times = []
    for _ in range(READ_TRIALS):
        with versioned_file(lib, path, "r") as vf:
            seconds, old = timed(lambda: read_all(vf[f"v{old_number}"], plan.datasets))
        read_times.append(seconds)
        check_equal(old, plan.state_after(old_number), f"every dataset of v{old_number}")
    read_time = median(read_times)
    with versioned_file(lib, path, "r") as vf:
        latest = read_all(vf[f"v{sizes.commits}"], plan.datasets)
        check_equal(latest, plan.state_after(sizes.commits), f"every dataset of v{sizes.commits}")
    return summarize(initial_commit, many_commits, single_commits, sizes) | {
        "file_bytes": file_bytes(path),
        "read_version_s": read_time,
    }


def summarize(initial: float, many: list[float], single: list[float], sizes: Sizes) -> Metrics:
    many_median, single_median = median(many), median(single)
    return {
        "initial_commit_s": initial,
        **commit_summary(many, sizes.window),
        "commit_median_1ds_s": single_median,
        "commit_many_over_one": many_median / single_median if single_median > 0 else float("nan"),
    }


def edit_in_place(path: pathlib.Path, sizes: Sizes, plan: Plan) -> tuple[float, list[float]]:
    edits = Stopwatch()
    width = sizes.edit_length
    with h5py.File(path, "w") as h5file:

        def create_all() -> None:
            for index in range(plan.datasets):
                h5file.create_dataset(
                    dataset_name(index),
                    data=plan.initial[index],
                    chunks=(sizes.chunk,),
                    maxshape=(None,),
                )

        write, _ = timed(create_all)
        for number in range(sizes.commits):
            start = plan.edit_starts[number]
            dataset = h5file[dataset_name(plan.target(number))]
            with edits.lap():
                dataset[start : start + width] = plan.edit_values[number]
    return write, edits.laps


def run_h5py(workdir: pathlib.Path, sizes: Sizes, plan: Plan) -> Metrics:
    single = plan.restricted(1)
    single_path = workdir / f"{NAME}-h5py-one.h5"
    _, single_edits = edit_in_place(single_path, sizes, single)
    path = workdir / f"{NAME}-h5py.h5"
    write, many_edits = edit_in_place(path, sizes, plan)
    read_times = []
    for _ in range(READ_TRIALS):
        with h5py.File(path, "r") as h5file:
            seconds, latest = timed(lambda: read_all(h5file, plan.datasets))
        read_times.append(seconds)
        check_equal(latest, plan.state_after(sizes.commits), "every dataset")
    read_time = median(read_times)
    metrics = summarize(write, many_edits, single_edits, sizes)
    metrics["write_s"] = metrics.pop("initial_commit_s")
    return metrics | {"file_bytes": file_bytes(path), "read_version_s": read_time}


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    sizes = QUICK if quick else FULL
    plan = make_plan(sizes)
    if lib == "h5py":
        return run_h5py(workdir, sizes, plan)
    return run_versioned(lib, workdir, sizes, plan)


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
