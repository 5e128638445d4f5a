"""Workload: full reads of uncompressed versions against plain h5py.

80 MB of float64 is committed once as a 1-d dataset in 1024-element chunks and once as
a 2000x5000 dataset in 100x100 chunks; each version is then read whole (the file opened
anew for every read, best of three). The plain h5py reference writes the same arrays
with the same chunks and reads them whole.
"""

from __future__ import annotations

import pathlib
import sys

import h5py
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _common import (
    Metrics,
    best_of,
    check_equal,
    main,
    read_plain,
    read_version,
    require_library,
    versioned_file,
)

NAME = "fast_reads"
LIBRARIES = ("h5vc", "h5py")
H5PY_BASELINE: dict[str, str] = {}

FULL = {"1d": ((10_000_000,), (1024,)), "2d": ((2000, 5000), (100, 100))}
QUICK = {"1d": ((1_000_000,), (1024,)), "2d": ((500, 2000), (100, 100))}


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    metrics: Metrics = {}
    rng = np.random.default_rng(20241114)
    for label, (shape, chunks) in (QUICK if quick else FULL).items():
        data = rng.random(shape)
        path = workdir / f"{NAME}-{label}-{lib}.h5"
        if lib == "h5py":
            with h5py.File(path, "w") as f:
                f.create_dataset("x", data=data, chunks=chunks)
            seconds, got = best_of(lambda path=path: read_plain(path, "x"))
        else:
            with versioned_file(lib, path, "w") as vf, vf.stage_version("v1") as group:
                group.create_dataset("x", data=data, chunks=chunks)
            seconds, got = best_of(lambda path=path: read_version(lib, path, "v1", "x"))
        check_equal(got, data, f"full read of the {label} array")
        metrics[f"full_read_{label}_s"] = seconds
    return metrics


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
