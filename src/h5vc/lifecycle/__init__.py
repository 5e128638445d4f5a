"""Version lifecycle: delete, repack, rewrite metadata, diff and history.

The functions take a :class:`~h5vc.VersionedHDF5File` or the h5py file/group
that holds the versioned data, like versioned-hdf5's module-level functions.
"""

from h5vc.lifecycle._tree import DatasetNotFoundError
from h5vc.lifecycle.delete import delete_version, delete_versions
from h5vc.lifecycle.diff import DatasetChange, VersionDiff, diff, get_diff
from h5vc.lifecycle.history import format_log, log
from h5vc.lifecycle.metadata import modify_metadata
from h5vc.lifecycle.repack import repack
from h5vc.lifecycle.stats import stats
from h5vc.lifecycle.verify import Problem, VerifyReport, verify

__all__ = [
    "DatasetChange",
    "DatasetNotFoundError",
    "Problem",
    "VerifyReport",
    "VersionDiff",
    "delete_version",
    "delete_versions",
    "diff",
    "format_log",
    "get_diff",
    "log",
    "modify_metadata",
    "repack",
    "stats",
    "verify",
]
