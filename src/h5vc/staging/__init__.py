"""The staging engine: a version's changes held in memory until commit.

:class:`StagedChangesArray` is pure numpy over an array protocol: its base slabs
may be any numpy-like array, such as an ``h5py.Dataset``, yet this package never
imports h5py.
"""

from h5vc.staging.array import StagedChangesArray
from h5vc.staging.plans import ChangesPlan, GetItemPlan, LoadPlan, ResizePlan, SetItemPlan
from h5vc.staging.transfer import TransferPlan

__all__ = [
    "ChangesPlan",
    "GetItemPlan",
    "LoadPlan",
    "ResizePlan",
    "SetItemPlan",
    "StagedChangesArray",
    "TransferPlan",
]
