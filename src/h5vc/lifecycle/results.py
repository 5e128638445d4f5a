"""What a merge, cherry-pick or revert did: plain data, importable without the merge
machinery (a fast-forward needs nothing else).

Written out rather than made by :func:`dataclasses.dataclass`, whose code generation
costs about a millisecond when this module loads, which is the whole of a
fast-forward's own work."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from h5vc.lifecycle.conflicts import Conflict

__all__ = ["MergeResult"]


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
