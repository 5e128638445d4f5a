"""Branches, tags, merges and the history tools on a versioned root, as plain
functions of its :class:`~h5vc.versions.FileState`: the ref methods of
:class:`~h5vc.VersionedHDF5File` (written in :mod:`h5vc.api`) call them.

The refs themselves live in the versions layer (:class:`h5vc.versions.refs.Refs`), the
merge in :mod:`h5vc.lifecycle.merge`, cherry-pick and revert in
:mod:`~h5vc.lifecycle.cherry`, blame, bisect and squash in their own modules; this
module resolves names (:func:`resolve_ref`, the one resolver of version, tag and branch
names) and keeps branches and the current version consistent around them.

Names given to ``vf[...]``, ``merge`` and the ref methods resolve in this order: a
version, a tag, a branch.  A name that is more than one of them and does not mean
one version is ambiguous: :class:`~h5vc.errors.AmbiguousRefError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from h5vc.errors import (
    AmbiguousRefError,
    InvalidOptionError,
    InvalidVersionNameError,
    RefNotFoundError,
)
from h5vc.lifecycle import MergeResult
from h5vc.store import layout
from h5vc.versions import FileState
from h5vc.versions.refs import BRANCH, TAG
from h5vc.versions.timestamps import now

if TYPE_CHECKING:  # the tools are imported when used: opening a file loads none
    from h5vc.lifecycle.bisection import BisectResult
    from h5vc.lifecycle.blame import Blame

__all__ = [
    "after_branch_commit",
    "bisect",
    "blame",
    "branch_base",
    "check_version_name",
    "cherry_pick",
    "create_branch",
    "create_tag",
    "current_branch",
    "delete_branch",
    "delete_tag",
    "generated_version_name",
    "merge",
    "merge_base",
    "resolve",
    "resolve_ref",
    "reset_branch",
    "revert",
    "squash",
    "switch_branch",
]


def resolve_ref(state: FileState, name: str) -> str:
    """The version ``name`` means: a version, a tag or a branch (in that order)."""
    found: dict[str, str] = {}
    if name in state.log:
        found["version"] = name
    for kind in (TAG, BRANCH):
        target = state.refs.get(kind, name)
        if target is not None:
            found[kind] = target
    if not found:
        raise RefNotFoundError(f"{name!r} is no version, tag or branch.")
    if len(set(found.values())) > 1:
        meanings = ", ".join(f"{kind} -> {version!r}" for kind, version in found.items())
        raise AmbiguousRefError(
            f"{name!r} is ambiguous: it names a {' and a '.join(found)} ({meanings}). "
            f"Use vf.branches[{name!r}] or vf.tags[{name!r}] to pick one."
        )
    return next(iter(found.values()))


def resolve(state: FileState, name: str) -> str:
    """The committed version that ``name`` (version, tag or branch) points at."""
    if not isinstance(name, str):
        raise TypeError(f"Expected a version, tag or branch name. Got {name!r}.")
    return resolve_ref(state, name)


def current_branch(state: FileState) -> str | None:
    """The branch last committed to or switched to, while its head is the current
    version; otherwise None."""
    name = state.refs.current_branch
    if name is None or state.refs.get(BRANCH, name) != state.current_version:
        return None
    return name


# -- branches ---------------------------------------------------------------------


def _target(state: FileState, at: str | None) -> str:
    if at is None:
        if state.current_version == layout.FIRST_VERSION:
            raise RefNotFoundError("The file has no versions yet: nothing to point at.")
        return state.current_version
    return resolve(state, at)


def _new_ref(state: FileState, kind: str, name: Any) -> str:
    return state.refs.check_new_name(kind, name, lambda n: n in state.log)


def _create_ref(state: FileState, kind: str, name: Any, at: str | None) -> str:
    """Create ref ``name`` of ``kind`` at ``at`` (default: the current version)."""
    state.check_writable(f"create {kind} {name!r}")
    name = _new_ref(state, kind, name)
    target = _target(state, at)
    with state.operation():
        state.refs.set(kind, name, target)
    return target


def _delete_ref(state: FileState, kind: str, name: str) -> None:
    state.check_writable(f"delete {kind} {name!r}")
    with state.operation():
        state.refs.delete(kind, name)


def create_branch(state: FileState, name: str, at: str | None = None) -> str:
    """Create branch ``name`` at ``at`` (default: the current version); its head."""
    return _create_ref(state, BRANCH, name, at)


def delete_branch(state: FileState, name: str) -> None:
    _delete_ref(state, BRANCH, name)


def reset_branch(state: FileState, name: str, to: str) -> None:
    state.check_writable(f"reset branch {name!r}")
    state.refs.require(BRANCH, name)
    target = resolve(state, to)
    was_current = current_branch(state) == name
    with state.operation():
        state.refs.set(BRANCH, name, target)
        if was_current:
            state.set_current_version(target)


def switch_branch(state: FileState, name: str) -> None:
    state.check_writable(f"switch to branch {name!r}")
    head = state.refs.require(BRANCH, name)
    with state.operation():
        state.set_current_version(head)
        state.refs.set_current_branch(name)


# -- tags -------------------------------------------------------------------------


def create_tag(state: FileState, name: str, version: str | None = None) -> str:
    """Tag ``version`` (default: the current version) as ``name``; the version."""
    return _create_ref(state, TAG, name, version)


def delete_tag(state: FileState, name: str) -> None:
    _delete_ref(state, TAG, name)


# -- commits on branches ----------------------------------------------------------


def branch_base(state: FileState, branch: str, prev_version: str | None) -> str:
    """The version a commit on ``branch`` starts from."""
    head = state.refs.require(BRANCH, branch)
    if prev_version is not None and prev_version != head and resolve(state, prev_version) != head:
        raise InvalidOptionError(
            f"Expected prev_version to be omitted or the head of branch {branch!r} "
            f"({head!r}). Got {prev_version!r}."
        )
    return head


def after_branch_commit(state: FileState, branch: str, version: str, make_current: bool) -> None:
    """Move ``branch`` to the version just committed on it (inside its operation)."""
    state.refs.set(BRANCH, branch, version)
    if make_current:
        state.refs.set_current_branch(branch)


# -- merges -----------------------------------------------------------------------


def merge_base(state: FileState, a: str, b: str) -> str | None:
    """The nearest common ancestor of two versions (or refs), None if unrelated."""
    from h5vc.lifecycle import merge as _merge

    return _merge.merge_base(state, resolve(state, a), resolve(state, b))


def merge(
    state: FileState,
    theirs: str,
    into: str | None,
    name: str | None,
    message: str | None,
    on_conflict: Any,
    *,
    author: str | None,
    allow_unrelated: bool,
    fast_forward: bool,
) -> MergeResult:
    """Three-way merge of ``theirs`` into branch ``into`` (see
    :meth:`h5vc.VersionedHDF5File.merge`)."""
    state.check_writable(f"merge {theirs!r}")
    branch, ours = _onto(state, into)
    their_version = resolve(state, theirs)
    moves_current = ours == state.current_version
    if fast_forward and _fast_forwards(state, ours, their_version, on_conflict):
        # Only refs move: the merge machinery is not needed (nor imported).
        with state.operation():  # one commit point: the branch and the current version
            if branch is not None:
                state.refs.set(BRANCH, branch, their_version)
            if moves_current:
                state.set_current_version(their_version)
        return MergeResult("fast-forward", their_version, ours, ours, their_version)
    from h5vc.lifecycle import merge as _merge

    if name is None:
        name = _merge_name(state, their_version, ours)
    with state.operation():  # one commit point: the version, the branch, current
        result = _merge.merge(
            state,
            ours,
            their_version,
            name,
            message=message,
            author=author,
            on_conflict=on_conflict,
            allow_unrelated=allow_unrelated,
            fast_forward=fast_forward,
            make_current=moves_current,
            check_name=lambda n: check_version_name(state, n),
        )
        if branch is not None:
            state.refs.set(BRANCH, branch, result.version)
        if moves_current and result.kind == "fast-forward":
            state.set_current_version(result.version)
    return result


#: Versions a fast-forward check walks back one by one (a version this process
#: committed or read costs no read) before it reads every version's parents at once.
_WALK_BEFORE_LOG = 32


def _fast_forwards(state: FileState, ours: str, theirs: str, on_conflict: Any) -> bool:
    """Whether merging ``theirs`` into ``ours`` is a fast-forward: ``ours`` is a proper
    ancestor of ``theirs`` (then it is also their newest common ancestor, the merge
    base) and the options are valid (else the full merge raises for them)."""
    if ours == theirs or not (on_conflict in ("fail", "ours", "theirs") or callable(on_conflict)):
        return False
    log = state.log
    if ours not in log or theirs not in log:
        return False
    seen = {theirs}
    todo = [theirs]
    while todo:
        if len(seen) == _WALK_BEFORE_LOG:
            # A long way back: every version's parents in one read (the index's log
            # column) rather than one read per version not met before.
            log.names()
        for parent in log.parents(todo.pop()):
            if parent == ours:
                return True
            if parent not in seen and parent in log:
                seen.add(parent)
                todo.append(parent)
    return False


def _onto(state: FileState, into: str | None) -> tuple[str | None, str]:
    """``(branch, its head)`` a merge, cherry-pick or revert commits on: ``into``,
    else the current branch; ``(None, current version)`` when there is none."""
    branch = into if into is not None else current_branch(state)
    ours = _target(state, None) if branch is None else state.refs.require(BRANCH, branch)
    return branch, ours


def cherry_pick(
    state: FileState,
    version: str,
    into: str | None,
    name: str | None,
    on_conflict: Any,
    *,
    parent: Any,
    message: str | None,
    author: str | None,
) -> MergeResult:
    """Apply the change ``version`` made onto branch ``into`` (see
    :meth:`h5vc.VersionedHDF5File.cherry_pick`)."""
    return _apply_change(
        state, "cherry-pick", version, into, name, on_conflict, parent, message, author
    )


def revert(
    state: FileState,
    version: str,
    into: str | None,
    name: str | None,
    parent: Any,
    on_conflict: Any,
    *,
    message: str | None,
    author: str | None,
) -> MergeResult:
    """Apply the inverse of the change ``version`` made onto branch ``into`` (see
    :meth:`h5vc.VersionedHDF5File.revert`)."""
    return _apply_change(state, "revert", version, into, name, on_conflict, parent, message, author)


# -- history tools ----------------------------------------------------------------


def blame(state: FileState, path: str, index: Any, ref: str | None) -> Blame:
    """Which version last changed each chunk region of dataset ``path`` in ``ref``."""
    from h5vc.lifecycle.blame import blame as _blame

    return _blame(state, _target(state, ref), path, index)


def bisect(
    state: FileState,
    predicate: Callable[[Any], Any],
    good: str,
    bad: str,
    open_version: Callable[[str], Any],
) -> BisectResult:
    """The first version from ``good`` to ``bad`` for which ``predicate`` is true;
    ``open_version`` opens a version group by name."""
    from h5vc.lifecycle.bisection import bisect as _bisect

    return _bisect(state, predicate, resolve(state, good), resolve(state, bad), open_version)


def squash(
    state: FileState,
    first: str,
    last: str,
    name: str | None,
    *,
    message: str | None,
    author: str | None,
) -> str:
    """Replace the run of versions from ``first`` to ``last`` by one new version (see
    :meth:`h5vc.VersionedHDF5File.squash`); its name."""
    from h5vc.lifecycle import squash as _squash

    state.check_writable(f"squash {first!r}..{last!r}")
    run = _squash.squash_run(state, resolve(state, first), resolve(state, last))
    if name is None:
        name = _unique(state, f"squash of {run[0]} to {run[-1]}")
    if message is None:
        message = _squash.default_message(state, run)
    info = _squash.squash(
        state,
        run,
        name,
        message=message,
        author=author,
        check_name=lambda n: check_version_name(state, n),
    )
    return info.name


def _apply_change(
    state: FileState,
    kind: str,
    version: str,
    into: str | None,
    name: str | None,
    on_conflict: Any,
    parent: Any,
    message: str | None,
    author: str | None,
) -> MergeResult:
    from h5vc.lifecycle import cherry as _cherry
    from h5vc.lifecycle import merge as _merge

    state.check_writable(f"{kind} {version!r}")
    _merge.check_on_conflict(on_conflict)
    branch, ours = _onto(state, into)
    source = resolve(state, version)
    if isinstance(parent, str):
        parent = resolve(state, parent)
    _cherry.change_parent(state, source, parent)  # refused before anything is written
    if message is None:
        message = _change_message(state, kind, source)
    moves_current = ours == state.current_version
    apply = _cherry.cherry_pick if kind == "cherry-pick" else _cherry.revert
    with state.operation():  # one commit point: the version, the branch, current
        new_name = check_version_name(
            state, name if name is not None else _change_name(state, kind, source)
        )
        result = apply(
            state,
            source,
            ours,
            new_name,
            parent=parent,
            message=message,
            author=author,
            on_conflict=on_conflict,
            make_current=moves_current,
        )
        if branch is not None:
            state.refs.set(BRANCH, branch, result.version)
    return result


def _change_name(state: FileState, kind: str, version: str) -> str:
    return _unique(state, f"{kind} of {version}")


def _change_message(state: FileState, kind: str, version: str) -> str:
    original = state.log.info(version).message
    first = f"{'Cherry-pick' if kind == 'cherry-pick' else 'Revert'} of {version}"
    return first if not original else f"{first}: {original}"


def _unique(state: FileState, base: str, suffix: str = " ({n})") -> str:
    """``base``, or ``base`` with ``suffix`` (n = 2, 3, ...) when a version or ref has it."""
    name, n = base, 1
    while name in state.log or state.refs.get(BRANCH, name) or state.refs.get(TAG, name):
        n += 1
        name = base + suffix.format(n=n)
    return name


def _merge_name(state: FileState, theirs: str, ours: str) -> str:
    return _unique(state, f"merge {theirs} into {ours}")


def generated_version_name(state: FileState) -> str:
    """A name for a version committed without one: the UTC time now to the
    microsecond, ``YYYYMMDDTHHMMSS.ffffffZ`` (names of later commits sort after those
    of earlier ones), with ``-2``, ``-3``, ... added in the rare case it is taken."""
    stamp = np.datetime_as_string(now(), unit="us").replace("-", "").replace(":", "")
    return _unique(state, f"{stamp}Z", "-{n}")


def check_version_name(state: FileState, name: str) -> str:
    """``name`` if a new version may take it: not a version, branch or tag yet."""
    from h5vc.versions import check_new_version_name  # the commit writer: loaded to write

    name = check_new_version_name(state, name)
    for kind in (BRANCH, TAG):
        if state.refs.get(kind, name) is not None:
            raise InvalidVersionNameError(
                f"{name!r} is already a {kind}; a version of the same name would make "
                f"{name!r} ambiguous. Expected another version name."
            )
    return name
