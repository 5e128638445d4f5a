"""Workload: full reads of uncompressed versions against plain h5py.

80 MB of float64 is committed once as a 1-d dataset in 1024-element chunks and once as
a 2000x5000 dataset in 100x100 chunks; each version is then read whole, the file opened
anew for every read. The target: at most 0.5x plain h5py's read of the same data with
the same chunks.

The h5vc run also writes the plain h5py file and alternates h5vc's and h5py's reads
(five rounds), so both see the same load: ``full_read_<shape>_s`` is h5vc's best,
``..._h5py_same_run_s`` h5py's best, ``..._over_h5py`` their ratio and ``..._min`` /
``..._max`` the range of the ratio within one round; ``..._cpu_s`` is the CPU time of
the best run (above its wall time when threads ran in parallel). The plain h5py run
reports its reads alone, for the harness's ratio column.
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
    interleaved,
    main,
    ratio_metrics,
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
ROUNDS = 5


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    metrics: Metrics = {}
    rng = np.random.default_rng(20241114)
    for label, (shape, chunks) in (QUICK if quick else FULL).items():
        data = rng.random(shape)
        plain = workdir / f"{NAME}-{label}-h5py.h5"
        with h5py.File(plain, "w") as f:
            f.create_dataset("x", data=data, chunks=chunks)
        if lib == "h5py":
            seconds, got = best_of(lambda plain=plain: read_plain(plain, "x"))
            check_equal(got, data, f"full read of the {label} array")
            metrics[f"full_read_{label}_s"] = seconds
            continue
        path = workdir / f"{NAME}-{label}-{lib}.h5"
        with versioned_file(lib, path, "w") as vf, vf.stage_version("v1") as group:
            group.create_dataset("x", data=data, chunks=chunks)
        times, got = interleaved(
            {
                "h5vc": lambda path=path: read_version(lib, path, "v1", "x"),
                "h5py": lambda plain=plain: read_plain(plain, "x"),
            },
            ROUNDS,
        )
        check_equal(got["h5vc"], data, f"full read of the {label} array")
        check_equal(got["h5py"], data, f"plain read of the {label} array")
        metrics.update(ratio_metrics(f"full_read_{label}", times["h5vc"], times["h5py"]))
    return metrics


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
