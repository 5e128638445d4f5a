"""Workload 8: Dask and xarray on a version.

Dask: a 1-d float64 array of 1 GiB (``--quick``: 128 MiB) is committed as version v1 and
edited in v2; the sum of v2 with ``h5vc.dask.from_version`` (default blocks: whole stored
chunks, about 64 MiB each) is timed with Dask's threaded scheduler on 1 and 2 threads, and
on a ``dask.distributed`` LocalCluster of one worker process and of two (one thread each;
both clusters run side by side and their runs alternate, so that the machine's load weighs
on both alike), five runs each after an untimed one (worker start-up and file opening are
not timed):
best, median and worst wall time, the CPU time of the best run, and the ratios 2 over 1.
As a control, the same clusters sum as many random numbers generated in the workers (CPU
only, no I/O): its ratio shows how much of a second core was free during the run; and
they sum the file's bytes read with plain ``readinto`` calls in as many blocks (no HDF5):
what reads from the page cache allow. ``load_average_1m`` is the machine's load when the
measurement started.

xarray: the same Dataset (a 2-d float64 variable of 80 MB with two coordinates) is written
as a version with ``h5vc.xarray.to_version`` (h5vc) and as a plain netCDF-4 file with the
same chunks by h5netcdf (h5py); ``xr.open_dataset(...)`` plus a full ``load()`` is timed on
each (engine "h5vc" against engine "h5netcdf"), each run opening the file afresh.
"""

from __future__ import annotations

import pathlib
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import itertools

from _common import Metrics, best_of, check_equal, file_bytes, main, require_library, timed

NAME = "scale"
LIBRARIES = ("h5vc", "h5py")
#: The plain file read by h5netcdf is the reference for the xarray read.
H5PY_BASELINE = {"xarray_read_s": "h5netcdf_read_s"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizes:
    dask_length: int
    grid: tuple[int, int]
    chunks: tuple[int, int]


FULL = Sizes(dask_length=128 * 1024 * 1024, grid=(2000, 5000), chunks=(250, 625))
QUICK = Sizes(dask_length=16 * 1024 * 1024, grid=(500, 2000), chunks=(125, 500))


def sample_dataset(sizes: Sizes) -> Any:
    import xarray as xr

    rows, cols = sizes.grid
    data = np.random.default_rng(5).random(sizes.grid)
    ds = xr.Dataset(
        {"field": (("y", "x"), data, {"units": "m"})},
        coords={"y": np.arange(rows, dtype=np.float64), "x": np.arange(cols, dtype=np.int64)},
        attrs={"title": "scale benchmark"},
    )
    ds["field"].encoding["chunksizes"] = sizes.chunks
    return ds


def xarray_read(path: pathlib.Path, engine: str) -> Any:
    """Open the file afresh, read everything, close it."""
    import xarray as xr

    chosen: Any = engine
    if engine == "h5vc":
        from h5vc import filecache
        from h5vc.xarray import H5vcBackendEntrypoint

        filecache.clear()  # no handle kept from an earlier run
        if "h5vc" not in xr.backends.list_engines():  # h5vc run from a source tree
            chosen = H5vcBackendEntrypoint
    with xr.open_dataset(path, engine=chosen) as ds:
        return ds.load()


def raw_block_sum(path: str, start: int, stop: int) -> float:
    """Sum of the float64 values in bytes [start, stop) of a file, read with plain reads."""
    buffer = np.empty((stop - start) // 8, dtype=np.float64)
    with open(path, "rb", buffering=0) as f:
        f.seek(start)
        f.readinto(memoryview(buffer).cast("B"))
    return float(buffer.sum())


def raw_sums(path: pathlib.Path, blocks: int) -> Any:
    """A Dask graph summing the file's bytes as float64, ``blocks`` plain reads."""
    import dask

    size = path.stat().st_size // 8 * 8
    edges = [size * i // blocks // 8 * 8 for i in range(blocks + 1)]
    # New keys on every call (pure=False): no run reuses another's results.
    parts = [
        dask.delayed(raw_block_sum, pure=False)(str(path), a, b)
        for a, b in itertools.pairwise(edges)
    ]
    return dask.delayed(sum, pure=False)(parts)


#: Timed runs of each Dask measurement (after one untimed run that opens the files).
DASK_REPEATS = 5


def _cpu_seconds() -> float:
    """CPU time of the calling process (all its threads): run on each worker."""
    import time

    return time.process_time()


def _measure(
    run: Any, cpu: Any, repeats: int = DASK_REPEATS
) -> tuple[list[float], list[float], Any]:
    """Wall and CPU seconds of ``repeats`` runs of ``run()`` (``cpu()``: CPU seconds so far
    of every process doing the work), and the last result."""
    import time

    walls, cpus, result = [], [], None
    for _ in range(repeats):
        before = cpu()
        start = time.perf_counter()
        result = run()
        walls.append(time.perf_counter() - start)
        cpus.append(cpu() - before)
    return walls, cpus, result


def _spread(metrics: Metrics, name: str, walls: list[float], cpus: list[float]) -> None:
    """Best, median and worst wall time, and CPU time of the best run."""
    metrics[f"{name}_s"] = min(walls)
    metrics[f"{name}_median_s"] = float(np.median(walls))
    metrics[f"{name}_worst_s"] = max(walls)
    metrics[f"{name}_cpu_s"] = cpus[int(np.argmin(walls))]


def dask_sums(path: pathlib.Path, expected: float) -> Metrics:
    """Sums of version v2 with Dask: threads (1 and 2), and worker processes (1 and 2).

    Each measurement runs once untimed (workers open the file), then
    :data:`DASK_REPEATS` times; the best, median and worst wall times are kept, and the
    CPU time of the best run (of the calling process for threads, of the workers for
    processes). The same clusters also sum as many random numbers generated in the
    workers (CPU only, no I/O: how much of a second core the machine had free) and the
    file's bytes read with plain reads, block by block (no HDF5: what reads from the
    page cache allow).
    """
    import os
    import time

    import dask
    import dask.array as da
    import distributed

    import h5vc.dask as hd

    array = hd.from_version(path, "v2", "x")
    control = da.random.default_rng(0).random(array.shape, chunks=array.chunks)
    metrics: Metrics = {
        "dask_blocks": float(array.npartitions),
        "dask_block_bytes": float(array.nbytes / array.npartitions),
        "load_average_1m": os.getloadavg()[0],
    }
    for threads in (1, 2):
        with dask.config.set(scheduler="threads", num_workers=threads):
            array.sum().compute()
            walls, cpus, total = _measure(lambda: array.sum().compute(), time.process_time)
        if not np.isclose(total, expected, rtol=1e-9):
            raise AssertionError(f"dask sum with {threads} threads: {total} != {expected}")
        _spread(metrics, f"dask_sum_{threads}_threads", walls, cpus)
    # Both clusters run side by side and their runs alternate, so that a change in the
    # machine's load during the measurement weighs on both alike.
    options: dict[str, Any] = {
        "threads_per_worker": 1,
        "processes": True,
        "dashboard_address": ":0",
        "worker_dashboard_address": None,
    }
    with (
        distributed.LocalCluster(n_workers=1, **options) as cluster_1,
        distributed.LocalCluster(n_workers=2, **options) as cluster_2,
        distributed.Client(cluster_1) as client_1,
        distributed.Client(cluster_2) as client_2,
    ):
        clients = {1: client_1, 2: client_2}

        def worker_cpu(client: Any) -> float:
            return float(sum(client.run(_cpu_seconds).values()))

        jobs = {
            "dask": lambda client: client.compute(array.sum()).result(),
            "control": lambda client: client.compute(control.sum()).result(),
            "raw": lambda client: client.compute(raw_sums(path, array.npartitions)).result(),
        }
        for kind, job in jobs.items():
            for client in clients.values():
                job(client)
            runs: dict[int, tuple[list[float], list[float]]] = {w: ([], []) for w in clients}
            for _ in range(DASK_REPEATS):
                for workers, client in clients.items():
                    before = worker_cpu(client)
                    start = time.perf_counter()
                    total = job(client)
                    runs[workers][0].append(time.perf_counter() - start)
                    runs[workers][1].append(worker_cpu(client) - before)
                    if kind == "dask" and not np.isclose(total, expected, rtol=1e-9):
                        raise AssertionError(
                            f"dask sum with {workers} workers: {total} != {expected}"
                        )
            for workers, (walls, cpus) in runs.items():
                _spread(metrics, f"{kind}_sum_{workers}_workers", walls, cpus)
    for kind, unit in (
        ("dask", "threads"),
        ("dask", "workers"),
        ("control", "workers"),
        ("raw", "workers"),
    ):
        one, two = metrics[f"{kind}_sum_1_{unit}_s"], metrics[f"{kind}_sum_2_{unit}_s"]
        suffix = "_threads" if unit == "threads" else ""
        metrics[f"{kind}{suffix}_speedup_2_over_1"] = float(one) / float(two)  # type: ignore[arg-type]
    one, threads = metrics["dask_sum_1_workers_s"], metrics["dask_sum_1_threads_s"]
    metrics["dask_1_worker_over_1_thread"] = float(one) / float(threads)  # type: ignore[arg-type]
    return metrics


def run_h5vc(workdir: pathlib.Path, sizes: Sizes) -> Metrics:
    import xarray as xr

    import h5vc
    import h5vc.xarray as hx

    values = np.arange(sizes.dask_length, dtype=np.float64)
    path = workdir / "dask.h5"
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=values)
        with vf.stage_version("v2") as g:
            g["x"][1000:1100] = 0.0
    expected = float(values.sum() - values[1000:1100].sum())
    del values
    metrics = dask_sums(path, expected)
    metrics["dask_file_bytes"] = file_bytes(path)

    ds = sample_dataset(sizes)
    grid = workdir / "grid.h5"
    metrics["to_version_s"], _ = timed(lambda: hx.to_version(ds, grid, "v1"))
    metrics["xarray_read_s"], back = best_of(lambda: xarray_read(grid, "h5vc"))
    xr.testing.assert_identical(back, ds)
    check_equal(back["field"].values, ds["field"].values, "xarray read")
    metrics["xarray_file_bytes"] = file_bytes(grid)
    return metrics


def run_h5py(workdir: pathlib.Path, sizes: Sizes) -> Metrics:
    import xarray as xr

    ds = sample_dataset(sizes)
    plain = workdir / "grid.nc"
    write, _ = timed(lambda: ds.to_netcdf(plain, engine="h5netcdf"))
    seconds, back = best_of(lambda: xarray_read(plain, "h5netcdf"))
    xr.testing.assert_identical(back, ds)
    return {
        "to_netcdf_s": write,
        "h5netcdf_read_s": seconds,
        "xarray_file_bytes": file_bytes(plain),
    }


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    sizes = QUICK if quick else FULL
    if lib == "h5py":
        return run_h5py(workdir, sizes)
    return run_h5vc(workdir, sizes)


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
