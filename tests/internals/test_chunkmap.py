"""Chunk maps: runs, run ids and their inverse, against brute-force references."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from h5vc.store.chunkmap import ChunkMap, Runs, grid_shape


def brute_force_runs(slots: np.ndarray) -> set[tuple[tuple[int, ...], int, int]]:
    """Runs by walking every column along axis 0 in Python."""
    runs = set()
    n0 = slots.shape[0]
    for rest in np.ndindex(*slots.shape[1:]):
        row = 0
        while row < n0:
            slot = slots[(row, *rest)]
            if slot < 0:
                row += 1
                continue
            length = 1
            while row + length < n0 and slots[(row + length, *rest)] == slot + length:
                length += 1
            runs.add(((row, *rest), length, int(slot)))
            row += length
    return runs


slot_maps = st.integers(1, 3).flatmap(
    lambda ndim: st.lists(st.integers(1, 6), min_size=ndim, max_size=ndim).flatmap(
        lambda grid: st.lists(
            st.integers(-1, 12), min_size=int(np.prod(grid)), max_size=int(np.prod(grid))
        ).map(lambda values: np.array(values, dtype=np.int64).reshape(grid))
    )
)


@settings(max_examples=200, deadline=None)
@given(slot_maps)
def test_runs_match_brute_force_and_round_trip(slots: np.ndarray) -> None:
    chunks = (3,) * slots.ndim
    shape = tuple(n * 3 - 1 for n in slots.shape)  # edge chunks on every axis
    chunk_map = ChunkMap(shape, chunks, slots)
    runs = chunk_map.runs()
    got = {
        (tuple(int(c) for c in coords), int(n), int(s))
        for coords, n, s in zip(runs.coords, runs.length, runs.slot)
    }
    assert got == brute_force_runs(slots)
    assert ChunkMap.from_runs(shape, chunks, runs) == chunk_map
    single = chunk_map.single_chunk_runs()
    assert ChunkMap.from_runs(shape, chunks, single) == chunk_map
    assert np.all(single.length == 1)


@settings(max_examples=100, deadline=None)
@given(slot_maps)
def test_run_ids_group_chunks_of_one_run(slots: np.ndarray) -> None:
    chunk_map = ChunkMap(tuple(n * 2 for n in slots.shape), (2,) * slots.ndim, slots)
    ids = chunk_map.run_ids()
    runs = chunk_map.runs()
    assert (ids < 0).sum() == (slots < 0).sum()
    for number, (coords, length) in enumerate(zip(runs.coords, runs.length)):
        for step in range(int(length)):
            assert ids[(coords[0] + step, *coords[1:])] == number


def test_one_dimensional_array_written_in_order_is_one_run() -> None:
    chunk_map = ChunkMap((10_000,), (1024,), np.arange(10, dtype=np.int64))
    assert len(chunk_map.runs()) == 1


def test_resized_keeps_common_chunks_and_fills_new_ones() -> None:
    chunk_map = ChunkMap((10, 10), (5, 5), np.array([[0, 1], [2, 3]]))
    grown = chunk_map.resized((15, 5))
    assert grown.slots.tolist() == [[0], [2], [-1]]
    assert grown.used_slots().tolist() == [0, 2]


def test_wrong_slot_shape_is_refused() -> None:
    with pytest.raises(ValueError, match=r"Expected a chunk map of shape \(2,\)"):
        ChunkMap((10,), (5,), np.zeros(3, dtype=np.int64))


def test_grid_shape_rounds_up() -> None:
    assert grid_shape((10, 11, 0), (5, 5, 3)) == (2, 3, 0)
    assert len(ChunkMap.empty((0,), (4,)).runs()) == 0
    assert isinstance(ChunkMap.empty((4,), (4,)).runs(), Runs)


def test_lru_cache_keeps_the_most_recently_used() -> None:
    from h5vc.versions import LRUCache

    cache = LRUCache(2)
    cache[("a", "")] = 1
    cache[("b", "")] = 2
    assert cache.get(("a", "")) == 1  # a is now the most recent
    cache[("c", "")] = 3
    assert set(cache) == {("a", ""), ("c", "")}
    assert cache.get(("b", "")) is None
