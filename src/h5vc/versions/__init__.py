"""The version DAG: timestamps, the log of committed versions, the shared state of
an open versioned root, and the commit writer (one module each)."""

from h5vc.store import dataset_chunks, object_address
from h5vc.versions.cache import LRUCache
from h5vc.versions.chunkmaps import CACHED_CHUNK_MAPS
from h5vc.versions.commit import (
    DatasetCommit,
    GroupCommit,
    Link,
    check_new_version_name,
    check_timestamp_order,
    commit_timestamp,
    commit_version,
    staged_chunk_map,
)
from h5vc.versions.log import VersionInfo, VersionLog, log_entry
from h5vc.versions.state import FileState, resolve_state
from h5vc.versions.timestamps import format_timestamp, parse_timestamp

__all__ = [
    "CACHED_CHUNK_MAPS",
    "DatasetCommit",
    "FileState",
    "GroupCommit",
    "LRUCache",
    "Link",
    "VersionInfo",
    "VersionLog",
    "check_new_version_name",
    "check_timestamp_order",
    "commit_timestamp",
    "commit_version",
    "dataset_chunks",
    "format_timestamp",
    "log_entry",
    "object_address",
    "parse_timestamp",
    "resolve_state",
    "staged_chunk_map",
]
