"""Squash: a linear run of versions replaced by one version holding the data of the last.

``squash(first, last)`` commits a new version whose parent is ``first``'s parent and
whose tree is ``last``'s (every object hard-linked, nothing copied in h5vc's layout),
with ``last``'s timestamp, so lookups by time stay ordered.  The children of ``last``
and the branches at ``last`` move to it, then the run is deleted with
:func:`~h5vc.lifecycle.delete.delete_versions`, which frees the chunks only the run's
versions held, as it does for any deletion.  All of it is one operation.

The run must be linear: ``first`` a first-parent ancestor of ``last`` (or ``last``
itself), no merge in it, and no version in it before ``last`` with another child or
a branch; no tag may name a version of the run (tags never move).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

from h5vc.errors import NotLinearHistoryError, RefInUseError
from h5vc.lifecycle.delete import delete_versions
from h5vc.store import layout, read_attributes, tree
from h5vc.versions import FileState, GroupCommit, Link, VersionInfo, commit_version
from h5vc.versions.refs import BRANCH

__all__ = ["default_message", "squash", "squash_run"]


def _children(state: FileState, of: set[str]) -> dict[str, list[str]]:
    """The children of each version of ``of`` (every version's parents read once)."""
    found: dict[str, list[str]] = {name: [] for name in of}
    for name in state.log.names():
        for parent in state.log.parents(name):
            if parent in found:
                found[parent].append(name)
    return found


def squash_run(state: FileState, first: str, last: str) -> list[str]:
    """The versions from ``first`` to ``last``, oldest first, checked to be a run that
    can be squashed (see the module's description); raises otherwise."""
    run: list[str] = []
    for name in state.log.ancestors(last):
        run.append(name)
        if name == first:
            break
    else:
        raise NotLinearHistoryError(
            f"Expected {first!r} to be {last!r} or an ancestor of it through first parents. "
            f"Got a version that is not."
        )
    run.reverse()
    merges = [name for name in run if state.log.info(name).merge_parents]
    if merges:
        raise NotLinearHistoryError(
            f"Cannot squash {first!r}..{last!r}: it holds the merge version(s) "
            f"{', '.join(map(repr, merges))}; expected a linear run."
        )
    children = _children(state, set(run[:-1]))
    for name, after in pairwise(run):
        others = [child for child in children[name] if child != after]
        if others:
            raise NotLinearHistoryError(
                f"Cannot squash {first!r}..{last!r}: version {name!r} has other children "
                f"({', '.join(map(repr, others))}) whose history would lose it."
            )
    inside = set(run[:-1])
    held = [f"branch {n!r} -> {v!r}" for n, v in state.refs.branches.items() if v in inside] + [
        f"tag {n!r} -> {v!r}" for n, v in state.refs.tags.items() if v in run
    ]
    if held:
        raise RefInUseError(
            f"Cannot squash {first!r}..{last!r}: {'; '.join(held)} (tags never move, and a "
            f"branch inside the run would lose its version). Move or delete those refs first."
        )
    return run


def squash(
    state: FileState,
    run: list[str],
    name: str,
    *,
    message: str | None = None,
    author: str | None = None,
    check_name: Callable[[str], str] | None = None,
) -> VersionInfo:
    """Replace ``run`` (from :func:`squash_run`) by the new version ``name`` (checked by
    ``check_name`` first).  Opens its own ``state.operation()``."""
    first, last = run[0], run[-1]
    info = state.log.info(last)
    parent = state.log.info(first).prev_version
    source = state.versions[last]
    root = GroupCommit(
        attrs=read_attributes(source.attrs, layout.VERSION_ATTRS),
        children={child: Link(source, child) for child in source},
    )
    children = _children(state, {last})[last]
    moves_current = state.current_version in run
    with state.operation():
        if check_name is not None:
            name = check_name(name)
        new = commit_version(
            state,
            name,
            parent,
            root,
            timestamp=info.timestamp,
            make_current=moves_current,
            message=message,
            author=author if author is not None else info.author,
        )
        for child in children:
            _repoint(state, child, last, name)
        for branch, head in state.refs.branches.items():
            if head == last:
                state.refs.set(BRANCH, branch, name)
        delete_versions(state, run)
    return new


def _repoint(state: FileState, child: str, old: str, new: str) -> None:
    """Make ``new`` the parent of ``child`` where ``old`` was, in the file and the log."""
    info = state.log.info(child)
    group = state.versions[child]
    prev = info.prev_version
    if prev == old:
        tree.set_prev_version(group, new)
        prev = new
    merged = tuple(new if p == old else p for p in info.merge_parents)
    if merged != info.merge_parents:
        tree.set_merge_parents(group, list(merged))
    state.log.remove(child)
    state.log.add(VersionInfo(child, prev, info.timestamp, info.message, info.author, merged))


def default_message(state: FileState, run: list[str]) -> str:
    """``squash of FIRST..LAST`` and the run's messages, oldest first."""
    lines = [f"Squash of {run[0]}..{run[-1]} ({len(run)} versions)"]
    for name in run:
        message = state.log.info(name).message
        if message:
            lines.append(f"{name}: {message}")
    return "\n".join(lines)
