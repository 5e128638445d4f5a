"""How long h5vc.verify takes, against reading every stored chunk once.

    python benchmarks/verify_time.py [--length 10000000] [--commits 200]

Builds the small-edits file (a float64 array in 1024-element chunks, then commits
that each overwrite 100 elements), then times ``h5vc.verify`` and a plain read of
every dataset store's ``raw_data`` (each unique chunk once), best of three.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time

import h5py
import numpy as np

import h5vc
from h5vc.store import layout


def best(func, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=10_000_000)
    parser.add_argument("--commits", type=int, default=200)
    args = parser.parse_args()
    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory(prefix="h5vc-verify-") as directory:
        path = pathlib.Path(directory) / "verify.h5"
        with h5vc.open(str(path), "w") as vf:
            with vf.stage_version("v0") as g:
                g.create_dataset(
                    "x", data=rng.random(args.length), chunks=(1024,), maxshape=(None,)
                )
            for number in range(args.commits):
                start = int(rng.integers(0, args.length - 100))
                with vf.stage_version(f"v{number + 1}") as g:
                    g["x"][start : start + 100] = rng.random(100)
        size = os.path.getsize(path) / 1e6

        def read_all() -> None:
            with h5py.File(path, "r") as f:
                f[f"{layout.VERSION_DATA}/x/{layout.RAW_DATA}"][()]

        def check() -> None:
            with h5vc.open(str(path)) as vf:
                report = h5vc.verify(vf)
                assert report.ok, report.describe()

        read_s = best(read_all)
        verify_s = best(check)
    print(
        f"file {size:.1f} MB: read every chunk once {read_s:.3f} s, verify {verify_s:.3f} s "
        f"({verify_s / read_s:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
