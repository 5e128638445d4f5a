"""Creating and deleting the HDF5 objects of the versioned layout.

The layers above (:mod:`h5vc.versions`, :mod:`h5vc.lifecycle`) never call
``create_group``, ``create_dataset`` or ``del`` on the layout's groups themselves: they
call these functions, so what the layout holds, and how it is built and taken apart,
is decided here (with :mod:`h5vc.store.tree`, :mod:`~h5vc.store.vds` and
:class:`~h5vc.store.rawdata.RawDataStore`).
"""

from __future__ import annotations

import h5py

from h5vc.store import layout
from h5vc.store.groups import new_group, require_groups
from h5vc.store.tree import remove_empty_parents

__all__ = [
    "create_subgroup",
    "create_version_group",
    "delete_version_group",
    "first_missing_group",
    "remove_created_store",
    "remove_group",
    "remove_new_store_tree",
    "scratch_group",
]


def create_version_group(versions: h5py.Group, name: str) -> h5py.Group:
    """A new, empty version group ``name`` under ``versions`` (not committed yet:
    :func:`~h5vc.store.tree.mark_committed` marks it)."""
    return new_group(versions, name)


def delete_version_group(versions: h5py.Group, name: str) -> None:
    """Unlink version group ``name``; the objects only it linked are freed."""
    del versions[name]


def create_subgroup(group: h5py.Group, name: str) -> h5py.Group:
    """A new, empty group ``group[name]`` of a version being written."""
    return new_group(group, name)


def remove_group(parent: h5py.Group, name: str) -> None:
    """Unlink ``parent[name]`` if it exists."""
    if name in parent:
        del parent[name]


def scratch_group(version_data: h5py.Group, name: str) -> h5py.Group:
    """The scratch group ``name`` under ``version_data`` (created if missing), where an
    operation builds objects before they replace the committed ones; remove it with
    :func:`remove_group`."""
    return require_groups(version_data, name)


def first_missing_group(version_data: h5py.Group, key: str) -> str:
    """The topmost group of store key ``key`` that does not exist yet ("" if every
    group exists): what creating the store adds, and what taking it back removes."""
    parts = key.split("/")
    for i in range(1, len(parts) + 1):
        if "/".join(parts[:i]) not in version_data:
            return "/".join(parts[:i])
    return ""


def remove_created_store(version_data: h5py.Group, key: str, created: str) -> None:
    """Take back the creation of the chunk store ``key``: remove the group ``created``
    (:func:`first_missing_group` before the store was made), or when it is "" the
    store's own ``raw_data`` and ``hash_table``."""
    if created:
        remove_group(version_data, created)
        return
    group = version_data[key]
    for name in (layout.RAW_DATA, layout.HASH_TABLE):
        remove_group(group, name)


def remove_new_store_tree(version_data: h5py.Group, key: str, created: str) -> None:
    """Remove the chunk store ``key`` created since the last commit and not committed
    after all, with the groups up to ``created`` it leaves empty (as
    :func:`remove_created_store` when ``created`` is "")."""
    if not created:
        remove_created_store(version_data, key, created)
        return
    del version_data[key]
    remove_empty_parents(version_data, key, stop=created)
