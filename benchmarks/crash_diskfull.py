"""Fill a small filesystem while a writer commits; check every committed version.

    python benchmarks/crash_diskfull.py [--runs 32] [--seed 0] [--size-mib 48]

Needs root (it mounts a tmpfs of ``--size-mib``). Each run fills the filesystem with a
ballast file that leaves a random amount of space free (2-14 MiB), then a writer commits
seeded versions (new datasets, edits, appends, deletions of old versions) until the disk
is full; each operation that fails is retried once, every committed version is read
in the same handle, the file is closed (a close can fail too), the ballast is removed, and the file is opened again: every version the writer saw
committed must read exactly as its model says, ``h5vc.verify`` must pass, and a new
commit must succeed. Runs alternate between the two ways of opening a file for writing:
``h5vc.open`` and ``h5py.File`` + ``VersionedHDF5File``. Prints the runs, the versions
checked and every wrong read; exits non-zero if any.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np

import h5vc

OPENERS = ("h5vc", "h5py")


@contextlib.contextmanager
def _open(path: Path, mode: str, opener: str) -> Any:
    if opener == "h5vc":
        with h5vc.open(str(path), mode) as vf:
            yield vf
    else:
        with h5py.File(path, mode) as f:
            yield h5vc.VersionedHDF5File(f)


def _is_disk_full(err: BaseException) -> bool:
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno == errno.ENOSPC:
            return True
        if "No space left" in str(seen) or "ENOSPC" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _step(
    vf: Any, rng: np.random.Generator, model: dict[str, dict[str, np.ndarray]], n: int
) -> Any:
    """One seeded operation; returns a function that applies it and updates the model."""
    current = dict(model[vf.current_version]) if vf.current_version in model else {}
    roll = rng.random()
    name = f"v{n}"
    if len(model) > 6 and roll < 0.15:
        doomed = sorted(model)[0]
        return lambda: (h5vc.delete_versions(vf, [doomed]), model.pop(doomed))
    if not current or roll < 0.4:
        key = f"d{n}"
        data = rng.random(int(rng.integers(20_000, 200_000)))
        current[key] = data

        def create(g: Any) -> None:
            g.create_dataset(key, data=data, chunks=(4096,), maxshape=(None,))

        apply = create
    elif roll < 0.7:
        key = sorted(current)[int(rng.integers(len(current)))]
        data = current[key].copy()
        start = int(rng.integers(len(data)))
        data[start : start + 3000] = rng.random(len(data[start : start + 3000]))
        current[key] = data

        def edit(g: Any) -> None:
            g[key][start : start + 3000] = data[start : start + 3000]

        apply = edit
    else:
        key = sorted(current)[int(rng.integers(len(current)))]
        extra = rng.random(int(rng.integers(1000, 30_000)))
        data = np.concatenate([current[key], extra])
        current[key] = data

        def append(g: Any) -> None:
            g[key].resize((len(data),))
            g[key][len(data) - len(extra) :] = extra

        apply = append

    def commit() -> None:
        with vf.stage_version(name) as g:
            apply(g)
        model[name] = current

    return commit


def _wrong_reads(vf: Any, model: dict[str, dict[str, np.ndarray]]) -> list[str]:
    wrong = []
    for name, datasets in model.items():
        for key, expected in datasets.items():
            if not np.array_equal(vf[name][key][()], expected):
                wrong.append(f"{name}/{key}")
    return wrong


def run_once(directory: Path, run: int, seed: int, opener: str) -> dict[str, Any]:
    rng = np.random.default_rng(seed * 1000 + run)
    path = directory / f"run{run}.h5"
    ballast = directory / "ballast"
    model: dict[str, dict[str, np.ndarray]] = {}
    stats = os.statvfs(directory)
    free = stats.f_bavail * stats.f_frsize
    leave = int(rng.integers(2 << 20, 14 << 20))
    with open(ballast, "wb") as f:
        f.write(b"\0" * max(0, free - leave))
    failures = 0
    with contextlib.suppress(OSError), _open(path, "w", opener) as vf:
        for n in range(10_000):
            operation = _step(vf, rng, model, n)
            try:
                operation()
            except Exception as err:
                if not _is_disk_full(err):
                    raise
                failures += 1
                try:
                    operation()  # the retry fails too, or fits in what is left
                except Exception as again:
                    if not _is_disk_full(again):
                        raise
                    break
        wrong_while_full = _wrong_reads(vf, model)
    ballast.unlink()
    wrong = wrong_while_full
    with _open(path, "r+", opener) as vf:
        assert set(vf.versions) >= set(model), (sorted(model), vf.versions)
        wrong += _wrong_reads(vf, model)
        report = h5vc.verify(vf)
        with vf.stage_version("after") as g:
            g.create_dataset("after", data=np.arange(1000))
        np.testing.assert_array_equal(vf["after"]["after"][()], np.arange(1000))
    path.unlink()
    return {
        "versions": len(model),
        "wrong": wrong,
        "verified": bool(report.ok),
        "failures": failures,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--size-mib", type=int, default=48)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("crash_diskfull: needs root to mount a small tmpfs; not run.")
        return 0
    started = time.perf_counter()
    totals = {opener: {"runs": 0, "versions": 0, "wrong": 0, "unverified": 0} for opener in OPENERS}
    examples: list[str] = []
    with tempfile.TemporaryDirectory(prefix="h5vc-full-") as mount:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={args.size_mib}m", "tmpfs", mount], check=True
        )
        try:
            for run in range(args.runs):
                opener = OPENERS[run % 2]
                result = run_once(Path(mount), run, args.seed, opener)
                total = totals[opener]
                total["runs"] += 1
                total["versions"] += result["versions"]
                total["wrong"] += len(result["wrong"])
                total["unverified"] += not result["verified"]
                if result["wrong"] or not result["verified"]:
                    examples.append(f"run {run} ({opener}): {result}")
                print(f"run {run:2d} {opener}: {result}", flush=True)
        finally:
            subprocess.run(["umount", mount], check=False)
    for example in examples[:5]:
        print(example)
    for opener, total in totals.items():
        print(f"opener={opener} " + " ".join(f"{k}={v}" for k, v in total.items()))
    print(f"({time.perf_counter() - started:.0f} s)")
    bad = any(t["wrong"] or t["unverified"] for t in totals.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
