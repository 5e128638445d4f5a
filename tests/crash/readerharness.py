"""A writer committing in a loop and readers reading the newest committed version.

Version ``v<k>`` holds ``x``, an array whose every element is ``k``, with the
attribute ``k``: a reader that sees anything else saw a torn or uncommitted state.
Run as a script: ``python readerharness.py writer PATH COMMITS [READERS]`` or ``python
readerharness.py reader PATH READS [LAST]``; a reader prints ``reads errors torn seen``.
A writer given ``READERS`` starts committing once that many readers have made their
first read (each leaves a file ``PATH.ready-<pid>``); a reader given ``LAST`` goes on
past ``READS`` reads until it has seen version ``v<LAST>``. So readers overlap the
writer's commits however fast either side starts and runs (each wait ends after
:data:`DEADLINE` seconds).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import h5vc

LENGTH = 30_000

#: Seconds the writer waits at most for its readers, and a reader for the last version.
DEADLINE = 300.0


def _ready_files(path: str) -> list[Path]:
    target = Path(path)
    return list(target.parent.glob(target.name + ".ready-*"))


def write(path: str, commits: int, readers: int = 0) -> None:
    deadline = time.monotonic() + DEADLINE
    while len(_ready_files(path)) < readers and time.monotonic() < deadline:
        time.sleep(0.01)
    with h5vc.open(path, "a") as vf:
        if "v0" not in vf:
            with vf.stage_version("v0") as g:
                g.create_dataset("x", data=np.zeros(LENGTH, np.int64), chunks=(1000,))
                g["x"].attrs["k"] = 0
        for k in range(1, commits + 1):
            with vf.stage_version(f"v{k}") as g:
                g["x"][:] = k
                g["x"].attrs["k"] = k
            if k % 10 == 0:  # deletes move chunks and free space that commits reuse
                h5vc.delete_versions(vf, [f"v{j}" for j in range(k - 10, k - 2)])


def read(path: str, reads: int, last: int | None = None) -> tuple[int, int, int, int]:
    """Reads, errors, torn reads and how many distinct versions were seen."""
    errors = torn = done = 0
    seen: set[str] = set()
    deadline = time.monotonic() + DEADLINE
    with h5vc.Reader(path) as reader:
        while done < reads or (
            last is not None and f"v{last}" not in seen and time.monotonic() < deadline
        ):
            try:
                with reader.batch() as vf:
                    name = vf.current_version
                    data = vf[name]["x"]
                    k = int(name[1:])
                    seen.add(name)
                    values = data[:]
                    if data.attrs["k"] != k or not bool(np.all(values == k)):
                        torn += 1
            except Exception as err:  # every error is counted, and shown
                errors += 1
                print(f"error: {type(err).__name__}: {err}", file=sys.stderr)
            if done == 0:
                Path(f"{path}.ready-{os.getpid()}").touch()  # the writer may start
            done += 1
            time.sleep(0.002)
    return done, errors, torn, len(seen)


def run(directory: Path, commits: int, reads: int, readers: int = 2) -> list[tuple[int, ...]]:
    """Start a writer, then ``readers`` readers while it commits; their results."""
    path = str(directory / "shared.h5")
    write(path, 0)  # v0, so that readers find a versioned file
    script = str(Path(__file__).resolve())
    writer = subprocess.Popen([sys.executable, script, "writer", path, str(commits), str(readers)])
    procs = [
        subprocess.Popen(
            [sys.executable, script, "reader", path, str(reads), str(commits)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(readers)
    ]
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        results.append(tuple(int(n) for n in out.split()))
    if writer.wait(timeout=600) != 0:
        raise RuntimeError(f"the writer failed ({writer.returncode})")
    return results


if __name__ == "__main__":
    role, target, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if role == "writer":
        write(target, count, int(sys.argv[4]) if len(sys.argv) > 4 else 0)
    else:
        print(*read(target, count, int(sys.argv[4]) if len(sys.argv) > 4 else None))
