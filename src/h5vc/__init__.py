"""h5vc: version control for array data in HDF5.

One HDF5 file holds every version of a tree of groups and datasets.  Versions are
staged like h5py groups and committed; unchanged chunks are shared between
versions, deduplicated by SHA-256; every committed version is a real HDF5 group of
virtual datasets that any HDF5 tool reads.

The public names are imported on first use, so that ``import h5vc.staging`` (pure
numpy) does not load h5py; only the error types (a module of its own, importing
nothing) and the tunables (:mod:`h5vc.config`, whose ``H5VC_*`` environment
variables are checked here, at import) are there from the start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from h5vc import errors
from h5vc.config import tunables as _tunables  # noqa: F401  (H5VC_* checked on import)
from h5vc.errors import *  # noqa: F403  (every error and warning type is public)

if TYPE_CHECKING:  # what type checkers see of the names _PUBLIC imports on first use
    from h5vc.api import VersionedHDF5File as VersionedHDF5File
    from h5vc.api import open as open
    from h5vc.lifecycle import delete_version as delete_version
    from h5vc.lifecycle import delete_versions as delete_versions
    from h5vc.lifecycle import get_diff as get_diff
    from h5vc.lifecycle import log as log
    from h5vc.lifecycle import modify_metadata as modify_metadata
    from h5vc.lifecycle.diff import diff as diff
    from h5vc.lifecycle.repack import repack as repack
    from h5vc.lifecycle.stats import stats as stats
    from h5vc.lifecycle.verify import verify as verify
    from h5vc.readers import Reader as Reader

#: The public names, each with the module that defines it.  ``h5vc.<name>``,
#: ``__all__`` and ``dir(h5vc)`` are all made from this table; every error and
#: warning type of :mod:`h5vc.errors` is public.
_PUBLIC: dict[str, str] = {
    "VersionedHDF5File": "h5vc.api",
    "open": "h5vc.api",
    "Reader": "h5vc.readers",
    **dict.fromkeys(
        (
            "delete_version",
            "delete_versions",
            "get_diff",
            "log",
            "modify_metadata",
        ),
        "h5vc.lifecycle",
    ),
    # Functions named as their modules: from those modules, which type checkers
    # otherwise confuse with the functions.
    **{name: f"h5vc.lifecycle.{name}" for name in ("diff", "repack", "stats", "verify")},
    **dict.fromkeys(errors.__all__, "h5vc.errors"),
}
#: Submodules that ``h5vc.<name>`` imports on first use (not in ``__all__``).
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
    module = _PUBLIC.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
    elif name == "__version__":
        value = _version()
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"h5vc.{name}")
    else:
        raise AttributeError(f"module 'h5vc' has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = [*_PUBLIC, "__version__"]  # noqa: F405  (__version__ comes from __getattr__)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_SUBPACKAGES})
