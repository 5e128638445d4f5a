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
   the released ones; ``hash_table`` keeps exactly the surviving rows and
   ``largest_index`` is written last.  Each surviving virtual dataset that points
   past the first released slot is rebuilt once with its slots renumbered and
   relinked at every place that named it.

``raw_data`` keeps its extent: the slots past the survivors are *free* and hold the
released chunks (and the old copies of the moved ones) until later commits write
their new chunks there, before raw_data grows (:mod:`h5vc.store.rawdata`).  HDF5
rewrites a chunk at its place in the file, so the released space is reused in every
file, however it was created or opened; HDF5's own record of freed space, which only
files created to persist it keep across a close, is not needed for it.

Compaction (rather than holes listed somewhere) keeps the on-disk format that
versioned-hdf5 writes and reads: its hash table stays sorted and gapless, and
versioned-hdf5 writes new chunks at ``largest_index`` too, over the free slots, so
files of its layout stay readable and writable by it.  No surviving version maps a
free slot, and a free slot has no hash-table row, so the hash index can never name
one; a commit interrupted anywhere leaves the slots it wrote free.
:func:`~h5vc.lifecycle.repack` copies only the slots in use.

Memory stays bounded: slots are moved in windows of at most
``COPY_BUDGET_BYTES`` of raw data, and only chunk maps (one integer per chunk)
of one dataset path are held at a time, never a version's data.

A dataset that no surviving version contains loses its ``raw_data`` and
``hash_table`` (and their group once empty).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from h5vc.errors import (
    InvalidVersionNameError,
    MergeBaseInUseError,
    RefInUseError,
    UnknownVersionToDeleteError,
)
from h5vc.store import (
    COPY_BUDGET_BYTES,
    compact_store,
    delete_version_group,
    erase_slots,
    layout,
    move_slots,
    timeindex,
    tree,
)
from h5vc.versions import FileState, log_entry, resolve_state

__all__ = ["COPY_BUDGET_BYTES", "delete_version", "delete_versions", "move_slots"]

#: The group of the sample columns' stores (``h5vc.columns.storage.SAMPLES_GROUP``):
#: h5vc.columns, whose import takes 0.1-0.2 s, is loaded only for a file that has one.
_SAMPLES_GROUP = "_h5vc_samples"


def delete_version(f: Any, version: str) -> None:
    """Delete one version; see :func:`delete_versions`."""
    delete_versions(f, [version])


def delete_versions(
    f: Any, versions: str | Iterable[str], *, force: bool = False, erase: bool = False
) -> None:
    """Delete ``versions`` (a name or names) from the versioned file ``f``.

    ``f`` is a :class:`~h5vc.VersionedHDF5File` or the h5py file/group holding
    the versioned data.  Surviving versions whose parent is deleted point to
    their nearest surviving ancestor; ``current_version`` moves the same way if
    it is deleted.  Chunks that no surviving version references are released
    and their slots reused by later commits.  Deleting every version leaves an
    empty versioned file.

    A version that is the head of a branch or carries a tag is deleted only with
    ``force=True``: its branches then move to the nearest surviving ancestor (and are
    deleted if there is none), its tags are deleted.

    The released chunks' bytes stay in the file (as free slots of raw_data) until a
    commit reuses them or the file is repacked; with ``erase=True`` every chunk no
    version uses is overwritten with zeros in place first, which costs one write of
    those chunks (zeroed chunks of a store with filters are then given back to HDF5,
    as zero bytes are no valid compressed chunk).

    Raises :class:`~h5vc.errors.UnknownVersionToDeleteError` (a ``KeyError`` and a
    ``ValueError``) for an unknown name,
    :class:`~h5vc.errors.InvalidVersionNameError` (a ``ValueError``) for
    ``__first_version__`` and :class:`~h5vc.errors.RefInUseError` for a version named
    by a ref without ``force``; nothing changes in any of these cases.
    """
    state = resolve_state(f)
    state.check_writable("delete versions")
    doomed = _parse_names(state, versions)
    if not doomed:
        return
    check_refs(state, doomed, force)
    check_merge_bases(state, doomed, force)
    survivors = [name for name in state.log.names() if name not in doomed]
    with state.operation(moves_chunks=True):  # all or nothing; caches are stale after
        parents = _repoint(state, doomed, survivors)
        for name in doomed:
            delete_version_group(state.versions, name)
        timeindex.remove_entries(state.version_data, doomed, _log_entries(state, parents))
        state.root.file.flush()
        _release_chunks(state, survivors, erase=erase)
        if _SAMPLES_GROUP in state.root:  # sample columns: their stores' slots are reused
            from h5vc.columns.history import release_samples

            release_samples(state, survivors)


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
            raise UnknownVersionToDeleteError(
                f"Cannot delete version {name!r}: expected a committed version. Got a "
                f"name that is not in {state.root.file.filename!r}."
            )
    return set(names)


def _nearest_survivor(state: FileState, name: str | None, doomed: set[str]) -> str:
    while name is not None and name in doomed:
        name = state.log.info(name).prev_version
    return layout.FIRST_VERSION if name is None else name


def check_refs(state: FileState, doomed: set[str], force: bool) -> None:
    """Refuse to delete versions that branches or tags name, unless ``force``."""
    named = state.refs.naming(doomed)
    if named and not force:
        raise RefInUseError(
            f"Cannot delete versions named by refs: {'; '.join(named)}. Move or delete "
            f"those refs first, or pass force=True."
        )


def check_merge_bases(state: FileState, doomed: set[str], force: bool) -> None:
    """Refuse to delete the merge base of two branches, unless ``force``: a later merge
    of them would take an older common ancestor as base and report what either side
    changed since then as conflicts."""
    if force:
        return
    heads = sorted(set(state.refs.branches.values()))
    if len(heads) < 2:
        return
    from h5vc.lifecycle.merge import merge_base  # with two branches or more only

    needed: dict[str, list[str]] = {}
    names = {head: [n for n, v in state.refs.branches.items() if v == head] for head in heads}
    for i, a in enumerate(heads):
        for b in heads[i + 1 :]:
            base = merge_base(state, a, b)
            if base in doomed and base not in (a, b):
                needed.setdefault(base, []).append(f"{names[a][0]!r} and {names[b][0]!r}")
    if needed:
        said = "; ".join(f"{v!r} (of {', '.join(pairs)})" for v, pairs in sorted(needed.items()))
        raise MergeBaseInUseError(
            f"Cannot delete the merge base of live branches: {said}. A later merge of "
            f"them needs it; merge or delete one of the branches first, or pass "
            f"force=True (h5vc delete --force) to take an older common ancestor as base."
        )


def _log_entries(state: FileState, parents: dict[str, list[str]]) -> dict[str, dict]:
    """The index's log entries of the survivors, with their new ``parents``."""
    return {name: {**log_entry(state.log.info(name)), "parents": p} for name, p in parents.items()}


def _repoint(state: FileState, doomed: set[str], survivors: list[str]) -> dict[str, list[str]]:
    """Point survivors at surviving parents; return every survivor's parents."""
    parents: dict[str, list[str]] = {}
    for name in survivors:
        info = state.log.info(name)
        prev = info.prev_version
        if prev in doomed:
            new_prev = _nearest_survivor(state, prev, doomed)
            tree.set_prev_version(state.versions[name], new_prev)
            prev = None if new_prev == layout.FIRST_VERSION else new_prev
        merged = list(info.merge_parents)
        if any(p in doomed for p in merged):
            merged = _repoint_merge_parents(state, name, info.merge_parents, doomed)
        parents[name] = ([prev] if prev else []) + merged
    moved = {
        name: _nearest_survivor(state, name, doomed) for name in state.refs.naming_versions(doomed)
    }
    state.refs.repoint({k: None if v == layout.FIRST_VERSION else v for k, v in moved.items()})
    current = state.current_version
    if current in doomed:
        new_current = _nearest_survivor(state, current, doomed)
        state.write_current_version(new_current)
    return parents


def _repoint_merge_parents(
    state: FileState, name: str, parents: tuple[str, ...], doomed: set[str]
) -> list[str]:
    """A merge's later parents move to their nearest survivors (dropped if none, or if
    that is already a parent)."""
    first = _nearest_survivor(state, state.log.info(name).prev_version, doomed)
    kept: list[str] = []
    for parent in parents:
        survivor = _nearest_survivor(state, parent, doomed)
        if survivor not in (layout.FIRST_VERSION, first, *kept):
            kept.append(survivor)
    tree.set_merge_parents(state.versions[name], kept)
    return kept


def _release_chunks(state: FileState, survivors: list[str], *, erase: bool = False) -> None:
    datasets = tree.collect_datasets(state.versions, survivors)
    # Deepest paths first, so that a store group emptied here can be removed.
    for path in sorted(tree.store_paths(state.version_data), key=lambda p: -p.count("/")):
        objects = datasets.get(path)
        store = state.stores.get(path)
        if objects and store is not None:
            compact_store(store, list(objects.values()), merge=state.h5vc_layout, erase=erase)
        else:
            if erase and store is not None:
                slots = np.arange(store.raw_data.shape[0] // store.chunks[0])
                erase_slots(store.raw_data, slots, store.chunks[0])
            tree.drop_store(state.version_data, path)
