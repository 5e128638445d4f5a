"""Workload: the fixed costs, paid however small the data.

- ``open_dataset_*``: ``vf[version]["x"]`` right after the file is opened (median of
  many openings), read-only (``_r``) and writable (``_rw``), through ``h5vc.open``
  and through ``h5py.File`` + ``VersionedHDF5File`` (``_h5py``; versioned-hdf5 has
  only that way, so its numbers stand under both names). Plain h5py opens the
  virtual dataset itself.
- ``edit_commit_*``: a commit changing one element of a 1 MiB-chunk dataset (median),
  through both ways of opening: what a commit costs besides its one chunk.
- ``edit_commit_durable_s``: the same commit through ``h5vc.open(..., durable_writes=True)``
  (every commit point synced to the disk), timed alternately with one without it on a
  second file, so that ``durable_over_plain`` compares the two in the same moments
  (h5vc only: the drop-in way has no ``durable_writes``).
- ``tiny_*``: 100 datasets of 3 int64, 50 commits each changing one of them: the file
  size and a read of all 100 of a version right after opening (median of five).
- ``import_first_read_s``: a new process importing the library, opening the file and
  reading one dataset (median of five processes after one that compiles the bytecode).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _common import Metrics, check_equal, file_bytes, main, median, require_library, timed

NAME = "fixed_costs"
LIBRARIES = ("h5vc", "versioned_hdf5", "h5py")
H5PY_BASELINE: dict[str, str] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizes:
    opens: int
    commits: int
    tiny_datasets: int
    tiny_commits: int
    processes: int


FULL = Sizes(opens=40, commits=40, tiny_datasets=100, tiny_commits=50, processes=5)
QUICK = Sizes(opens=10, commits=10, tiny_datasets=20, tiny_commits=10, processes=2)
EDIT_CHUNK = 1 << 17  # float64 elements: 1 MiB


@contextlib.contextmanager
def opened(lib: str, path: pathlib.Path, mode: str, way: str) -> Iterator[Any]:
    """``lib``'s versioned file at ``path``: through ``h5vc.open`` (``way`` "open",
    h5vc only) or through ``h5py.File`` + ``VersionedHDF5File`` (``way`` "h5py")."""
    if lib == "h5vc" and way == "open":
        import h5vc

        with h5vc.open(str(path), mode) as vf:
            yield vf
        return
    if lib == "h5vc":
        from h5vc import VersionedHDF5File
    else:
        from versioned_hdf5 import VersionedHDF5File
    with h5py.File(path, mode) as h5file:
        vf = VersionedHDF5File(h5file)
        try:
            yield vf
        finally:
            close = getattr(vf, "close", None)
            if close is not None and not getattr(vf, "closed", False):
                close()


def ways(lib: str) -> list[tuple[str, str]]:
    """(way, metric suffix) pairs of ``lib``."""
    return [("open", ""), ("h5py", "_h5py")] if lib == "h5vc" else [("h5py", "")]


def twice(lib: str, metrics: Metrics) -> Metrics:
    """versioned-hdf5 opens files one way: its numbers stand under both names."""
    if lib == "h5vc":
        return metrics
    return metrics | {f"{key[:-2]}_h5py_s": v for key, v in metrics.items() if key.endswith("_s")}


# -- opening a committed dataset ----------------------------------------------------


def make_open_file(lib: str, path: pathlib.Path) -> None:
    with opened(lib, path, "w", "open" if lib == "h5vc" else "h5py") as vf:
        with vf.stage_version("v1") as group:
            group.create_dataset("x", data=np.arange(100_000.0), chunks=(1024,), maxshape=(None,))
        for number in range(2, 6):
            with vf.stage_version(f"v{number}") as group:
                group["x"][number * 10 : number * 10 + 5] = -number


def open_times(lib: str, path: pathlib.Path, sizes: Sizes) -> Metrics:
    metrics: Metrics = {}
    for way, suffix in ways(lib):
        for mode, label in (("r", "r"), ("r+", "rw")):
            seconds = []
            for _ in range(sizes.opens):
                with opened(lib, path, mode, way) as vf:
                    took, dataset = timed(lambda vf=vf: vf["v3"]["x"])
                    seconds.append(took)
                    assert dataset.shape == (100_000,)
            metrics[f"open_dataset_{label}{suffix}_s"] = median(seconds)
    return metrics


def h5py_open_times(path: pathlib.Path, sizes: Sizes) -> Metrics:
    metrics: Metrics = {}
    for mode, label in (("r", "r"), ("r+", "rw")):
        seconds = []
        for _ in range(sizes.opens):
            with h5py.File(path, mode) as h5file:
                took, _ = timed(lambda f=h5file: f["_version_data/versions/v3"]["x"])
                seconds.append(took)
        metrics[f"open_dataset_{label}_s"] = median(seconds)
    return metrics


# -- a small edit of a dataset of 1 MiB chunks --------------------------------------


def edit_commits(lib: str, workdir: pathlib.Path, sizes: Sizes) -> Metrics:
    metrics: Metrics = {}
    for way, suffix in ways(lib):
        path = workdir / f"{NAME}-{lib}-edit{suffix}.h5"
        seconds = []
        with opened(lib, path, "w", way) as vf:
            with vf.stage_version("v0") as group:
                group.create_dataset(
                    "x", data=np.zeros(8 * EDIT_CHUNK), chunks=(EDIT_CHUNK,), maxshape=(None,)
                )
            for number in range(1, sizes.commits + 1):

                def commit(vf: Any = vf, number: int = number) -> None:
                    with vf.stage_version(f"v{number}") as group:
                        group["x"][number * 1001] = number

                seconds.append(timed(commit)[0])
        metrics[f"edit_commit{suffix}_s"] = median(seconds)
    return metrics


def durable_commits(workdir: pathlib.Path, sizes: Sizes) -> Metrics:
    """h5vc's edit commit with and without ``durable_writes``, alternately."""
    import h5vc

    seconds: dict[bool, list[float]] = {False: [], True: []}
    with contextlib.ExitStack() as stack:
        files = {}
        for durable in (False, True):
            path = workdir / f"{NAME}-h5vc-durable-{durable}.h5"
            vf = stack.enter_context(h5vc.open(str(path), "w", durable_writes=durable))
            with vf.stage_version("v0") as group:
                group.create_dataset(
                    "x", data=np.zeros(8 * EDIT_CHUNK), chunks=(EDIT_CHUNK,), maxshape=(None,)
                )
            files[durable] = vf
        for number in range(1, sizes.commits + 1):
            for durable, vf in files.items():

                def commit(vf: Any = vf, number: int = number) -> None:
                    with vf.stage_version(f"v{number}") as group:
                        group["x"][number * 1001] = number

                seconds[durable].append(timed(commit)[0])
        for vf in files.values():
            check_equal(vf[f"v{sizes.commits}"]["x"][1001:1002], np.ones(1), "durable edit")
    plain, durable_median = median(seconds[False]), median(seconds[True])
    return {
        "edit_commit_durable_s": durable_median,
        "durable_over_plain": durable_median / plain,
    }


# -- many tiny datasets -------------------------------------------------------------


def tiny(lib: str, workdir: pathlib.Path, sizes: Sizes) -> Metrics:
    path = workdir / f"{NAME}-{lib}-tiny.h5"
    names = [f"a{index:03d}" for index in range(sizes.tiny_datasets)]
    with opened(lib, path, "w", "open" if lib == "h5vc" else "h5py") as vf:
        for number in range(sizes.tiny_commits):
            with vf.stage_version(f"v{number}") as group:
                if number == 0:
                    for name in names:
                        group.create_dataset(name, data=np.arange(3, dtype=np.int64))
                else:
                    group[names[number % len(names)]][0] = number
    middle = sizes.tiny_commits // 2
    expected = np.tile(np.arange(3, dtype=np.int64), (len(names), 1))
    for number in range(1, middle + 1):
        expected[number % len(names), 0] = number
    metrics: Metrics = {"tiny_file_bytes": file_bytes(path)}
    for way, suffix in ways(lib):
        seconds = []
        for _ in range(5):
            with opened(lib, path, "r", way) as vf:
                took, got = timed(
                    lambda vf=vf: np.stack([vf[f"v{middle}"][name][:] for name in names])
                )
            seconds.append(took)
            check_equal(got, expected, f"every tiny dataset of v{middle}")
        metrics[f"tiny_read_version{suffix}_s"] = median(seconds)
    return metrics


def h5py_tiny(workdir: pathlib.Path, sizes: Sizes) -> Metrics:
    path = workdir / f"{NAME}-h5py-tiny.h5"
    names = [f"a{index:03d}" for index in range(sizes.tiny_datasets)]
    with h5py.File(path, "w") as h5file:
        for name in names:
            h5file.create_dataset(name, data=np.arange(3, dtype=np.int64))
    seconds = []
    for _ in range(5):
        with h5py.File(path, "r") as h5file:
            seconds.append(timed(lambda f=h5file: [f[name][:] for name in names])[0])
    return {"tiny_file_bytes": file_bytes(path), "tiny_read_version_s": median(seconds)}


# -- import and first read, in a new process ----------------------------------------

FIRST_READ = {
    "h5vc": ("import h5vc\nwith h5vc.open({path!r}, 'r') as vf:\n    vf['v3']['x'][:10]\n"),
    "versioned_hdf5": (
        "import h5py, versioned_hdf5\n"
        "with h5py.File({path!r}, 'r') as f:\n"
        "    versioned_hdf5.VersionedHDF5File(f)['v3']['x'][:10]\n"
    ),
    "h5py": (
        "import h5py\n"
        "with h5py.File({path!r}, 'r') as f:\n"
        "    f['_version_data/versions/v3/x'][:10]\n"
    ),
}


def import_first_read(lib: str, workdir: pathlib.Path, path: pathlib.Path, sizes: Sizes) -> Metrics:
    """Median time of new processes importing ``lib`` and reading one dataset, with
    compiled bytecode cached (in ``workdir``) as an installed package has it: a first,
    untimed process compiles it."""
    code = (
        "import time\nstart = time.perf_counter()\n"
        + FIRST_READ[lib].format(path=str(path))
        + "print(time.perf_counter() - start)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    seconds = []
    for _ in range(sizes.processes + 1):
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            timeout=300,
        )
        seconds.append(float(done.stdout.strip().splitlines()[-1]))
    return {"import_first_read_s": median(seconds[1:])}


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    sizes = QUICK if quick else FULL
    if lib == "h5py":
        path = workdir / f"{NAME}-h5py-open.h5"  # the same names, a plain dataset
        with h5py.File(path, "w") as h5file:
            group = h5file.create_group("_version_data/versions/v3")
            group.create_dataset("x", data=np.arange(100_000.0), chunks=(1024,))
        return (
            h5py_open_times(path, sizes)
            | h5py_tiny(workdir, sizes)
            | import_first_read(lib, workdir, path, sizes)
        )
    path = workdir / f"{NAME}-{lib}-open.h5"
    make_open_file(lib, path)
    metrics = open_times(lib, path, sizes) | edit_commits(lib, workdir, sizes)
    if lib == "h5vc":
        metrics |= durable_commits(workdir, sizes)
    metrics |= tiny(lib, workdir, sizes) | import_first_read(lib, workdir, path, sizes)
    return twice(lib, metrics)


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
