"""Helpers shared by the workload modules.

Imports only the standard library, numpy and h5py, so that every benchmark environment
(the project's and each peer's) can load it. The versioned libraries are imported lazily
by :func:`versioned_file`.

h5vc's files are opened with ``h5vc.open``, as its users are told to: writes go through
the rollback journal. ``H5VC_BENCH_JOURNAL=0`` in the environment opens them with
``h5py.File`` instead (HDF5's default driver, the same free-space options a file created
by ``h5vc.open`` has, with the root group held open so that h5vc does not take the
handle over for its journal), to measure what the journal costs.

h5vc loads its writer (staging engine, commit code, hashing) on the first write of a
process, where versioned-hdf5 loads everything at import. So that a first timed commit
does not include that loading, :func:`versioned_file` makes one small commit in a
scratch file first, once per process, when it opens an h5vc file for writing.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import pathlib
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import h5py
import numpy as np

#: Library names understood by :func:`versioned_file`.
VERSIONED_LIBRARIES = ("h5vc", "versioned_hdf5")

Metrics = dict[str, "float | list[float]"]


def versioned_class(lib: str) -> Any:
    """Return the ``VersionedHDF5File`` class of a versioned library."""
    if lib == "h5vc":
        import h5vc

        return h5vc.VersionedHDF5File
    if lib == "versioned_hdf5":
        import versioned_hdf5

        return versioned_hdf5.VersionedHDF5File
    raise ValueError(f"Expected one of {VERSIONED_LIBRARIES}. Got {lib!r} instead.")


def journal_enabled() -> bool:
    """Whether h5vc's files are opened through its journal (``H5VC_BENCH_JOURNAL``)."""
    return os.environ.get("H5VC_BENCH_JOURNAL", "1") != "0"


@functools.cache
def load_h5vc_writer() -> None:
    """One small commit in a scratch file (see the module's docstring)."""
    import tempfile

    import h5vc

    with (
        tempfile.TemporaryDirectory() as scratch,
        h5vc.open(os.path.join(scratch, "warm.h5"), "w") as vf,
    ):
        with vf.stage_version("v0") as group:
            group.create_dataset("x", data=np.arange(4096.0), chunks=(1024,))
        with vf.stage_version("v1") as group:
            group["x"][:10] = -1


@contextmanager
def versioned_file(lib: str, path: pathlib.Path, mode: str) -> Iterator[Any]:
    """Open ``path`` as ``lib``'s ``VersionedHDF5File``: h5vc's with ``h5vc.open``
    (see :func:`journal_enabled`), versioned-hdf5's with h5py."""
    cls = versioned_class(lib)
    if lib == "h5vc" and mode != "r":
        load_h5vc_writer()
    if lib == "h5vc" and journal_enabled():
        import h5vc

        with h5vc.open(str(path), mode) as vf:
            yield vf
        return
    options: dict[str, Any] = {}
    if lib == "h5vc" and mode in ("w", "w-", "x"):
        from h5vc.store.space import FILE_SPACE_OPTIONS

        options = dict(FILE_SPACE_OPTIONS)
    with h5py.File(path, mode, **options) as h5file, unjournaled(lib, h5file):
        vf = cls(h5file)
        try:
            yield vf
        finally:
            close = getattr(vf, "close", None)
            if close is not None and not getattr(vf, "closed", False):
                close()


@contextmanager
def unjournaled(lib: str, h5file: h5py.File) -> Iterator[None]:
    """For h5vc, keep HDF5's own driver under ``h5file``: h5vc takes a writable file's
    handle over for its journal unless another object of the file is open, so the root
    group is held open (and the warning that says so is silenced)."""
    if lib != "h5vc" or h5file.mode != "r+":
        yield
        return
    import warnings

    from h5vc.errors import UnjournaledFileWarning

    root = h5file["/"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnjournaledFileWarning)
        yield
    del root


class Stopwatch:
    """Accumulates wall-clock durations measured with ``time.perf_counter``."""

    __slots__ = ("laps",)

    def __init__(self) -> None:
        self.laps: list[float] = []

    @contextmanager
    def lap(self) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.laps.append(time.perf_counter() - start)

    @property
    def last(self) -> float:
        return self.laps[-1]


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    """Run ``action`` once; return (seconds, its result)."""
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def best_of(action: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    """Run ``action`` ``repeat`` times; return (fastest seconds, last result).

    For reads of large arrays: a single run also measures the operating system
    handing out fresh pages for the result, which varies by a factor of two or
    three from run to run.  Each run should open the file itself (see
    :func:`read_version` and :func:`read_plain`), so no run profits from another's
    caches.
    """
    best = float("inf")
    result = None
    for _ in range(repeat):
        seconds, result = timed(action)
        best = min(best, seconds)
    return best, result


def read_version(lib: str, path: pathlib.Path, version: str, name: str) -> Any:
    """Open the file, read dataset ``name`` of ``version`` whole, close the file."""
    with versioned_file(lib, path, "r") as vf:
        return vf[version][name][:]


def read_plain(path: pathlib.Path, name: str) -> Any:
    """Open the file with h5py, read dataset ``name`` whole, close the file."""
    with h5py.File(path, "r") as h5file:
        return h5file[name][:]


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def commit_summary(commit_times: list[float], window: int) -> Metrics:
    """Median commit time over the first and last ``window`` commits, and their ratio."""
    first = median(commit_times[:window])
    last = median(commit_times[-window:])
    return {
        "commit_times_s": list(commit_times),
        "commit_median_s": median(commit_times),
        "commit_first_median_s": first,
        "commit_last_median_s": last,
        "commit_last_over_first": last / first if first > 0 else float("nan"),
    }


def file_bytes(path: pathlib.Path) -> float:
    return float(os.path.getsize(path))


def check_equal(got: Any, expected: np.ndarray, what: str) -> None:
    """Raise AssertionError unless ``got`` has the shape, dtype and values of ``expected``."""
    got = np.asarray(got)
    if got.shape != expected.shape:
        raise AssertionError(f"{what}: expected shape {expected.shape}. Got {got.shape} instead.")
    if got.dtype != expected.dtype:
        raise AssertionError(f"{what}: expected dtype {expected.dtype}. Got {got.dtype} instead.")
    if not np.array_equal(got, expected):
        mismatched = int(np.count_nonzero(got != expected))
        raise AssertionError(f"{what}: {mismatched} of {expected.size} elements differ.")


def require_library(lib: str, libraries: tuple[str, ...], name: str) -> None:
    if lib not in libraries:
        raise ValueError(f"Workload {name!r} expected a library in {libraries}. Got {lib!r}.")


def main(name: str, libraries: tuple[str, ...], run: Callable[..., Metrics]) -> None:
    """Command line entry point shared by the workloads: prints the metrics as JSON."""
    parser = argparse.ArgumentParser(description=f"Run the {name!r} benchmark workload.")
    parser.add_argument("--lib", required=True, choices=libraries)
    parser.add_argument("--workdir", required=True, type=pathlib.Path)
    parser.add_argument("--quick", action="store_true", help="reduced sizes")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    metrics = run(args.lib, args.workdir, args.quick)
    sys.stdout.write(json.dumps(metrics) + "\n")


def cpu_seconds() -> float:
    """CPU time of this process so far, every thread, user and system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def interleaved(
    actions: dict[str, Callable[[], Any]], rounds: int
) -> tuple[dict[str, list[tuple[float, float]]], dict[str, Any]]:
    """Run every action once per round, in turn, ``rounds`` times; return the (wall, CPU)
    seconds of each run by name and each action's last result.

    Alternating the runs exposes them to the same load, so that ratios between them
    mean something on a shared machine; CPU time shows whether threads ran in parallel
    (CPU above wall time) or waited for a core.
    """
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in actions}
    results: dict[str, Any] = {}
    for _ in range(rounds):
        for name, action in actions.items():
            cpu = cpu_seconds()
            start = time.perf_counter()
            results[name] = action()
            times[name].append((time.perf_counter() - start, cpu_seconds() - cpu))
    return times, results


def ratio_metrics(
    prefix: str, ours: list[tuple[float, float]], theirs: list[tuple[float, float]]
) -> Metrics:
    """Best wall time and its CPU time of both sides, the ratio of the best times, and
    the lowest and highest ratio of two runs of the same round."""
    best_ours, best_theirs = min(ours), min(theirs)
    rounds = [a[0] / b[0] for a, b in zip(ours, theirs)]
    return {
        f"{prefix}_s": best_ours[0],
        f"{prefix}_cpu_s": best_ours[1],
        f"{prefix}_h5py_same_run_s": best_theirs[0],
        f"{prefix}_h5py_same_run_cpu_s": best_theirs[1],
        f"{prefix}_over_h5py": best_ours[0] / best_theirs[0],
        f"{prefix}_over_h5py_min": min(rounds),
        f"{prefix}_over_h5py_max": max(rounds),
    }
