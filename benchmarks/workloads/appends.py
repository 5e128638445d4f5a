"""Workload 2: a table that grows by appends.

An (n, 8) float64 table with 4096-row chunks starts with 1000 rows; 300 commits each append
1000 rows (resize, then write the new rows), so partially filled chunks are rewritten as
they fill. Measures every append commit, the file size, full reads of the newest and an
old version, a read of the newest rows on the file already open and one on the file
opened anew (``tail_read_fresh_s``: open, read the last 1000 rows of the newest version,
close; median of five). The plain h5py reference appends the same rows to one dataset in
place. Icechunk appends the same rows to a zarr array with the same chunks (``resize``,
then write), one commit each (``_icechunk.py``).
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
    median,
    read_plain,
    read_version,
    require_library,
    timed,
    versioned_file,
)

NAME = "appends"
LIBRARIES = ("h5vc", "versioned_hdf5", "h5py", "icechunk")
H5PY_BASELINE = {"initial_commit_s": "write_s"}
COLUMNS = 8
#: Fresh openings timed for ``tail_read_fresh_s`` (the median is reported).
FRESH_TRIALS = 5


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

    def fresh_tail() -> np.ndarray:
        with versioned_file(lib, path, "r") as vf:
            return vf[latest_name]["table"][-step:]

    return {
        "initial_commit_s": initial_commit,
        **commit_summary(commits.laps, sizes.window),
        "file_bytes": file_bytes(path),
        "full_read_s": full_read,
        "full_read_old_s": full_read_old,
        "tail_read_s": tail_read,
        "tail_read_fresh_s": fresh_tail_read(fresh_tail, table[-step:]),
    }


def fresh_tail_read(read: Callable[[], np.ndarray], expected: np.ndarray) -> float:
    """Median seconds of ``read()`` (open the file, read the newest rows, close), each
    result checked."""
    laps = []
    for _ in range(FRESH_TRIALS):
        seconds, got = timed(read)
        check_equal(got, expected, "last rows read on a fresh open")
        laps.append(seconds)
    return median(laps)


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
        "tail_read_fresh_s": fresh_tail_read(lambda: read_plain_tail(path, step), table[-step:]),
    }


def read_plain_tail(path: pathlib.Path, rows: int) -> np.ndarray:
    with h5py.File(path, "r") as h5file:
        return h5file["table"][-rows:]


def run_icechunk(path: pathlib.Path, sizes: Sizes, table: np.ndarray) -> Metrics:
    import _icechunk as ic

    commits = Stopwatch()
    step = sizes.rows_per_commit
    chunks = (sizes.chunk_rows, COLUMNS)
    repo = ic.create_repo(path)
    snapshots = []
    with commits.lap():
        snapshots.append(
            ic.commit(repo, lambda s: ic.create_array(s, "table", table[:step], chunks), "v0")
        )
    initial_commit = commits.last
    commits.laps.clear()
    for number in range(1, sizes.commits + 1):
        rows = table[number * step : (number + 1) * step]

        def edit(store: Any, rows: np.ndarray = rows) -> None:
            append(ic.open_array(store, "table", writable=True), rows)

        with commits.lap():
            snapshots.append(ic.commit(repo, edit, f"v{number}"))

    latest, old_number = snapshots[sizes.commits], sizes.commits // 2
    full_read, got = best_of(lambda: ic.read_snapshot(path, latest, "table"))
    full_read_old, old = best_of(lambda: ic.read_snapshot(path, snapshots[old_number], "table"))
    array = ic.open_array(ic.snapshot_store(ic.open_repo(path), latest), "table")
    tail_read, tail = timed(lambda: array[-step:])
    check_equal(got, table, "full read of the last snapshot")
    check_equal(old, rows_after(table, sizes, old_number), f"full read of v{old_number}")
    check_equal(tail, table[-step:], f"last {step} rows of the last snapshot")
    check_equal(ic.read_snapshot(path, snapshots[0], "table"), table[:step], "full read of v0")

    def fresh_tail() -> np.ndarray:
        store = ic.snapshot_store(ic.open_repo(path), latest)
        return np.asarray(ic.open_array(store, "table")[-step:])

    return {
        "initial_commit_s": initial_commit,
        **commit_summary(commits.laps, sizes.window),
        "file_bytes": ic.directory_bytes(path),
        "full_read_s": full_read,
        "full_read_old_s": full_read_old,
        "tail_read_s": tail_read,
        "tail_read_fresh_s": fresh_tail_read(fresh_tail, table[-step:]),
    }


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    sizes = QUICK if quick else FULL
    table = make_table(sizes)
    path = workdir / f"{NAME}-{lib}.h5"
    if lib == "h5py":
        return run_h5py(path, sizes, table)
    if lib == "icechunk":
        return run_icechunk(path.with_suffix(".icechunk"), sizes, table)
    return run_versioned(lib, path, sizes, table)


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
