"""h5py look-alike objects: staged (writable) and committed (read-only) groups and datasets."""

from h5vc.wrappers.dataset import CommittedDataset, StagedDataset
from h5vc.wrappers.group import CommittedGroup, StagedGroup

__all__ = ["CommittedDataset", "CommittedGroup", "StagedDataset", "StagedGroup"]
