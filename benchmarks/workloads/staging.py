"""Editing a staged version: scattered single-element writes and reads, then commit.

A 1M-element int64 dataset with 1000-element chunks is committed as version
``v1``; version ``v2`` then gets 2000 single-element writes at scattered
positions and 2000 single-element reads, and is committed. The same workload
runs on h5vc and on versioned-hdf5 through their common
``VersionedHDF5File``/``stage_version`` API.

``--engine`` measures the staging engines alone, on the same operations over the
same data: a ``StagedChangesArray`` over the ``raw_data``-like h5py dataset,
scattered writes, scattered reads, then collecting the changed chunks.

    python benchmarks/workloads/staging.py --lib versioned_hdf5 --workdir /tmp/x [--quick]
    python benchmarks/workloads/staging.py --lib h5vc --workdir /tmp/x --engine
"""

from __future__ import annotations

import argparse
import importlib
import json
import pathlib
import sys
import time
from typing import Any

NAME = "staging"
LIBRARIES = ("h5vc", "versioned_hdf5")

SIZE = 1_000_000
CHUNK = 1000
N_WRITES = 2000
N_READS = 2000
SEED = 12345


def _sizes(quick: bool) -> tuple[int, int, int]:
    if quick:
        return SIZE // 10, N_WRITES // 10, N_READS // 10
    return SIZE, N_WRITES, N_READS


def _positions(size: int, n_writes: int, n_reads: int) -> tuple[Any, Any, Any]:
    import numpy as np

    rng = np.random.default_rng(SEED)
    writes = rng.integers(0, size, n_writes)
    values = rng.integers(-(2**40), 2**40, n_writes)
    reads = rng.integers(0, size, n_reads)
    return writes.tolist(), values.tolist(), reads.tolist()


def run(lib: str, workdir: pathlib.Path, quick: bool) -> dict[str, float]:
    """Run the workload on ``lib``; seconds per phase."""
    import h5py
    import numpy as np

    vlib = importlib.import_module(lib)
    size, n_writes, n_reads = _sizes(quick)
    writes, values, reads = _positions(size, n_writes, n_reads)
    initial = np.arange(size, dtype=np.int64)
    expected = initial.copy()
    expected[writes] = values  # later writes to the same position win, as in the loop
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"staging-{lib}.h5"
    with h5py.File(path, "w") as h5file:
        versioned = vlib.VersionedHDF5File(h5file)
        start = time.perf_counter()
        with versioned.stage_version("v1") as group:
            group.create_dataset("x", data=initial, chunks=(CHUNK,))
        create_s = time.perf_counter() - start
        context = versioned.stage_version("v2")
        group = context.__enter__()
        dataset = group["x"]
        start = time.perf_counter()
        for position, value in zip(writes, values):
            dataset[position] = value
        write_s = time.perf_counter() - start
        start = time.perf_counter()
        read_back = [dataset[position] for position in reads]
        read_s = time.perf_counter() - start
        start = time.perf_counter()
        context.__exit__(None, None, None)
        commit_s = time.perf_counter() - start
        if read_back != expected[reads].tolist():
            raise AssertionError("values read in the staged version differ from those written")
        committed = versioned["v2"]["x"][:]
        if not np.array_equal(committed, expected):
            raise AssertionError("the committed version differs from what was written")
        if not np.array_equal(versioned["v1"]["x"][:], initial):
            raise AssertionError("the first version changed")
    return {
        "create_s": create_s,
        "write_s": write_s,
        "read_s": read_s,
        "commit_s": commit_s,
        "total_s": write_s + read_s + commit_s,
    }


def run_engine(lib: str, workdir: pathlib.Path, quick: bool) -> dict[str, float]:
    """The staging engines alone over the same raw_data-like base slab."""
    import h5py
    import numpy as np

    size, n_writes, n_reads = _sizes(quick)
    writes, values, reads = _positions(size, n_writes, n_reads)
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"staging-engine-{lib}.h5"
    n_chunks = size // CHUNK
    with h5py.File(path, "w") as h5file:
        raw_data = h5file.create_dataset(
            "raw_data", data=np.arange(size, dtype=np.int64), chunks=(CHUNK,)
        )
        slab_indices = np.ones(n_chunks, dtype=np.intp)
        slab_offsets = np.arange(n_chunks, dtype=np.intp) * CHUNK
        if lib == "h5vc":
            from h5vc.staging import StagedChangesArray

            start = time.perf_counter()
            staged = StagedChangesArray(
                (size,), (CHUNK,), np.int64, 0, [raw_data], slab_indices, slab_offsets
            )
        else:
            from versioned_hdf5.staged_changes import StagedChangesArray as Engine

            start = time.perf_counter()
            staged = Engine((size,), (CHUNK,), [raw_data], slab_indices, slab_offsets, 0)
        build_s = time.perf_counter() - start
        start = time.perf_counter()
        for position, value in zip(writes, values):
            staged[position] = value
        write_s = time.perf_counter() - start
        start = time.perf_counter()
        read_back = [staged[position] for position in reads]
        read_s = time.perf_counter() - start
        start = time.perf_counter()
        if lib == "h5vc":
            changed = {coords[0]: data.copy() for coords, data in staged.changes()}
        else:  # chunks whose slab index points past the base slabs are staged
            indices, offsets = np.asarray(staged.slab_indices), np.asarray(staged.slab_offsets)
            changed = {
                int(chunk): staged.slabs[indices[chunk]][offsets[chunk] : offsets[chunk] + CHUNK]
                for chunk in np.flatnonzero(indices >= staged.staged_slabs_start)
            }
        changes_s = time.perf_counter() - start
        expected = np.arange(size, dtype=np.int64)
        expected[writes] = values
        if read_back != expected[reads].tolist():
            raise AssertionError("engine reads differ from the model")
        for chunk in {position // CHUNK for position in writes}:
            box = slice(chunk * CHUNK, (chunk + 1) * CHUNK)
            if not np.array_equal(changed[chunk], expected[box]):
                raise AssertionError(f"changed chunk {chunk} differs from the model")
    return {
        "build_s": build_s,
        "write_s": write_s,
        "read_s": read_s,
        "changes_s": changes_s,
        "total_s": write_s + read_s + changes_s,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", choices=LIBRARIES, required=True)
    parser.add_argument("--workdir", type=pathlib.Path, required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--engine", action="store_true", help="measure the staging engines")
    args = parser.parse_args(argv)
    runner = run_engine if args.engine else run
    json.dump(runner(args.lib, args.workdir, args.quick), sys.stdout)
    print()


if __name__ == "__main__":
    main()
