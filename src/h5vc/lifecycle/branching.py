"""Branches, tags, merges and the history tools as methods of
:class:`~h5vc.VersionedHDF5File`.

The refs themselves live in the versions layer (:class:`h5vc.versions.refs.Refs`), the
merge in :mod:`h5vc.lifecycle.merge`, cherry-pick and revert in
:mod:`~h5vc.lifecycle.cherry`, blame, bisect and squash in their own modules; this
mixin resolves names (:func:`resolve_ref`, the one resolver of version, tag and branch
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
from h5vc.store import layout
from h5vc.versions import FileState, check_new_version_name
from h5vc.versions.refs import BRANCH, TAG
from h5vc.versions.timestamps import now

if TYPE_CHECKING:  # the tools are imported when used: opening a file loads none
    from h5vc.lifecycle.bisection import BisectResult
    from h5vc.lifecycle.blame import Blame
    from h5vc.lifecycle.merge import MergeResult

__all__ = ["RefsMixin", "check_version_name", "generated_version_name", "resolve_ref"]


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


class RefsMixin:
    """Branch, tag and merge methods; the class using it provides ``_open_state``."""

    @property
    def _open_state(self) -> FileState:  # provided by the class
        raise NotImplementedError

    def _check_writable(self, action: str) -> None:  # provided by the class
        raise NotImplementedError

    def get_version_by_name(self, name: str) -> Any:  # provided by the class
        raise NotImplementedError

    # -- names --------------------------------------------------------------------

    def resolve(self, name: str) -> str:
        """The committed version that ``name`` (version, tag or branch) points at."""
        if not isinstance(name, str):
            raise TypeError(f"Expected a version, tag or branch name. Got {name!r}.")
        return resolve_ref(self._open_state, name)

    @property
    def branches(self) -> dict[str, str]:
        """Branch name -> head version."""
        return self._open_state.refs.branches

    @property
    def tags(self) -> dict[str, str]:
        """Tag name -> version."""
        return self._open_state.refs.tags

    @property
    def current_branch(self) -> str | None:
        """The branch last committed to or switched to, while its head is the current
        version; otherwise None."""
        state = self._open_state
        name = state.refs.current_branch
        if name is None or state.refs.get(BRANCH, name) != state.current_version:
            return None
        return name

    # -- branches -----------------------------------------------------------------

    def _target(self, at: str | None) -> str:
        state = self._open_state
        if at is None:
            if state.current_version == layout.FIRST_VERSION:
                raise RefNotFoundError("The file has no versions yet: nothing to point at.")
            return state.current_version
        return self.resolve(at)

    def _new_ref(self, kind: str, name: Any) -> str:
        state = self._open_state
        return state.refs.check_new_name(kind, name, lambda n: n in state.log)

    def create_branch(self, name: str, at: str | None = None) -> str:
        """Create branch ``name`` at ``at`` (a version, tag or branch; default: the
        current version) and return its head.  Writes one attribute."""
        self._check_writable(f"create branch {name!r}")
        name = self._new_ref(BRANCH, name)
        head = self._target(at)
        with self._open_state.operation():
            self._open_state.refs.set(BRANCH, name, head)
        return head

    def delete_branch(self, name: str) -> None:
        """Delete branch ``name`` (not its versions); not the current branch."""
        self._check_writable(f"delete branch {name!r}")
        with self._open_state.operation():
            self._open_state.refs.delete(BRANCH, name)

    def reset_branch(self, name: str, to: str) -> None:
        """Point branch ``name`` at ``to`` (a version, tag or branch)."""
        self._check_writable(f"reset branch {name!r}")
        state = self._open_state
        state.refs.require(BRANCH, name)
        target = self.resolve(to)
        was_current = self.current_branch == name
        with state.operation():
            state.refs.set(BRANCH, name, target)
            if was_current:
                state.set_current_version(target)

    def switch_branch(self, name: str) -> None:
        """Make ``name`` the current branch and its head the current version."""
        self._check_writable(f"switch to branch {name!r}")
        state = self._open_state
        head = state.refs.require(BRANCH, name)
        with state.operation():
            state.set_current_version(head)
            state.refs.set_current_branch(name)

    # -- tags ---------------------------------------------------------------------

    def create_tag(self, name: str, version: str | None = None) -> str:
        """Tag ``version`` (a version, tag or branch; default: the current version) as
        ``name`` and return the version.  Tags never move."""
        self._check_writable(f"create tag {name!r}")
        name = self._new_ref(TAG, name)
        target = self._target(version)
        with self._open_state.operation():
            self._open_state.refs.set(TAG, name, target)
        return target

    def delete_tag(self, name: str) -> None:
        """Delete tag ``name`` (not its version)."""
        self._check_writable(f"delete tag {name!r}")
        with self._open_state.operation():
            self._open_state.refs.delete(TAG, name)

    # -- commits on branches ----------------------------------------------------------

    def _branch_base(self, branch: str, prev_version: str | None) -> str:
        """The version a commit on ``branch`` starts from."""
        head = self._open_state.refs.require(BRANCH, branch)
        if prev_version is not None and prev_version != head and self.resolve(prev_version) != head:
            raise InvalidOptionError(
                f"Expected prev_version to be omitted or the head of branch {branch!r} "
                f"({head!r}). Got {prev_version!r}."
            )
        return head

    def _after_branch_commit(self, branch: str, version: str, make_current: bool) -> None:
        refs = self._open_state.refs
        refs.set(BRANCH, branch, version)
        if make_current:
            refs.set_current_branch(branch)

    # -- merges -------------------------------------------------------------------

    def merge_base(self, a: str, b: str) -> str | None:
        """The nearest common ancestor of two versions (or refs), None if unrelated."""
        from h5vc.lifecycle import merge as _merge

        state = self._open_state
        return _merge.merge_base(state, self.resolve(a), self.resolve(b))

    def merge(
        self,
        theirs: str,
        into: str | None = None,
        name: str | None = None,
        message: str | None = None,
        on_conflict: Any = "fail",
        *,
        author: str | None = None,
        allow_unrelated: bool = False,
        fast_forward: bool = True,
    ) -> MergeResult:
        """Three-way merge of ``theirs`` (a version, tag or branch) into branch ``into``.

        ``into`` defaults to the current branch, or the current version when no branch
        is current.  The merge commits version ``name`` (default: generated) with
        parents (``into``'s head, ``theirs``) and moves ``into`` to it; when ``into``'s
        head is an ancestor of ``theirs`` the branch is fast-forwarded instead (no new
        version) unless ``fast_forward=False``.  ``on_conflict``: ``"fail"`` raises
        :class:`~h5vc.errors.MergeConflictError` and writes nothing; ``"ours"`` or
        ``"theirs"`` take that side; a callable ``f(conflict, base, ours, theirs)``
        returns the merged values of each conflicting chunk region.
        """
        from h5vc.lifecycle import merge as _merge

        self._check_writable(f"merge {theirs!r}")
        state = self._open_state
        branch, ours = self._onto(into)
        their_version = self.resolve(theirs)
        moves_current = ours == state.current_version
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

    def _onto(self, into: str | None) -> tuple[str | None, str]:
        """``(branch, its head)`` a merge, cherry-pick or revert commits on: ``into``,
        else the current branch; ``(None, current version)`` when there is none."""
        state = self._open_state
        branch = into if into is not None else self.current_branch
        ours = self._target(None) if branch is None else state.refs.require(BRANCH, branch)
        return branch, ours

    def cherry_pick(
        self,
        version: str,
        into: str | None = None,
        name: str | None = None,
        on_conflict: Any = "fail",
        *,
        parent: Any = None,
        message: str | None = None,
        author: str | None = None,
    ) -> MergeResult:
        """Apply the change ``version`` (a version, tag or branch) made to its parent onto
        branch ``into`` (default: the current branch, or the current version when no
        branch is current), as a new version ``name`` (default: generated), and move the
        branch to it.

        Three-way and chunk level, like :meth:`merge`, with ``version``'s parent as the
        base; ``on_conflict`` as for :meth:`merge`.  A merge version needs ``parent``
        (1-based position or name of the parent whose change is taken):
        :class:`~h5vc.errors.MergeParentError` otherwise.  A version already in
        ``into``'s history raises :class:`~h5vc.errors.EmptyChangeError`.
        """
        return self._apply_change(
            "cherry-pick", version, into, name, on_conflict, parent, message, author
        )

    def revert(
        self,
        version: str,
        into: str | None = None,
        name: str | None = None,
        parent: Any = None,
        on_conflict: Any = "fail",
        *,
        message: str | None = None,
        author: str | None = None,
    ) -> MergeResult:
        """Apply the inverse of the change ``version`` made to its parent onto branch
        ``into`` (as :meth:`cherry_pick`): a new version that undoes it, later changes
        kept.  A merge version needs ``parent`` (whose side is kept)."""
        return self._apply_change(
            "revert", version, into, name, on_conflict, parent, message, author
        )

    # -- history tools ----------------------------------------------------------------

    def blame(self, path: str, index: Any = ..., ref: str | None = None) -> Blame:
        """Which version last changed each chunk region of dataset ``path`` in ``ref``
        (a version, tag or branch; default: the current version) that ``index``
        touches (default: all).  Decided from chunk maps and digests: no data is read.
        ``result.regions`` lists ``(region, version)``; ``result.version_of(i, j)``
        answers for one element."""
        from h5vc.lifecycle.blame import blame as _blame

        return _blame(self._open_state, self._target(ref), path, index)

    def bisect(self, predicate: Callable[[Any], Any], good: str, bad: str) -> BisectResult:
        """The first version on the path from ``good`` to ``bad`` (versions, tags or
        branches) for which ``predicate(version_group)`` is true; ``good`` is taken as
        false and ``bad`` as true.  A binary search: ``ceil(log2(n))`` of the ``n``
        versions on the path are opened.  ``result.version`` is the version found,
        ``result.tested`` the ``(version, result)`` pairs in order."""
        from h5vc.lifecycle.bisection import bisect as _bisect

        state = self._open_state
        return _bisect(
            state, predicate, self.resolve(good), self.resolve(bad), self.get_version_by_name
        )

    def squash(
        self,
        first: str,
        last: str,
        name: str | None = None,
        *,
        message: str | None = None,
        author: str | None = None,
    ) -> str:
        """Replace the linear run of versions from ``first`` to ``last`` (versions, tags
        or branches) by one new version ``name`` (default: generated) holding ``last``'s
        data, parent ``first``'s parent; ``last``'s children and branches move to it,
        and the run is deleted as :func:`~h5vc.delete_versions` deletes (the chunks
        only the run held are freed).  Returns the new version's name.

        Raises :class:`~h5vc.errors.NotLinearHistoryError` unless ``first`` is ``last``
        or a first-parent ancestor of it with no merge, and no other child, in between;
        :class:`~h5vc.errors.RefInUseError` for a tag on the run or a branch inside it.
        Nothing changes then.  The default message lists the run's messages.
        """
        from h5vc.lifecycle import squash as _squash

        self._check_writable(f"squash {first!r}..{last!r}")
        state = self._open_state
        run = _squash.squash_run(state, self.resolve(first), self.resolve(last))
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
        self,
        kind: str,
        version: str,
        into: str | None,
        name: str | None,
        on_conflict: Any,
        parent: Any,
        message: str | None,
        author: str | None,
    ) -> MergeResult:
        from h5vc.lifecycle import merge as _merge
        from h5vc.lifecycle.cherry import change_parent, cherry_pick, revert

        self._check_writable(f"{kind} {version!r}")
        state = self._open_state
        _merge.check_on_conflict(on_conflict)
        branch, ours = self._onto(into)
        source = self.resolve(version)
        if isinstance(parent, str):
            parent = self.resolve(parent)
        change_parent(state, source, parent)  # refused before anything is written
        if message is None:
            message = _change_message(state, kind, source)
        moves_current = ours == state.current_version
        apply = cherry_pick if kind == "cherry-pick" else revert
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
    name = check_new_version_name(state, name)
    for kind in (BRANCH, TAG):
        if state.refs.get(kind, name) is not None:
            raise InvalidVersionNameError(
                f"{name!r} is already a {kind}; a version of the same name would make "
                f"{name!r} ambiguous. Expected another version name."
            )
    return name
