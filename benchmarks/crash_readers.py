"""Readers in other processes read the newest committed version while a writer commits.

    python benchmarks/crash_readers.py [--commits 1000] [--reads 3000] [--readers 2]

The writer commits version after version (every element of ``x`` equal to the
version's number, deleting older versions every tenth commit); each reader reads the
newest committed version in batches (``h5vc.Reader``) and counts errors, torn reads
(anything but a whole version) and the distinct versions it saw. See
``tests/crash/readerharness.py``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "crash"))

import readerharness


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--reads", type=int, default=3000)
    parser.add_argument("--readers", type=int, default=2)
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="h5vc-readers-") as directory:
        results = readerharness.run(
            pathlib.Path(directory), args.commits, args.reads, readers=args.readers
        )
    bad = 0
    for number, (reads, errors, torn, seen) in enumerate(results):
        print(f"reader {number}: reads={reads} errors={errors} torn={torn} versions_seen={seen}")
        bad += errors + torn
    print(f"writer commits={args.commits} ({time.perf_counter() - started:.0f} s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
