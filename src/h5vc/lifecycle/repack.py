"""Writing a compact copy of a versioned file.

HDF5 keeps the space of freed objects and chunks inside the file, so a file
does not shrink after :func:`~h5vc.lifecycle.delete_versions`.  ``repack``
copies every top-level object into a new file with HDF5's object copy, which
streams chunk by chunk, writes only allocated chunks and keeps hard links
inside each copied tree: every version keeps its name, parent, timestamp,
attributes and data, the versions group keeps ``current_version`` and
``data_version``, and objects shared between versions stay shared.
"""

from __future__ import annotations

import os

import h5py

from h5vc.durable.files import recover_abandoned
from h5vc.errors import NotVersionedError
from h5vc.store import layout
from h5vc.store.space import FILE_SPACE_OPTIONS
from h5vc.store.tree import copy_attrs

__all__ = ["repack"]


def repack(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Write a compact copy of the versioned file ``src`` to the new file ``dst``.

    ``dst`` must not exist.  Raises :class:`~h5vc.errors.NotVersionedError` if
    ``src`` has no versioned data at its root.
    """
    if os.path.exists(dst):
        raise FileExistsError(
            f"Expected a path where a new file can be written. Got {os.fspath(dst)!r}, "
            f"which already exists."
        )
    recover_abandoned(os.fspath(src))  # a crashed writer's journal is rolled back first
    with h5py.File(src, "r") as source:
        if layout.VERSION_DATA not in source:
            raise NotVersionedError(
                f"Expected a versioned file with a {layout.VERSION_DATA!r} group at its "
                f"root. Got {os.fspath(src)!r}, which has none."
            )
        try:
            with h5py.File(dst, "w-", **FILE_SPACE_OPTIONS) as target:
                copy_attrs(source.attrs, target.attrs)
                for name in source:
                    source.copy(source[name], target, name=name)
        except BaseException:
            if os.path.exists(dst):
                os.remove(dst)
            raise
