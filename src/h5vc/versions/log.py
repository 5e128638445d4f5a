"""The log of committed versions: their metadata, looked up by name or by time."""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np

from h5vc.errors import VersionNotFoundError
from h5vc.hdf5.damage import damaged
from h5vc.store import layout, timeindex
from h5vc.versions.timestamps import attr_str, read_timestamp

if TYPE_CHECKING:
    from h5vc.hdf5.filebytes import FileBytes
    from h5vc.versions.reading import KnownRoot

__all__ = ["VersionInfo", "VersionLog", "log_entry", "scalar_integer_bytes"]


@dataclass(frozen=True, slots=True)
class VersionInfo:
    """Metadata of one committed version."""

    name: str
    prev_version: str | None
    timestamp: np.datetime64
    message: str | None = None
    author: str | None = None
    #: Parents of a merge after the first (``prev_version``); empty otherwise.
    merge_parents: tuple[str, ...] = ()

    @property
    def parents(self) -> tuple[str, ...]:
        """Every parent, first parent first (empty for a root)."""
        first = () if self.prev_version is None else (self.prev_version,)
        return first + self.merge_parents


#: Heap keys of :meth:`VersionLog.topological`: newer versions have smaller keys.
_EPOCH = np.datetime64(0, "us")


class VersionLog:
    """Committed versions of one versioned root.

    Looking up one version reads only that version's group; listing versions or
    looking them up by time reads every version's metadata once and then keeps a
    sorted timestamp index up to date, so later lookups are a bisection.
    """

    def __init__(
        self,
        versions_group: h5py.Group,
        version_data: h5py.Group | None = None,
        *,
        keep_opened: bool = False,
        known: KnownRoot | None = None,
    ):
        """``keep_opened``: keep the group of the version last checked open for
        :meth:`group` (a read-only file: no version group is deleted under it).
        ``known``: what was read of a read-only file's bytes as they are now, by
        this handle or an earlier one (the versions found committed and their
        metadata are shared with it)."""
        self._group = versions_group
        self._keep_opened = keep_opened
        self._version_data = version_data
        self._infos: dict[str, VersionInfo] = {} if known is None else known.infos
        #: Names known to be committed whose metadata has not been read yet.
        self._committed: set[str] = set() if known is None else known.committed
        self._known = known is not None
        self._by_time: list[tuple[np.datetime64, str]] | None = None
        #: The group of the version last found committed by ``in``, opened to read
        #: its marker: what :meth:`group` hands out next instead of opening it again.
        self._opened: tuple[str, h5py.h5g.GroupID] | None = None

    def reload(self) -> None:
        """Forget what was read; the next listing reads the file again."""
        self._infos = {}
        self._committed = set()
        self._by_time = None
        self._opened = None

    def learn(self, known: KnownRoot) -> None:
        """Take what ``known`` says of the file's bytes as they are now (read by
        earlier handles: the versions found committed and their metadata) besides
        what this log read; it is not added to ``known``."""
        self._committed = self._committed | known.committed
        if self._by_time is None:  # else every version's metadata is here already
            for name, info in known.infos.items():
                self._infos.setdefault(name, info)
        self._known = True

    def group(self, name: str) -> h5py.Group:
        """The group of version ``name`` (checked with ``in`` first): the one opened to
        read its commit marker when that was the last version checked."""
        opened, self._opened = self._opened, None
        if opened is not None and opened[0] == name and opened[1].valid:
            return h5py.Group(opened[1])
        try:  # one HDF5 call (h5py's lookup by name makes several)
            found = h5py.h5o.open(self._group.id, name.encode())
        except Exception:  # h5py's way below says what is wrong
            found = None
        if isinstance(found, h5py.h5g.GroupID):
            return h5py.Group(found)
        return self._group[name]

    def opened(self, name: str) -> h5py.Group | None:
        """:meth:`group` of version ``name`` (checked with ``in`` first), or None in a
        file read with ``known`` where the group is not open now: HDF5 opened it in
        the file's bytes as they are now, by this handle or an earlier one, to read
        its marker, and the caller opens it when first used."""
        opened = self._opened
        if self._known and (opened is None or opened[0] != name) and name in self._committed:
            return None
        return self.group(name)

    def _load_all(self) -> list[tuple[np.datetime64, str]]:
        if self._by_time is None:
            filename = str(self._group.file.filename)
            with damaged(filename, f"The versions group {self._group.name}"):
                infos = self._from_index()
                names = list(self._group) if infos is None else []
            from_index = infos is not None
            if infos is None:
                infos = {}
                for name in names:
                    info = self._read(name)
                    if info is not None:
                        infos[name] = info
            self._infos = infos
            # the index is in time order already; dicts keep insertion order
            pairs = [(info.timestamp, name) for name, info in infos.items()]
            self._by_time = pairs if from_index else sorted(pairs)
        return self._by_time

    def _from_index(self) -> dict[str, VersionInfo] | None:
        """Every version's metadata from the persisted index's log column (one read),
        or None when the index is missing, stale or has no log column."""
        if self._version_data is None or not self._index_usable():
            return None
        rows = timeindex.read_log(self._version_data)
        if rows is None:
            return None
        infos = {}
        for ts, name, entry in rows:
            parents = entry.get("parents") or []
            infos[name] = VersionInfo(
                name,
                parents[0] if parents else None,
                ts,
                entry.get("message"),
                entry.get("author"),
                tuple(parents[1:]),
            )
        return infos

    def _read(self, name: str) -> VersionInfo | None:
        """The metadata of ``name`` from the file, or None if it is not committed."""
        if name == layout.FIRST_VERSION:
            return None
        with damaged(str(self._group.file.filename), f"Version {self._group.name}/{name}"):
            if name not in self._group:
                return None
            attrs = self._group[name].attrs
            if not attrs.get(layout.ATTR_COMMITTED, False):
                return None  # left behind by an interrupted commit
            return _info_from_attrs(name, attrs)

    def add(self, info: VersionInfo) -> None:
        self._infos[info.name] = info
        if self._by_time is not None:
            bisect.insort(self._by_time, (info.timestamp, info.name))

    def remove(self, name: str) -> None:
        self._committed.discard(name)
        if self._opened is not None and self._opened[0] == name:
            self._opened = None
        info = self._infos.pop(name, None)
        if info is not None and self._by_time is not None:
            self._by_time.remove((info.timestamp, name))

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is committed; reads at most its commit marker."""
        if not isinstance(name, str):
            return False
        if name in self._infos or name in self._committed:
            return True
        if self._by_time is not None or name == layout.FIRST_VERSION or "/" in name or not name:
            return False  # no version name holds "/" (a branch's may)
        gid = self._group.id
        key = name.encode()
        opened = None
        try:
            if not gid.links.exists(key):
                return False
            committed, opened = _committed_marker(gid, key)
        except (KeyError, RuntimeError, OSError, TypeError, ValueError):
            committed = None  # linked but unreadable: the slow path says why
        if committed is None:
            opened = None
            filename = str(self._group.file.filename)
            with damaged(filename, f"Version group {self._group.name}/{name}"):
                group = self._group[name]  # linked but unreadable: damage, not absence
                committed = isinstance(group, h5py.Group) and bool(
                    group.attrs.get(layout.ATTR_COMMITTED, False)
                )
        if not committed:
            return False
        self._committed.add(name)
        if opened is not None and self._keep_opened:
            self._opened = (name, opened)
        return True

    def __len__(self) -> int:
        return len(self._load_all())

    def names(self) -> list[str]:
        """Committed version names, oldest first."""
        return [name for _, name in self._load_all()]

    def names_by_time(
        self, links: int | None = None, file_bytes: FileBytes | None = None
    ) -> list[str]:
        """:meth:`names` without reading the versions' metadata where the persisted
        index lists them all (its names column alone: no log entries decoded); the
        metadata read later is read then.  ``links``: the number of links of the
        versions group, where the caller counted them (else HDF5 counts them);
        ``file_bytes``: the file's bytes, to read the names from."""
        if self._by_time is None and self._version_data is not None:
            filename = str(self._group.file.filename)
            with damaged(filename, f"The versions group {self._group.name}"):
                if self._index_usable(links):
                    found = timeindex.read_names(self._version_data, file_bytes)
                    if found is not None:
                        return list(dict.fromkeys(found))  # as names(): each once
        return self.names()

    def info(self, name: str) -> VersionInfo:
        info = self._infos.get(name)
        if info is None:
            found = None if self._by_time is not None else self._read(name)
            if found is None:
                raise VersionNotFoundError(f"Version {name!r} not found.")
            info = self._infos[name] = found
        return info

    def parents(self, name: str) -> tuple[str, ...]:
        """The parents of ``name``, first parent first."""
        return self.info(name).parents

    def ancestors(self, name: str) -> Iterator[str]:
        """``name``, its parent, grandparent, ... up to the first version."""
        current: str | None = name
        while current is not None:
            yield current
            current = self.info(current).prev_version

    def topological(self, start: str, *, first_parent: bool = False) -> Iterator[str]:
        """``start`` and every ancestor once, each before its parents (git's
        ``--topo-order``); of the versions ready at a time, the newest comes first.

        With ``first_parent`` only the chain of first parents is walked.  Lazy: the
        ancestors are collected first (parents only), nothing else is read.
        """
        self._load_all()  # every version's parents in one read (the index's log column)
        if first_parent:
            yield from self.ancestors(start)
            return
        children: dict[str, int] = {start: 0}
        todo = [start]
        while todo:
            for parent in self.parents(todo.pop()):
                if parent not in self:
                    continue  # deleted merge parents are repointed; be lenient anyway
                if parent in children:
                    children[parent] += 1
                else:
                    children[parent] = 1
                    todo.append(parent)
        ready: list[tuple[np.timedelta64, str]] = [(_EPOCH - self._stamp(start), start)]
        while ready:
            _, name = heapq.heappop(ready)
            yield name
            for parent in self.parents(name):
                if parent in children:
                    children[parent] -= 1
                    if not children[parent]:
                        heapq.heappush(ready, (_EPOCH - self._stamp(parent), parent))

    def _stamp(self, name: str) -> np.datetime64:
        return self.info(name).timestamp

    def _index_usable(self, links: int | None = None) -> bool:
        """Whether the persisted time index lists exactly the committed versions
        (``links``: the versions group's links, if counted already)."""
        vd = self._version_data
        if vd is None or not timeindex.has_index(vd):
            return False
        # An index entry is appended right after a commit's marker: a process
        # stopped in between leaves one entry short, and the scan is used instead.
        return timeindex.entry_count(vd) == (len(self._group) if links is None else links) - 1

    def at_time(self, ts: np.datetime64, exact: bool = False) -> str:
        """The version committed at ``ts``, or the latest one before it."""
        found: str | None
        if self._by_time is None and self._version_data is not None and self._index_usable():
            found = timeindex.lookup(self._version_data, ts, exact=exact)
        else:
            by_time = self._load_all()
            i = bisect.bisect_right(by_time, (ts, chr(0x10FFFF)))
            found = None if i == 0 or (exact and by_time[i - 1][0] != ts) else by_time[i - 1][1]
        if found is None:
            what = "at" if exact else "at or before"
            raise VersionNotFoundError(f"No version was committed {what} {ts}.")
        return found


_COMMITTED = layout.ATTR_COMMITTED.encode()


def _committed_marker(
    versions: h5py.h5g.GroupID, name: bytes
) -> tuple[bool | None, h5py.h5g.GroupID | None]:
    """Whether the group ``name`` of ``versions`` carries a true commit marker, read
    with HDF5's low-level calls (a fraction of the cost of h5py's group and attribute
    objects, paid once per version a file opens), and the group; None if ``name`` is
    no group or its marker is not a scalar integer (or h5py's boolean enum)."""
    obj = h5py.h5o.open(versions, name)
    if not isinstance(obj, h5py.h5g.GroupID):
        return None, None
    if not h5py.h5a.exists(obj, _COMMITTED):
        return False, obj
    raw = scalar_integer_bytes(h5py.h5a.open(obj, _COMMITTED))
    return (None if raw is None else bool(raw.any())), obj


#: HDF5 type classes of markers and counts read by :func:`scalar_integer_bytes`.
_INTEGER_CLASSES = frozenset({h5py.h5t.INTEGER, h5py.h5t.ENUM})


def scalar_integer_bytes(attr: h5py.h5a.AttrID) -> np.ndarray | None:
    """The bytes of the scalar integer (or enum of integers) attribute ``attr`` as
    stored, without making its numpy dtype (which costs more than the read): a value
    is zero exactly when all its bytes are. None for any other kind of attribute."""
    tid = attr.get_type()
    if (
        tid.get_class() not in _INTEGER_CLASSES
        or attr.get_space().get_simple_extent_type() != h5py.h5s.SCALAR
    ):
        return None
    raw = np.zeros(tid.get_size(), dtype=np.uint8)
    attr.read(raw, mtype=tid)
    return raw


def log_entry(info: VersionInfo) -> dict[str, Any]:
    """The persisted index's log column entry of a version."""
    return {"parents": list(info.parents), "message": info.message, "author": info.author}


def _info_from_attrs(name: str, attrs: h5py.AttributeManager) -> VersionInfo:
    prev = attr_str(attrs.get(layout.ATTR_PREV_VERSION, layout.FIRST_VERSION))
    message = attrs.get(layout.ATTR_MESSAGE)
    author = attrs.get(layout.ATTR_AUTHOR)
    merged = attrs.get(layout.ATTR_MERGE_PARENTS)
    return VersionInfo(
        name=name,
        prev_version=None if prev in ("", layout.FIRST_VERSION) else prev,
        timestamp=read_timestamp(attrs[layout.ATTR_TIMESTAMP]),
        message=None if message is None else attr_str(message),
        author=None if author is None else attr_str(author),
        merge_parents=() if merged is None else tuple(attr_str(p) for p in np.atleast_1d(merged)),
    )
