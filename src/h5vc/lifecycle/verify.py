"""Integrity check of a versioned file: every stored chunk against its digest, every
version's mappings against the stores, the version metadata and refs against the
versions.

:func:`verify` reads the whole file once and returns a :class:`VerifyReport`; it
raises only for an argument that is not a versioned file.  Each :class:`Problem`
names the HDF5 object at fault and the versions and datasets it affects.
:func:`rebuild_hash_tables` rewrites hash tables from the stored chunks: a repair for
tables computed wrongly, not for damaged chunks (their digests would then be taken
as right).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import h5py
import numpy as np

from h5vc.columns.history import check_samples
from h5vc.errors import H5vcError, StageInProgressError
from h5vc.hashing import chunk_hash, prefetch
from h5vc.hdf5.filebytes import (
    FileBytes,
    Unreadable,
    many_compact_links,
    many_datasets,
    many_links,
)
from h5vc.hdf5.header import (
    DATASPACE,
    LAYOUT,
    StoredHeader,
    checksum,
    dataspace_dims,
    stored_messages_at,
)
from h5vc.hdf5.mappings import header_mappings
from h5vc.store import (
    ChunkMap,
    RawDataStore,
    RebuiltTables,
    layout,
    legacy,
    read_chunk_map,
    slot_windows,
    source_name,
    timeindex,
    tree,
)
from h5vc.versions.refs import BRANCH, TAG
from h5vc.versions.state import FileState, resolve_state

__all__ = ["Problem", "ProgressCallback", "VerifyReport", "rebuild_hash_tables", "verify"]

#: ``progress(done, total)``: units of work done so far out of ``total`` (one per
#: dataset object whose mappings were checked, one per stored chunk hashed).
ProgressCallback = Callable[[int, int], None]

#: Errors a damaged object can raise while it is read.
_READ_ERRORS = (H5vcError, OSError, KeyError, ValueError, RuntimeError, TypeError)


@dataclass(frozen=True, slots=True)
class Problem:
    """One inconsistency found by :func:`verify`.

    ``kind`` is one of ``"chunk-digest"`` (stored bytes differ from their digest),
    ``"mapping"`` (a version's dataset points nowhere valid or cannot be read),
    ``"hash-table"`` (rows outside raw_data, two rows for one slot),
    ``"store"`` (a chunk store missing or unreadable), ``"sample"`` (a sample of a
    column missing, unreadable, or not matching its checksum), ``"version-metadata"``
    (parent, timestamp, current version or time index inconsistent) and ``"ref"`` (a
    branch or tag pointing at a version that does not exist, such as one deleted by
    another library).
    """

    kind: str
    object: str
    message: str
    versions: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = []
        if self.versions:
            shown = ", ".join(self.versions[:5]) + (" ..." if len(self.versions) > 5 else "")
            where.append(f"versions: {shown}")
        if self.datasets:
            where.append(f"datasets: {', '.join(self.datasets)}")
        suffix = f" ({'; '.join(where)})" if where else ""
        return f"[{self.kind}] {self.object}: {self.message}{suffix}"


@dataclass
class VerifyReport:
    """What :func:`verify` checked and every problem it found (none: the file is sound)."""

    filename: str
    problems: list[Problem] = field(default_factory=list)
    versions: int = 0
    dataset_objects: int = 0
    chunks: int = 0
    bytes: int = 0
    #: Stored chunks no version uses whose shape cannot be known (edge chunks of
    #: axes after the first), so their digest was not recomputed.
    unchecked_chunks: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def affected_versions(self) -> list[str]:
        return sorted({v for p in self.problems for v in p.versions})

    def __str__(self) -> str:
        head = (
            f"{self.filename}: {self.versions} versions, {self.dataset_objects} dataset "
            f"objects, {self.chunks} chunks ({self.bytes} bytes) checked: "
            + ("no problems." if self.ok else f"{len(self.problems)} problem(s).")
        )
        return "\n".join([head, *(f"  {p}" for p in self.problems)])


class _SlotUse:
    """Who uses the slots of one store, and the chunk shapes they see there."""

    def __init__(self, n_slots: int):
        self.used = np.zeros(n_slots, dtype=bool)
        #: (versions, mask of the slots they use) per dataset object.
        self.objects: list[tuple[tuple[str, ...], np.ndarray]] = []
        self.shapes: dict[int, set[tuple[int, ...]]] = defaultdict(set)
        self.no_row: np.ndarray | None = None

    def versions_of(self, slot: int) -> tuple[str, ...]:
        found = {v for versions, mask in self.objects if mask[slot] for v in versions}
        return tuple(sorted(found))


def verify(f: Any, *, progress: ProgressCallback | None = None) -> VerifyReport:
    """Check the integrity of every version in the versioned file ``f``.

    Recomputes the SHA-256 digest of every stored chunk and compares it with its
    hash-table row, checks that every version's datasets map stored slots of the
    right chunk shape, and that hash tables and version metadata are consistent.
    Returns a :class:`VerifyReport`; a sound file gives a report whose ``ok`` is
    true.  ``progress(done, total)`` is called as the work advances.
    """
    state = resolve_state(f)
    report = VerifyReport(state.filename)
    names = _check_versions(state, report)
    report.versions = len(names)

    def unreadable(version: str, path: str, error: Exception) -> None:
        report.problems.append(
            Problem(
                "mapping",
                f"{state.versions.name}/{version}/{path}",
                f"unreadable object: {error}",
                (version,),
                (path,),
            )
        )

    datasets = tree.collect_datasets(state.versions, names, on_damage=unreadable)
    holders = _versions_by_object(state, names)
    for objects in datasets.values():
        for obj in objects.values():  # a shared group is walked once: every holder
            obj.versions = sorted(holders.get(obj.address, obj.versions))
    store_paths = tree.store_paths(state.version_data)
    stores = _open_stores(state, store_paths, report)
    n_objects = sum(len(objects) for objects in datasets.values())
    total = n_objects + sum(store.n_slots for store in stores.values())
    done = 0
    uses = {path: _SlotUse(store.n_slots) for path, store in stores.items()}
    collections: dict[int, dict[int, bytes]] = {}  # global heap collections read
    for path, objects in datasets.items():
        for obj in objects.values():
            _check_object(state, stores.get(path), obj, uses.get(path), report, collections)
            done += 1
            if progress is not None:
                progress(done, total)
    for path in datasets:
        if path not in stores and path not in store_paths:
            users = sorted({v for obj in datasets[path].values() for v in obj.versions})
            report.problems.append(
                Problem(
                    "store",
                    f"{state.version_data.name}/{path}",
                    f"no chunk store ({layout.RAW_DATA!r} and {layout.HASH_TABLE!r}) for "
                    f"a dataset that versions hold",
                    tuple(users),
                    (path,),
                )
            )
    for path, store in stores.items():
        done = _check_store(path, store, uses[path], report, progress, done, total)
    for where, message, holding in check_samples(state, names):  # of sample columns
        report.problems.append(Problem("sample", where, message, holding))
    return report


# -- version metadata -------------------------------------------------------------


def _check_versions(state: FileState, report: VerifyReport) -> list[str]:
    """The committed version names; problems of their metadata go to ``report``."""
    names: list[str] = []
    for name in state.versions:
        if name == layout.FIRST_VERSION:
            continue
        try:
            if name in state.log:
                names.append(name)
        except _READ_ERRORS as error:
            report.problems.append(
                Problem(
                    "version-metadata",
                    f"{state.versions.name}/{name}",
                    f"unreadable version metadata: {error}",
                    (name,),
                )
            )
    known = set(names)
    for name in names:
        info = state.log.info(name)
        obj = f"{state.versions.name}/{name}"
        parent = info.prev_version
        if parent is not None and parent not in known:
            report.problems.append(
                Problem("version-metadata", obj, f"parent version {parent!r} missing", (name,))
            )
        elif parent is not None and info.timestamp <= state.log.info(parent).timestamp:
            report.problems.append(
                Problem(
                    "version-metadata",
                    obj,
                    f"timestamp {info.timestamp} is not after parent {parent!r}'s "
                    f"({state.log.info(parent).timestamp}): lookups by time are ambiguous",
                    (name, parent),
                )
            )
    _check_current_and_index(state, known, report)
    _check_refs(state, known, report)
    return names


def _check_refs(state: FileState, known: set[str], report: VerifyReport) -> None:
    """Every branch and tag must point at a committed version: a version deleted
    outside h5vc (versioned-hdf5's delete_versions knows no refs) leaves them dangling."""
    where = state.versions.name or ""
    try:
        refs = {BRANCH: state.refs.branches, TAG: state.refs.tags}
    except _READ_ERRORS as error:
        report.problems.append(Problem("ref", where, f"unreadable branches and tags: {error}"))
        return
    for kind, named in refs.items():
        for name, version in named.items():
            if version not in known:
                report.problems.append(
                    Problem(
                        "ref",
                        f"{kind} {name!r}",
                        f"points at version {version!r}, which does not exist (deleted "
                        f"outside h5vc?): reading it fails; "
                        f"{'reset' if kind == BRANCH else 'delete'} the {kind}",
                    )
                )


def _check_current_and_index(state: FileState, known: set[str], report: VerifyReport) -> None:
    try:
        current = state.current_version
    except _READ_ERRORS as error:
        current = f"<unreadable: {error}>"
    if current not in known and current not in ("", layout.FIRST_VERSION):
        report.problems.append(
            Problem(
                "version-metadata",
                state.versions.name or "",
                f"current_version {current!r} names no committed version",
            )
        )
    vd = state.version_data
    try:
        if not timeindex.has_index(vd) or timeindex.entry_count(vd) != len(known):
            return  # absent or stale: not used for lookups
        listed = {name for _, name in timeindex.read_index(vd) or []}
    except _READ_ERRORS as error:
        listed = {f"<unreadable: {error}>"}
    if listed != known:
        report.problems.append(
            Problem(
                "version-metadata",
                f"{vd.name}/{timeindex.INDEX_NAME}",
                "time index lists other versions than the committed ones: "
                f"{sorted(listed ^ known)[:5]}",
                tuple(sorted(known - listed)),
            )
        )


# -- mappings ---------------------------------------------------------------------


def _versions_by_object(state: FileState, names: list[str]) -> dict[int, set[str]]:
    """Dataset object address -> every version that holds it (through shared groups
    too).  A file open read-only is read from its bytes where they are of a form
    :mod:`h5vc.hdf5.filebytes` reads; otherwise (and where they disagree with
    themselves: HDF5 then reports the damage) through HDF5."""
    file_bytes = FileBytes.of(state.versions.file)
    if file_bytes is not None:
        with file_bytes:
            try:
                return _holders_from_bytes(state, file_bytes, names)
            except Unreadable:
                pass
    holders: dict[int, set[str]] = defaultdict(set)
    for name in names:
        # a member HDF5 cannot read was reported by the walk of collect_datasets
        skip = _ignore_damage
        for _, parent, member in tree.walk_version(state.versions[name], on_damage=skip):
            info = h5py.h5o.get_info(parent.id, member.encode())
            if info.type == h5py.h5o.TYPE_DATASET:
                holders[int(info.addr)].add(name)
    return holders


def _ignore_damage(path: str, error: Exception) -> None:
    """Leave out a member HDF5 cannot read (reported elsewhere)."""


#: Groups nested deeper than this in a version are a cycle of hard links.
_MAX_DEPTH = 256


def _holders_from_bytes(
    state: FileState, file_bytes: FileBytes, names: list[str]
) -> dict[int, set[str]]:
    """:func:`_versions_by_object` read from the file's bytes, level by level (the
    groups of one level at once, then their members at once); raises
    :class:`Unreadable` where the tree is not of a form read there."""
    roots = file_bytes.links(file_bytes.header(int(h5py.h5o.get_info(state.versions.id).addr)))
    if roots is None:
        raise Unreadable("the versions group is not a group")
    root_of = dict(roots)
    links_of: dict[int, list[tuple[str, int]]] = {}
    datasets: set[int] = set()
    others: set[int] = set()
    frontier = list(dict.fromkeys(root_of[name] for name in names if name in root_of))
    if len(frontier) < len(set(names)):
        raise Unreadable("a version without a group")
    for address, links in zip(frontier, _groups(file_bytes, frontier)):
        if links is None:
            raise Unreadable("a version that is not a group")
        links_of[address] = links
    while frontier:
        members = list(
            dict.fromkeys(
                member
                for group in frontier
                for _, member in links_of[group]
                if member not in links_of and member not in datasets and member not in others
            )
        )
        read = many_datasets(file_bytes, members)
        rest = [address for address, good in zip(members, read.ok.tolist()) if not good]
        datasets.update(address for address, good in zip(members, read.ok.tolist()) if good)
        frontier = []
        for address, links in zip(rest, _groups(file_bytes, rest)):
            if links is not None:
                links_of[address] = links
                frontier.append(address)
            elif file_bytes.is_dataset(file_bytes.header(address)):
                datasets.add(address)
            else:
                others.add(address)
    below: dict[int, frozenset[int]] = {}
    open_groups: set[int] = set()

    def datasets_below(group: int) -> frozenset[int]:
        found = below.get(group)
        if found is not None:
            return found
        if group in open_groups or len(open_groups) > _MAX_DEPTH:
            raise Unreadable("a group that holds itself")
        open_groups.add(group)
        held: set[int] = set()
        for _, member in links_of[group]:
            if member in links_of:
                held |= datasets_below(member)
            elif member in datasets:
                held.add(member)
        open_groups.discard(group)
        found = below[group] = frozenset(held)
        return found

    holders: dict[int, set[str]] = defaultdict(set)
    for name in names:
        for address in datasets_below(root_of[name]):
            holders[address].add(name)
    return holders


def _groups(file_bytes: FileBytes, addresses: list[int]) -> list[list[tuple[str, int]] | None]:
    """The links of the groups at ``addresses`` (read at once where their form allows,
    else one by one); None for an object that is not a group."""
    found = many_links(file_bytes, addresses)
    left = [i for i, links in enumerate(found) if links is None]
    for i, links in zip(left, many_compact_links(file_bytes, [addresses[i] for i in left])):
        found[i] = links if links is not None else file_bytes.links(file_bytes.header(addresses[i]))
    return found


def _open_stores(
    state: FileState, paths: list[str], report: VerifyReport
) -> dict[str, RawDataStore]:
    stores: dict[str, RawDataStore] = {}
    for path in paths:
        try:
            store = state.stores.get(path)
            if store is not None:
                _ = store.n_slots, store.rows()
                stores[path] = store
        except _READ_ERRORS as error:
            report.problems.append(
                Problem(
                    "store",
                    f"{state.version_data.name}/{path}",
                    f"chunk store unreadable: {error}",
                    (),
                    (path,),
                )
            )
    return stores


def _check_object(
    state: FileState,
    store: RawDataStore | None,
    obj: tree.DatasetObject,
    use: _SlotUse | None,
    report: VerifyReport,
    collections: dict[int, dict[int, bytes]],
) -> None:
    """Check one dataset object's mappings; record which slots it uses."""
    report.dataset_objects += 1
    versions = tuple(obj.versions)
    where = f"{state.versions.name}/{obj.versions[0]}/{obj.path}"

    def problem(message: str) -> None:
        report.problems.append(Problem("mapping", where, message, versions, (obj.path,)))

    try:
        chunk_map = _chunk_map(state, obj, collections)
    except _READ_ERRORS as error:
        problem(f"mappings unreadable: {error}")
        return
    if store is None or use is None:
        return  # reported once per path by the caller
    if tuple(chunk_map.chunks) != tuple(store.chunks):
        problem(f"chunks {chunk_map.chunks} differ from its store's {store.chunks}")
        return
    if chunk_map.source is not None and chunk_map.source != source_name(store.raw_data):
        file, dataset = (name.decode("utf-8", "replace") for name in chunk_map.source)
        where_file = "this file" if file == "." else repr(file)
        problem(
            f"HDF5 reads its chunks from {dataset!r} in {where_file}, not from "
            f"{store.raw_data.name!r}: other HDF5 tools read other data than h5vc (was "
            f"the versioned tree copied? h5vc.repack writes a consistent copy)"
        )
    slots = chunk_map.slots[chunk_map.slots >= 0]
    if np.any(slots >= store.n_slots):
        problem(f"maps slot {int(slots.max())}; raw_data has {store.n_slots} slots")
        return
    if use.no_row is None:
        digests = store.slot_digests()[: store.n_slots]
        use.no_row = digests == np.zeros((), dtype="V32")
    mask = np.zeros(store.n_slots, dtype=bool)
    mask[slots] = True
    missing = np.flatnonzero(mask & use.no_row)
    if len(missing):
        problem(f"maps slots without a hash-table row: {missing[:8].tolist()}")
    use.used |= mask
    use.objects.append((versions, mask))
    _record_edge_shapes(chunk_map, use)


#: The messages a dataset object's chunk map is read from.
_MAP_MESSAGES = frozenset((DATASPACE, LAYOUT))


@dataclass(frozen=True, slots=True)
class _Stored:
    """What :func:`read_chunk_map` asks of a dataset it did not open."""

    shape: tuple[int, ...]
    name: str


def _chunk_map(
    state: FileState, obj: tree.DatasetObject, collections: dict[int, dict[int, bytes]]
) -> ChunkMap:
    """The chunk map of ``obj``: in a file open read-only, read from its header's
    bytes and its ``chunks`` attribute without opening the dataset (HDF5 would load
    every mapping); otherwise, or where those are not of the plain form, through HDF5
    (which reports damage as damage)."""
    parent, name = obj.locations[0]
    where = f"{parent.name.rstrip('/')}/{name}"
    stored = stored_messages_at(parent, obj.address, _MAP_MESSAGES, where)
    if stored is not None and len(stored.messages) == len(_MAP_MESSAGES):
        mappings = header_mappings(stored, where, state.filename, collections)
        if mappings is not None and not _checksum_matches(stored, collections):
            mappings = None  # HDF5 reports it
        chunks = _chunks_attribute(parent, name) if mappings is not None else None
        if mappings is not None and chunks is not None:
            shape = tuple(dataspace_dims(stored.messages[DATASPACE], stored.sizeof_size))
            return read_chunk_map(cast(Any, _Stored(shape, where)), chunks, mappings)
    return obj.chunk_map()


def _checksum_matches(stored: StoredHeader, collections: dict[int, dict[int, bytes]]) -> bool:
    """Whether the mapping list of the virtual dataset whose layout message ``stored``
    holds (read into ``collections``) matches the checksum HDF5 stored after it (HDF5
    checks it when it opens the dataset, which :func:`_chunk_map` does not)."""
    layout_message = stored.messages[LAYOUT]
    size = stored.sizeof_addr
    address = int.from_bytes(layout_message[2 : 2 + size], "little")
    if address == (1 << (8 * size)) - 1:
        return True  # no mapping list
    index = int.from_bytes(layout_message[2 + size : 6 + size], "little")
    blob = collections.get(address, {}).get(index)
    if blob is None or len(blob) < 4:
        return False
    return checksum(blob[:-4]) == int.from_bytes(blob[-4:], "little")


def _chunks_attribute(parent: h5py.Group, name: str) -> tuple[int, ...] | None:
    """The ``chunks`` attribute of ``parent[name]``, read without opening the object;
    None where it has none."""
    key = layout.ATTR_CHUNKS.encode()
    if not h5py.h5a.exists(parent.id, key, obj_name=name.encode()):
        return None
    attr = h5py.h5a.open(parent.id, key, obj_name=name.encode())
    value = np.empty(attr.shape, dtype=attr.dtype)
    attr.read(value)
    if value.dtype.kind not in "iu":
        return None
    return tuple(int(c) for c in np.atleast_1d(value))


def _record_edge_shapes(chunk_map: ChunkMap, use: _SlotUse) -> None:
    """The shapes of chunks trimmed on an axis after the first (axis 0 is in the row)."""
    shape, chunks, slots = chunk_map.shape, chunk_map.chunks, chunk_map.slots
    for axis in range(1, len(shape)):
        if shape[axis] % chunks[axis] == 0 or slots.shape[axis] == 0:
            continue
        edge = np.take(slots, [slots.shape[axis] - 1], axis=axis)
        for position in zip(*np.nonzero(edge >= 0)):
            index = tuple(int(i) for i in position)
            grid = list(index)
            grid[axis] = slots.shape[axis] - 1
            chunk_shape = tuple(
                min(c, n - g * c) for n, c, g in zip(shape, chunks, grid, strict=True)
            )
            use.shapes[int(edge[index])].add(chunk_shape[1:])


# -- stored chunks ----------------------------------------------------------------


def _check_store(
    path: str,
    store: RawDataStore,
    use: _SlotUse,
    report: VerifyReport,
    progress: ProgressCallback | None,
    done: int,
    total: int,
) -> int:
    """Recompute every stored chunk's digest; return the progress count."""
    rows = store.rows()
    c0 = store.chunks[0]
    where = store.hash_table.name or path
    starts, stops = rows["shape"][:, 0], rows["shape"][:, 1]
    bad = (starts < 0) | (starts % c0 != 0) | (starts >= store.n_slots * c0)
    bad |= (stops <= starts) | (stops - starts > c0)
    if np.any(bad):
        report.problems.append(
            Problem(
                "hash-table",
                where,
                f"{int(bad.sum())} row(s) outside the slots of raw_data "
                f"(rows {np.flatnonzero(bad)[:8].tolist()})",
                (),
                (path,),
            )
        )
    good = np.flatnonzero(~bad)
    slots = starts[good] // c0
    unique, counts = np.unique(slots, return_counts=True)
    if np.any(counts > 1):
        report.problems.append(
            Problem(
                "hash-table",
                where,
                f"several rows for slots {unique[counts > 1][:8].tolist()}",
                (),
                (path,),
            )
        )
    order = np.argsort(slots, kind="stable")
    slots, good = slots[order], good[order]
    digests = np.ascontiguousarray(rows["hash"]).view("V32").ravel()
    used = (stops - starts)[good]
    checks = _SlotChecks(path, store, use, report, digests[good], used)
    for position, window_slots, results, nbytes in prefetch(
        checks.hash_window, _numbered(_windows(store, slots))
    ):
        report.bytes += nbytes
        checks.compare(window_slots, results, position)
        done += len(window_slots)
        if progress is not None:
            progress(done, total)
    return done + store.n_slots - len(slots)


def _numbered(
    windows: Iterator[tuple[np.ndarray, np.ndarray | None]],
) -> Iterator[tuple[int, np.ndarray, np.ndarray | None]]:
    """Each window with the position of its first slot among the slots checked, so
    that windows hashed out of order (on background threads) find their rows."""
    position = 0
    for window_slots, data in windows:
        yield position, window_slots, data
        position += len(window_slots)


def _windows(
    store: RawDataStore, slots: np.ndarray
) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
    """``(slots, their raw rows)`` in windows of bounded size, read in slot order; a
    window HDF5 cannot read is read slot by slot, ``None`` for a slot that fails."""
    c0 = store.chunks[0]
    raw_data = store.raw_data
    for window_slots in slot_windows(raw_data, slots, c0):
        first, last = int(window_slots[0]), int(window_slots[-1])
        try:
            yield window_slots, raw_data[first * c0 : (last + 1) * c0]
            continue
        except OSError:
            pass
        for slot in window_slots.tolist():
            try:
                data: np.ndarray | None = raw_data[slot * c0 : (slot + 1) * c0]
            except OSError:
                data = None
            yield np.array([slot], dtype=np.int64), data


class _SlotChecks:
    """Hashes the chunks of one store's windows and compares them with their rows."""

    def __init__(
        self,
        path: str,
        store: RawDataStore,
        use: _SlotUse,
        report: VerifyReport,
        digests: np.ndarray,
        rows_used: np.ndarray,
    ):
        self.path, self.store, self.use, self.report = path, store, use, report
        self.digests, self.rows_used = digests, rows_used
        self.c0 = store.chunks[0]
        self.unreadable: set[int] = set()

    def hash_window(
        self, item: tuple[int, np.ndarray, np.ndarray | None]
    ) -> tuple[int, np.ndarray, list[tuple[bytes, ...]], int]:
        """``(position, slots, candidate digests of each slot, bytes hashed)`` of one
        window; depends on nothing but the window, so windows may run in any order."""
        start, window_slots, data = item
        first = int(window_slots[0])
        if data is None:  # HDF5 could not decode the stored chunk
            self.unreadable.add(first)
            return start, window_slots, [()], 0
        results: list[tuple[bytes, ...]] = []
        nbytes = 0
        for k, slot in enumerate(window_slots.tolist()):
            rows = int(self.rows_used[start + k])
            base = data[(slot - first) * self.c0 : (slot - first) * self.c0 + rows]
            candidates = [base]
            for tail in self.use.shapes.get(slot, ()):
                trim = [slice(None), *(slice(0, n) for n in tail)]
                candidates.append(base[tuple(trim)])
            results.append(tuple(chunk_hash(c) for c in candidates))
            nbytes += base.nbytes
        return start, window_slots, results, nbytes

    def compare(
        self, window_slots: np.ndarray, results: list[tuple[bytes, ...]], position: int
    ) -> None:
        for k, (slot, found) in enumerate(zip(window_slots.tolist(), results)):
            self.report.chunks += 1
            expected = self.digests[position + k].tobytes()
            if expected in found:
                continue
            users = self.use.versions_of(slot) if self.use.used[slot] else None
            if slot in self.unreadable:
                self.report.problems.append(
                    Problem(
                        "chunk-digest",
                        f"{self.store.raw_data.name} slot {slot}",
                        "stored bytes cannot be read (HDF5 failed to decode the chunk)",
                        users or (),
                        (self.path,),
                    )
                )
                continue
            if users is None and self.store.raw_data.ndim > 1:
                self.report.unchecked_chunks += 1  # trimmed shape unknown
                self.report.chunks -= 1
                continue
            self.report.problems.append(
                Problem(
                    "chunk-digest",
                    f"{self.store.raw_data.name} slot {slot}",
                    "stored bytes do not match their SHA-256 digest"
                    + ("" if users else " (no version uses this chunk)"),
                    users or (),
                    (self.path,),
                )
            )


# -- repair -----------------------------------------------------------------------


def rebuild_hash_tables(f: Any, *, strings_only: bool = False) -> RebuiltTables:
    """Rewrite hash tables from the chunks they index (every store's, or with
    ``strings_only`` those of object-dtype string datasets, whose digests older
    versioned-hdf5 releases computed wrongly).

    Each stored chunk gets one row with the digest h5vc computes when it commits the
    chunk, so equal chunks committed later are shared again; no version's data
    changes. One operation: a file opened by :func:`h5vc.open` is left as it was if it
    fails. Returns what was rewritten.
    """
    state = resolve_state(f)
    state.check_writable("rebuild hash tables")
    if state.staging is not None:
        raise StageInProgressError(
            f"Cannot rebuild hash tables while version {state.staging!r} is being staged: "
            f"leave its stage_version() block first."
        )
    state.drop_caches()  # cached stores hold the tables (and their indexes) open
    with state.operation():
        rebuilt = legacy.rebuild_hash_tables(
            state.version_data,
            state.versions,
            state.log.names(),
            dtype_kinds="O" if strings_only else None,
        )
    state.drop_caches()
    return rebuilt
