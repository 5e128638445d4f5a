"""Bisect: the first version on the path from a good version to a bad one where a
property appears.

The path is the chain of first parents from ``bad`` back to ``good`` (or, when
``good`` is not on it, the shortest chain of parents that reaches it).  As ``git
bisect``, ``good`` is taken as not having the property and ``bad`` as having it, and
the property is assumed to persist once it appears: a binary search then opens
``ceil(log2(n))`` of the ``n`` versions on the path, and nothing else is read.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from h5vc.errors import BisectError
from h5vc.versions import FileState

__all__ = ["BisectResult", "bisect", "bisect_path"]


@dataclass(frozen=True)
class BisectResult:
    """What :func:`bisect` found."""

    #: The first version on the path for which the predicate is true.
    version: str
    good: str
    bad: str
    #: Versions after ``good`` up to ``bad`` on the path searched, oldest first.
    path: tuple[str, ...]
    #: ``(version, predicate result)`` in the order they were tested.
    tested: tuple[tuple[str, bool], ...]


def bisect_path(state: FileState, good: str, bad: str) -> list[str]:
    """The versions after ``good`` up to ``bad`` (included), oldest first."""
    if good == bad:
        raise BisectError(f"Expected a good version older than the bad one. Got {good!r} for both.")
    state.log.names()  # every version's parents in one read (the index's log column)
    chain: list[str] = []
    for name in state.log.ancestors(bad):
        if name == good:
            return chain[::-1]
        chain.append(name)
    # good is not a first-parent ancestor: the shortest chain of parents to it
    came_from: dict[str, str | None] = {bad: None}
    todo = deque([bad])
    while todo:
        name = todo.popleft()
        for parent in state.log.parents(name):
            if parent in came_from or parent not in state.log:
                continue
            came_from[parent] = name
            if parent == good:
                path = []
                step: str | None = name
                while step is not None:
                    path.append(step)
                    step = came_from[step]
                return path
            todo.append(parent)
    raise BisectError(
        f"Expected the good version {good!r} to be an ancestor of the bad version "
        f"{bad!r}. Got a version that is not in its history."
    )


def bisect(
    state: FileState,
    predicate: Callable[[Any], Any],
    good: str,
    bad: str,
    open_version: Callable[[str], Any],
) -> BisectResult:
    """The first version on the path from ``good`` to ``bad`` for which
    ``predicate(open_version(name))`` is true (see the module's description)."""
    path = bisect_path(state, good, bad)
    tested: list[tuple[str, bool]] = []
    low, high = 0, len(path) - 1  # path[high] (bad) has the property
    while low < high:
        middle = (low + high) // 2
        name = path[middle]
        found = bool(predicate(open_version(name)))
        tested.append((name, found))
        if found:
            high = middle
        else:
            low = middle + 1
    return BisectResult(path[high], good, bad, tuple(path), tuple(tested))
