"""Workload: an image-like ML dataset in a sample store, for backends "00" and "01".

3000 smooth, compressible 224x224 uint8 images (fixed seed) are written in one writer
session and committed; then all are read back in random order by one process, and again
by two worker processes that each read half. Writes run twice (into fresh stores) and
reads three times; the shortest time of each phase is reported. Both libraries use the same compression
options and the same collection backend code. Every sample read is checked against what
was written (the workers return an xxhash64 of each sample, compared in the parent).

Two compression settings: ``blosc:lz4`` level 5 (metrics ``B_...``) and ``blosc:lz4hc``
level 5 (metrics ``B_lz4hc_...``), both with byte shuffle.

A dedup-heavy write (metrics ``B_dedup_...``, blosc:lz4hc level 5, byte shuffle): 3000
samples, sample ``i`` being ``np.roll(base, i, axis=1) // (1 + i % 3)`` of one image of
uniformly random bytes, so 672 are distinct (none of them compresses: every stored chunk
is the sample's own bytes) and each recurs 4 or 5 times. ``B_dedup_write_s`` and
``B_dedup_write_cpu_s``: the 3000 written one call each and committed (h5vc: the
default writer, closed); ``B_dedup_distinct_each_s``: the 672 distinct ones alone
written and committed into a fresh store, divided by 672, and
``B_dedup_distinct_cpu_each_s`` the CPU time of the process meanwhile (all threads),
divided by 672: CPU over wall time is the number of cores the write used. Each is the median of
:data:`DEDUP_REPEATS` runs into fresh stores; every record is read back and compared,
and the records must name exactly 672 distinct samples.

``H5VC_BENCH_SAMPLES=dedup`` in the environment runs the dedup-heavy write only.

Metrics per backend ``B``: ``B_write_s`` (write + commit, one call per sample; h5vc with
the default writer, which compresses on one thread per core while the caller goes on,
and closing the writer as its commit), ``B_write_cpu_s`` (the CPU time of that process
meanwhile, threads included: on a busy machine the wall time says little), ``B_read_s``
(random-order read of all samples, one sample per call), ``B_read2w_s`` (the same with 2
worker processes, pool already started), ``B_bytes`` (bytes on disk of the store), and
for h5vc only ``B_writemany_s`` and ``B_writemany_cpu_s`` (the same samples written by
one ``SampleWriter.write_many`` call) and ``B_readbatch_s`` (the same random-order read
as one ``SampleReader.read_many`` call, which decodes on the reader's default threads
besides the calling one).
"""

from __future__ import annotations

import multiprocessing
import os
import pathlib
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _common import Metrics, check_equal, main, require_library

NAME = "samples"
LIBRARIES = ("h5vc", "hangar")
BACKENDS = ("00", "01")
SHAPE = (224, 224)
COMPRESSION = {"complib": "blosc:lz4", "complevel": 5, "shuffle": "byte"}
#: Metric prefix (after the backend) and compression options of each setting measured.
COMPRESSIONS = {
    "": COMPRESSION,
    "lz4hc_": {"complib": "blosc:lz4hc", "complevel": 5, "shuffle": "byte"},
}
FULL_COUNT = 3000
QUICK_COUNT = 200
DEDUP_COMPRESSION = {"complib": "blosc:lz4hc", "complevel": 5, "shuffle": "byte"}
#: Distinct samples of the dedup-heavy write: roll offsets (224) times divisors (3).
DEDUP_DISTINCT = 672
DEDUP_REPEATS = 3
SEED = 20240601
#: Timed phases are repeated and the shortest time kept (each write into a fresh store).
WRITE_REPEATS = 2
READ_REPEATS = 3


def make_images(count: int, seed: int = SEED) -> list[np.ndarray]:
    """Image-like samples: a quantised gradient with a few flat shapes and mild noise."""
    rng = np.random.default_rng(seed)
    rows = np.arange(SHAPE[0], dtype=np.float32)[:, None]
    cols = np.arange(SHAPE[1], dtype=np.float32)[None, :]
    images = []
    for _ in range(count):
        slope_r, slope_c = rng.uniform(-0.5, 0.5, size=2)
        image = rng.uniform(40, 200) + slope_r * rows + slope_c * cols
        image = np.floor(image / 4) * 4
        for _ in range(rng.integers(2, 6)):
            r0, c0 = rng.integers(0, 200, size=2)
            radius = rng.integers(8, 48)
            disk = (rows - r0) ** 2 + (cols - c0) ** 2 < radius**2
            image = np.where(disk, rng.integers(0, 256), image)
        noise = rng.random(SHAPE) < 0.02
        image = np.where(noise, image + rng.integers(-8, 9, size=SHAPE), image)
        images.append(np.ascontiguousarray(np.clip(image, 0, 255).astype(np.uint8)))
    return images


def make_dedup_images(count: int, seed: int = SEED) -> list[np.ndarray]:
    """The dedup-heavy samples: rolled and divided copies of one random image."""
    base = np.random.default_rng(seed).integers(0, 256, SHAPE, dtype=np.uint8)
    return [np.ascontiguousarray(np.roll(base, i, axis=1) // (1 + i % 3)) for i in range(count)]


def median_of(repeats: int, action: Any, workdir: pathlib.Path) -> tuple[float, float, Any]:
    """Run ``action(directory)`` ``repeats`` times, each into a fresh subdirectory of
    ``workdir``; return the median wall and CPU seconds and the last result."""
    import statistics

    walls, cpus, result = [], [], None
    for n in range(repeats):
        cpu, start = time.process_time(), time.perf_counter()
        result = action(workdir / str(n))
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), result


def check_dedup(read: Any, keys: list[Any], images: list[np.ndarray], what: str) -> None:
    """Every sample read back by ``read(key)`` equals the one written."""
    for position, key in enumerate(keys):
        check_equal(read(key), images[position], f"{what} sample {position}")


#: CPU time of the process (all threads) during the fastest run of the last
#: :func:`best_of` or :func:`best_of_each` call.
LAST_CPU: list[float] = [0.0]


def best_of(repeats: int, action: Any, *args: Any) -> tuple[float, Any]:
    """Run ``action`` ``repeats`` times; return the shortest time and the last result.

    With one argument ``args[0]`` (a directory), each run writes into a fresh subdirectory.
    """
    best, result = float("inf"), None
    for n in range(repeats):
        call_args = (args[0] / str(n),) if args else ()
        cpu, start = time.process_time(), time.perf_counter()
        result = action(*call_args)
        seconds = time.perf_counter() - start
        if seconds < best:
            best, LAST_CPU[0] = seconds, time.process_time() - cpu
    return best, result


def best_of_each(action: Any, prepare: Any, targets: list[Any]) -> tuple[float, Any]:
    """Time ``action(prepare(target))`` (not ``prepare``) for each target.

    Returns the shortest time and the last result.
    """
    best, result = float("inf"), None
    for target in targets:
        prepared = prepare(target)
        cpu, start = time.process_time(), time.perf_counter()
        result = action(prepared)
        seconds = time.perf_counter() - start
        if seconds < best:
            best, LAST_CPU[0] = seconds, time.process_time() - cpu
    return best, result


def directory_bytes(path: pathlib.Path) -> float:
    return float(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()))


def digest(array: np.ndarray) -> str:
    import xxhash

    return xxhash.xxh64_hexdigest(np.ascontiguousarray(array).data)


# ----------------------------------------------------------------------------- h5vc


def _h5vc_worker(task: tuple[Any, list[str]]) -> list[str]:
    reader, records = task
    return [digest(reader.read(record)) for record in records]


def _h5vc_backend(
    backend: str,
    workdir: pathlib.Path,
    images: list[np.ndarray],
    order: np.ndarray,
    pool: Any,
    compression: dict[str, Any],
) -> tuple[Metrics, list[np.ndarray], list[list[str]]]:
    from h5vc.samples import SampleStore

    def write(directory: pathlib.Path) -> tuple[Any, list[str]]:
        store = SampleStore(directory, backend, SHAPE, np.uint8, compression)
        with store.writer() as writer:
            return store, [writer.write(image) for image in images]

    def write_many(directory: pathlib.Path) -> tuple[Any, list[str]]:
        store = SampleStore(directory, backend, SHAPE, np.uint8, compression)
        with store.writer() as writer:
            return store, writer.write_many(images)

    def read() -> list[np.ndarray]:
        with store.reader() as reader:
            return [reader.read(records[i]) for i in order]

    def read_batch() -> list[np.ndarray]:
        with store.reader() as reader:
            return reader.read_many([records[i] for i in order])

    name = f"h5vc-{backend}-{compression['complib'].replace(':', '-')}"
    writemany_s, (store, many) = best_of(WRITE_REPEATS, write_many, workdir / f"{name}-many")
    writemany_cpu_s = LAST_CPU[0]
    for position, record in enumerate(many):
        check_equal(store.reader().read(record), images[position], f"h5vc write_many {position}")
    write_s, (store, records) = best_of(WRITE_REPEATS, write, workdir / name)
    write_cpu_s = LAST_CPU[0]
    read_s, got = best_of(READ_REPEATS, read)
    readbatch_s, batch = best_of(READ_REPEATS, read_batch)
    for position, i in enumerate(order):
        check_equal(batch[position], images[i], f"h5vc {backend} batch sample {i}")
    halves = [[records[i] for i in part] for part in np.array_split(order, 2)]
    read2w_s, digests = best_of(
        READ_REPEATS, lambda: pool.map(_h5vc_worker, [(store.reader(), h) for h in halves])
    )
    metrics = {"write_s": write_s, "write_cpu_s": write_cpu_s, "read_s": read_s}
    metrics.update(writemany_s=writemany_s, writemany_cpu_s=writemany_cpu_s)
    metrics.update(readbatch_s=readbatch_s)
    metrics.update(read2w_s=read2w_s, bytes=directory_bytes(store.directory))
    return metrics, got, digests


def _h5vc_dedup(backend: str, workdir: pathlib.Path, images: list[np.ndarray]) -> Metrics:
    from h5vc.samples import SampleStore

    def write(subset: list[np.ndarray]) -> Any:
        def action(directory: pathlib.Path) -> tuple[Any, list[str]]:
            store = SampleStore(directory, backend, SHAPE, np.uint8, DEDUP_COMPRESSION)
            with store.writer() as writer:
                return store, [writer.write(image) for image in subset]

        return action

    distinct = images[:DEDUP_DISTINCT]
    name = f"h5vc-{backend}-dedup"
    write_s, write_cpu_s, (store, records) = median_of(DEDUP_REPEATS, write(images), workdir / name)
    distinct_s, distinct_cpu_s, (distinct_store, distinct_records) = median_of(
        DEDUP_REPEATS, write(distinct), workdir / f"{name}-distinct"
    )
    if len(set(records)) != len(distinct) or len(set(distinct_records)) != len(distinct):
        raise AssertionError(f"h5vc {backend} dedup: expected {len(distinct)} distinct records.")
    with store.reader() as reader:
        check_dedup(reader.read, records, images, f"h5vc {backend} dedup")
    with distinct_store.reader() as reader:
        check_dedup(reader.read, distinct_records, distinct, f"h5vc {backend} dedup distinct")
    return {
        "dedup_write_s": write_s,
        "dedup_write_cpu_s": write_cpu_s,
        "dedup_distinct_each_s": distinct_s / len(distinct),
        "dedup_distinct_cpu_each_s": distinct_cpu_s / len(distinct),
    }


# --------------------------------------------------------------------------- hangar


_HANGAR_REPOS: dict[str, Any] = {}


def _hangar_worker(task: tuple[str, str, list[int]]) -> list[str]:
    from hangar import Repository

    path, column, keys = task
    if path not in _HANGAR_REPOS:  # a process may open a repository only once
        _HANGAR_REPOS[path] = Repository(path, exists=True)
    checkout = _HANGAR_REPOS[path].checkout()
    try:
        col = checkout.columns[column]
        with col:
            return [digest(col[key]) for key in keys]
    finally:
        checkout.close()


def _hangar_backend(
    backend: str,
    workdir: pathlib.Path,
    images: list[np.ndarray],
    order: np.ndarray,
    pool: Any,
    compression: dict[str, Any],
) -> tuple[Metrics, list[np.ndarray], list[list[str]]]:
    import contextlib
    import io

    from hangar import Repository

    column = f"images{backend}"
    name = f"hangar-{backend}-{compression['complib'].replace(':', '-')}"

    def init(directory: pathlib.Path) -> Any:
        directory.mkdir(parents=True)
        repo = Repository(directory, exists=False)
        with contextlib.redirect_stdout(io.StringIO()):
            repo.init(user_name="bench", user_email="bench@example.org", remove_old=True)
        return repo

    def write(repo: Any) -> Any:
        with contextlib.redirect_stdout(io.StringIO()):
            checkout = repo.checkout(write=True)
        col = checkout.add_ndarray_column(
            column, prototype=images[0], backend=backend, backend_options=dict(compression)
        )
        with col:
            for key, image in enumerate(images):
                col[key] = image
        checkout.commit("add samples")
        checkout.close()
        return repo

    def read() -> list[np.ndarray]:
        checkout = repo.checkout()
        col = checkout.columns[column]
        with col:
            got = [col[int(i)] for i in order]
        checkout.close()
        return got

    directories = [workdir / f"{name}-{n}" for n in range(WRITE_REPEATS)]
    write_s, repo = best_of_each(write, init, directories)
    write_cpu_s = LAST_CPU[0]
    read_s, got = best_of(READ_REPEATS, read)
    directory = str(directories[-1])
    halves = [[int(i) for i in part] for part in np.array_split(order, 2)]
    read2w_s, digests = best_of(
        READ_REPEATS,
        lambda: pool.map(_hangar_worker, [(directory, column, half) for half in halves]),
    )
    metrics = {"write_s": write_s, "write_cpu_s": write_cpu_s, "read_s": read_s}
    metrics["read2w_s"] = read2w_s
    metrics["bytes"] = directory_bytes(pathlib.Path(directory) / ".hangar")
    return metrics, got, digests


def _hangar_dedup(backend: str, workdir: pathlib.Path, images: list[np.ndarray]) -> Metrics:
    import contextlib
    import io

    from hangar import Repository

    column = f"dedup{backend}"

    def write(subset: list[np.ndarray]) -> Any:
        def action(directory: pathlib.Path) -> Any:
            directory.mkdir(parents=True)
            repo = Repository(directory, exists=False)
            with contextlib.redirect_stdout(io.StringIO()):
                repo.init(user_name="bench", user_email="bench@example.org", remove_old=True)
                checkout = repo.checkout(write=True)
            col = checkout.add_ndarray_column(
                column,
                prototype=subset[0],
                backend=backend,
                backend_options=dict(DEDUP_COMPRESSION),
            )
            with col:
                for key, image in enumerate(subset):
                    col[key] = image
            checkout.commit("add samples")
            checkout.close()
            return repo

        return action

    distinct = images[:DEDUP_DISTINCT]
    name = f"hangar-{backend}-dedup"
    write_s, write_cpu_s, repo = median_of(DEDUP_REPEATS, write(images), workdir / name)
    distinct_s, distinct_cpu_s, distinct_repo = median_of(
        DEDUP_REPEATS, write(distinct), workdir / f"{name}-distinct"
    )
    for checked, subset in ((repo, images), (distinct_repo, distinct)):
        checkout = checked.checkout()
        try:
            col = checkout.columns[column]
            with col:
                check_dedup(col.__getitem__, list(range(len(subset))), subset, "hangar dedup")
        finally:
            checkout.close()
    return {
        "dedup_write_s": write_s,
        "dedup_write_cpu_s": write_cpu_s,
        "dedup_distinct_each_s": distinct_s / len(distinct),
        "dedup_distinct_cpu_each_s": distinct_cpu_s / len(distinct),
    }


# ------------------------------------------------------------------------------ run


def run(lib: str, workdir: pathlib.Path, quick: bool) -> dict[str, float]:
    require_library(lib, LIBRARIES, NAME)
    if lib == "hangar":
        os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
        import hangar  # noqa: F401  (imported before the pool forks)

        run_backend, run_dedup = _hangar_backend, _hangar_dedup
    else:
        import h5vc.samples  # noqa: F401

        run_backend, run_dedup = _h5vc_backend, _h5vc_dedup
    import xxhash  # noqa: F401

    count = QUICK_COUNT if quick else FULL_COUNT
    metrics: dict[str, float] = {}
    dedup_images = make_dedup_images(count)
    for backend in BACKENDS:
        result = run_dedup(backend, workdir, dedup_images)
        metrics.update({f"{backend}_{key}": float(value) for key, value in result.items()})
    if os.environ.get("H5VC_BENCH_SAMPLES") == "dedup":
        return metrics
    images = make_images(count)
    expected = [digest(image) for image in images]
    order = np.random.default_rng(SEED + 1).permutation(count)
    # Workers fork before any file is open and are warm before timing starts.
    with multiprocessing.get_context("fork").Pool(2) as pool:
        pool.map(abs, [0, 0])
        for prefix, compression in COMPRESSIONS.items():
            for backend in BACKENDS:
                result, got, digests = run_backend(
                    backend, workdir, images, order, pool, compression
                )
                for position, i in enumerate(order):
                    check_equal(got[position], images[i], f"{lib} {backend} sample {i}")
                parallel = [d for part in digests for d in part]
                if parallel != [expected[i] for i in order]:
                    raise AssertionError(f"{lib} {backend}: a worker read differs from the write.")
                metrics.update(
                    {f"{backend}_{prefix}{key}": float(value) for key, value in result.items()}
                )
    return metrics


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
