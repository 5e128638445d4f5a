"""Branches and tags: named pointers to committed versions.

:class:`Refs` validates names and keeps the refs of one versioned root in memory;
they are stored by :mod:`h5vc.store.refattrs` (one attribute each).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import h5py

from h5vc.errors import (
    InvalidRefNameError,
    RefExistsError,
    RefInUseError,
    RefNotFoundError,
    TagImmutableError,
)
from h5vc.store import refattrs

if TYPE_CHECKING:
    from h5vc.versions.reading import KnownRoot

__all__ = ["BRANCH", "TAG", "Refs", "check_ref_format"]

BRANCH = "branch"
TAG = "tag"


#: Characters git refuses anywhere in a ref name (``git check-ref-format``).
_FORBIDDEN = frozenset(" ~^:?*[\\")

#: Anything :func:`check_ref_format` refuses (a name it finds nothing of is valid, as
#: nearly every name is: one search instead of a loop over its characters); the
#: checks themselves, which say what is wrong, run on a name it finds.
_MAYBE_BAD = re.compile(
    r"^-|^__|^@$|[\x00-\x1f\x7f ~^:?*\[\\]|\.\.|@\{|\.$|^/|/$|//|(?:^|/)\.|\.lock(?:/|$)"
)


def check_ref_format(kind: str, name: object) -> str:
    """``name`` if it follows git's rules for ref names (``git check-ref-format
    --allow-onelevel``): components separated by ``/`` (none empty, none starting with
    ``.`` or ending with ``.lock``); no ``..``, ``@{``, control characters, space,
    ``~^:?*[\\``; not ``@``, not ending with ``.``.  Like ``git branch``, no leading
    ``-``; h5vc keeps names starting with ``__`` for itself."""
    if not isinstance(name, str):
        raise InvalidRefNameError(
            f"Expected a {kind} name as a str. Got {type(name).__name__} instead."
        )
    if name and _MAYBE_BAD.search(name) is None:
        return name
    problem = None
    if not name:
        problem = "it is empty"
    elif name.startswith("-"):
        problem = "it starts with '-'"
    elif name.startswith("__"):
        problem = "names starting with '__' are h5vc's own"
    elif name == "@":
        problem = "it is '@'"
    elif any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        problem = "it contains a control character"
    elif _FORBIDDEN.intersection(name):
        problem = f"it contains {''.join(sorted(_FORBIDDEN.intersection(name)))!r}"
    elif ".." in name:
        problem = "it contains '..'"
    elif "@{" in name:
        problem = "it contains '@{'"
    elif name.endswith("."):
        problem = "it ends with '.'"
    else:
        for part in name.split("/"):
            if not part:
                problem = "it has an empty component (a leading, trailing or double '/')"
            elif part.startswith("."):
                problem = f"its component {part!r} starts with '.'"
            elif part.endswith(".lock"):
                problem = f"its component {part!r} ends with '.lock'"
            if problem:
                break
    if problem:
        raise InvalidRefNameError(
            f"Expected a {kind} name following git's rules for ref names: {problem}. Got {name!r}."
        )
    return name


class Refs:
    """The branches and tags of one versioned root, read once and kept in memory."""

    def __init__(self, versions_group: h5py.Group, *, known: KnownRoot | None = None):
        """``known``: what was read of a read-only file's bytes as they are now, by
        this handle or an earlier one (the refs are read once for all of them)."""
        self._group = versions_group
        self._refs: dict[str, dict[str, str]] | None = None
        self._current: str | None = None
        self._known = known
        #: ``(kind, name)`` of the refs written since they were read.
        self._written: set[tuple[str, str]] = set()

    def reload(self) -> None:
        self._refs = None
        self._known = None
        self._written.clear()

    def _load(self) -> dict[str, dict[str, str]]:
        if self._refs is None:
            known = self._known
            if known is not None and known.refs is not None:
                refs, self._current = known.refs
            else:
                refs, self._current = refattrs.read_refs(self._group)
                if known is not None:
                    known.refs = ({kind: dict(r) for kind, r in refs.items()}, self._current)
            self._refs = {kind: dict(r) for kind, r in refs.items()}
        return self._refs

    # -- reading ------------------------------------------------------------------

    @property
    def branches(self) -> dict[str, str]:
        """Branch name -> head version, sorted by name."""
        return dict(sorted(self._load()[BRANCH].items()))

    @property
    def tags(self) -> dict[str, str]:
        """Tag name -> version, sorted by name."""
        return dict(sorted(self._load()[TAG].items()))

    def get(self, kind: str, name: str) -> str | None:
        return self._load()[kind].get(name)

    def require(self, kind: str, name: str) -> str:
        found = self.get(kind, name)
        if found is None:
            known = ", ".join(sorted(self._load()[kind])) or "none"
            plural = "branches" if kind == BRANCH else f"{kind}s"
            raise RefNotFoundError(f"No {kind} named {name!r} (the {plural}: {known}).")
        return found

    @property
    def current_branch(self) -> str | None:
        """The stored current branch (which may no longer point at the current version)."""
        self._load()
        return self._current

    def naming(self, versions: set[str]) -> list[str]:
        """``"branch NAME"`` / ``"tag NAME"`` for every ref pointing into ``versions``."""
        found = []
        for kind, refs in self._load().items():
            found += [f"{kind} {n!r} -> {v!r}" for n, v in sorted(refs.items()) if v in versions]
        return found

    def naming_versions(self, versions: set[str]) -> set[str]:
        """The versions of ``versions`` that some branch or tag points at."""
        return {v for refs in self._load().values() for v in refs.values() if v in versions}

    # -- writing ------------------------------------------------------------------

    def check_new_name(self, kind: str, name: object, is_version: Callable[[str], bool]) -> str:
        """``name`` if it can name a new branch or tag; else a specific error."""
        name = check_ref_format(kind, name)
        refs = self._load()
        if name in refs[kind]:
            error = TagImmutableError if kind == TAG else RefExistsError
            raise error(
                f"A {kind} named {name!r} already exists (-> {refs[kind][name]!r})"
                + ("; tags never move: delete it first." if kind == TAG else ".")
            )
        other = TAG if kind == BRANCH else BRANCH
        if name in refs[other]:
            raise InvalidRefNameError(
                f"{name!r} is already a {other}; a {kind} of the same name would be ambiguous."
            )
        if is_version(name):
            raise InvalidRefNameError(
                f"{name!r} is the name of a version; a {kind} of the same name would be ambiguous."
            )
        return name

    def set(self, kind: str, name: str, version: str) -> None:
        refs = self._load()
        ref = (kind, name)
        refattrs.write_ref(
            self._group,
            kind,
            name,
            version,
            written=ref in self._written,
            new=name not in refs[kind],
        )
        self._written.add(ref)
        refs[kind][name] = version

    def delete(self, kind: str, name: str) -> None:
        self.require(kind, name)
        if kind == BRANCH and name == self.current_branch:
            raise RefInUseError(
                f"Cannot delete branch {name!r}: it is the current branch. Switch to another "
                f"branch first."
            )
        refattrs.delete_ref(self._group, kind, name)
        self._written.discard((kind, name))
        del self._load()[kind][name]

    def set_current_branch(self, name: str | None) -> None:
        self._load()
        refattrs.set_current_branch(self._group, name)
        self._current = name

    def repoint(self, moved: dict[str, str | None]) -> None:
        """After versions were deleted: move branches to ``moved[old]`` (a surviving
        ancestor) and drop tags of deleted versions (and branches with no survivor)."""
        for kind, refs in self._load().items():
            for name, version in list(refs.items()):
                if version not in moved:
                    continue
                target = moved[version]
                if kind == BRANCH and target is not None:
                    self.set(kind, name, target)
                else:
                    refattrs.delete_ref(self._group, kind, name)
                    self._written.discard((kind, name))
                    del refs[name]
                    if name == self._current and kind == BRANCH:
                        self.set_current_branch(None)
