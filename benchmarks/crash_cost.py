"""What crash safety costs: commits and reads with and without h5vc's rollback journal.

    python benchmarks/crash_cost.py [--length 10000000] [--commits 50]

The small-edits workload (a float64 array in 1024-element chunks, then commits that each
overwrite 100 elements at a random offset) runs three ways: through HDF5's default driver
with no journal (what h5vc did before), through the journal with fsync at every commit
point (the default), and through the journal without fsync (safe against a killed
process, not against power loss). Prints the initial commit, the median and total of the
edit commits, and a full read of the newest version, each the best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator

import h5py
import numpy as np

import h5vc
from h5vc.durable.journal import JournaledFile
from h5vc.errors import UnjournaledFileWarning


@contextlib.contextmanager
def open_plain(path: pathlib.Path) -> Iterator[tuple[h5vc.VersionedHDF5File, object]]:
    """HDF5's own driver: the root group is held open, so h5vc cannot take the handle
    over for its journal (and says so with a warning, silenced here)."""
    with h5py.File(path, "w") as f, warnings.catch_warnings():
        warnings.simplefilter("ignore", UnjournaledFileWarning)
        root = f["/"]
        yield h5vc.VersionedHDF5File(f), lambda: None
        del root


@contextlib.contextmanager
def open_journaled(
    path: pathlib.Path, durable: bool
) -> Iterator[tuple[h5vc.VersionedHDF5File, object]]:
    journal = JournaledFile(path, create=True, durable=durable)
    f = h5py.File(journal, "w")

    def commit_point() -> None:
        f.flush()
        journal.commit()

    try:
        yield h5vc.VersionedHDF5File(f), commit_point
    finally:
        f.close()
        journal.commit()
        journal.close()


def run(variant: str, path: pathlib.Path, length: int, commits: int) -> dict[str, float]:
    rng = np.random.default_rng(1)
    initial = rng.random(length)
    opener = {
        "no journal": lambda: open_plain(path),
        "journal+fsync": lambda: open_journaled(path, True),
        "journal, no fsync": lambda: open_journaled(path, False),
    }[variant]
    times = []
    with opener() as (vf, commit_point):
        start = time.perf_counter()
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=initial, chunks=(1024,), maxshape=(None,))
        commit_point()
        first = time.perf_counter() - start
        for number in range(commits):
            offset = int(rng.integers(0, length - 100))
            start = time.perf_counter()
            with vf.stage_version(f"v{number + 1}") as g:
                g["x"][offset : offset + 100] = rng.random(100)
            commit_point()
            times.append(time.perf_counter() - start)
    start = time.perf_counter()
    with h5vc.open(str(path)) as vf:
        vf[f"v{commits}"]["x"][:]
    read = time.perf_counter() - start
    return {
        "initial_s": first,
        "commit_median_ms": statistics.median(times) * 1e3,
        "commits_total_s": sum(times),
        "read_s": read,
        "size_mb": os.path.getsize(path) / 1e6,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=10_000_000)
    parser.add_argument("--commits", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    variants = ("no journal", "journal+fsync", "journal, no fsync")
    best: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="h5vc-cost-") as directory:
        for _ in range(args.repeat):
            for variant in variants:
                path = pathlib.Path(directory) / "cost.h5"
                result = run(variant, path, args.length, args.commits)
                path.unlink()
                kept = best.setdefault(variant, result)
                for key, value in result.items():
                    kept[key] = min(kept[key], value)
    keys = list(best[variants[0]])
    print(f"{'':20}" + "".join(f"{key:>18}" for key in keys))
    for variant in variants:
        print(f"{variant:20}" + "".join(f"{best[variant][key]:18.3f}" for key in keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())
