"""The staging engine: a version's changes held in memory until commit.

:class:`StagedChangesArray` is pure numpy over an array protocol: its base slabs
may be any numpy-like array, such as an ``h5py.Dataset``, yet this package never
imports h5py.

Each name is imported from its module on first use (PEP 562): a committed read,
which needs only :mod:`h5vc.staging.transfer`, loads neither the plans nor the
indexing (nor ndindex).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from h5vc.lazy import lazy_names

if TYPE_CHECKING:
    from h5vc.staging.array import StagedChangesArray as StagedChangesArray
    from h5vc.staging.plans import ChangesPlan as ChangesPlan
    from h5vc.staging.plans import GetItemPlan as GetItemPlan
    from h5vc.staging.plans import LoadPlan as LoadPlan
    from h5vc.staging.plans import ResizePlan as ResizePlan
    from h5vc.staging.plans import SetItemPlan as SetItemPlan
    from h5vc.staging.transfer import TransferPlan as TransferPlan

#: The public names, each with the module that defines it.
_NAMES: dict[str, str] = {
    "StagedChangesArray": "h5vc.staging.array",
    "ChangesPlan": "h5vc.staging.plans",
    "GetItemPlan": "h5vc.staging.plans",
    "LoadPlan": "h5vc.staging.plans",
    "ResizePlan": "h5vc.staging.plans",
    "SetItemPlan": "h5vc.staging.plans",
    "TransferPlan": "h5vc.staging.transfer",
}

__all__ = sorted(_NAMES)


__getattr__, __dir__ = lazy_names(__name__, _NAMES)
