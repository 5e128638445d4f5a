"""Version lifecycle: delete, repack, rewrite metadata, diff and history.

The functions take a :class:`~h5vc.VersionedHDF5File` or the h5py file/group
that holds the versioned data, like versioned-hdf5's module-level functions.

Each name is imported from its module on first use: opening a file and reading a
version loads none of them.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from h5vc.lazy import lazy_names

if TYPE_CHECKING:
    from h5vc.lifecycle._tree import DatasetNotFoundError as DatasetNotFoundError
    from h5vc.lifecycle.delete import delete_version as delete_version
    from h5vc.lifecycle.delete import delete_versions as delete_versions
    from h5vc.lifecycle.diff import DatasetChange as DatasetChange
    from h5vc.lifecycle.diff import VersionDiff as VersionDiff
    from h5vc.lifecycle.diff import diff as diff
    from h5vc.lifecycle.diff import get_diff as get_diff
    from h5vc.lifecycle.history import format_log as format_log
    from h5vc.lifecycle.history import log as log
    from h5vc.lifecycle.metadata import modify_metadata as modify_metadata
    from h5vc.lifecycle.repack import repack as repack
    from h5vc.lifecycle.stats import stats as stats
    from h5vc.lifecycle.verify import Problem as Problem
    from h5vc.lifecycle.verify import VerifyReport as VerifyReport
    from h5vc.lifecycle.verify import verify as verify

#: The public names, each with the module that defines it.
_PUBLIC: dict[str, str] = {
    "DatasetNotFoundError": "h5vc.lifecycle._tree",
    "delete_version": "h5vc.lifecycle.delete",
    "delete_versions": "h5vc.lifecycle.delete",
    "DatasetChange": "h5vc.lifecycle.diff",
    "VersionDiff": "h5vc.lifecycle.diff",
    "diff": "h5vc.lifecycle.diff",
    "get_diff": "h5vc.lifecycle.diff",
    "format_log": "h5vc.lifecycle.history",
    "log": "h5vc.lifecycle.history",
    "modify_metadata": "h5vc.lifecycle.metadata",
    "repack": "h5vc.lifecycle.repack",
    "stats": "h5vc.lifecycle.stats",
    "Problem": "h5vc.lifecycle.verify",
    "VerifyReport": "h5vc.lifecycle.verify",
    "verify": "h5vc.lifecycle.verify",
}

__all__ = sorted(_PUBLIC)


__getattr__, __dir__ = lazy_names(__name__, _PUBLIC)


class _Package(types.ModuleType):
    """The package, whose functions ``diff``, ``repack``, ``stats`` and ``verify`` share
    their names with their modules: importing such a module sets the package's
    attribute of that name to the module, so the function is set instead."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _PUBLIC.get(name) == value.__name__:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
