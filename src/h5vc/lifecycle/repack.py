"""Writing a compact copy of a versioned file.

HDF5 keeps the space of freed objects and chunks inside the file, so a file
does not shrink after :func:`~h5vc.lifecycle.delete_versions`.  ``repack``
copies every top-level object into a new file with HDF5's object copy, which
streams chunk by chunk, writes only allocated chunks and keeps hard links
inside each copied tree: every version keeps its name, parent, timestamp,
attributes and data, the versions group keeps ``current_version`` and
``data_version``, and objects shared between versions stay shared.  A chunk store
with free slots (chunks released by ``delete_versions``, kept for reuse) has only
its slots in use copied, raw chunk by raw chunk, so the copy holds no byte of them.

The copy is written to ``<dst>.h5vc-repack`` through h5vc's journaled writer (its
writer lock keeps a second ``repack`` to the same target out), synced to the disk,
and only then linked to ``dst``: ``dst`` is either absent or a complete file, also
after a crash or a failed write, and the source is only read.
"""

from __future__ import annotations

import contextlib
import os

import h5py

from h5vc.durable.files import ReadLock, close_file, open_file, recover_abandoned
from h5vc.durable.journal import journal_path
from h5vc.errors import NotVersionedError
from h5vc.store import FILE_SPACE_OPTIONS, copy_compacted, layout, store_paths

__all__ = ["PARTIAL_SUFFIX", "repack"]

#: The copy is written under this name next to ``dst`` until it is complete.
PARTIAL_SUFFIX = ".h5vc-repack"


def repack(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Write a compact copy of the versioned file ``src`` to the new file ``dst``.

    ``dst`` must not exist.  Raises :class:`~h5vc.errors.NotVersionedError` if
    ``src`` has no versioned data at its root.  If the copy fails (or the process is
    killed), ``dst`` does not exist and the call can simply be repeated.
    """
    target = os.fspath(dst)
    if os.path.exists(target):
        raise FileExistsError(
            f"Expected a path where a new file can be written. Got {target!r}, "
            f"which already exists."
        )
    recover_abandoned(os.fspath(src))  # a crashed writer's journal is rolled back first
    # The copy is one read of the source: a writer at work waits until it is done, so
    # it copies one committed state.
    lock = ReadLock(src)
    with contextlib.closing(lock), lock, h5py.File(src, "r") as source:
        if layout.VERSION_DATA not in source:
            raise NotVersionedError(
                f"Expected a versioned file with a {layout.VERSION_DATA!r} group at its "
                f"root. Got {os.fspath(src)!r}, which has none."
            )
        # Copying decodes every object header: the chunk stores' are checked first.
        store_paths(source[layout.VERSION_DATA])
        partial = target + PARTIAL_SUFFIX
        # A copy left by a crashed repack is started afresh (a live one holds the lock).
        copy = open_file(partial, "w", durable=True, **FILE_SPACE_OPTIONS)
        try:
            try:
                copy_compacted(source, copy)
            finally:
                close_file(copy)  # the last commit point: raises if a write failed
            os.link(partial, target)  # never replaces a file that appeared meanwhile
        except BaseException:
            _remove(partial)
            raise
        _remove(partial)


def _remove(path: str) -> None:
    for name in (path, journal_path(path)):
        with contextlib.suppress(FileNotFoundError):
            os.remove(name)
