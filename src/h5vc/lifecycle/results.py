"""What a merge, cherry-pick or revert did: plain data, importable without the merge
machinery (a fast-forward needs nothing else)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Conflict", "MergeResult"]


@dataclass(frozen=True)
class Conflict:
    """One thing both sides changed differently.

    ``kind`` is ``"data"`` (elements of a dataset; a dataset added on both sides is
    merged over an all-fill base), ``"shape"`` (resized differently on both sides),
    ``"attribute"``, ``"deleted"`` (one side deleted what the other changed) or
    ``"type"`` (a group on one side, a dataset on the other, or datasets of
    different stores: one side created it again with another dtype or chunks;
    columns of different sample shapes, dtypes or compression) or ``"key"`` (a key of
    a sample column, named by ``key``, given different samples or removed on one side
    and changed on the other).  For ``"data"``: ``region`` is the chunk-aligned region
    (clipped to the merged shape) and ``elements`` the number of conflicting elements
    in it; for ``"attribute"``, ``attr`` names the attribute.
    """

    path: str
    kind: str
    region: tuple[slice, ...] | None = None
    elements: int = 0
    attr: str | None = None
    key: Any = None

    def describe(self) -> str:
        where = "/" + self.path
        if self.kind == "key":
            return f"{where} key {self.key!r}: changed differently on both sides"
        if self.kind == "data" and self.region is not None:
            span = ", ".join(f"{s.start}:{s.stop}" for s in self.region)
            return f"{where}[{span}]: {self.elements} element(s) changed differently on both sides"
        if self.kind == "attribute":
            return f"{where} attribute {self.attr!r}: changed differently on both sides"
        return f"{where}: {self.kind} conflict"


@dataclass
class MergeResult:
    """What a merge did: ``kind`` is ``"merge"`` (a new version), ``"fast-forward"``,
    or for :mod:`h5vc.lifecycle.cherry` ``"cherry-pick"`` / ``"revert"`` (a new version
    on ``ours`` alone; ``base`` and ``theirs`` are the two ends of the change applied)."""

    kind: str
    version: str
    base: str | None
    ours: str
    theirs: str
    #: Conflicts that were resolved by ``on_conflict`` ("ours", "theirs" or a callable).
    conflicts: list[Conflict] = field(default_factory=list)
    #: Chunks taken from theirs without reading data, and chunks merged element-wise.
    chunks_taken: int = 0
    chunks_merged: int = 0
