"""Readers of every read-only kind in other processes while a writer commits and deletes.

    python benchmarks/crash_readers.py [--commits 600] [--deletes 50] [--reads 3000]
        [--per-kind 2] [--rate-commits 200] [--gap 0.0] [--kinds open-persistent,...]

1. Correctness: ``--per-kind`` readers of each kind (``h5vc.open`` per read and kept
   open, ``VersionedHDF5File(h5py.File(path, "r"))`` kept open, ``h5vc.Reader``,
   Dask, xarray) read the newest version and one read 20 reads before, ``--reads``
   times each, while the writer commits ``--commits`` versions and deletes old ones
   ``--deletes`` times. Every read must give its version's data or
   ``VersionNotFoundError`` (counted as ``gone``); ``wrong``, ``torn``, ``corrupt``
   and ``errors`` must be 0. With ``--gap``, the writer waits that long after each
   commit, so that readers of a file unchanged since their last read read without
   the lock (and check the file's stamp afterwards) until a commit meets them.
2. Writer priority: the writer's commit rate beside two ``h5vc.Reader`` processes
   reading whole versions back to back (no pause), against its rate with no reader
   and beside two plain h5py readers that take no lock (what the readers' use of
   the CPU alone costs the writer).

See ``tests/crash/readerharness.py``. Exits 1 if any read was bad.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "crash"))

import readerharness


def _correctness(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="h5vc-readers-") as directory:
        results, (commits, seconds) = readerharness.run(
            pathlib.Path(directory),
            args.commits,
            args.reads,
            per_kind=args.per_kind,
            deletes=args.deletes,
            gap=args.gap,
            **({"kinds": args.kinds.split(",")} if args.kinds else {}),
        )
    print(
        f"writer: {commits} commits, {args.deletes} deletes in {seconds:.1f} s "
        f"({commits / seconds:.1f} commits/s) beside "
        f"{args.per_kind * len(results)} readers"
    )
    bad = 0
    header = " ".join(f"{key:>7}" for key in readerharness.COUNTS)
    print(f"{'kind':<16} {header}")
    for kind, counts in results.items():
        for found in counts:
            print(f"{kind:<16} " + " ".join(f"{found[key]:>7}" for key in readerharness.COUNTS))
            bad += sum(found[key] for key in ("wrong", "torn", "corrupt", "errors"))
    print(f"bad reads: {bad} ({time.perf_counter() - started:.0f} s in all)")
    return bad


def _rate(commits: int, kind: str | None) -> float:
    with tempfile.TemporaryDirectory(prefix="h5vc-rate-") as directory:
        _, (made, seconds) = readerharness.run(
            pathlib.Path(directory),
            commits,
            0,
            kinds=[kind] if kind else [],
            per_kind=2,
            deletes=commits // 12,
            pause=0.0,
        )
    return made / seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=600)
    parser.add_argument("--deletes", type=int, default=50)
    parser.add_argument("--reads", type=int, default=3000)
    parser.add_argument("--per-kind", type=int, default=2)
    parser.add_argument("--rate-commits", type=int, default=200)
    parser.add_argument("--skip-correctness", action="store_true")
    parser.add_argument("--gap", type=float, default=0.0, help="seconds after each commit")
    parser.add_argument("--kinds", default="", help="comma-separated reader kinds")
    parser.add_argument("--skip-rates", action="store_true")
    args = parser.parse_args()
    bad = 0 if args.skip_correctness else _correctness(args)
    if args.skip_rates:
        return 1 if bad else 0
    alone = _rate(args.rate_commits, None)
    plain = _rate(args.rate_commits, "h5py-plain")
    beside = _rate(args.rate_commits, "reader")
    print(f"writer rate alone: {alone:.1f} commits/s")
    print(
        f"beside 2 plain h5py readers (no lock; the CPU they take): {plain:.1f} "
        f"commits/s, {plain / alone:.2f}x"
    )
    print(
        f"beside 2 h5vc.Readers reading whole versions back to back: {beside:.1f} "
        f"commits/s, {beside / alone:.2f}x ({beside / plain:.2f}x the plain readers')"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
