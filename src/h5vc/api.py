"""The public entry point: :class:`VersionedHDF5File` and :func:`open`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np

from h5vc import lifecycle
from h5vc.durable import files as durable
from h5vc.errors import (
    AncestorNotFoundError,
    ClosedError,
    StageInProgressError,
    VersionNotFoundError,
)
from h5vc.store import layout
from h5vc.versions import (
    FileState,
    VersionInfo,
    check_new_version_name,
    commit_timestamp,
    commit_version,
    parse_timestamp,
)
from h5vc.wrappers import CommittedGroup, StagedGroup
from h5vc.wrappers.group import CommittedViews

if TYPE_CHECKING:
    from h5vc.lifecycle import VersionDiff

__all__ = ["VersionedHDF5File", "open"]


class VersionedHDF5File:
    """Every version of a tree of groups and datasets, kept in one HDF5 file.

    ``VersionedHDF5File(f)`` takes an open ``h5py.File`` or any ``h5py.Group``.
    A writable file without versioned data is initialized; a read-only one must
    already be versioned.

    >>> with vf.stage_version("v1") as g:          # doctest: +SKIP
    ...     g.create_dataset("x", data=np.arange(10))
    >>> vf["v1"]["x"][:3]                           # doctest: +SKIP
    array([0, 1, 2])
    """

    def __init__(self, f: h5py.File | h5py.Group):
        if not isinstance(f, h5py.Group):
            raise TypeError(
                f"Expected an open h5py.File or h5py.Group. Got {type(f).__name__} instead."
            )
        self._file = f
        self._state: FileState | None = FileState.shared(f)
        self._views = CommittedViews(self._state)

    # -- state --------------------------------------------------------------------

    @property
    def f(self) -> h5py.Group:
        """The h5py file or group this versioned store lives in.

        A file opened by :func:`open` is reopened when an operation fails (it is
        restored to the last commit point): look ``f`` up again afterwards.
        """
        return self._file if self._state is None else self._state.root

    @property
    def file_state(self) -> FileState:
        """The state shared by every handle on this root (raises once closed)."""
        if self._state is None:
            raise ClosedError("This VersionedHDF5File is closed.")
        if not self._state.root.id.valid:
            raise ClosedError(
                "This VersionedHDF5File's h5py file or group is closed; reopen the file."
            )
        return self._state

    _open_state = file_state

    @property
    def closed(self) -> bool:
        return self._state is None or not self._state.root.id.valid

    def close(self) -> None:
        """Forget every cache; the h5py file stays open (its owner closes it)."""
        if self._state is not None:
            self._state.drop_caches()
        self._views.clear()
        self._state = None

    @property
    def data_version(self) -> int:
        """The on-disk layout number of this file."""
        return self._open_state.data_version

    @property
    def current_version(self) -> str:
        return self._open_state.current_version

    @current_version.setter
    def current_version(self, name: str) -> None:
        self._check_writable("set current_version")
        self._open_state.set_current_version(name)

    @property
    def versions(self) -> list[str]:
        """Names of every committed version, oldest first."""
        return self._open_state.log.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self.versions)

    def __len__(self) -> int:
        return len(self._open_state.log)

    def __contains__(self, name: object) -> bool:
        return name in self._open_state.log

    # -- lookups ------------------------------------------------------------------

    def __getitem__(self, key: Any) -> CommittedGroup:
        """A committed version by name, ancestor index (0, -1, ...) or timestamp.

        ``None`` is the current version; ``-n`` is the n-th ancestor of the
        current version; a ``datetime`` (UTC) or ``numpy.datetime64`` is the
        version committed at that time or the latest one before it.
        """
        state = self._open_state
        if key is None:
            return self.get_version_by_name(state.current_version)
        if isinstance(key, str):
            return self.get_version_by_name(key)
        if isinstance(key, int | np.integer) and not isinstance(key, bool | np.bool_):
            return self.get_version_by_name(self._ancestor(int(key)))
        if isinstance(key, datetime | np.datetime64):
            return self.get_version_by_timestamp(key)
        raise TypeError(
            f"Expected a version name, None, an int <= 0 or a timestamp. "
            f"Got {type(key).__name__} instead."
        )

    def _ancestor(self, n: int) -> str:
        if n > 0:
            raise IndexError(
                f"Expected an int <= 0 (0 is the current version, -1 its parent, ...). Got {n}."
            )
        state = self._open_state
        current = state.current_version
        if current == layout.FIRST_VERSION:
            raise VersionNotFoundError("There is no version yet: the file is empty.")
        chain = state.log.ancestors(current)
        for _ in range(-n):
            next(chain, None)
        found = next(chain, None)
        if found is None:
            raise AncestorNotFoundError(
                f"Version {current!r} has fewer than {-n} ancestors (asked for {n})."
            )
        return found

    def get_version_by_name(self, name: str) -> CommittedGroup:
        state = self._open_state
        if name in ("", layout.FIRST_VERSION):
            raise VersionNotFoundError(f"{name!r} is not a committed version.")
        group = self._views.get((name, ""))
        if group is None:
            if name not in state.log:
                raise VersionNotFoundError(f"Version {name!r} not found.")
            group = CommittedGroup(state, name, state.versions[name], views=self._views)
            self._views[(name, "")] = group
        return group

    def get_version_by_timestamp(self, timestamp: Any, exact: bool = False) -> CommittedGroup:
        """The version committed at ``timestamp`` (or just before it unless ``exact``)."""
        ts = parse_timestamp(timestamp)
        return self.get_version_by_name(self._open_state.log.at_time(ts, exact=exact))

    def version_info(self, name: str) -> VersionInfo:
        """Name, parent, timestamp, message and author of a committed version."""
        return self._open_state.log.info(name)

    # -- writing ------------------------------------------------------------------

    def _check_writable(self, action: str) -> None:
        self._open_state.check_writable(action)

    @contextlib.contextmanager
    def stage_version(
        self,
        version_name: str,
        prev_version: str | None = None,
        make_current: bool = True,
        timestamp: datetime | np.datetime64 | None = None,
        *,
        message: str | None = None,
        author: str | None = None,
    ) -> Iterator[StagedGroup]:
        """Stage a new version and commit it when the ``with`` block exits.

        The yielded group starts as ``prev_version`` (default: the current
        version; ``""`` for an empty version) and behaves like an ``h5py.Group``.
        If the block raises, nothing is committed.
        """
        self._check_writable(f"stage version {version_name!r}")
        state = self._open_state
        if state.staging is not None:
            raise StageInProgressError(
                f"Cannot stage version {version_name!r} while version {state.staging!r} is "
                f"being staged in the same file: leave that stage_version() block first."
            )
        name = check_new_version_name(state, version_name)
        ts = None if timestamp is None else parse_timestamp(timestamp)
        base = self._resolve_prev(prev_version)
        if ts is not None:
            commit_timestamp(state, base, ts)  # refused before anything is staged
        group = StagedGroup(state, base, None if base is None else state.versions[base])
        state.staging = name
        try:
            yield group
            with state.operation():
                commit_version(
                    state,
                    name,
                    base,
                    group.to_commit(),
                    timestamp=ts,
                    make_current=make_current,
                    message=message,
                    author=author,
                )
        except BaseException:
            # A file from h5vc.open goes back to the last commit point; elsewhere the
            # chunks written while staging (large new datasets) are taken back.
            if not state.roll_back():
                state.undo_writes()
            raise
        finally:
            state.staging = None
            group.close_staging(
                f"Version {name!r} is no longer being staged; open it with "
                f"VersionedHDF5File[{name!r}] or stage a new version."
            )

    def _resolve_prev(self, prev_version: str | None) -> str | None:
        state = self._open_state
        if prev_version is None:
            prev_version = state.current_version
        if prev_version in ("", layout.FIRST_VERSION):
            return None
        if prev_version not in state.log:
            raise VersionNotFoundError(f"Previous version {prev_version!r} not found.")
        return prev_version

    def __delitem__(self, name: str) -> None:
        lifecycle.delete_versions(self.file_state, [name])

    # -- lifecycle (implemented in h5vc.lifecycle) ----------------------------------

    def diff(self, version1: str, version2: str) -> VersionDiff:
        """Groups, datasets, attributes and chunk regions that differ between two versions."""
        return lifecycle.diff(self.file_state, version1, version2)

    def get_diff(self, name: str, version1: str, version2: str) -> dict[Any, Any]:
        """``{region: (data in version1, data in version2)}`` for dataset ``name``."""
        return lifecycle.get_diff(self.file_state, name, version1, version2)

    def log(self, version: str | None = None) -> list[VersionInfo]:
        """Versions from ``version`` (default: the current one) back to the first."""
        return lifecycle.log(self.file_state, version)

    def __repr__(self) -> str:
        if self._state is None:
            return "<Closed VersionedHDF5File>"
        return (
            f"<VersionedHDF5File {self._file.file.filename!r} ({len(self)} versions, "
            f"current {self.current_version!r})>"
        )


@contextlib.contextmanager
def open(
    path: str, mode: str = "r", *, durable_writes: bool = False, **kwargs: Any
) -> Iterator[VersionedHDF5File]:
    """Open the HDF5 file at ``path`` and yield its :class:`VersionedHDF5File`.

    The file is closed when the ``with`` block exits.  ``mode`` is h5py's
    (``"r"``, ``"r+"``, ``"a"``, ``"w"``, ``"w-"``/``"x"``). A file opened for
    writing is crash safe: a killed process or a failed write never costs a
    committed version (see "Crash safety" in docs/design.md); one process writes
    it at a time (:class:`~h5vc.errors.WriterActiveError`). ``durable_writes=True``
    also syncs every commit to the disk, so it survives a power loss.
    """
    file = durable.open_file(path, mode, durable=durable_writes, **kwargs)
    vf = None
    try:
        vf = VersionedHDF5File(file)
        yield vf
    finally:
        current = file if vf is None or vf._state is None else vf._state.root.file
        if vf is not None:
            vf.close()
        durable.close_file(current)
