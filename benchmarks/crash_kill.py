"""Kill a writer with SIGKILL at random moments and count what was lost.

    python benchmarks/crash_kill.py [--kills 500] [--seed 0] [--max-delay 1.2]
                                    [--opener h5vc|h5py]

Each kill interrupts a writer doing a seeded mix of commits (small edits, new datasets,
resizes, large write-through arrays, attributes), ``delete_versions``,
``modify_metadata`` and ``repack``; a checker then opens the file, compares every version
the writer had reported committed with the writer's model and commits on top (see
``tests/crash/killharness.py``). ``--opener h5py`` opens the file as code written for
versioned-hdf5 does (``h5py.File`` then ``VersionedHDF5File``), in the writer and the
checker alike; the default is ``h5vc.open``. Prints kills, versions lost and unopenable files; exits
non-zero if anything was lost.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "crash"))

import killharness


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-delay", type=float, default=1.2)
    parser.add_argument("--kills-per-file", type=int, default=8)
    parser.add_argument("--opener", choices=killharness.OPENERS, default="h5vc")
    parser.add_argument("--examples", type=int, default=5, help="problems to print in full")
    args = parser.parse_args()
    started = time.perf_counter()

    def progress(trial: int, tally: killharness.Tally) -> None:
        if (trial + 1) % 25 == 0:
            elapsed = time.perf_counter() - started
            print(f"[{elapsed:6.0f} s] {tally.summary()}", flush=True)

    with tempfile.TemporaryDirectory(prefix="h5vc-kill-") as directory:
        tally = killharness.run_kills(
            pathlib.Path(directory),
            args.kills,
            seed=args.seed,
            max_delay=args.max_delay,
            kills_per_file=args.kills_per_file,
            opener=args.opener,
            progress=progress,
        )
    for example in tally.examples[: args.examples]:
        print("-" * 60)
        print(example)
    print("-" * 60)
    print(
        f"opener={args.opener} kills={tally.kills} lost={tally.lost} unopenable={tally.unopenable} "
        f"next_commit_failed={tally.next_commit_failed} wrong_in_flight={tally.wrong_pending} "
        f"phantom={tally.phantom} writer_errors={tally.writer_errors} "
        f"versions_checked={tally.checked} ({time.perf_counter() - started:.0f} s)"
    )
    return 0 if tally.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
