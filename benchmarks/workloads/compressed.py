"""Workload: compressed datasets (gzip level 4, Blosc zstd, zstd) against plain h5py.

For each filter (``gzip``: HDF5's deflate at level 4; ``zstd``: hdf5plugin's Blosc with
zstd at level 5 and byte shuffle; ``zstd_plain``: hdf5plugin's Zstd at level 5), 80 MB of float64 (a random walk rounded to two decimals, which
compresses about 3:1) in 16384-element chunks is committed once, read whole (the file
opened anew), then five commits each overwrite 100 consecutive elements at a random
place. The plain h5py reference writes the same array with the same chunks and filter,
reads it whole and makes the same edits in place. versioned-hdf5 runs the gzip case
only (its environment has no hdf5plugin). The targets: an initial commit at most 0.6x
h5py's write, a full read at most 0.6x h5py's read, an edit commit at most 1/20 of
versioned-hdf5's.

The h5vc run also measures plain h5py in the same process, alternating with h5vc so
both see the same load (three rounds of writes, five of reads): ``<filter>_initial_commit``
and ``<filter>_full_read`` come with ``_cpu_s`` (CPU time of the best run; above its
wall time when the codec threads ran in parallel), ``_h5py_same_run_s``, ``_over_h5py``
(ratio of the best times) and ``_over_h5py_min`` / ``_max`` (the range of the ratio
within one round). Where versioned-hdf5 can be imported too, its edit commits alternate
with h5vc's on the gzip file and ``gzip_edit_commit_over_versioned_hdf5`` is the ratio of
the medians.

Icechunk commits the same array to a zarr array with the same chunks and the matching
zarr codec (``GzipCodec(level=4)``; ``BloscCodec(cname="zstd", clevel=5, shuffle)``;
``ZstdCodec(level=5)``), reads it whole from a fresh open (best of three) and makes the
same five edit commits (``_icechunk.py``).
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
    interleaved,
    main,
    ratio_metrics,
    read_plain,
    read_version,
    require_library,
    timed,
    versioned_file,
)

NAME = "compressed"
LIBRARIES = ("h5vc", "versioned_hdf5", "h5py", "icechunk")
H5PY_BASELINE = {
    "gzip_initial_commit_s": "gzip_write_s",
    "zstd_initial_commit_s": "zstd_write_s",
    "zstd_plain_initial_commit_s": "zstd_plain_write_s",
}
#: Filters run by every library but versioned-hdf5 (whose environment has no hdf5plugin).
FILTERS = ("gzip", "zstd", "zstd_plain")

EDITS = 5
EDIT_SIZE = 100
CHUNK = 16384
WRITE_ROUNDS = 3
READ_ROUNDS = 5


def filters(name: str) -> dict[str, Any]:
    if name == "gzip":
        return {"compression": "gzip", "compression_opts": 4}
    import hdf5plugin

    if name == "zstd_plain":
        return dict(hdf5plugin.Zstd(clevel=5))
    return dict(hdf5plugin.Blosc(cname="zstd", clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE))


def write_plain(path: pathlib.Path, data: np.ndarray, name: str) -> None:
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data, chunks=(CHUNK,), **filters(name))


def commit_initial(lib: str, path: pathlib.Path, data: np.ndarray, name: str) -> None:
    with versioned_file(lib, path, "w") as vf, vf.stage_version("v0") as group:
        group.create_dataset("x", data=data, chunks=(CHUNK,), **filters(name))


def edit_commits(
    libs: list[str], paths: dict[str, pathlib.Path], starts: np.ndarray
) -> dict[str, list[float]]:
    """Each library's commit of each edit, alternating between the libraries."""
    laps: dict[str, Stopwatch] = {lib: Stopwatch() for lib in libs}
    with_files = {lib: versioned_file(lib, paths[lib], "r+") for lib in libs}
    files = {lib: context.__enter__() for lib, context in with_files.items()}
    try:
        for i, start in enumerate(starts):
            for lib in libs:
                with laps[lib].lap(), files[lib].stage_version(f"v{i + 1}") as group:
                    group["x"][start : start + EDIT_SIZE] = -i
    finally:
        for context in with_files.values():
            context.__exit__(None, None, None)
    return {lib: laps[lib].laps for lib in libs}


def peer_available() -> bool:
    try:
        import versioned_hdf5  # noqa: F401
    except ImportError:
        return False
    return True


def run_icechunk(workdir: pathlib.Path, name: str, data: np.ndarray, starts: np.ndarray) -> Metrics:
    import _icechunk as ic

    path = workdir / f"{NAME}-{name}.icechunk"
    expected = data.copy()
    for i, start in enumerate(starts):
        expected[start : start + EDIT_SIZE] = -i
    repo = ic.create_repo(path)
    codec = ic.zarr_codec(name)
    initial, first = timed(
        lambda: ic.commit(repo, lambda s: ic.create_array(s, "x", data, (CHUNK,), codec), "v0")
    )
    read, got = best_of(lambda: ic.read_snapshot(path, first, "x"))
    check_equal(got, data, f"full read of v0 ({name})")
    edits = Stopwatch()
    last = first
    for i, start in enumerate(starts):

        def edit(store: Any, start: int = start, i: int = i) -> None:
            ic.open_array(store, "x", writable=True)[start : start + EDIT_SIZE] = -i

        with edits.lap():
            last = ic.commit(repo, edit, f"v{i + 1}")
    check_equal(ic.read_snapshot(path, last, "x"), expected, f"last version ({name})")
    return {
        f"{name}_initial_commit_s": initial,
        f"{name}_full_read_s": read,
        f"{name}_edit_commit_s": statistics.median(edits.laps),
        f"{name}_file_bytes": ic.directory_bytes(path),
    }


def run_filter(lib: str, workdir: pathlib.Path, name: str, data: np.ndarray) -> Metrics:
    path = workdir / f"{NAME}-{name}-{lib}.h5"
    plain = workdir / f"{NAME}-{name}-h5py.h5"
    rng = np.random.default_rng(7)
    starts = rng.integers(0, len(data) - EDIT_SIZE, EDITS)
    if lib == "icechunk":
        return run_icechunk(workdir, name, data, starts)
    expected = data.copy()
    for i, start in enumerate(starts):
        expected[start : start + EDIT_SIZE] = -i
    if lib == "h5py":
        edits = Stopwatch()
        with h5py.File(plain, "w") as f:

            def create() -> h5py.Dataset:
                dataset = f.create_dataset("x", data=data, chunks=(CHUNK,), **filters(name))
                f.flush()  # HDF5 compresses the chunks it still caches only now
                return dataset

            write, dataset = timed(create)
            for i, start in enumerate(starts):
                with edits.lap():
                    dataset[start : start + EDIT_SIZE] = -i
                    f.flush()
        read, got = best_of(lambda: read_plain(plain, "x"))
        check_equal(got, expected, f"full read ({name})")
        return {
            f"{name}_write_s": write,
            f"{name}_full_read_s": read,
            f"{name}_edit_commit_s": statistics.median(edits.laps),
            f"{name}_file_bytes": float(plain.stat().st_size),
        }
    if lib == "versioned_hdf5":
        initial, _ = timed(lambda: commit_initial(lib, path, data, name))
        read, got = best_of(lambda: read_version(lib, path, "v0", "x"))
        check_equal(got, data, f"full read of v0 ({name})")
        laps = edit_commits([lib], {lib: path}, starts)[lib]
        check_equal(read_version(lib, path, f"v{EDITS}", "x"), expected, f"last version ({name})")
        return {
            f"{name}_initial_commit_s": initial,
            f"{name}_full_read_s": read,
            f"{name}_edit_commit_s": statistics.median(laps),
            f"{name}_file_bytes": float(path.stat().st_size),
        }
    writes, _ = interleaved(
        {
            "h5vc": lambda: commit_initial(lib, path, data, name),
            "h5py": lambda: write_plain(plain, data, name),
        },
        WRITE_ROUNDS,
    )
    reads, got = interleaved(
        {
            "h5vc": lambda: read_version(lib, path, "v0", "x"),
            "h5py": lambda: read_plain(plain, "x"),
        },
        READ_ROUNDS,
    )
    check_equal(got["h5vc"], data, f"full read of v0 ({name})")
    check_equal(got["h5py"], data, f"plain read ({name})")
    metrics: Metrics = {}
    metrics.update(ratio_metrics(f"{name}_initial_commit", writes["h5vc"], writes["h5py"]))
    metrics.update(ratio_metrics(f"{name}_full_read", reads["h5vc"], reads["h5py"]))
    libs = [lib]
    paths = {lib: path}
    if name == "gzip" and peer_available():
        paths["versioned_hdf5"] = workdir / f"{NAME}-{name}-versioned_hdf5.h5"
        commit_initial("versioned_hdf5", paths["versioned_hdf5"], data, name)
        libs.append("versioned_hdf5")
    laps = edit_commits(libs, paths, starts)
    for other in libs:
        got = read_version(other, paths[other], f"v{EDITS}", "x")
        check_equal(got, expected, f"last version ({name}, {other})")
    metrics[f"{name}_edit_commit_s"] = statistics.median(laps[lib])
    metrics[f"{name}_file_bytes"] = float(path.stat().st_size)
    if "versioned_hdf5" in laps:
        peer = statistics.median(laps["versioned_hdf5"])
        metrics[f"{name}_edit_commit_versioned_hdf5_same_run_s"] = peer
        metrics[f"{name}_edit_commit_over_versioned_hdf5"] = metrics[f"{name}_edit_commit_s"] / peer
    return metrics


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    n = 1_000_000 if quick else 10_000_000
    data = np.round(np.random.default_rng(20241114).normal(size=n).cumsum(), 2)
    metrics: Metrics = {}
    for name in ("gzip",) if lib == "versioned_hdf5" else FILTERS:
        metrics.update(run_filter(lib, workdir, name, data))
    return metrics


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
