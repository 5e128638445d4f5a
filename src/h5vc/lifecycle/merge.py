"""Three-way merges of versions, decided from chunk maps.

``merge(vf, theirs, into=...)`` finds the nearest common ancestor (the *base*) of the
two versions and walks the three trees together.  An object that is the same HDF5
object on two sides (h5vc hard-links unchanged objects) is settled without looking
inside; a dataset changed on both sides is merged chunk by chunk from its chunk maps
(:mod:`h5vc.lifecycle.merge_chunks`), reading only the chunks both sides changed.
Nothing is written until every conflict is resolved; the merge is one commit with two
parents.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import h5py
import numpy as np

from h5vc.errors import (
    InvalidOptionError,
    MergeConflictError,
    NothingToMergeError,
    UnrelatedHistoriesError,
)
from h5vc.lifecycle.conflicts import Conflict
from h5vc.lifecycle.merge_chunks import merge_elements, plan_chunks, result_shape
from h5vc.lifecycle.results import MergeResult
from h5vc.store import ChunkMap, layout, read_attributes, read_fill, staged_array
from h5vc.versions import (
    DatasetCommit,
    FileState,
    GroupCommit,
    Link,
    commit_version,
    resolve_state,
)

__all__ = [
    "Conflict",
    "MergeResult",
    "Merger",
    "check_on_conflict",
    "commit_result",
    "is_ancestor",
    "merge",
    "merge_base",
]

Resolver = Callable[["Conflict", np.ndarray, np.ndarray, np.ndarray], Any]


def parents(state: FileState, name: str) -> list[str]:
    """The parents of a committed version, first parent first."""
    return list(state.log.parents(name))


def _ancestry(state: FileState, start: str) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        for parent in parents(state, todo.pop()):
            if parent not in seen and parent in state.log:
                seen.add(parent)
                todo.append(parent)
    return seen


def is_ancestor(state: FileState, ancestor: str, version: str) -> bool:
    """Whether ``ancestor`` is reached from ``version`` through parents (not itself)."""
    return ancestor != version and ancestor in _ancestry(state, version)


def merge_base(state: FileState, a: str, b: str) -> str | None:
    """The nearest common ancestor of versions ``a`` and ``b`` (either may be it), or None.

    Of several common ancestors the most recently committed one is taken: a version
    is committed after its parents, so it is never an ancestor of another one.
    """
    state.log.names()  # every version's parents in one read (the index's log column)
    common = _ancestry(state, a) & _ancestry(state, b)
    if not common:
        return None
    return max(common, key=lambda name: (state.log.info(name).timestamp, name))


class Merger:
    """Walks base, ours and theirs together and builds the commit of the merge."""

    def __init__(
        self,
        state: FileState,
        base: str | None,
        ours: str,
        theirs: str,
        on_conflict: str | Resolver,
    ):
        self.state = state
        self.names = (base, ours, theirs)
        self.on_conflict = on_conflict
        self.conflicts: list[Conflict] = []
        self.taken = 0
        self.merged = 0

    def _group(self, version: str | None) -> h5py.Group | None:
        return None if version is None else self.state.versions[version]

    def run(self) -> GroupCommit:
        base, ours, theirs = (self._group(v) for v in self.names)
        assert ours is not None and theirs is not None
        return self._merge_group("", base, ours, theirs, layout.VERSION_ATTRS)

    # -- structure ----------------------------------------------------------------

    def _conflict(self, conflict: Conflict) -> str:
        """Record a conflict; return the side that wins ("ours" or "theirs")."""
        self.conflicts.append(conflict)
        return "theirs" if self.on_conflict == "theirs" else "ours"

    def _merge_attrs(
        self, path: str, objects: tuple[Any, Any, Any], hidden: frozenset[str]
    ) -> dict[str, Any]:
        base, ours, theirs = (
            {} if obj is None else read_attributes(obj.attrs, hidden) for obj in objects
        )
        merged = dict(ours)
        for key in sorted(set(base) | set(ours) | set(theirs)):
            b, o, t = (side.get(key, _MISSING) for side in (base, ours, theirs))
            if _same(o, t) or _same(t, b):
                continue
            if _same(o, b) or self._conflict(Conflict(path, "attribute", attr=key)) == "theirs":
                if t is _MISSING:
                    merged.pop(key, None)
                else:
                    merged[key] = t
        return merged

    def _merge_group(
        self,
        path: str,
        base: h5py.Group | None,
        ours: h5py.Group,
        theirs: h5py.Group,
        hidden: frozenset[str] = frozenset(),
    ) -> GroupCommit:
        spec = GroupCommit(attrs=self._merge_attrs(path, (base, ours, theirs), hidden))
        names = set(ours) | set(theirs) | (set(base) if base is not None else set())
        for name in sorted(names):
            child = self._merge_child(f"{path}{name}", name, base, ours, theirs)
            if child is not None:
                spec.children[name] = child
        return spec

    def _merge_child(
        self, path: str, name: str, base: h5py.Group | None, ours: h5py.Group, theirs: h5py.Group
    ) -> GroupCommit | DatasetCommit | Link | None:
        b, o, t = (_info(group, name) for group in (base, ours, theirs))
        if o == t or t == b:
            return None if o is None else Link(ours, name)
        if o == b:
            return None if t is None else Link(theirs, name)
        if o is None or t is None or o[0] != t[0]:
            kind = "deleted" if o is None or t is None else "type"
            side = self._conflict(Conflict(path, kind))
            keep, group = (o, ours) if side == "ours" else (t, theirs)
            return None if keep is None else Link(group, name)
        base_obj = base[name] if base is not None and b is not None and b[0] == o[0] else None
        if o[0] == h5py.h5o.TYPE_GROUP and layout_is_column(ours[name], theirs[name]):
            return self._merge_column(path, base_obj, ours, theirs, name)
        if o[0] == h5py.h5o.TYPE_GROUP:
            return self._merge_group(f"{path}/", base_obj, ours[name], theirs[name])
        # a dataset added on both sides merges over an all-fill base
        return self._merge_dataset(path, base_obj, ours[name], theirs[name], (ours, theirs))

    def _merge_column(
        self,
        path: str,
        base: h5py.Group | None,
        ours: h5py.Group,
        theirs: h5py.Group,
        name: str,
    ) -> GroupCommit | Link | None:
        """Merge a sample column by key (see :func:`h5vc.columns.history.merge_column`)."""

        def resolve(key: Any, read: Callable[[int], Any]) -> Any:
            record = Conflict(path, "key", key=key)
            side = self._conflict(record)
            if callable(self.on_conflict):
                return self.on_conflict(record, read(0), read(1), read(2))
            return side

        groups = (base, ours[name], theirs[name])
        from h5vc.columns.history import merge_column  # loaded by the first column merged

        merged = merge_column(self.state, self.names, path, groups, resolve)
        if merged is None:  # different samples: the columns have nothing in common
            side = self._conflict(Conflict(path, "type"))
            return Link(ours if side == "ours" else theirs, name)
        return merged

    # -- data ---------------------------------------------------------------------

    def _merge_dataset(
        self,
        path: str,
        base: h5py.Dataset | None,
        ours: h5py.Dataset,
        theirs: h5py.Dataset,
        parents: tuple[h5py.Group, h5py.Group],
    ) -> DatasetCommit | Link:
        b_name, o_name, t_name = self.names
        shape = result_shape(
            None if base is None else tuple(base.shape), tuple(ours.shape), tuple(theirs.shape)
        )
        if shape is None:
            side = self._conflict(Conflict(path, "shape"))
            name = path.rpartition("/")[2]
            return Link(parents[0] if side == "ours" else parents[1], name)
        state = self.state
        o_key = state.stores.key(o_name, path, ours)
        if state.stores.key(t_name, path, theirs) != o_key:
            # Created again on one side with another dtype or chunks: nothing in common.
            side = self._conflict(Conflict(path, "type"))
            name = path.rpartition("/")[2]
            return Link(parents[0] if side == "ours" else parents[1], name)
        if (
            base is not None
            and b_name is not None
            and state.stores.key(b_name, path, base) != o_key
        ):
            base = None  # the base held an earlier dataset of that name
        store = state.stores.require(path, o_name, ours)
        o_map = state.chunk_maps.get(o_name, path, ours)
        t_map = state.chunk_maps.get(t_name, path, theirs)
        b_map = None if base is None or b_name is None else state.chunk_maps.get(b_name, path, base)
        plan = plan_chunks(
            shape, o_map.chunks, None if b_map is None else b_map.slots, o_map.slots, t_map.slots
        )
        self.taken += plan.from_theirs
        dtype = store.raw_data.dtype
        fill = read_fill(dtype, store.fillvalue)
        array = staged_array(ChunkMap(shape, o_map.chunks, plan.slots), store.raw_data, dtype, fill)
        sides = (base, ours, theirs)
        for coords in plan.both:
            region = tuple(
                slice(int(i) * c, min((int(i) + 1) * c, n))
                for i, c, n in zip(coords, o_map.chunks, shape)
            )
            array[region] = self._merge_region(path, region, sides, fill)
            self.merged += 1
        attrs = self._merge_attrs(path, sides, layout.DATASET_ATTRS)
        return DatasetCommit(
            path=path,
            array=array,
            dtype=dtype,
            chunks=o_map.chunks,
            fillvalue=store.fillvalue,
            attrs=attrs,
            raw_data=store.raw_data,
        )

    def _merge_region(
        self,
        path: str,
        region: tuple[slice, ...],
        sides: tuple[h5py.Dataset | None, h5py.Dataset, h5py.Dataset],
        fill: Any,
    ) -> np.ndarray:
        """Read the three versions of one chunk and merge them element by element."""
        values = [
            _read_region(self.state, version, path, dataset, region, fill)
            for version, dataset in zip(self.names, sides)
        ]
        merged, conflict = merge_elements(*values)
        count = int(np.count_nonzero(conflict))
        if not count:
            return merged
        record = Conflict(path, "data", region=region, elements=count)
        side = self._conflict(record)
        if callable(self.on_conflict):
            resolved = np.asarray(self.on_conflict(record, *values))
            if resolved.shape != merged.shape:
                raise ValueError(
                    f"Expected the conflict resolver to return an array of shape "
                    f"{merged.shape} for {record.describe()}. Got shape {resolved.shape}."
                )
            return resolved
        if side == "theirs":
            merged[conflict] = values[2][conflict]
        return merged


_MISSING = object()


def _same(a: Any, b: Any) -> bool:
    if a is _MISSING or b is _MISSING:
        return a is b
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    except (TypeError, ValueError):
        return False


def layout_is_column(*groups: h5py.Group) -> bool:
    """Whether every one of ``groups`` is a sample column."""
    return all(isinstance(g, h5py.Group) and layout.ATTR_COLUMN in g.attrs for g in groups)


def _info(group: h5py.Group | None, name: str) -> tuple[int, int] | None:
    """``(object type, address)`` of ``group[name]``, or None if absent."""
    if group is None or name not in group:
        return None
    info = h5py.h5o.get_info(group.id, name.encode())
    return int(info.type), int(info.addr)


def _read_region(
    state: FileState,
    version: str | None,
    path: str,
    dataset: h5py.Dataset | None,
    region: tuple[slice, ...],
    fill: Any,
) -> np.ndarray:
    """The chunk-aligned ``region`` of ``path`` in ``version``: one read of its chunk's
    ``raw_data`` slot, with the fill value where the chunk is not stored or lies outside
    that version's shape."""
    shape = tuple(s.stop - s.start for s in region)
    if dataset is None or version is None:
        return np.full(shape, fill, dtype=object if isinstance(fill, bytes) else None)
    store = state.stores.require(path, version)
    chunk_map = state.chunk_maps.get(version, path, dataset)
    raw = store.raw_data
    out = np.full(shape, fill, dtype=raw.dtype if raw.dtype.kind != "O" else object)
    coords = tuple(s.start // c for s, c in zip(region, chunk_map.chunks))
    inside_grid = all(i < n for i, n in zip(coords, chunk_map.slots.shape))
    slot = int(chunk_map.slots[coords]) if inside_grid else -1
    if slot < 0:
        return out
    c0 = chunk_map.chunks[0]
    kept = tuple(slice(0, max(0, min(s.stop, n) - s.start)) for s, n in zip(region, dataset.shape))
    rows = raw[slot * c0 : slot * c0 + kept[0].stop]
    within: tuple[slice, ...] = (slice(None), *kept[1:])
    out[kept] = rows[within]
    return out


def check_on_conflict(on_conflict: Any) -> None:
    if on_conflict not in ("fail", "ours", "theirs") and not callable(on_conflict):
        raise InvalidOptionError(
            f"Expected on_conflict='fail', 'ours', 'theirs' or a callable. Got {on_conflict!r}."
        )


def plan_merge(
    state: FileState,
    ours: str,
    theirs: str,
    *,
    on_conflict: str | Resolver = "fail",
    allow_unrelated: bool = False,
) -> tuple[str | None, Merger | None]:
    """``(base, merger)`` for merging ``theirs`` into ``ours``; the merger is None for a
    fast-forward.  Raises the merge's bad-input errors; writes nothing."""
    check_on_conflict(on_conflict)
    if ours == theirs:
        raise NothingToMergeError(f"Cannot merge version {theirs!r} into itself.")
    base = merge_base(state, ours, theirs)
    if base is None and not allow_unrelated:
        raise UnrelatedHistoriesError(
            f"Versions {ours!r} and {theirs!r} have no common ancestor; pass "
            f"allow_unrelated=True to merge them over an empty base."
        )
    if base == theirs:
        raise NothingToMergeError(
            f"Version {theirs!r} is already an ancestor of {ours!r}: nothing to merge."
        )
    if base == ours:
        return base, None
    return base, Merger(state, base, ours, theirs, on_conflict)


def merge(
    state: FileState,
    ours: str,
    theirs: str,
    name: str,
    *,
    message: str | None = None,
    author: str | None = None,
    on_conflict: str | Resolver = "fail",
    allow_unrelated: bool = False,
    fast_forward: bool = True,
    make_current: bool = True,
    check_name: Callable[[str], str] | None = None,
) -> MergeResult:
    """Merge version ``theirs`` into version ``ours`` as the new version ``name``.

    Returns a fast-forward result (nothing written) when ``ours`` is an ancestor of
    ``theirs`` and ``fast_forward`` is set.  Refs are the caller's business.
    """
    base, merger = plan_merge(
        state, ours, theirs, on_conflict=on_conflict, allow_unrelated=allow_unrelated
    )
    if merger is None and fast_forward:
        return MergeResult("fast-forward", theirs, base, ours, theirs)
    if check_name is not None:
        name = check_name(name)
    if merger is None:
        merger = Merger(state, base, ours, theirs, on_conflict)
    commit_result(
        state,
        merger,
        name,
        f"Merging {theirs!r} into {ours!r} (base {base!r})",
        message=message,
        author=author,
        make_current=make_current,
        merge_parents=(theirs,),
    )
    return MergeResult(
        "merge",
        name,
        base,
        ours,
        theirs,
        conflicts=merger.conflicts,
        chunks_taken=merger.taken,
        chunks_merged=merger.merged,
    )


def commit_result(
    state: FileState,
    merger: Merger,
    name: str,
    what: str,
    *,
    message: str | None,
    author: str | None,
    make_current: bool,
    merge_parents: tuple[str, ...] = (),
) -> None:
    """Run ``merger`` and commit its result on ``ours`` as version ``name``; raise
    :class:`MergeConflictError` (``what`` says what was being done) and write nothing
    if a conflict is left unresolved.  Runs inside the caller's ``state.operation()``."""
    on_conflict = merger.on_conflict
    ours = merger.names[1]
    assert ours is not None
    root = merger.run()
    unresolved = [
        c
        for c in merger.conflicts
        if on_conflict == "fail" or (callable(on_conflict) and c.kind not in ("data", "key"))
    ]
    if unresolved:  # the caller's operation takes back what the merger wrote
        raise MergeConflictError(
            f"{what}: {len(unresolved)} conflict(s); nothing was written: "
            + "; ".join(c.describe() for c in unresolved[:5])
            + (" ..." if len(unresolved) > 5 else ""),
            unresolved,
        )
    commit_version(
        state,
        name,
        ours,
        root,
        message=message,
        author=author,
        make_current=make_current,
        merge_parents=merge_parents,
    )


def chunk_slots(f: Any, version: str, path: str) -> np.ndarray:
    """The ``raw_data`` slot of every chunk of dataset ``path`` in ``version``
    (-1 for a chunk that is all fill value), flattened in C order."""
    state = resolve_state(f)
    dataset = state.versions[version][path]
    return state.chunk_maps.get(version, path, dataset).slots.ravel()
