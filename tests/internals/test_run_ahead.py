"""``run_ahead``: results in order from items computed on pool threads and on the
caller's thread, a bounded number ahead, errors at their item's place, nothing left
running once the iterator is done."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from h5vc.hashing import run_ahead


@pytest.mark.parametrize(("threads", "limit"), [(0, 1), (1, 1), (1, 3), (2, 4), (3, 2)])
def test_results_in_order_with_at_most_limit_taken_ahead(threads: int, limit: int) -> None:
    lock = threading.Lock()
    started: list[int] = []

    def work(i: int) -> int:
        with lock:
            started.append(i)
        time.sleep(0.001 * (3 - i % 3))  # the later of a group finish first
        return i * i

    seen = []
    for k, result in enumerate(run_ahead(work, range(20), threads, limit)):
        with lock:
            # Taken and not handed over: at most ``limit``, the one handed included.
            assert len(started) <= k + limit
        seen.append(result)
    assert seen == [i * i for i in range(20)]
    assert sorted(started) == list(range(20))


def test_no_thread_computes_everything_on_the_callers_thread_in_order() -> None:
    names: list[tuple[int, str]] = []

    def work(i: int) -> int:
        names.append((i, threading.current_thread().name))
        return -i

    assert list(run_ahead(work, range(7), 0, 3)) == [-i for i in range(7)]
    assert names == [(i, threading.current_thread().name) for i in range(7)]


def test_empty_items_give_nothing() -> None:
    assert list(run_ahead(lambda i: i, [], 2, 4)) == []


@pytest.mark.parametrize("threads", [0, 1, 2])
def test_an_error_reaches_the_caller_at_its_place_and_nothing_after_it_starts(
    threads: int,
) -> None:
    lock = threading.Lock()
    started: list[int] = []
    failed = threading.Event()

    def work(i: int) -> int:
        with lock:
            assert not failed.is_set() or i < 5, "an item past the failed one started"
            started.append(i)
        if i == 5:
            failed.set()
            raise ValueError("item 5 failed")
        time.sleep(0.001)
        return i

    seen = []
    with pytest.raises(ValueError, match="item 5 failed"):
        for result in run_ahead(work, range(40), threads, 3):
            seen.append(result)
    assert seen == [0, 1, 2, 3, 4][: len(seen)]
    assert max(started) < 5 + 3  # at most ``limit`` taken ahead


def test_an_error_on_a_pool_thread_reaches_the_caller() -> None:
    main = threading.current_thread()

    def work(i: int) -> int:
        if threading.current_thread() is not main:
            raise RuntimeError("failed on a pool thread")
        time.sleep(0.005)  # leave the pool thread time to take an item
        return i

    with pytest.raises(RuntimeError, match="failed on a pool thread"):
        list(run_ahead(work, range(50), 1, 4))


def test_an_error_of_the_items_reaches_the_caller_after_the_items_before() -> None:
    def items() -> Iterator[int]:
        yield from range(4)
        raise KeyError("no more items")

    seen = []
    with pytest.raises(KeyError, match="no more items"):
        for result in run_ahead(lambda i: i + 1, items(), 2, 3):
            seen.append(result)
    assert seen == [1, 2, 3, 4]


@pytest.mark.parametrize("threads", [1, 2])
def test_stopping_early_waits_for_started_items_and_starts_no_more(threads: int) -> None:
    lock = threading.Lock()
    running = 0
    started: list[int] = []

    def work(i: int) -> int:
        nonlocal running
        with lock:
            running += 1
            started.append(i)
        time.sleep(0.01)
        with lock:
            running -= 1
        return i

    results = run_ahead(work, range(100), threads, 4)
    assert next(results) == 0
    assert next(results) == 1
    results.close()
    with lock:
        assert running == 0  # every started item finished before close() returned
        count = len(started)
    time.sleep(0.03)
    assert len(started) == count  # and none started since
    assert count <= 2 + 4


def test_an_error_of_the_caller_stops_the_pool_threads() -> None:
    lock = threading.Lock()
    running = 0

    def work(i: int) -> int:
        nonlocal running
        with lock:
            running += 1
        time.sleep(0.005)
        with lock:
            running -= 1
        return i

    def consume() -> None:
        for result in run_ahead(work, range(100), 2, 4):
            if result == 3:
                raise OSError("the write failed")

    with pytest.raises(OSError, match="the write failed"):
        consume()
    with lock:
        assert running == 0
