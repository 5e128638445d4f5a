"""Workload: an MNIST-like dataset in versioned sample columns, h5vc against Hangar.

The same data on both sides (fixed seed): 60,000 images of 28x28 uint8 (about four in
five pixels zero, as in MNIST) under int keys 0..59,999, and a label column of int64
scalar samples (h5vc: a column of shape ``()``; Hangar: an ndarray column of shape ``()``,
int64, on the backend Hangar picks for it, ``"01"``). Images use backend ``"01"`` with
blosc:lz4 level 5 and byte shuffle on both sides; labels use each side's default.

Steps, each timed once (metric names in brackets):

1. the images and labels written and committed as the first version [``commit1_s``];
2. branch ``a`` from it changes 1,000 images and adds 5,000 samples (image and label),
   committed [``branch_a_s``];
3. branch ``b`` from the first version changes 1,000 other images, committed
   [``branch_b_s``]. h5vc also writes those 1,000 images alone, as the only samples of
   a new column in a new file, staged and committed the same way [``write_alone_s``];
   ``commit_over_write`` is ``branch_b_s`` over it, the cost of committing a change to
   a column of 60,000 samples against the samples' own (at most 10 is the target);
4. ``b`` merged into ``a`` (a three-way merge) [``merge_s``];
5. the diff of the first version against the merge, checked: 5,000 keys added and
   2,000 changed in the images, 5,000 added in the labels [``diff_s``];
6. every image of the merge read in random order, one call per sample [``read_merged_s``;
   h5vc also ``read_merged_batch_s``, the same as one ``get_many`` call];
7. 1,000 random images of the first version [``read_v1_s``];
8. a DataLoader-style epoch over the merge's images: shuffled batches of 256 positions
   read by one process [``loader_1p_s``] and by a pool of 2 spawned worker processes
   mapping over the batches [``loader_2w_s``; ``loader_speedup`` = 1p / 2w]. h5vc
   reads through ``column.as_dataset()``, pickled to the workers; Hangar's workers open
   the repository at the merge commit. The pools are started (and the workers warm)
   before timing. With torch importable (it is optional), ``torch_loader_{0,2}w_s``:
   torch's DataLoader over ``as_dataset()`` with 0 and 2 spawned workers.

``v1_bytes`` and ``merged_bytes``: bytes on disk after step 1 and after step 5 (h5vc: the file;
Hangar: its ``.hangar`` directory). Every read is compared with the expected arrays.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import pathlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _common import check_equal, file_bytes, main, require_library

NAME = "columns"
LIBRARIES = ("h5vc", "hangar")
SHAPE = (28, 28)
COMPRESSION = {"complib": "blosc:lz4", "complevel": 5, "shuffle": "byte"}
SEED = 20261126
BATCH = 256
#: Metrics of one run: seconds, bytes and ratios.
Metrics = dict[str, float]


class Sizes:
    """Sample counts of one run."""

    def __init__(self, quick: bool) -> None:
        self.count = 300 if quick else 60_000
        self.changed = 20 if quick else 1_000
        self.added = 60 if quick else 5_000
        self.v1_reads = 20 if quick else 1_000
        self.batch = 32 if quick else BATCH


class Data:
    """The expected contents of every version, built from one seed."""

    def __init__(self, sizes: Sizes) -> None:
        rng = np.random.default_rng(SEED)
        n, total = sizes.count, sizes.count + sizes.added
        self.sizes = sizes
        self.images_v1 = make_images(rng, n)
        self.labels_v1 = rng.integers(0, 10, n).astype(np.int64)
        picked = rng.permutation(n)[: 2 * sizes.changed]
        self.changed_a = sorted(int(k) for k in picked[: sizes.changed])
        self.changed_b = sorted(int(k) for k in picked[sizes.changed :])
        self.new_a = make_images(rng, sizes.changed)
        self.new_b = make_images(rng, sizes.changed)
        self.added_keys = list(range(n, total))
        self.added_images = make_images(rng, sizes.added)
        self.added_labels = rng.integers(0, 10, sizes.added).astype(np.int64)
        merged = np.concatenate([self.images_v1, self.added_images])
        merged[self.changed_a] = self.new_a
        merged[self.changed_b] = self.new_b
        self.images_merged = merged
        self.labels_merged = np.concatenate([self.labels_v1, self.added_labels])
        self.merged_order = [int(k) for k in rng.permutation(total)]
        self.v1_keys = [int(k) for k in rng.choice(n, sizes.v1_reads, replace=False)]
        self.batches = [
            [int(i) for i in part]
            for part in np.array_split(rng.permutation(total), -(-total // sizes.batch))
        ]


def make_images(rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` MNIST-like images: a stroke of bright pixels on a zero background."""
    rows = np.arange(SHAPE[0])[None, :, None]
    cols = np.arange(SHAPE[1])[None, None, :]
    centre = rng.uniform(8, 20, (count, 2, 1, 1))
    radius = rng.uniform(4, 9, (count, 1, 1))
    distance = np.sqrt((rows - centre[:, 0]) ** 2 + (cols - centre[:, 1]) ** 2)
    ring = np.abs(distance - radius) < rng.uniform(1, 2.5, (count, 1, 1))
    values = rng.integers(64, 256, (count, *SHAPE))
    return np.where(ring, values, 0).astype(np.uint8)


def directory_bytes(path: pathlib.Path) -> float:
    return float(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()))


@contextlib.contextmanager
def stopwatch(metrics: Metrics, name: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    metrics[name] = time.perf_counter() - start


def check_batches(data: Data, results: list[np.ndarray], what: str) -> None:
    """Worker results (one stacked array per batch of positions) against the merge."""
    for batch, got in zip(data.batches, results):
        check_equal(got, data.images_merged[batch], f"{what} batch at {batch[0]}")
    if len(results) != len(data.batches):
        raise AssertionError(f"{what}: expected {len(data.batches)} batches. Got {len(results)}.")


def spawn_pool(initializer: Callable[..., None], args: tuple[Any, ...]) -> Any:
    """A pool of 2 spawned workers, each run ``initializer(*args)``, both started."""
    pool = multiprocessing.get_context("spawn").Pool(2, initializer, args)
    pool.map(time.sleep, [0.2, 0.2], chunksize=1)
    return pool


def timed_epoch(read: Callable[[list[int]], np.ndarray], batches: list[list[int]]) -> Any:
    start = time.perf_counter()
    results = [read(batch) for batch in batches]
    return time.perf_counter() - start, results


def timed_pool_epoch(pool: Any, read: Callable[..., Any], batches: list[list[int]]) -> Any:
    start = time.perf_counter()
    results = pool.map(read, batches, chunksize=1)
    return time.perf_counter() - start, results


# ----------------------------------------------------------------------------- h5vc

_DATASET: list[Any] = []


def _h5vc_init_worker(dataset: Any) -> None:
    _DATASET[:] = [dataset]


def _h5vc_read_batch(batch: list[int]) -> np.ndarray:
    dataset = _DATASET[0]
    return np.stack([dataset[i] for i in batch])


def _h5vc_diff_counts(result: Any) -> dict[str, tuple[int, int, int]]:
    """``{column name: (added, removed, changed)}`` from a VersionDiff."""
    return {
        path.strip("/").rpartition("/")[2]: (
            len(change.added),
            len(change.removed),
            len(change.changed),
        )
        for path, change in result.columns.items()
    }


def run_h5vc(workdir: pathlib.Path, data: Data) -> Metrics:
    import h5vc

    sizes, metrics = data.sizes, {}
    path = workdir / "columns.h5"
    n = sizes.count
    keys = list(range(n))
    with h5vc.open(str(path), "w") as vf:
        stage = vf.stage_version("v1")
        with stopwatch(metrics, "commit1_s"), stage as g:
            images = g.create_column(
                "images", shape=SHAPE, dtype="uint8", backend="01", compression=COMPRESSION
            )
            labels = g.create_column("labels", shape=(), dtype="int64")
            images.set_many(keys, data.images_v1)
            labels.set_many(keys, data.labels_v1)
    metrics["v1_bytes"] = file_bytes(path)
    with h5vc.open(str(path), "r+") as vf:
        vf.create_branch("a", at="v1")
        vf.create_branch("b", at="v1")
        stage_a = vf.stage_version("a1", branch="a", make_current=False)
        with stopwatch(metrics, "branch_a_s"), stage_a as g:
            g["images"].set_many(data.changed_a, data.new_a)
            g["images"].set_many(data.added_keys, data.added_images)
            g["labels"].set_many(data.added_keys, data.added_labels)
        stage_b = vf.stage_version("b1", branch="b", make_current=False)
        with stopwatch(metrics, "branch_b_s"), stage_b as g:
            g["images"].set_many(data.changed_b, data.new_b)
        with stopwatch(metrics, "merge_s"):
            merged = vf.merge("b", into="a", name="merged").version
        with stopwatch(metrics, "diff_s"):
            result = vf.diff("v1", merged)
    expected = {
        "images": (sizes.added, 0, 2 * sizes.changed),
        "labels": (sizes.added, 0, 0),
    }
    counts = _h5vc_diff_counts(result)
    if counts != expected:
        raise AssertionError(f"h5vc diff: expected {expected}. Got {counts} instead.")
    metrics["merged_bytes"] = file_bytes(path)
    with h5vc.open(str(workdir / "alone.h5"), "w") as vf:
        stage = vf.stage_version("alone")
        with stopwatch(metrics, "write_alone_s"), stage as g:
            alone = g.create_column(
                "images", shape=SHAPE, dtype="uint8", backend="01", compression=COMPRESSION
            )
            alone.set_many(data.changed_b, data.new_b)
    metrics["commit_over_write"] = metrics["branch_b_s"] / metrics["write_alone_s"]

    order = data.merged_order
    with h5vc.open(str(path), "r") as vf:
        col = vf[merged]["images"]
        with stopwatch(metrics, "read_merged_s"):
            got = [col[k] for k in order]
        check_equal(np.stack(got), data.images_merged[order], "h5vc merged read")
        with stopwatch(metrics, "read_merged_batch_s"):
            batch = col.get_many(order)
        check_equal(batch, data.images_merged[order], "h5vc merged get_many")
        check_equal(
            vf[merged]["labels"].get_many(list(range(len(data.labels_merged)))),
            data.labels_merged,
            "h5vc merged labels",
        )
        v1 = vf["v1"]["images"]
        with stopwatch(metrics, "read_v1_s"):
            got = [v1[k] for k in data.v1_keys]
        check_equal(np.stack(got), data.images_v1[data.v1_keys], "h5vc v1 read")
        dataset = col.as_dataset(keys=list(range(len(data.images_merged))))
        metrics.update(h5vc_loaders(dataset, data))
    return metrics


def h5vc_loaders(dataset: Any, data: Data) -> Metrics:
    metrics: Metrics = {}
    _h5vc_init_worker(dataset)
    metrics["loader_1p_s"], results = timed_epoch(_h5vc_read_batch, data.batches)
    check_batches(data, results, "h5vc 1 process")
    pool = spawn_pool(_h5vc_init_worker, (dataset,))
    try:
        metrics["loader_2w_s"], results = timed_pool_epoch(pool, _h5vc_read_batch, data.batches)
    finally:
        pool.close()
        pool.join()
    check_batches(data, results, "h5vc 2 workers")
    metrics["loader_speedup"] = metrics["loader_1p_s"] / metrics["loader_2w_s"]
    try:
        import torch.utils.data
    except ImportError:
        return metrics
    for workers in (0, 2):
        loader = torch.utils.data.DataLoader(
            dataset,
            batch_sampler=data.batches,
            num_workers=workers,
            multiprocessing_context="spawn" if workers else None,
        )
        start = time.perf_counter()
        results = [np.asarray(batch) for batch in loader]
        metrics[f"torch_loader_{workers}w_s"] = time.perf_counter() - start
        check_batches(data, results, f"torch DataLoader, {workers} workers")
    return metrics


# --------------------------------------------------------------------------- hangar

_HANGAR: dict[str, Any] = {}


def _hangar_open_images(repo: Any, commit: str) -> None:
    """Check ``commit`` out and keep its images column open for :func:`_hangar_read_batch`."""
    with contextlib.redirect_stdout(io.StringIO()):
        checkout = repo.checkout(commit=commit)
    col = checkout.columns["images"]
    col.__enter__()  # one open of the column's files for every read, as ``with col:``
    _HANGAR.update(checkout=checkout, images=col)


def _hangar_close_images() -> None:
    _HANGAR["images"].__exit__(None, None, None)
    _HANGAR.pop("checkout").close()


def _hangar_init_worker(path: str, commit: str) -> None:
    from hangar import Repository

    _hangar_open_images(Repository(path, exists=True), commit)


def _hangar_read_batch(batch: list[int]) -> np.ndarray:
    col = _HANGAR["images"]
    return np.stack([col[i] for i in batch])


def _hangar_diff_counts(result: Any) -> dict[str, tuple[int, int, int]]:
    counts: dict[str, list[int]] = {}
    for position, changes in enumerate(
        (result.diff.added, result.diff.deleted, result.diff.mutated)
    ):
        for key in changes.samples:
            counts.setdefault(key.column, [0, 0, 0])[position] += 1
    return {column: (a, d, m) for column, (a, d, m) in counts.items()}


def run_hangar(workdir: pathlib.Path, data: Data) -> Metrics:
    from hangar import Repository

    sizes, metrics = data.sizes, {}
    directory = workdir / "repo"
    directory.mkdir()
    quiet = contextlib.redirect_stdout(io.StringIO())
    with quiet:
        repo = Repository(directory, exists=False)
        repo.init(user_name="bench", user_email="bench@example.org", remove_old=True)
    with stopwatch(metrics, "commit1_s"):
        with quiet:
            checkout = repo.checkout(write=True)
        images = checkout.add_ndarray_column(
            "images", shape=SHAPE, dtype=np.uint8, backend="01", backend_options=COMPRESSION
        )
        labels = checkout.add_ndarray_column("labels", shape=(), dtype=np.int64)
        with images, labels:
            for key in range(sizes.count):
                images[key] = data.images_v1[key]
                labels[key] = data.labels_v1[key : key + 1].reshape(())
        first = checkout.commit("first")
        checkout.close()
    metrics["v1_bytes"] = directory_bytes(directory / ".hangar")
    repo.create_branch("a", base_commit=first)
    repo.create_branch("b", base_commit=first)
    with stopwatch(metrics, "branch_a_s"):
        with quiet:
            checkout = repo.checkout(write=True, branch="a")
        images, labels = checkout.columns["images"], checkout.columns["labels"]
        with images, labels:
            for key, image in zip(data.changed_a, data.new_a):
                images[key] = image
            for position, key in enumerate(data.added_keys):
                images[key] = data.added_images[position]
                labels[key] = data.added_labels[position : position + 1].reshape(())
        checkout.commit("a1")
        checkout.close()
    with stopwatch(metrics, "branch_b_s"):
        with quiet:
            checkout = repo.checkout(write=True, branch="b")
        with checkout.columns["images"] as images:
            for key, image in zip(data.changed_b, data.new_b):
                images[key] = image
        checkout.commit("b1")
        checkout.close()
    with stopwatch(metrics, "merge_s"), quiet:
        merged = repo.merge("merge b", master_branch="a", dev_branch="b")
    with stopwatch(metrics, "diff_s"):
        result = repo.diff(first, merged)
    counts = _hangar_diff_counts(result)
    expected = {"images": (sizes.added, 0, 2 * sizes.changed), "labels": (sizes.added, 0, 0)}
    if counts != expected:
        raise AssertionError(f"hangar diff: expected {expected}. Got {counts} instead.")
    metrics["merged_bytes"] = directory_bytes(directory / ".hangar")

    order = data.merged_order
    with quiet:
        checkout = repo.checkout(commit=merged)
    try:
        with checkout.columns["images"] as col, stopwatch(metrics, "read_merged_s"):
            got = [col[k] for k in order]
        check_equal(np.stack(got), data.images_merged[order], "hangar merged read")
        with checkout.columns["labels"] as col:
            got = [col[k] for k in range(len(data.labels_merged))]
        check_equal(np.stack(got), data.labels_merged, "hangar merged labels")
    finally:
        checkout.close()
    with quiet:
        checkout = repo.checkout(commit=first)
    try:
        with checkout.columns["images"] as col, stopwatch(metrics, "read_v1_s"):
            got = [col[k] for k in data.v1_keys]
        check_equal(np.stack(got), data.images_v1[data.v1_keys], "hangar v1 read")
    finally:
        checkout.close()

    _hangar_open_images(repo, merged)  # a process opens a repository only once
    try:
        metrics["loader_1p_s"], results = timed_epoch(_hangar_read_batch, data.batches)
    finally:
        _hangar_close_images()
    check_batches(data, results, "hangar 1 process")
    pool = spawn_pool(_hangar_init_worker, (str(directory), merged))
    try:
        metrics["loader_2w_s"], results = timed_pool_epoch(pool, _hangar_read_batch, data.batches)
    finally:
        pool.close()
        pool.join()
    check_batches(data, results, "hangar 2 workers")
    metrics["loader_speedup"] = metrics["loader_1p_s"] / metrics["loader_2w_s"]
    return metrics


# ------------------------------------------------------------------------------ run


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    data = Data(Sizes(quick))
    if lib == "hangar":
        os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
        return run_hangar(workdir, data)
    return run_h5vc(workdir, data)


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
