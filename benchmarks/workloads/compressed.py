"""Workload: compressed datasets (gzip level 4, Blosc zstd) against plain h5py.

For each filter, 80 MB of float64 (a random walk rounded to two decimals, which
compresses about 3:1) in 16384-element chunks is committed once, read whole (the file
opened anew, best of three), then five commits each overwrite 100 consecutive elements
at a random place. The plain h5py reference writes the same array with the same chunks
and filter, reads it whole and makes the same edits in place. versioned-hdf5 runs the
gzip case only (its environment has no hdf5plugin).
"""

from __future__ import annotations

import pathlib
import statistics
import sys
from typing import Any

import h5py
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _common import (
    Metrics,
    Stopwatch,
    best_of,
    check_equal,
    main,
    read_plain,
    read_version,
    require_library,
    timed,
    versioned_file,
)

NAME = "compressed"
LIBRARIES = ("h5vc", "versioned_hdf5", "h5py")
H5PY_BASELINE = {"gzip_initial_commit_s": "gzip_write_s", "zstd_initial_commit_s": "zstd_write_s"}

EDITS = 5
EDIT_SIZE = 100
CHUNK = 16384


def filters(name: str) -> dict[str, Any]:
    if name == "gzip":
        return {"compression": "gzip", "compression_opts": 4}
    import hdf5plugin

    return dict(hdf5plugin.Blosc(cname="zstd", clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE))


def run_filter(lib: str, workdir: pathlib.Path, name: str, data: np.ndarray) -> Metrics:
    path = workdir / f"{NAME}-{name}-{lib}.h5"
    rng = np.random.default_rng(7)
    starts = rng.integers(0, len(data) - EDIT_SIZE, EDITS)
    expected = data.copy()
    for i, start in enumerate(starts):
        expected[start : start + EDIT_SIZE] = -i
    edits = Stopwatch()
    if lib == "h5py":
        with h5py.File(path, "w") as f:
            write, dataset = timed(
                lambda: f.create_dataset("x", data=data, chunks=(CHUNK,), **filters(name))
            )
            f.flush()
            for i, start in enumerate(starts):
                with edits.lap():
                    dataset[start : start + EDIT_SIZE] = -i
                    f.flush()
        read, got = best_of(lambda: read_plain(path, "x"))
        check_equal(got, expected, f"full read ({name})")
        return {
            f"{name}_write_s": write,
            f"{name}_full_read_s": read,
            f"{name}_edit_commit_s": statistics.median(edits.laps),
        }
    with versioned_file(lib, path, "w") as vf:
        with edits.lap(), vf.stage_version("v0") as group:
            group.create_dataset("x", data=data, chunks=(CHUNK,), **filters(name))
        initial = edits.last
        edits.laps.clear()
        for i, start in enumerate(starts):
            with edits.lap(), vf.stage_version(f"v{i + 1}") as group:
                group["x"][start : start + EDIT_SIZE] = -i
    read, got = best_of(lambda: read_version(lib, path, "v0", "x"))
    check_equal(got, data, f"full read of v0 ({name})")
    check_equal(read_version(lib, path, f"v{EDITS}", "x"), expected, f"last version ({name})")
    return {
        f"{name}_initial_commit_s": initial,
        f"{name}_full_read_s": read,
        f"{name}_edit_commit_s": statistics.median(edits.laps),
    }


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    n = 1_000_000 if quick else 10_000_000
    data = np.round(np.random.default_rng(20241114).normal(size=n).cumsum(), 2)
    metrics: Metrics = {}
    for name in ("gzip",) if lib == "versioned_hdf5" else ("gzip", "zstd"):
        metrics.update(run_filter(lib, workdir, name, data))
    return metrics


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
