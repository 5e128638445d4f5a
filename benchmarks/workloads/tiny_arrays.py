"""Workload: many tiny datasets — 100 arrays of 3 int64 and 50 commits.

Version v0 creates 100 int64 datasets of 3 elements each (one 3-element chunk each);
then 50 commits each overwrite one element of one dataset (round robin). Measures the
initial commit, every commit, the size of the file, and reading every dataset of version
v25 right after opening the file: the opening (``open_s``), the 100 reads after it
(``read_all_s``) and both (``open_read_all_s``), each the median of five openings. The
plain h5py reference writes the same datasets and edits them in place (each edit
followed by ``flush``), and reads its only state. Icechunk keeps
the same arrays as zarr arrays with 3-element chunks, one commit per version (its default
configuration keeps chunks this small inline in the manifest; see ``_icechunk.py``).
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
    check_equal,
    commit_summary,
    file_bytes,
    main,
    median,
    require_library,
    timed,
    versioned_file,
)

NAME = "tiny_arrays"
LIBRARIES = ("h5vc", "versioned_hdf5", "h5py", "icechunk")
H5PY_BASELINE = {"initial_commit_s": "write_s"}
#: Openings timed for the reads (the median is reported).
READ_TRIALS = 5
LENGTH = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizes:
    datasets: int
    commits: int
    window: int
    read_version: int


FULL = Sizes(datasets=100, commits=50, window=10, read_version=25)
QUICK = Sizes(datasets=20, commits=10, window=3, read_version=5)


def name_of(index: int) -> str:
    return f"d{index:03d}"


def initial(sizes: Sizes) -> np.ndarray:
    return np.arange(sizes.datasets * LENGTH, dtype=np.int64).reshape(sizes.datasets, LENGTH)


def edit(number: int, sizes: Sizes) -> tuple[int, int, int]:
    """(dataset, element, new value) of commit ``number`` (1-based)."""
    return (number - 1) % sizes.datasets, number % LENGTH, -number


def state_after(commits: int, sizes: Sizes) -> np.ndarray:
    state = initial(sizes)
    for number in range(1, commits + 1):
        index, element, value = edit(number, sizes)
        state[index, element] = value
    return state


def timed_reads(
    open_version: Callable[[], tuple[Any, Callable[[], None]]], sizes: Sizes, what: str
) -> Metrics:
    """Median over :data:`READ_TRIALS` of opening (``open_version()`` returns the
    version's group and a closer) and of reading every dataset right after."""
    expected = state_after(sizes.read_version, sizes)
    opens, reads = [], []
    for _ in range(READ_TRIALS):
        open_s, (group, close) = timed(open_version)
        read_s, got = timed(
            lambda group=group: np.stack(
                [np.asarray(group[name_of(i)][:]) for i in range(sizes.datasets)]
            )
        )
        close()
        check_equal(got, expected, what)
        opens.append(open_s)
        reads.append(read_s)
    return {
        "open_s": median(opens),
        "read_all_s": median(reads),
        "open_read_all_s": median([a + b for a, b in zip(opens, reads)]),
    }


def run_versioned(lib: str, path: pathlib.Path, sizes: Sizes) -> Metrics:
    commits = Stopwatch()
    data = initial(sizes)
    with versioned_file(lib, path, "w") as vf:
        with commits.lap(), vf.stage_version("v0") as group:
            for index in range(sizes.datasets):
                group.create_dataset(name_of(index), data=data[index], chunks=(LENGTH,))
        initial_commit = commits.last
        commits.laps.clear()
        for number in range(1, sizes.commits + 1):
            index, element, value = edit(number, sizes)
            with commits.lap(), vf.stage_version(f"v{number}") as group:
                group[name_of(index)][element] = value

    def open_version() -> tuple[Any, Callable[[], None]]:
        context = versioned_file(lib, path, "r")
        vf = context.__enter__()
        return vf[f"v{sizes.read_version}"], lambda: context.__exit__(None, None, None)

    metrics = timed_reads(open_version, sizes, f"every dataset of v{sizes.read_version}")
    return {
        "initial_commit_s": initial_commit,
        **commit_summary(commits.laps, sizes.window),
        "file_bytes": file_bytes(path),
        **metrics,
    }


def run_h5py(path: pathlib.Path, sizes: Sizes) -> Metrics:
    edits = Stopwatch()
    data = initial(sizes)
    with h5py.File(path, "w") as h5file:

        def create_all() -> None:
            for index in range(sizes.datasets):
                h5file.create_dataset(name_of(index), data=data[index], chunks=(LENGTH,))

        write, _ = timed(create_all)
        for number in range(1, sizes.commits + 1):
            index, element, value = edit(number, sizes)
            with edits.lap():
                h5file[name_of(index)][element] = value
                h5file.flush()
    # The file holds only the last state: read it as the "version".
    last = Sizes(
        datasets=sizes.datasets,
        commits=sizes.commits,
        window=sizes.window,
        read_version=sizes.commits,
    )

    def open_file() -> tuple[Any, Callable[[], None]]:
        h5file = h5py.File(path, "r")
        return h5file, h5file.close

    return {
        "write_s": write,
        **commit_summary(edits.laps, sizes.window),
        "file_bytes": file_bytes(path),
        **timed_reads(open_file, last, "every dataset"),
    }


def run_icechunk(path: pathlib.Path, sizes: Sizes) -> Metrics:
    import _icechunk as ic

    commits = Stopwatch()
    data = initial(sizes)
    repo = ic.create_repo(path)

    def create_all(store: Any) -> None:
        for index in range(sizes.datasets):
            ic.create_array(store, name_of(index), data[index], (LENGTH,))

    snapshots = []
    with commits.lap():
        snapshots.append(ic.commit(repo, create_all, "v0"))
    initial_commit = commits.last
    commits.laps.clear()
    for number in range(1, sizes.commits + 1):
        index, element, value = edit(number, sizes)

        def change(store: Any, index: int = index, element: int = element, value: int = value):
            ic.open_array(store, name_of(index), writable=True)[element] = value

        with commits.lap():
            snapshots.append(ic.commit(repo, change, f"v{number}"))

    class Group:
        def __init__(self, store: Any) -> None:
            self.store = store

        def __getitem__(self, name: str) -> Any:
            return ic.open_array(self.store, name)

    def open_version() -> tuple[Any, Callable[[], None]]:
        store = ic.snapshot_store(ic.open_repo(path), snapshots[sizes.read_version])
        return Group(store), lambda: None

    metrics = timed_reads(open_version, sizes, f"every array of v{sizes.read_version}")
    return {
        "initial_commit_s": initial_commit,
        **commit_summary(commits.laps, sizes.window),
        "file_bytes": ic.directory_bytes(path),
        **metrics,
    }


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    sizes = QUICK if quick else FULL
    path = workdir / f"{NAME}-{lib}.h5"
    if lib == "h5py":
        return run_h5py(path, sizes)
    if lib == "icechunk":
        return run_icechunk(path.with_suffix(".icechunk"), sizes)
    return run_versioned(lib, path, sizes)


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
