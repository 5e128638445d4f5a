"""Workload: branches, and bringing a branch's work back (h5vc and Icechunk).

The ``small_edits`` array (10M float64 in 1024-element chunks) is committed once.
Measured on both libraries:

* ``branch_create_s``: creating a branch at that version (median of 20 branches);
* ``branch_commit_s``: a commit on a branch overwriting 100 consecutive elements at a
  random offset (median of 10 commits on one branch);
* ``fast_forward_s``: moving a branch that has not moved since another branched off it
  to that branch's head (h5vc: ``merge``, which fast-forwards; Icechunk:
  ``Repository.reset_branch``).

Icechunk has branches but no merge of two branches that both moved. What it has is a
rebase of a session: two writable sessions open on ``main`` at the same snapshot, each
edits 100 elements of different chunks; the first commits, the second commits with
``rebase_with=ConflictDetector()`` and is replayed onto the first
(``rebase_commit_s``: the ``commit`` call alone, against ``plain_commit_s``, the same
call with nothing to rebase). h5vc instead merges branches: branch ``feature`` makes the 10 commits above
while ``trunk`` makes one commit of its own; ``merge_s`` is ``merge("feature",
into="trunk")`` (a three-way merge, no chunk changed on both sides), timed after the
merge code is loaded; the first merge of a process also loads it
(``merge_code_import_s``, timed on its own). Every result is
read back and compared with the expected array. h5vc's file is opened with
``h5vc.open(path, "r+")``; Icechunk's settings are in ``_icechunk.py``.
"""

from __future__ import annotations

import importlib
import pathlib
import sys
from typing import Any

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _common import Metrics, check_equal, main, median, require_library, timed

NAME = "branches"
LIBRARIES = ("h5vc", "icechunk")
EDIT = 100


def sizes(quick: bool) -> dict[str, int]:
    if quick:
        return {"length": 1_000_000, "chunk": 1024, "branches": 5, "commits": 3}
    return {"length": 10_000_000, "chunk": 1024, "branches": 20, "commits": 10}


def plan(size: dict[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The array, and the start of each edit (branch commits, then two more) far apart."""
    rng = np.random.default_rng(20240701)
    data = rng.random(size["length"])
    edits = size["commits"] + 2
    # One edit per stretch of the array: no two edits share a chunk.
    stretch = size["length"] // edits
    starts = np.arange(edits) * stretch + rng.integers(0, stretch - 2 * size["chunk"], edits)
    values = rng.random((edits, EDIT))
    return data, starts, values


def applied(data: np.ndarray, starts: np.ndarray, values: np.ndarray, which: range) -> np.ndarray:
    state = data.copy()
    for index in which:
        state[starts[index] : starts[index] + EDIT] = values[index]
    return state


def run_h5vc(path: pathlib.Path, size: dict[str, int]) -> Metrics:
    import h5vc

    data, starts, values = plan(size)
    commits = size["commits"]
    with h5vc.open(path, "w") as vf, vf.stage_version("base") as group:
        group.create_dataset("x", data=data, chunks=(size["chunk"],))
    with h5vc.open(path, "r+") as vf:
        laps = []
        for number in range(size["branches"]):
            seconds, _ = timed(lambda n=number: vf.create_branch(f"b{n:02d}", at="base"))
            laps.append(seconds)
        branch_create = median(laps)
        vf.create_branch("feature", at="base")
        vf.create_branch("trunk", at="base")
        laps = []
        for number in range(commits):

            def commit(number: int = number) -> None:
                with vf.stage_version(f"f{number}", branch="feature", make_current=False) as g:
                    g["x"][starts[number] : starts[number] + EDIT] = values[number]

            seconds, _ = timed(commit)
            laps.append(seconds)
        branch_commit = median(laps)
        fast_forward, _ = timed(lambda: vf.merge("feature", into="b00"))
        with vf.stage_version("t0", branch="trunk", make_current=False) as g:
            g["x"][starts[commits] : starts[commits] + EDIT] = values[commits]
        loading, _ = timed(lambda: importlib.import_module("h5vc.lifecycle.merge"))
        merge, _ = timed(lambda: vf.merge("feature", into="trunk", name="merged"))
        feature = applied(data, starts, values, range(commits))
        check_equal(vf[vf.branches["b00"]]["x"][:], feature, "fast-forwarded branch")
        merged = applied(data, starts, values, range(commits + 1))
        check_equal(vf["merged"]["x"][:], merged, "merge of feature into trunk")
    return {
        "branch_create_s": branch_create,
        "branch_commit_s": branch_commit,
        "fast_forward_s": fast_forward,
        "merge_s": merge,
        "merge_code_import_s": loading,
    }


def run_icechunk(path: pathlib.Path, size: dict[str, int]) -> Metrics:
    import _icechunk as ic
    import icechunk

    data, starts, values = plan(size)
    commits = size["commits"]
    repo = ic.create_repo(path)
    base = ic.commit(repo, lambda s: ic.create_array(s, "x", data, (size["chunk"],)), "base")
    laps = []
    for number in range(size["branches"]):
        seconds, _ = timed(lambda n=number: repo.create_branch(f"b{n:02d}", base))
        laps.append(seconds)
    branch_create = median(laps)
    repo.create_branch("feature", base)

    def edit(index: int) -> Any:
        def write(store: Any) -> None:
            ic.open_array(store, "x", writable=True)[starts[index] : starts[index] + EDIT] = values[
                index
            ]

        return write

    laps = []
    head = base
    for number in range(commits):
        seconds, head = timed(lambda n=number: ic.commit(repo, edit(n), f"f{n}", "feature"))
        laps.append(seconds)
    branch_commit = median(laps)
    fast_forward, _ = timed(lambda: repo.reset_branch("b00", head, from_snapshot_id=base))
    feature = applied(data, starts, values, range(commits))
    check_equal(ic.read_snapshot(path, repo.lookup_branch("b00"), "x"), feature, "fast-forward")

    # Two sessions on main at the same snapshot; the second is rebased onto the first.
    first = repo.writable_session(ic.MAIN)
    second = repo.writable_session(ic.MAIN)
    edit(commits)(first.store)
    first.commit("first")
    plain_commit = plain_commit_time(repo, edit(commits + 1))
    edit(commits + 1)(second.store)
    rebase_commit, tip = timed(
        lambda: second.commit("second", rebase_with=icechunk.ConflictDetector())
    )
    expected = applied(data, starts, values, range(commits, commits + 2))
    check_equal(ic.read_snapshot(path, tip, "x"), expected, "rebased commit on main")
    return {
        "branch_create_s": branch_create,
        "branch_commit_s": branch_commit,
        "fast_forward_s": fast_forward,
        "plain_commit_s": plain_commit,
        "rebase_commit_s": rebase_commit,
    }


def plain_commit_time(repo: Any, write: Any) -> float:
    """``Session.commit`` of the rebased commit's edit, on a branch with nothing to rebase."""
    import _icechunk as ic

    repo.create_branch("plain", repo.lookup_branch(ic.MAIN))
    session = repo.writable_session("plain")
    write(session.store)
    seconds, _ = timed(lambda: session.commit("plain"))
    return seconds


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    size = sizes(quick)
    if lib == "icechunk":
        return run_icechunk(workdir / f"{NAME}.icechunk", size)
    return run_h5vc(workdir / f"{NAME}.h5", size)


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
