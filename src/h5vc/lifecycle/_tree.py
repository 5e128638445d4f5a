"""Names the lifecycle operations share (the tree code itself lives in ``h5vc.store.tree``)."""

from __future__ import annotations

from h5vc.errors import DatasetNotFoundError
from h5vc.store import object_address as address

__all__ = ["DatasetNotFoundError", "address"]
