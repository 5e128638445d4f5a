"""One conflict of a merge, cherry-pick or revert: plain data (a fast-forward, which
has none, does not import it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Conflict"]


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
