"""Time ``h5vc.verify`` against reading every version's unique chunks once.

    python benchmarks/verify_time.py FILE [repeats]

The reference read parses every version's mappings (as verify must) and reads each
slot any version uses once, one read per run of consecutive slots; ``raw_data only``
reads every chunk store whole, with no mapping parsed.
"""

from __future__ import annotations

import sys
import time

import h5py
import numpy as np

import h5vc
from h5vc.store import tree
from h5vc.versions.state import resolve_state


def read_unique_chunks(path: str) -> int:
    with h5py.File(path, "r") as f:
        state = resolve_state(f)
        datasets = tree.collect_datasets(state.versions, state.log.names())
        total = 0
        for store_path, objects in datasets.items():
            store = state.stores.get(store_path)
            if store is None:
                continue
            used = np.zeros(store.n_slots, dtype=bool)
            for obj in objects.values():
                slots = obj.chunk_map().slots
                used[slots[slots >= 0]] = True
            c0 = store.chunks[0]
            slots = np.flatnonzero(used)
            for run in np.split(slots, np.flatnonzero(np.diff(slots) != 1) + 1):
                if len(run):
                    total += store.raw_data[run[0] * c0 : (run[-1] + 1) * c0].nbytes
        return total


def read_raw_data(path: str) -> int:
    with h5py.File(path, "r") as f:
        version_data = f["_version_data"]
        return sum(version_data[p]["raw_data"][()].nbytes for p in tree.store_paths(version_data))


def run_verify(path: str) -> int:
    with h5py.File(path, "r") as f:
        report = h5vc.verify(f)
    if not report.ok:
        raise SystemExit(str(report))
    return report.bytes


def main() -> None:
    path = sys.argv[1]
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    for _ in range(repeats):
        for name, func in [
            ("unique chunks", read_unique_chunks),
            ("raw_data only", read_raw_data),
            ("verify", run_verify),
        ]:
            start = time.perf_counter()
            size = func(path)
            print(f"{name:14s} {time.perf_counter() - start:7.3f} s  {size / 1e6:7.1f} MB")


if __name__ == "__main__":
    main()
