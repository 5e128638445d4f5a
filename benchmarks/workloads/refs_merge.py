"""Workload: branches, tags and three-way merges (h5vc only: its peers have no merge).

* Refs: a file with 1000 versions of a small dataset; the median time to create a
  branch, and a tag, at a random version.
* Merge of one-sided chunks: the small-edits benchmark array (10M float64 in
  1024-element chunks); branches ``a`` and ``b`` each edit one element in each of 100
  different chunks; ``merge(b, into=a)`` against one ordinary commit that edits the
  same 200 chunks.  No data is read for these chunks: each was changed on one side.
* Merge of shared chunks: both branches edit disjoint elements of the same 50 chunks,
  so each of those chunks is read in its three versions and merged element by element.
  The result is checked against the expected array.
* Listing on a long history: ``h5vc log``, ``h5vc branch list`` and ``h5vc show`` on a
  file with 10,000 versions, run in-process through the command's own runner.
* Cherry-pick: branch ``b`` edits one element in each of 100 chunks of the small-edits
  array; cherry-picking that version onto ``a`` (which edited 100 other chunks) against
  one ordinary commit editing the same 100 chunks on ``a``.
* Blame: the small-edits array after 1000 commits each overwriting 100 consecutive
  elements at a random offset (as the small-edits workload);
  ``vf.blame("x")`` on the file opened read-only (``h5vc.open(path)``), and opened for
  writing.
* Bisect: over the 10,000 versions of the long history, the first version where an
  element reached a value; the time without the predicate's own time, and the number
  of versions opened.
"""

from __future__ import annotations

import pathlib
import sys
from typing import Any

import h5py
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _common import Metrics, main, median, require_library, timed

NAME = "refs_merge"
LIBRARIES = ("h5vc",)

FULL = {
    "ref_versions": 1000,
    "length": 10_000_000,
    "chunk": 1024,
    "long_history": 10_000,
    "blame_versions": 1000,
}
QUICK = {
    "ref_versions": 200,
    "length": 1_000_000,
    "chunk": 1024,
    "long_history": 1000,
    "blame_versions": 100,
}


def _history(h5vc: Any, path: pathlib.Path, versions: int) -> None:
    with h5py.File(path, "w") as f:
        vf = h5vc.VersionedHDF5File(f)
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=np.arange(1000.0), chunks=(100,))
        for i in range(1, versions):
            with vf.stage_version(f"v{i}") as g:
                g["x"][i % 1000] = -i


def measure_refs(h5vc: Any, workdir: pathlib.Path, sizes: dict[str, int]) -> Metrics:
    path = workdir / "refs.h5"
    n = sizes["ref_versions"]
    _history(h5vc, path, n)
    rng = np.random.default_rng(1)
    branch_laps, tag_laps = [], []
    with h5py.File(path, "r+") as f:
        vf = h5vc.VersionedHDF5File(f)
        for i, at in enumerate(rng.integers(0, n, 100)):
            seconds, _ = timed(lambda i=i, at=at: vf.create_branch(f"b{i}", at=f"v{at}"))
            branch_laps.append(seconds)
            seconds, _ = timed(lambda i=i, at=at: vf.create_tag(f"t{i}", f"v{at}"))
            tag_laps.append(seconds)
        if len(vf.branches) != 100 or len(vf.tags) != 100:
            raise AssertionError("expected 100 branches and 100 tags")
    return {
        "ref_file_versions": float(n),
        "branch_create_s": median(branch_laps),
        "tag_create_s": median(tag_laps),
    }


def _base_file(h5vc: Any, path: pathlib.Path, sizes: dict[str, int]) -> np.ndarray:
    data = np.random.default_rng(0).random(sizes["length"])
    with h5py.File(path, "w") as f:
        vf = h5vc.VersionedHDF5File(f)
        with vf.stage_version("base") as g:
            g.create_dataset("x", data=data, chunks=(sizes["chunk"],))
        vf.create_branch("a")
        vf.create_branch("b")
    return data


def _edit(vf: Any, name: str, branch: str, index: np.ndarray, value: float) -> None:
    with vf.stage_version(name, branch=branch, make_current=False) as g:
        x = g["x"]
        for i in index:
            x[int(i)] = value


def measure_merges(h5vc: Any, workdir: pathlib.Path, sizes: dict[str, int]) -> Metrics:
    chunk = sizes["chunk"]
    n_chunks = sizes["length"] // chunk
    rng = np.random.default_rng(2)
    chosen = rng.choice(n_chunks, 200, replace=False) * chunk + 7
    path = workdir / "merge.h5"
    data = _base_file(h5vc, path, sizes)
    with h5py.File(path, "r+") as f:
        vf = h5vc.VersionedHDF5File(f)
        _edit(vf, "a1", "a", chosen[:100], -1.0)
        _edit(vf, "b1", "b", chosen[100:], -2.0)
        merge_s, result = timed(lambda: vf.merge("b", into="a", name="ab"))
        if result.chunks_merged != 0 or result.chunks_taken != 100:
            raise AssertionError(f"unexpected merge plan: {result}")

        def commit() -> None:  # one ordinary commit editing the same 200 chunks
            with vf.stage_version("c200", prev_version="base", make_current=False) as g:
                x = g["x"]
                for i in chosen:
                    x[int(i)] = -3.0

        commit_s, _ = timed(commit)
        merged = vf["ab"]["x"][:]
    expected = data.copy()
    expected[chosen[:100]] = -1.0
    expected[chosen[100:]] = -2.0
    if not np.array_equal(merged, expected):
        raise AssertionError("merge of one-sided chunks gave a wrong array")
    return {
        "merge_one_sided_200_chunks_s": merge_s,
        "commit_200_chunks_s": commit_s,
        "merge_over_commit": merge_s / commit_s,
        **measure_shared_chunks(h5vc, workdir, sizes),
    }


def measure_shared_chunks(h5vc: Any, workdir: pathlib.Path, sizes: dict[str, int]) -> Metrics:
    chunk = sizes["chunk"]
    n_chunks = sizes["length"] // chunk
    starts = np.random.default_rng(3).choice(n_chunks, 50, replace=False) * chunk
    path = workdir / "shared.h5"
    data = _base_file(h5vc, path, sizes)
    with h5py.File(path, "r+") as f:
        vf = h5vc.VersionedHDF5File(f)
        _edit(vf, "a1", "a", starts + 1, -1.0)
        _edit(vf, "b1", "b", starts + 2, -2.0)
        merge_s, result = timed(lambda: vf.merge("b", into="a", name="ab"))
        if result.chunks_merged != 50:
            raise AssertionError(f"expected 50 chunks merged element-wise: {result}")
        merged = vf["ab"]["x"][:]
    expected = data.copy()
    expected[starts + 1] = -1.0
    expected[starts + 2] = -2.0
    if not np.array_equal(merged, expected):
        raise AssertionError("merge of shared chunks gave a wrong array")
    return {"merge_shared_50_chunks_s": merge_s}


def measure_listing(h5vc: Any, workdir: pathlib.Path, sizes: dict[str, int]) -> Metrics:
    from click.testing import CliRunner

    from h5vc.cli import cli

    path = workdir / "long.h5"
    n = sizes["long_history"]
    _history(h5vc, path, n)
    with h5py.File(path, "r+") as f:
        vf = h5vc.VersionedHDF5File(f)
        for i in range(0, n, max(1, n // 50)):
            vf.create_branch(f"b{i}", at=f"v{i}")
    runner = CliRunner()
    metrics: Metrics = {"long_history_versions": float(n)}
    for label, args in (
        ("log", ["log", str(path)]),
        ("branch_list", ["branch", "list", str(path)]),
        ("show", ["show", str(path), f"v{n // 2}"]),
    ):
        laps = []
        for _ in range(3):
            seconds, result = timed(lambda args=args: runner.invoke(cli, args))
            if result.exit_code != 0:
                raise AssertionError(f"h5vc {label} failed: {result.output}")
            laps.append(seconds)
        metrics[f"cli_{label}_s"] = median(laps)
    return metrics


def measure_cherry_pick(h5vc: Any, workdir: pathlib.Path, sizes: dict[str, int]) -> Metrics:
    chunk = sizes["chunk"]
    n_chunks = sizes["length"] // chunk
    chosen = np.random.default_rng(4).choice(n_chunks, 200, replace=False) * chunk + 3
    path = workdir / "cherry.h5"
    data = _base_file(h5vc, path, sizes)
    with h5py.File(path, "r+") as f:
        vf = h5vc.VersionedHDF5File(f)
        _edit(vf, "a1", "a", chosen[100:], -1.0)
        _edit(vf, "b1", "b", chosen[:100], -2.0)
        pick_s, result = timed(lambda: vf.cherry_pick("b1", into="a", name="picked"))
        if result.chunks_taken != 100 or result.chunks_merged != 0:
            raise AssertionError(f"unexpected cherry-pick plan: {result}")

        def commit() -> None:  # an ordinary commit editing the same 100 chunks on a1
            with vf.stage_version("c100", prev_version="a1", make_current=False) as g:
                x = g["x"]
                for i in chosen[:100]:
                    x[int(i)] = -2.0

        commit_s, _ = timed(commit)
        picked = vf["picked"]["x"][:]
    expected = data.copy()
    expected[chosen[100:]] = -1.0
    expected[chosen[:100]] = -2.0
    if not np.array_equal(picked, expected):
        raise AssertionError("cherry-pick gave a wrong array")
    return {
        "cherry_pick_100_chunks_s": pick_s,
        "commit_100_chunks_s": commit_s,
        "cherry_pick_over_commit": pick_s / commit_s,
    }


def measure_blame(h5vc: Any, workdir: pathlib.Path, sizes: dict[str, int]) -> Metrics:
    length, versions = sizes["length"], sizes["blame_versions"]
    rng = np.random.default_rng(5)
    path = workdir / "blame.h5"
    owner = np.zeros(-(-length // sizes["chunk"]), dtype=np.int64)  # the model
    with h5py.File(path, "w") as f:
        vf = h5vc.VersionedHDF5File(f)
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=rng.random(length), chunks=(sizes["chunk"],))
        for i in range(1, versions):  # the small-edits workload's commits
            start = int(rng.integers(0, length - 100))
            with vf.stage_version(f"v{i}") as g:
                g["x"][start : start + 100] = -float(i)
            owner[start // sizes["chunk"] : (start + 99) // sizes["chunk"] + 1] = i
    metrics: Metrics = {"blame_versions": float(versions), "blame_elements": float(length)}
    for label, mode in (("read_only", "r"), ("writable", "r+")):
        laps = []
        for _ in range(2 if label == "read_only" else 1):
            with h5vc.open(str(path), mode) as vf:
                seconds, result = timed(lambda vf=vf: vf.blame("x"))
            laps.append(seconds)
        got = np.array([int(v[1:]) for v in result.chunk_versions.ravel()])
        if not np.array_equal(got, owner):
            raise AssertionError("blame disagrees with the model")
        metrics[f"blame_{label}_s"] = min(laps)
    return metrics


def measure_bisect(h5vc: Any, workdir: pathlib.Path, sizes: dict[str, int]) -> Metrics:
    """Bisect on the long history of :func:`measure_listing` (built there)."""
    path = workdir / "long.h5"
    n = sizes["long_history"]
    target = n * 2 // 3 + 7
    spent: list[float] = []

    def predicate(group: Any) -> bool:
        # element target % 1000 is -i from version i on, until version i + 1000
        seconds, value = timed(lambda: group["x"][target % 1000] <= -target)
        spent.append(seconds)
        return bool(value)

    laps = []
    for _ in range(3):
        spent.clear()
        with h5vc.open(str(path)) as vf:
            seconds, result = timed(lambda vf=vf: vf.bisect(predicate, "v0", f"v{n - 1}"))
        laps.append(seconds - sum(spent))
        if result.version != f"v{target}":
            raise AssertionError(f"bisect found {result.version}, expected v{target}")
    return {
        "bisect_versions": float(n),
        "bisect_without_predicate_s": median(laps),
        "bisect_versions_opened": float(len(result.tested)),
    }


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    import h5vc

    sizes = QUICK if quick else FULL
    return {
        **measure_refs(h5vc, workdir, sizes),
        **measure_merges(h5vc, workdir, sizes),
        **measure_listing(h5vc, workdir, sizes),
        **measure_bisect(h5vc, workdir, sizes),
        **measure_cherry_pick(h5vc, workdir, sizes),
        **measure_blame(h5vc, workdir, sizes),
    }


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
