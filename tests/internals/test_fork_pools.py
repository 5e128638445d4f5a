"""A forked child (multiprocessing's workers, a data loader's) reads and writes with
thread pools of its own: the parent's, which the child has no threads of, would leave
its work waiting forever."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from forked import run_in_child

import h5vc
from h5vc.hdf5 import codecs


def test_the_codec_pool_works_in_a_forked_child() -> None:
    items = list(range(64))
    assert list(codecs.parallel_map(lambda x: 2 * x, items)) == [2 * x for x in items]
    if codecs.workers() < 2:
        return  # one core: no pool is made, in the parent or the child
    assert codecs._pool is not None  # the parent has one now
    assert (
        run_in_child(
            lambda: list(codecs.parallel_map(lambda x: 3 * x, items)) == [3 * x for x in items]
        )
        == "ok"
    )


def test_reads_and_commits_work_in_a_forked_child(tmp_path: Path) -> None:
    path = tmp_path / "f.h5"
    data = np.random.default_rng(5).random((400, 500))
    with h5vc.open(path, "w") as vf, vf.stage_version("v0") as group:
        group.create_dataset("x", data=data, chunks=(50, 50))
    with h5vc.open(path) as vf:  # the parent reads with its pools first
        np.testing.assert_array_equal(vf["v0"]["x"][()], data)

    def read_and_commit() -> bool:
        with h5vc.open(path) as vf:
            if not np.array_equal(vf["v0"]["x"][()], data):
                return False
        with h5vc.open(path, "r+") as vf:
            with vf.stage_version("v1") as group:
                group["x"][:, :] = data + 1
            return bool(np.array_equal(vf["v1"]["x"][()], data + 1))

    assert run_in_child(read_and_commit) == "ok"
    with h5vc.open(path) as vf:
        np.testing.assert_array_equal(vf["v1"]["x"][()], data + 1)
