"""Feeding a training loop from a committed column: pickled datasets, worker
processes, batches."""

from __future__ import annotations

import multiprocessing
import pickle
from pathlib import Path

import numpy as np
import pytest

import h5vc
from h5vc.errors import ColumnKeyError


@pytest.fixture
def path(tmp_path: Path) -> Path:
    path = tmp_path / "train.h5"
    data = np.arange(40 * 4, dtype=np.int32).reshape(40, 4)
    with h5vc.open(path, "a") as vf:
        with vf.stage_version("v1") as g:
            g.create_column("x", shape=(4,), dtype="int32").set_many(range(40), data)
        with vf.stage_version("v2") as g:
            g["x"][0] = np.full(4, -1, np.int32)
    return path


def expected(key: int) -> np.ndarray:
    return np.arange(key * 4, key * 4 + 4, dtype=np.int32)


def test_as_dataset_pickles_and_reads_in_a_pool_of_two_processes(path: Path) -> None:
    with h5vc.open(path, "r") as vf:
        dataset = vf["v1"]["x"].as_dataset(keys=[3, 0, 39], transform=np.negative)
        assert len(dataset) == 3
        np.testing.assert_array_equal(dataset[0], -expected(3))
        copy = pickle.loads(pickle.dumps(dataset))
        assert copy._column is None  # reopened lazily
        np.testing.assert_array_equal(copy[2], -expected(39))
        with multiprocessing.get_context("spawn").Pool(2) as pool:
            got = pool.map(dataset.__getitem__, range(len(dataset)))
    np.testing.assert_array_equal(np.stack(got), -np.stack([expected(k) for k in (3, 0, 39)]))


def test_as_dataset_reads_its_own_version(path: Path) -> None:
    with h5vc.open(path, "r") as vf:
        old, new = (pickle.loads(pickle.dumps(vf[v]["x"].as_dataset())) for v in ("v1", "v2"))
    np.testing.assert_array_equal(old[0], expected(0))
    np.testing.assert_array_equal(new[0], np.full(4, -1, np.int32))


def test_as_dataset_refuses_unknown_keys(path: Path) -> None:
    with h5vc.open(path, "r") as vf, pytest.raises(ColumnKeyError, match="99"):
        vf["v1"]["x"].as_dataset(keys=[1, 99])


@pytest.mark.parametrize("shuffle", [False, True])
def test_batches_cover_every_sample_once(path: Path, shuffle: bool) -> None:
    with h5vc.open(path, "r") as vf:
        batches = list(vf["v1"]["x"].batches(16, shuffle=shuffle, seed=3))
    assert [len(b) for b in batches] == [16, 16, 8]
    rows = np.concatenate(batches)
    order = rows[:, 0] // 4
    assert sorted(order.tolist()) == list(range(40))
    assert (order.tolist() != list(range(40))) == shuffle
    np.testing.assert_array_equal(rows, np.stack([expected(k) for k in order]))


def test_batches_refuse_a_bad_size(path: Path) -> None:
    with h5vc.open(path, "r") as vf, pytest.raises(ValueError, match="batch_size"):
        next(vf["v1"]["x"].batches(0))
