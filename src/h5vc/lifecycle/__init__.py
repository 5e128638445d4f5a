"""Version lifecycle: delete, repack, rewrite metadata, diff and history.

The functions take a :class:`~h5vc.VersionedHDF5File` or the h5py file/group
that holds the versioned data, like versioned-hdf5's module-level functions.

Each name is imported from its module on first use: opening a file and reading a
version loads none of them.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from h5vc.lazy import lazy_names

if TYPE_CHECKING:
    from h5vc.lifecycle._tree import DatasetNotFoundError as DatasetNotFoundError
    from h5vc.lifecycle.conflicts import Conflict
    from h5vc.lifecycle.delete import delete_version as delete_version
    from h5vc.lifecycle.delete import delete_versions as delete_versions
    from h5vc.lifecycle.diff import DatasetChange as DatasetChange
    from h5vc.lifecycle.diff import VersionDiff as VersionDiff
    from h5vc.lifecycle.diff import diff as diff
    from h5vc.lifecycle.diff import get_diff as get_diff
    from h5vc.lifecycle.history import format_log as format_log
    from h5vc.lifecycle.history import log as log
    from h5vc.lifecycle.metadata import modify_metadata as modify_metadata
    from h5vc.lifecycle.repack import repack as repack
    from h5vc.lifecycle.stats import stats as stats
    from h5vc.lifecycle.verify import Problem as Problem
    from h5vc.lifecycle.verify import VerifyReport as VerifyReport
    from h5vc.lifecycle.verify import verify as verify

#: The public names, each with the module that defines it.
_PUBLIC: dict[str, str] = {
    "DatasetNotFoundError": "h5vc.lifecycle._tree",
    "delete_version": "h5vc.lifecycle.delete",
    "delete_versions": "h5vc.lifecycle.delete",
    "DatasetChange": "h5vc.lifecycle.diff",
    "VersionDiff": "h5vc.lifecycle.diff",
    "diff": "h5vc.lifecycle.diff",
    "get_diff": "h5vc.lifecycle.diff",
    "format_log": "h5vc.lifecycle.history",
    "log": "h5vc.lifecycle.history",
    "modify_metadata": "h5vc.lifecycle.metadata",
    "repack": "h5vc.lifecycle.repack",
    "stats": "h5vc.lifecycle.stats",
    "Problem": "h5vc.lifecycle.verify",
    "VerifyReport": "h5vc.lifecycle.verify",
    "verify": "h5vc.lifecycle.verify",
}

__all__ = sorted(_PUBLIC)


__getattr__, __dir__ = lazy_names(__name__, _PUBLIC)


# What a merge, cherry-pick or revert did (h5vc.lifecycle.results names it): defined
# here, with the package every file loads, so that a fast-forward, which only moves
# refs, imports no module (a module's import costs 0.1-0.4 ms, as much as the rest of
# a fast-forward). Written out rather than made by dataclasses.dataclass, whose code
# generation costs about a millisecond.


class MergeResult:
    """What a merge did: ``kind`` is ``"merge"`` (a new version), ``"fast-forward"``,
    or for :mod:`h5vc.lifecycle.cherry` ``"cherry-pick"`` / ``"revert"`` (a new version
    on ``ours`` alone; ``base`` and ``theirs`` are the two ends of the change applied).

    ``conflicts`` are the conflicts that were resolved by ``on_conflict`` ("ours",
    "theirs" or a callable); ``chunks_taken`` counts chunks taken from theirs without
    reading data and ``chunks_merged`` chunks merged element by element. Results
    compare equal when every field is equal."""

    __slots__ = (
        "base",
        "chunks_merged",
        "chunks_taken",
        "conflicts",
        "kind",
        "ours",
        "theirs",
        "version",
    )
    _FIELDS = (
        "kind",
        "version",
        "base",
        "ours",
        "theirs",
        "conflicts",
        "chunks_taken",
        "chunks_merged",
    )

    def __init__(
        self,
        kind: str,
        version: str,
        base: str | None,
        ours: str,
        theirs: str,
        conflicts: list[Conflict] | None = None,
        chunks_taken: int = 0,
        chunks_merged: int = 0,
    ) -> None:
        self.kind = kind
        self.version = version
        self.base = base
        self.ours = ours
        self.theirs = theirs
        self.conflicts: list[Conflict] = [] if conflicts is None else conflicts
        self.chunks_taken = chunks_taken
        self.chunks_merged = chunks_merged

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._FIELDS)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, MergeResult)
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in zip(self._FIELDS, self._values()))
        return f"MergeResult({fields})"


class _Package(types.ModuleType):
    """The package, whose functions ``diff``, ``repack``, ``stats`` and ``verify`` share
    their names with their modules: importing such a module sets the package's
    attribute of that name to the module, so the function is set instead."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _PUBLIC.get(name) == value.__name__:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
