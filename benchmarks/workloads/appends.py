"""Workload 2: a table that grows by appends.

An (n, 8) float64 table with 4096-row chunks starts with 1000 rows; 300 commits each append
1000 rows (resize, then write the new rows), so partially filled chunks are rewritten as
they fill. Measures every append commit, the file size, full reads of the newest and an
old version and a read of the newest rows. The plain h5py reference appends the same rows
to one dataset in place.
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

NAME = "appends"
LIBRARIES = ("h5vc", "versioned_hdf5", "h5py")
H5PY_BASELINE = {"initial_commit_s": "write_s"}
COLUMNS = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizes:
    commits: int
    rows_per_commit: int
    chunk_rows: int
    window: int


FULL = Sizes(commits=300, rows_per_commit=1000, chunk_rows=4096, window=20)
QUICK = Sizes(commits=30, rows_per_commit=1000, chunk_rows=4096, window=5)


def make_table(sizes: Sizes) -> np.ndarray:
    """All rows ever written: the initial block followed by one block per commit."""
    rng = np.random.default_rng(20240502)
    return rng.random(((sizes.commits + 1) * sizes.rows_per_commit, COLUMNS))


def rows_after(table: np.ndarray, sizes: Sizes, commits: int) -> np.ndarray:
    return table[: (commits + 1) * sizes.rows_per_commit]


def append(dataset: object, rows: np.ndarray) -> None:
    old_length = dataset.shape[0]  # type: ignore[attr-defined]
    dataset.resize((old_length + rows.shape[0], COLUMNS))  # type: ignore[attr-defined]
    dataset[old_length:] = rows  # type: ignore[index]


def run_versioned(lib: str, path: pathlib.Path, sizes: Sizes, table: np.ndarray) -> Metrics:
    commits = Stopwatch()
    step = sizes.rows_per_commit
    with versioned_file(lib, path, "w") as vf:
        with commits.lap(), vf.stage_version("v0") as group:
            group.create_dataset(
                "table",
                data=table[:step],
                chunks=(sizes.chunk_rows, COLUMNS),
                maxshape=(None, COLUMNS),
            )
        initial_commit = commits.last
        commits.laps.clear()
        for number in range(1, sizes.commits + 1):
            with commits.lap(), vf.stage_version(f"v{number}") as group:
                append(group["table"], table[number * step : (number + 1) * step])

    latest_name, old_number = f"v{sizes.commits}", sizes.commits // 2
    with versioned_file(lib, path, "r") as vf:
        full_read, latest = best_of(lambda: read_version(lib, path, latest_name, "table"))
        full_read_old, old = best_of(lambda: read_version(lib, path, f"v{old_number}", "table"))
        tail_read, tail = timed(lambda: vf[latest_name]["table"][-step:])
        check_equal(latest, table, f"full read of {latest_name}")
        check_equal(old, rows_after(table, sizes, old_number), f"full read of v{old_number}")
        check_equal(tail, table[-step:], f"last {step} rows of {latest_name}")
        check_equal(vf["v0"]["table"][:], table[:step], "full read of v0")
    return {
        "initial_commit_s": initial_commit,
        **commit_summary(commits.laps, sizes.window),
        "file_bytes": file_bytes(path),
        "full_read_s": full_read,
        "full_read_old_s": full_read_old,
        "tail_read_s": tail_read,
    }


def run_h5py(path: pathlib.Path, sizes: Sizes, table: np.ndarray) -> Metrics:
    appends = Stopwatch()
    step = sizes.rows_per_commit
    with h5py.File(path, "w") as h5file:
        write, dataset = timed(
            lambda: h5file.create_dataset(
                "table",
                data=table[:step],
                chunks=(sizes.chunk_rows, COLUMNS),
                maxshape=(None, COLUMNS),
            )
        )
        for number in range(1, sizes.commits + 1):
            with appends.lap():
                append(dataset, table[number * step : (number + 1) * step])
    with h5py.File(path, "r") as h5file:
        full_read, latest = best_of(lambda: read_plain(path, "table"))
        tail_read, tail = timed(lambda: h5file["table"][-step:])
    check_equal(latest, table, "full read")
    check_equal(tail, table[-step:], f"last {step} rows")
    return {
        "write_s": write,
        **commit_summary(appends.laps, sizes.window),
        "file_bytes": file_bytes(path),
        "full_read_s": full_read,
        "tail_read_s": tail_read,
    }


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    sizes = QUICK if quick else FULL
    table = make_table(sizes)
    path = workdir / f"{NAME}-{lib}.h5"
    if lib == "h5py":
        return run_h5py(path, sizes, table)
    return run_versioned(lib, path, sizes, table)


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
