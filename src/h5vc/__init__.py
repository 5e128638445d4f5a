"""h5vc: version control for array data in HDF5.

One HDF5 file holds every version of a tree of groups and datasets.  Versions are
staged like h5py groups and committed; unchanged chunks are shared between
versions, deduplicated by SHA-256; every committed version is a real HDF5 group of
virtual datasets that any HDF5 tool reads.

The public names are imported on first use, so that ``import h5vc.staging`` (pure
numpy) does not load h5py.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from h5vc.errors import (
    AmbiguousRefError,
    AncestorNotFoundError,
    ArrayMismatchError,
    BisectError,
    CorruptDataError,
    DatasetNotFoundError,
    EmptyChangeError,
    H5vcError,
    InvalidOptionError,
    InvalidRefNameError,
    InvalidTimestampError,
    MergeConflictError,
    MergeError,
    MergeParentError,
    MetadataMismatchError,
    MissingDependencyError,
    NothingToMergeError,
    NotLinearHistoryError,
    NotVersionedError,
    ReadOnlyError,
    RefExistsError,
    RefInUseError,
    RefNotFoundError,
    TagImmutableError,
    TimestampOrderError,
    UnrelatedHistoriesError,
    UnsupportedDtypeError,
    UnsupportedFormatError,
    VersionExistsError,
    VersionNotFoundError,
    WriterActiveError,
)

if TYPE_CHECKING:
    from h5vc.api import VersionedHDF5File, open
    from h5vc.lifecycle import (
        delete_version,
        delete_versions,
        diff,
        get_diff,
        log,
        modify_metadata,
        repack,
        stats,
        verify,
    )
    from h5vc.readers import Reader

#: Public name -> the module that defines it.
_LAZY = {
    "VersionedHDF5File": "h5vc.api",
    "open": "h5vc.api",
    "Reader": "h5vc.readers",
    **{
        name: "h5vc.lifecycle"
        for name in (
            "delete_version",
            "delete_versions",
            "diff",
            "get_diff",
            "log",
            "modify_metadata",
            "repack",
            "stats",
            "verify",
        )
    },
}
_SUBPACKAGES = frozenset(
    {
        "api",
        "chunking",
        "durable",
        "errors",
        "hashing",
        "lifecycle",
        "readers",
        "samples",
        "staging",
        "store",
        "versions",
        "wrappers",
    }
)


def _version() -> str:
    """The installed version (read on first use: importlib.metadata costs 40-60 ms)."""
    from importlib import metadata

    try:
        return metadata.version("h5vc")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        value: Any = _version()
        globals()[name] = value
        return value
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"h5vc.{name}")
    else:
        raise AttributeError(f"module 'h5vc' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_SUBPACKAGES, "__version__"})


__all__ = [
    "AmbiguousRefError",
    "AncestorNotFoundError",
    "ArrayMismatchError",
    "BisectError",
    "CorruptDataError",
    "DatasetNotFoundError",
    "EmptyChangeError",
    "H5vcError",
    "InvalidOptionError",
    "InvalidRefNameError",
    "InvalidTimestampError",
    "MergeConflictError",
    "MergeError",
    "MergeParentError",
    "TimestampOrderError",
    "UnsupportedDtypeError",
    "MetadataMismatchError",
    "MissingDependencyError",
    "NotLinearHistoryError",
    "NotVersionedError",
    "NothingToMergeError",
    "ReadOnlyError",
    "RefExistsError",
    "RefInUseError",
    "RefNotFoundError",
    "TagImmutableError",
    "UnrelatedHistoriesError",
    "Reader",
    "UnsupportedFormatError",
    "VersionExistsError",
    "VersionNotFoundError",
    "VersionedHDF5File",
    "WriterActiveError",
    "__version__",
    "delete_version",
    "delete_versions",
    "diff",
    "get_diff",
    "log",
    "modify_metadata",
    "open",
    "repack",
    "stats",
    "verify",
]
