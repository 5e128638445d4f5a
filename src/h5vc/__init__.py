"""h5vc: version control for array data in HDF5.

One HDF5 file holds every version of a tree of groups and datasets.  Versions are
staged like h5py groups and committed; unchanged chunks are shared between
versions, deduplicated by SHA-256; every committed version is a real HDF5 group of
virtual datasets that any HDF5 tool reads.
"""

from h5vc.api import VersionedHDF5File, open
from h5vc.errors import (
    AncestorNotFoundError,
    CorruptDataError,
    DatasetNotFoundError,
    H5vcError,
    InvalidOptionError,
    InvalidTimestampError,
    MetadataMismatchError,
    NotVersionedError,
    ReadOnlyError,
    UnsupportedFormatError,
    VersionExistsError,
    VersionNotFoundError,
)
from h5vc.lifecycle import (
    delete_version,
    delete_versions,
    diff,
    get_diff,
    log,
    modify_metadata,
    repack,
)

__version__ = "0.1.0"

__all__ = [
    "AncestorNotFoundError",
    "CorruptDataError",
    "DatasetNotFoundError",
    "H5vcError",
    "InvalidOptionError",
    "InvalidTimestampError",
    "MetadataMismatchError",
    "NotVersionedError",
    "ReadOnlyError",
    "UnsupportedFormatError",
    "VersionExistsError",
    "VersionNotFoundError",
    "VersionedHDF5File",
    "__version__",
    "delete_version",
    "delete_versions",
    "diff",
    "get_diff",
    "log",
    "modify_metadata",
    "open",
    "repack",
]
