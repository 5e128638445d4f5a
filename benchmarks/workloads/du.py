"""Workload: ``h5vc du`` on a file of many small versions.

One float64 dataset ``x`` of 1000 chunks (16 elements each) is committed with three
datasets that are never touched again (``a``, ``g/b``, ``g/c``: hard-linked into every
later version); then every commit overwrites one chunk of ``x`` (chunk ``n % 1000`` of
version ``n``), 10,000 versions in all (500 with ``--quick``). ``h5vc du --json`` is run
on the file, as a user runs it (a subprocess, the file opened read-only), and its
per-version and per-dataset numbers are checked against what the edits imply.

h5vc only: versioned-hdf5 has no ``du`` command.
"""

from __future__ import annotations

import json
import pathlib
import resource
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _common import Metrics, file_bytes, main, require_library, timed

NAME = "du"
LIBRARIES = ("h5vc",)

CHUNK = 16
CHUNKS = 1000
UNTOUCHED = ("a", "g/b", "g/c")


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizes:
    versions: int
    runs: int


FULL = Sizes(versions=10_000, runs=3)
QUICK = Sizes(versions=500, runs=2)


def version_name(number: int) -> str:
    return f"v{number:05d}"


def build(path: pathlib.Path, versions: int) -> None:
    """Write the file: see the module's docstring."""
    import h5vc

    rng = np.random.default_rng(20261126)
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version(version_name(0)) as group:
            group.create_dataset("x", data=rng.random(CHUNK * CHUNKS), chunks=(CHUNK,))
            for name in UNTOUCHED:
                group.create_dataset(name, data=np.arange(100.0), chunks=(50,))
        for number in range(1, versions):
            start = (number % CHUNKS) * CHUNK
            with vf.stage_version(version_name(number)) as group:
                group["x"][start : start + CHUNK] = rng.random(CHUNK)


def run_du(path: pathlib.Path) -> dict:
    """``h5vc du --json`` in a subprocess (the command a user runs)."""
    done = subprocess.run(
        [sys.executable, "-m", "h5vc.cli", "du", str(path), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def check(usage: dict, versions: int) -> None:
    """Raise AssertionError unless ``usage`` is what the edits imply."""
    rows = usage["versions"]
    if len(rows) != versions:
        raise AssertionError(f"du: expected {versions} versions. Got {len(rows)}.")
    x = next(entry for entry in usage["datasets"] if entry["path"] == "/x")
    # Every version uses 1000 chunks of x; every edit stores one new chunk.
    slot = 8 * CHUNK
    if x["versions"] != versions or x["stored_bytes"] != (CHUNKS + versions - 1) * slot:
        raise AssertionError(f"du: unexpected usage of /x: {x}")
    for name in UNTOUCHED:
        entry = next(e for e in usage["datasets"] if e["path"] == "/" + name)
        if entry["versions"] != versions or entry["shared_bytes"] != entry["stored_bytes"]:
            raise AssertionError(f"du: unexpected usage of /{name}: {entry}")


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    sizes = QUICK if quick else FULL
    path = workdir / f"{NAME}-{lib}.h5"
    build_s, _ = timed(lambda: build(path, sizes.versions))
    laps = []
    for _ in range(sizes.runs):
        start, cpu = time.perf_counter(), children_cpu()
        usage = run_du(path)
        laps.append((time.perf_counter() - start, children_cpu() - cpu))
        check(usage, sizes.versions)
    start, cpu = time.perf_counter(), children_cpu()
    subprocess.run([sys.executable, "-m", "h5vc.cli", "--help"], capture_output=True)
    startup = (time.perf_counter() - start, children_cpu() - cpu)
    return {
        "build_s": build_s,
        "file_bytes": file_bytes(path),
        "du_s": min(wall for wall, _ in laps),
        "du_cpu_s": min(cpu for _, cpu in laps),
        "cli_startup_s": startup[0],
        "cli_startup_cpu_s": startup[1],
    }


def children_cpu() -> float:
    """CPU seconds of the finished subprocesses so far (user and system): on a shared
    machine a command's CPU time moves less with the load than its wall time."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
