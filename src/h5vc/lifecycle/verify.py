"""Checking a versioned file: every stored chunk against its digest, every mapping
against the stored slots, the version metadata against itself."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from h5vc.hashing import chunk_hash
from h5vc.store import layout
from h5vc.store.rawdata import RawDataStore
from h5vc.store.tree import DatasetObject, collect_datasets
from h5vc.versions.state import FileState, resolve_state

__all__ = ["Problem", "VerifyReport", "verify"]

#: Slots read from raw_data at once.
WINDOW_BYTES = 16 << 20


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong, with the versions and dataset it affects."""

    kind: str  # "digest", "unstored slot", "no hash row", "metadata", "unreadable"
    message: str
    path: str = ""
    versions: tuple[str, ...] = ()


@dataclass
class VerifyReport:
    """What :func:`verify` checked and found."""

    versions: int = 0
    datasets: int = 0
    chunks: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        head = (
            f"{self.versions} versions, {self.datasets} dataset stores, {self.chunks} "
            f"chunks checked: "
        )
        if self.ok:
            return head + "no problem."
        lines = [head + f"{len(self.problems)} problems."]
        for problem in self.problems:
            where = f" [{problem.path}]" if problem.path else ""
            versions = f" (versions: {', '.join(problem.versions)})" if problem.versions else ""
            lines.append(f"{problem.kind}{where}: {problem.message}{versions}")
        return "\n".join(lines)


def verify(f: Any, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """Check the versioned file ``f`` and report every problem found.

    Recomputes the SHA-256 of every stored chunk and compares it with its hash-table
    row; checks that every version's mappings point to stored slots that have a row;
    checks the version metadata (parents, current version). ``progress(done, total)``
    is called after each dataset store. Nothing is changed.
    """
    state = resolve_state(f)
    report = VerifyReport(versions=len(state.log))
    _check_metadata(state, report)
    names = state.log.names()
    found = collect_datasets(state.versions, names)
    stores = sorted(found)
    report.datasets = len(stores)
    for done, path in enumerate(stores, 1):
        try:
            _check_store(state, path, list(found[path].values()), report)
        except Exception as err:  # a damaged object: reported, the others still checked
            report.problems.append(Problem("unreadable", f"{type(err).__name__}: {err}", path=path))
        if progress is not None:
            progress(done, len(stores))
    return report


def _check_metadata(state: FileState, report: VerifyReport) -> None:
    names = state.log.names()
    for name in names:
        info = state.log.info(name)
        parent = info.prev_version
        if parent and parent != layout.FIRST_VERSION and parent not in state.log:
            report.problems.append(
                Problem(
                    "metadata",
                    f"parent {parent!r} is not a committed version",
                    versions=(name,),
                )
            )
    current = state.current_version
    if current != layout.FIRST_VERSION and current not in state.log:
        report.problems.append(
            Problem("metadata", f"current_version {current!r} is not a committed version")
        )


def _check_store(
    state: FileState, path: str, objects: list[DatasetObject], report: VerifyReport
) -> None:
    store = state.store(path)
    versions = tuple(sorted({v for obj in objects for v in obj.versions}))
    if store is None:
        report.problems.append(
            Problem("unstored slot", "the dataset has no chunk store", path, versions)
        )
        return
    rows = store.rows()
    has_row = np.zeros(store.n_slots + 1, dtype=bool)
    row_slots = rows["shape"][:, 0] // store.chunks[0]
    has_row[row_slots[row_slots < len(has_row)]] = True
    maps = []
    edges: dict[int, set[tuple[int, ...]]] = {}  # slot -> trimmed shapes it is read with
    for obj in objects:
        chunk_map = obj.chunk_map()
        maps.append((obj, chunk_map))
        _check_mappings(store, chunk_map, has_row, obj, path, report)
        _edge_extents(chunk_map, edges)
    for row, chunk in _stored_chunks(store, rows):
        report.chunks += 1
        slot = int(row["shape"][0]) // store.chunks[0]
        candidates = {(chunk.shape[0], *store.chunks[1:]), *edges.get(slot, ())}
        digest = bytes(row["hash"])
        if not any(
            chunk_hash(chunk[tuple(slice(0, n) for n in shape)]) == digest
            for shape in candidates
            if shape[0] <= chunk.shape[0]
        ):
            users = sorted(
                {v for obj, m in maps if bool(np.any(m.slots == slot)) for v in obj.versions}
            )
            report.problems.append(
                Problem(
                    "digest",
                    f"the chunk in slot {slot} (rows {int(row['shape'][0])}:"
                    f"{int(row['shape'][1])} of raw_data) does not match its SHA-256",
                    path,
                    tuple(users),
                )
            )


def _edge_extents(chunk_map: Any, edges: dict[int, set[tuple[int, ...]]]) -> None:
    """Add the trimmed shape of every chunk on the dataset's far edges."""
    grid = chunk_map.slots.shape
    if not chunk_map.slots.size:
        return
    for axis, (c, n) in enumerate(zip(chunk_map.chunks, chunk_map.shape)):
        if n % c == 0:
            continue
        index = [slice(None)] * len(grid)
        index[axis] = slice(grid[axis] - 1, grid[axis])
        part = chunk_map.slots[tuple(index)]
        for coords in np.argwhere(part >= 0):
            full = list(coords)
            full[axis] = grid[axis] - 1
            extent = tuple(
                int(min(cc, nn - i * cc))
                for i, cc, nn in zip(full, chunk_map.chunks, chunk_map.shape)
            )
            edges.setdefault(int(part[tuple(coords)]), set()).add(extent)


def _check_mappings(
    store: RawDataStore,
    chunk_map: Any,
    has_row: np.ndarray,
    obj: DatasetObject,
    path: str,
    report: VerifyReport,
) -> None:
    used = chunk_map.slots[chunk_map.slots >= 0]
    beyond = np.unique(used[used >= store.n_slots])
    if len(beyond):
        report.problems.append(
            Problem(
                "unstored slot",
                f"mappings point to slots {beyond[:5].tolist()} beyond the {store.n_slots} stored",
                path,
                tuple(obj.versions),
            )
        )
    inside = used[used < store.n_slots]
    missing = np.unique(inside[~has_row[inside]]).tolist()
    if missing:
        report.problems.append(
            Problem(
                "no hash row",
                f"slots {missing[:5]} are mapped but have no hash-table row",
                path,
                tuple(obj.versions),
            )
        )


def _stored_chunks(store: RawDataStore, rows: np.ndarray) -> Iterator[tuple[Any, np.ndarray]]:
    """Each hash-table row with its chunk's rows of raw_data, read in large windows."""
    if not len(rows):
        return
    order = np.argsort(rows["shape"][:, 0], kind="stable")
    raw_data = store.raw_data
    row_bytes = max(1, raw_data.dtype.itemsize * int(np.prod(raw_data.shape[1:])))
    budget = max(store.chunks[0], WINDOW_BYTES // row_bytes)
    k = 0
    while k < len(order):
        start = int(rows["shape"][order[k], 0])
        end = k
        while end < len(order) and int(rows["shape"][order[end], 1]) - start <= budget:
            end += 1
        end = max(end, k + 1)
        stop = max(int(rows["shape"][order[i], 1]) for i in range(k, end))
        window = raw_data[start:stop]
        for i in range(k, end):
            row = rows[order[i]]
            yield row, window[int(row["shape"][0]) - start : int(row["shape"][1]) - start]
        k = end
