"""Version lifecycle: delete, repack, rewrite metadata, diff and history.

The functions take a :class:`~h5vc.VersionedHDF5File` or the h5py file/group
that holds the versioned data, like versioned-hdf5's module-level functions.
"""

from h5vc.lifecycle._tree import DatasetNotFoundError
from h5vc.lifecycle.delete import delete_version, delete_versions
from h5vc.lifecycle.metadata import modify_metadata

__all__ = [
    "DatasetNotFoundError",
    "delete_version",
    "delete_versions",
    "modify_metadata",
]
