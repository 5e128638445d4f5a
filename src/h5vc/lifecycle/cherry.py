"""Cherry-pick and revert: a version's change applied (or undone) on another version.

Both are the three-way merge of :mod:`h5vc.lifecycle.merge`, with another base:

* ``cherry_pick(version)`` onto ``ours`` merges ``version`` with its parent as the base:
  what ``version`` changed against its parent is applied to ``ours``;
* ``revert(version)`` onto ``ours`` merges the parent with ``version`` as the base: the
  inverse change is applied.

So the work is decided from chunk maps exactly as for a merge (a chunk only one side
changed is taken without reading data; chunks both sides changed are read and merged
element by element), conflicts are reported and resolved the same way, and nothing is
written unless every conflict is resolved.  The new version has one parent, ``ours``.
"""

from __future__ import annotations

from typing import Any

from h5vc.errors import EmptyChangeError, MergeParentError
from h5vc.lifecycle.merge import (
    Merger,
    MergeResult,
    Resolver,
    check_on_conflict,
    commit_result,
    is_ancestor,
)
from h5vc.store import layout
from h5vc.versions import FileState

__all__ = ["change_parent", "cherry_pick", "revert"]


def change_parent(state: FileState, version: str, parent: Any = None) -> str | None:
    """The parent that ``version``'s change is taken against (None for a root).

    A merge version has several parents: ``parent`` must then say which, as its
    1-based position (git's ``--mainline``) or the parent's name.  A version with one
    parent accepts only that parent (or nothing).
    """
    parents = state.log.parents(version)
    if parent is None:
        if len(parents) > 1:
            raise MergeParentError(
                f"Version {version!r} is a merge of {', '.join(map(repr, parents))}: expected "
                f"parent=1..{len(parents)} (or a parent's name) to say which side's change "
                f"to take. Got none."
            )
        return parents[0] if parents else None
    if isinstance(parent, int) and not isinstance(parent, bool):
        if not 1 <= parent <= len(parents):
            raise MergeParentError(
                f"Expected parent between 1 and {len(parents)} for version {version!r} "
                f"(parents {', '.join(map(repr, parents)) or 'none'}). Got {parent}."
            )
        return parents[parent - 1]
    if isinstance(parent, str) and parent in parents:
        return parent
    raise MergeParentError(
        f"Expected parent to be one of the parents of {version!r} "
        f"({', '.join(map(repr, parents)) or 'none: it is a root'}) or its 1-based "
        f"position. Got {parent!r}."
    )


def cherry_pick(
    state: FileState,
    version: str,
    ours: str,
    name: str,
    *,
    parent: Any = None,
    message: str | None = None,
    author: str | None = None,
    on_conflict: str | Resolver = "fail",
    make_current: bool = True,
) -> MergeResult:
    """Apply the change ``version`` made to its parent onto ``ours``, as version ``name``.

    ``result.base`` is that parent and ``result.theirs`` is ``version``.  Raises
    :class:`~h5vc.errors.EmptyChangeError` when ``version`` is ``ours`` or one of its
    ancestors (its change is there already), :class:`~h5vc.errors.MergeParentError`
    for a merge version without ``parent``, and
    :class:`~h5vc.errors.MergeConflictError` as a merge does.  Refs are the caller's.
    Runs inside the caller's ``state.operation()``.
    """
    check_on_conflict(on_conflict)
    base = change_parent(state, version, parent)
    if version == ours or is_ancestor(state, version, ours):
        raise EmptyChangeError(
            f"Version {version!r} is already part of the history of {ours!r}: its change "
            f"is there; nothing to cherry-pick."
        )
    merger = Merger(state, base, ours, version, on_conflict)
    commit_result(
        state,
        merger,
        name,
        f"Cherry-picking {version!r} onto {ours!r} (its parent {base!r} as the base)",
        message=message,
        author=author,
        make_current=make_current,
    )
    return _result("cherry-pick", name, base, ours, version, merger)


def revert(
    state: FileState,
    version: str,
    ours: str,
    name: str,
    *,
    parent: Any = None,
    message: str | None = None,
    author: str | None = None,
    on_conflict: str | Resolver = "fail",
    make_current: bool = True,
) -> MergeResult:
    """Apply the inverse of the change ``version`` made to its parent onto ``ours``.

    ``result.base`` is ``version`` and ``result.theirs`` its parent (for a root:
    ``__first_version__``, the empty version, so reverting a root removes what it
    added).  Errors as :func:`cherry_pick` (a revert of a version not in ``ours``'
    history is allowed: its inverse is applied all the same).
    """
    check_on_conflict(on_conflict)
    theirs = change_parent(state, version, parent)
    merger = Merger(state, version, ours, theirs or layout.FIRST_VERSION, on_conflict)
    commit_result(
        state,
        merger,
        name,
        f"Reverting {version!r} on {ours!r}",
        message=message,
        author=author,
        make_current=make_current,
    )
    return _result("revert", name, version, ours, theirs or layout.FIRST_VERSION, merger)


def _result(
    kind: str, name: str, base: str | None, ours: str, theirs: str, merger: Merger
) -> MergeResult:
    return MergeResult(
        kind,
        name,
        base,
        ours,
        theirs,
        conflicts=merger.conflicts,
        chunks_taken=merger.taken,
        chunks_merged=merger.merged,
    )
