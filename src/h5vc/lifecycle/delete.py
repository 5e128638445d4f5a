"""Deleting versions and releasing the chunks only they referenced.

Design
------
``delete_versions`` validates every name first, then

1. re-points each surviving version whose parent is deleted to its nearest
   surviving ancestor (``__first_version__`` if none) and moves
   ``current_version`` the same way;
2. unlinks the deleted version groups;
3. *compacts* every dataset store (:func:`h5vc.store.compact.compact_store`): the
   slots still referenced by a surviving version are copied down, in order, over
   the released ones; ``raw_data`` is shrunk, ``hash_table`` keeps exactly the
   surviving rows and ``largest_index`` is written last.  Each surviving virtual
   dataset that points past the first released slot is rebuilt once with its
   slots renumbered and relinked at every place that named it.

Compaction was chosen over a free-slot list because it keeps the on-disk format
unchanged (versioned-hdf5 writes the same compact tables, so compat files stay
readable by it), the hash index can never name a released slot, and a later
commit appends right after the survivors, into the space the released chunks
occupied.  HDF5 deallocates the shrunk chunks of ``raw_data``, so their stale
bytes are unreachable through any version; :func:`~h5vc.lifecycle.repack`
returns the space to the file system.

Memory stays bounded: slots are moved in windows of at most
``COPY_BUDGET_BYTES`` of raw data, and only chunk maps (one integer per chunk)
of one dataset path are held at a time, never a version's data.

A dataset that no surviving version contains loses its ``raw_data`` and
``hash_table`` (and their group once empty).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from h5vc.errors import InvalidVersionNameError, VersionNotFoundError
from h5vc.store import layout, timeindex, tree
from h5vc.store.compact import COPY_BUDGET_BYTES, compact_store, move_slots
from h5vc.versions import FileState, resolve_state

__all__ = ["COPY_BUDGET_BYTES", "delete_version", "delete_versions", "move_slots"]


def delete_version(f: Any, version: str) -> None:
    """Delete one version; see :func:`delete_versions`."""
    delete_versions(f, [version])


def delete_versions(f: Any, versions: str | Iterable[str]) -> None:
    """Delete ``versions`` (a name or names) from the versioned file ``f``.

    ``f`` is a :class:`~h5vc.VersionedHDF5File` or the h5py file/group holding
    the versioned data.  Surviving versions whose parent is deleted point to
    their nearest surviving ancestor; ``current_version`` moves the same way if
    it is deleted.  Chunks that no surviving version references are released
    and their slots reused by later commits.  Deleting every version leaves an
    empty versioned file.

    Raises :class:`~h5vc.errors.VersionNotFoundError` for an unknown name and
    :class:`~h5vc.errors.InvalidVersionNameError` (a ``ValueError``) for
    ``__first_version__``; nothing changes in either case.
    """
    state = resolve_state(f)
    state.check_writable("delete versions")
    doomed = _parse_names(state, versions)
    if not doomed:
        return
    survivors = [name for name in state.log.names() if name not in doomed]
    with state.operation():  # a failure in a file from h5vc.open: all rolled back
        state.upgrade_layout()
        try:
            _repoint(state, doomed, survivors)
            for name in doomed:
                del state.versions[name]
            timeindex.remove_entries(state.version_data, doomed)
            _release_chunks(state, survivors)
        finally:
            state.forget()  # chunks moved: cached hash indexes and chunk maps are stale


def _parse_names(state: FileState, versions: str | Iterable[str]) -> set[str]:
    names = [versions] if isinstance(versions, str) else list(versions)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"Expected version names as str. Got {name!r} instead.")
        if name == layout.FIRST_VERSION:
            raise InvalidVersionNameError(
                f"Cannot delete {layout.FIRST_VERSION!r}: it is the empty root of every "
                f"versioned file. Expected names of committed versions."
            )
        if name not in state.log:
            raise VersionNotFoundError(
                f"Cannot delete version {name!r}: expected a committed version. Got a "
                f"name that is not in {state.root.file.filename!r}."
            )
    return set(names)


def _nearest_survivor(state: FileState, name: str | None, doomed: set[str]) -> str:
    while name is not None and name in doomed:
        name = state.log.info(name).prev_version
    return layout.FIRST_VERSION if name is None else name


def _repoint(state: FileState, doomed: set[str], survivors: list[str]) -> None:
    for name in survivors:
        prev = state.log.info(name).prev_version
        if prev in doomed:
            new_prev = _nearest_survivor(state, prev, doomed)
            tree.set_prev_version(state.versions[name], new_prev)
    current = state.current_version
    if current in doomed:
        new_current = _nearest_survivor(state, current, doomed)
        tree.set_current_version(state.versions, new_current)


def _release_chunks(state: FileState, survivors: list[str]) -> None:
    datasets = tree.collect_datasets(state.versions, survivors)
    # Deepest paths first, so that a store group emptied here can be removed.
    for path in sorted(tree.store_paths(state.version_data), key=lambda p: -p.count("/")):
        objects = datasets.get(path)
        store = state.store(path)
        if objects and store is not None:
            compact_store(store, list(objects.values()), merge=state.h5vc_layout)
        else:
            tree.drop_store(state.version_data, path)
