"""The version DAG: timestamps, the log of committed versions, the shared state of
an open versioned root, and the commit writer (one module each).

Each name is imported from its module on first use (PEP 562): reading a version
never loads the commit writer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from h5vc.lazy import lazy_names

if TYPE_CHECKING:
    from h5vc.store import dataset_chunks as dataset_chunks
    from h5vc.store import object_address as object_address
    from h5vc.versions.cache import LRUCache as LRUCache
    from h5vc.versions.chunkmaps import CACHED_CHUNK_MAPS as CACHED_CHUNK_MAPS
    from h5vc.versions.commit import DatasetCommit as DatasetCommit
    from h5vc.versions.commit import GroupCommit as GroupCommit
    from h5vc.versions.commit import Link as Link
    from h5vc.versions.commit import check_new_version_name as check_new_version_name
    from h5vc.versions.commit import check_timestamp_order as check_timestamp_order
    from h5vc.versions.commit import commit_timestamp as commit_timestamp
    from h5vc.versions.commit import commit_version as commit_version
    from h5vc.versions.commit import staged_chunk_map as staged_chunk_map
    from h5vc.versions.log import VersionInfo as VersionInfo
    from h5vc.versions.log import VersionLog as VersionLog
    from h5vc.versions.log import log_entry as log_entry
    from h5vc.versions.state import FileState as FileState
    from h5vc.versions.state import resolve_state as resolve_state
    from h5vc.versions.timestamps import format_timestamp as format_timestamp
    from h5vc.versions.timestamps import parse_timestamp as parse_timestamp

#: The public names, each with the module that defines it.
_NAMES: dict[str, str] = {
    "dataset_chunks": "h5vc.store",
    "object_address": "h5vc.store",
    "LRUCache": "h5vc.versions.cache",
    "CACHED_CHUNK_MAPS": "h5vc.versions.chunkmaps",
    "DatasetCommit": "h5vc.versions.commit",
    "GroupCommit": "h5vc.versions.commit",
    "Link": "h5vc.versions.commit",
    "check_new_version_name": "h5vc.versions.commit",
    "check_timestamp_order": "h5vc.versions.commit",
    "commit_timestamp": "h5vc.versions.commit",
    "commit_version": "h5vc.versions.commit",
    "staged_chunk_map": "h5vc.versions.commit",
    "VersionInfo": "h5vc.versions.log",
    "VersionLog": "h5vc.versions.log",
    "log_entry": "h5vc.versions.log",
    "FileState": "h5vc.versions.state",
    "resolve_state": "h5vc.versions.state",
    "format_timestamp": "h5vc.versions.timestamps",
    "parse_timestamp": "h5vc.versions.timestamps",
}

__all__ = sorted(_NAMES)


__getattr__, __dir__ = lazy_names(__name__, _NAMES)
