"""Workload: version lifecycle — deleting versions and looking versions up by time.

A float64 array (1M elements, 4096-element chunks) is committed, then edited by 999
commits that each overwrite 1000 consecutive elements at a random offset (1000 versions).
Every 10th version (v9, v19, ...) is then deleted in one ``delete_versions`` call, run in
a fresh subprocess so that its peak resident memory is its own; a second run on a copy
of the file measures the peak of Python-level allocations with ``tracemalloc``. Surviving
versions are read back and compared with a replay of the edits.

Space reuse: a quarter-length array is committed, then rewritten entirely by 16
versions; every other one is deleted, the file opened again with plain
``h5py.File(path, "r+")`` and rewritten entirely 8 times. The median of those commits
and the file's growth over them (against the bytes they write) show whether the space
the deleted versions held is reused.

A second file holds 10,000 versions of a small dataset with explicit timestamps one
second apart; it measures opening the file, the first ``vf[datetime]`` lookup and the
median of later lookups.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _common import Metrics, check_equal, file_bytes, main, median, require_library, timed

NAME = "lifecycle"
LIBRARIES = ("h5vc", "versioned_hdf5")


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizes:
    length: int
    chunk: int
    versions: int
    edit_length: int
    delete_every: int
    checked_versions: int
    timestamp_versions: int
    lookups: int


FULL = Sizes(
    length=1_000_000,
    chunk=4096,
    versions=1000,
    edit_length=1000,
    delete_every=10,
    checked_versions=25,
    timestamp_versions=10_000,
    lookups=200,
)
QUICK = Sizes(
    length=100_000,
    chunk=4096,
    versions=100,
    edit_length=1000,
    delete_every=10,
    checked_versions=10,
    timestamp_versions=500,
    lookups=100,
)

#: Run in a subprocess: open the file, delete versions, print time and memory as JSON.
DELETE_SCRIPT = """
import json, resource, sys, time, tracemalloc
sys.path[:0] = {sys_path!r}
import h5py
import {module} as vlib
names = {names!r}
with h5py.File({path!r}, "r+") as f:
    if {trace!r}:
        tracemalloc.start()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    vlib.delete_versions(f, names)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] if {trace!r} else 0
rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"seconds": seconds, "maxrss_kb": rss_after, "rss_before_kb": rss_before,
                  "traced_peak_bytes": peak}}))
"""


def edit_plan(sizes: Sizes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(20240611)
    initial = rng.random(sizes.length)
    starts = rng.integers(0, sizes.length - sizes.edit_length, sizes.versions)
    values = rng.random((sizes.versions, sizes.edit_length))
    return initial, starts, values


def version_name(number: int) -> str:
    return f"v{number:05d}"


def build(vlib: Any, path: pathlib.Path, sizes: Sizes) -> float:
    import h5py

    initial, starts, values = edit_plan(sizes)
    width = sizes.edit_length

    def commit_all() -> None:
        with h5py.File(path, "w") as f:
            vf = vlib.VersionedHDF5File(f)
            with vf.stage_version(version_name(0)) as group:
                group.create_dataset("x", data=initial, chunks=(sizes.chunk,), maxshape=(None,))
            for number in range(1, sizes.versions):
                start = starts[number]
                with vf.stage_version(version_name(number)) as group:
                    group["x"][start : start + width] = values[number]

    seconds, _ = timed(commit_all)
    return seconds


def deleted_numbers(sizes: Sizes) -> list[int]:
    every = sizes.delete_every
    return list(range(every - 1, sizes.versions, every))


def run_delete(module: str, path: pathlib.Path, names: list[str], trace: bool) -> dict[str, float]:
    script = DELETE_SCRIPT.format(
        sys_path=list(sys.path), module=module, names=names, path=str(path), trace=trace
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"delete_versions failed in a subprocess:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def verify(vlib: Any, path: pathlib.Path, sizes: Sizes) -> None:
    import h5py

    initial, starts, values = edit_plan(sizes)
    deleted = set(deleted_numbers(sizes))
    step = max(1, sizes.versions // sizes.checked_versions)
    checked = set(range(0, sizes.versions, step)) | {sizes.versions - 1}
    state = initial.copy()
    width = sizes.edit_length
    with h5py.File(path, "r") as f:
        vf = vlib.VersionedHDF5File(f)
        names = set(vf.versions) if hasattr(vf, "versions") else set(f["_version_data/versions"])
        for number in range(sizes.versions):
            if number:
                start = starts[number]
                state[start : start + width] = values[number]
            name = version_name(number)
            if number in deleted:
                if name in names:
                    raise AssertionError(f"version {name} was deleted but is still listed")
            elif number in checked:
                check_equal(vf[name]["x"][:], state, f"version {name} after deletes")


#: Versions of the space-reuse file that each rewrite all of it; every other one is
#: deleted and then as many full rewrites are committed.
REUSE_VERSIONS = 16


def measure_reuse(vlib: Any, workdir: pathlib.Path, sizes: Sizes) -> Metrics:
    """Full rewrites after deleting half the versions, in a plain h5py session: their
    median commit time and how much the file grew (against the bytes they write)."""
    import h5py

    path = workdir / f"{NAME}-reuse.h5"
    length = sizes.length // 4
    rng = np.random.default_rng(20240612)
    with h5py.File(path, "w") as f:
        vf = vlib.VersionedHDF5File(f)
        with vf.stage_version("base") as group:
            group.create_dataset("x", data=rng.random(length), chunks=(sizes.chunk,))
        for number in range(REUSE_VERSIONS):
            with vf.stage_version(f"full{number:03d}") as group:
                group["x"][:] = rng.random(length)
    with h5py.File(path, "r+") as f:
        vlib.delete_versions(f, [f"full{n:03d}" for n in range(0, REUSE_VERSIONS, 2)])
    before = file_bytes(path)
    laps = []
    with h5py.File(path, "r+") as f:
        vf = vlib.VersionedHDF5File(f)
        for number in range(REUSE_VERSIONS // 2):
            values = rng.random(length)

            def commit(number: int = number, values: np.ndarray = values) -> None:
                with vf.stage_version(f"again{number:03d}") as group:
                    group["x"][:] = values

            seconds, _ = timed(commit)
            laps.append(seconds)
        check_equal(vf[f"again{number:03d}"]["x"][:], values, "the last rewrite after deletes")
    return {
        "reuse_commit_s": median(laps),
        "reuse_written_bytes": float(REUSE_VERSIONS // 2 * length * 8),
        "reuse_file_growth_bytes": file_bytes(path) - before,
    }


def measure_deletes(lib: str, vlib: Any, workdir: pathlib.Path, sizes: Sizes) -> Metrics:
    path = workdir / f"{NAME}-{lib}.h5"
    build_s = build(vlib, path, sizes)
    size_before = file_bytes(path)
    traced_copy = workdir / f"{NAME}-{lib}-traced.h5"
    shutil.copyfile(path, traced_copy)
    names = [version_name(n) for n in deleted_numbers(sizes)]
    # h5vc keeps delete_versions in h5vc.lifecycle (also re-exported at the top level).
    module = "h5vc.lifecycle" if lib == "h5vc" else vlib.__name__
    timing = run_delete(module, path, names, trace=False)
    traced = run_delete(module, traced_copy, names, trace=True)
    traced_copy.unlink()
    verify(vlib, path, sizes)
    return {
        "build_s": build_s,
        "file_bytes_before_delete": size_before,
        "delete_s": timing["seconds"],
        "delete_maxrss_mb": timing["maxrss_kb"] / 1024,
        "delete_rss_growth_mb": (timing["maxrss_kb"] - timing["rss_before_kb"]) / 1024,
        "delete_traced_peak_mb": traced["traced_peak_bytes"] / 2**20,
        "file_bytes_after_delete": file_bytes(path),
    }


def measure_timestamps(vlib: Any, workdir: pathlib.Path, sizes: Sizes) -> Metrics:
    import h5py

    path = workdir / f"{NAME}-timestamps.h5"
    origin = datetime(2024, 1, 1, tzinfo=timezone.utc)
    with h5py.File(path, "w") as f:
        vf = vlib.VersionedHDF5File(f)
        for number in range(sizes.timestamp_versions):
            stamp = origin + timedelta(seconds=number)
            with vf.stage_version(version_name(number), timestamp=stamp) as group:
                if number == 0:
                    group.create_dataset("x", data=np.arange(10), chunks=(10,))
                else:
                    group["x"][0] = number
    rng = np.random.default_rng(7)
    offsets = rng.uniform(0, sizes.timestamp_versions - 1, sizes.lookups)
    queries = [origin + timedelta(seconds=float(s)) for s in offsets]
    with h5py.File(path, "r") as f:
        open_s, vf = timed(lambda: vlib.VersionedHDF5File(f))
        first_s, version = timed(lambda: vf[queries[0]])
        if int(version["x"][0]) != int(offsets[0]):
            raise AssertionError(f"first lookup did not return {version_name(int(offsets[0]))}")
        laps = []
        for query, offset in zip(queries, offsets):
            seconds, version = timed(lambda q=query: vf[q])
            laps.append(seconds)
            if int(version["x"][0]) != int(offset):
                raise AssertionError(
                    f"lookup at {query} did not return {version_name(int(offset))}"
                )
    return {
        "timestamp_open_s": open_s,
        "timestamp_first_lookup_s": first_s,
        "timestamp_lookup_s": median(laps),
    }


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    if lib == "h5vc":
        import h5vc as vlib
    else:
        import versioned_hdf5 as vlib
    sizes = QUICK if quick else FULL
    return {
        **measure_deletes(lib, vlib, workdir, sizes),
        **measure_reuse(vlib, workdir, sizes),
        **measure_timestamps(vlib, workdir, sizes),
    }


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
