"""The public entry point: :class:`VersionedHDF5File` and :func:`open`."""

from __future__ import annotations

import contextlib
import os
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
    InvalidOptionError,
    RefNotFoundError,
    StageInProgressError,
    VersionNotCommittedError,
    VersionNotFoundError,
    VersionPathError,
)
from h5vc.hdf5.damage import damaged
from h5vc.lifecycle import branching
from h5vc.lifecycle.branching import check_version_name, generated_version_name, resolve_ref
from h5vc.store import layout
from h5vc.versions import FileState, VersionInfo, parse_timestamp
from h5vc.versions.reading import reads
from h5vc.wrappers import CommittedGroup, StagedGroup
from h5vc.wrappers.group import CommittedViews

if TYPE_CHECKING:
    from collections.abc import Callable

    from h5vc.lifecycle import VersionDiff
    from h5vc.lifecycle.bisection import BisectResult
    from h5vc.lifecycle.blame import Blame
    from h5vc.lifecycle.merge import MergeResult
    from h5vc.store.legacy import RebuiltTables

__all__ = ["VersionedHDF5File", "open"]

#: Layouts a new file can be created in: h5vc's (default) and versioned-hdf5's.
NEW_FILE_DATA_VERSIONS = frozenset({layout.DATA_VERSION_H5VC, layout.DATA_VERSION_COMPAT})
#: Names whose lookups in a read-only file are kept for lookups without the read lock.
_LOOKUPS_KEPT = 256


class VersionedHDF5File:
    """Every version of a tree of groups and datasets, kept in one HDF5 file.

    ``VersionedHDF5File(f)`` takes an open ``h5py.File`` or any ``h5py.Group``.
    A writable file without versioned data is initialized; a read-only one must
    already be versioned.  A new file gets h5vc's layout (``data_version`` 1001:
    commits cost what changed, but versioned-hdf5 refuses the file); pass
    ``data_version=4`` for versioned-hdf5's layout (one mapping per chunk), which
    both libraries read and write, for teams that run versioned-hdf5 next to h5vc.
    An existing file keeps its layout; asking for another one raises.

    >>> with vf.stage_version("v1") as g:          # doctest: +SKIP
    ...     g.create_dataset("x", data=np.arange(10))
    >>> vf["v1"]["x"][:3]                           # doctest: +SKIP
    array([0, 1, 2])
    """

    def __init__(self, f: h5py.File | h5py.Group, *, data_version: int | None = None):
        if not isinstance(f, h5py.Group):
            raise TypeError(
                f"Expected an open h5py.File or h5py.Group. Got {type(f).__name__} instead."
            )
        if data_version is not None and data_version not in NEW_FILE_DATA_VERSIONS:
            raise InvalidOptionError(
                f"Expected data_version={layout.DATA_VERSION_H5VC} (h5vc's layout) or "
                f"{layout.DATA_VERSION_COMPAT} (versioned-hdf5's) for a new file. "
                f"Got {data_version!r}."
            )
        self._file = f
        self._state: FileState | None = FileState.shared(f, data_version)
        if data_version is not None and self._state.data_version != data_version:
            found = self._state.data_version
            self._state = None
            raise InvalidOptionError(
                f"Expected a file in data_version {data_version}. Got "
                f"{f.file.filename!r}, already versioned with data_version {found}; an "
                f"existing file keeps its layout."
            )
        self._views = CommittedViews(self._state)
        #: Version names looked up in a read-only file -> (the file's stamp then, the
        #: group found), for lookups without the read lock (see :meth:`__getitem__`).
        self._looked_up: dict[str, tuple[Any, CommittedGroup]] = {}

    # -- state --------------------------------------------------------------------

    @property
    def f(self) -> h5py.Group:
        """The h5py file or group this versioned store lives in.

        A file opened by :func:`open` is reopened when an operation fails (it is
        restored to the last commit point): look ``f`` up again afterwards.
        """
        if self._state is None or self._state.guard is not None:
            return self._file  # a read-only file: h5vc reads through a handle of its own
        return self._state.root

    @property
    def file_state(self) -> FileState:
        """The state shared by every handle on this root (raises once closed)."""
        if self._state is None:
            raise ClosedError("This VersionedHDF5File is closed.")
        if self._state.closed:
            raise ClosedError(
                "This VersionedHDF5File's h5py file or group is closed; reopen the file."
            )
        return self._state

    _open_state = file_state

    @property
    def closed(self) -> bool:
        return self._state is None or self._state.closed

    def close(self) -> None:
        """Forget every cache; the h5py file stays open (its owner closes it)."""
        if self._state is not None:
            self._state.drop_caches()
        self._views.clear()
        self._looked_up.clear()
        self._state = None

    @property
    def data_version(self) -> int:
        """The on-disk layout number of this file."""
        return self._open_state.data_version

    @property
    @reads
    def current_version(self) -> str:
        return self._open_state.current_version

    @current_version.setter
    def current_version(self, name: str) -> None:
        self._check_writable("set current_version")
        with self._open_state.operation():
            self._open_state.set_current_version(name)

    @property
    @reads
    def versions(self) -> list[str]:
        """Names of every committed version, oldest first."""
        return self._open_state.log.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self.versions)

    @reads
    def __len__(self) -> int:
        return len(self._open_state.log)

    @reads
    def __contains__(self, name: object) -> bool:
        return name in self._open_state.log

    # -- lookups ------------------------------------------------------------------

    def __getitem__(self, key: Any) -> CommittedGroup:
        """A committed version by name, ancestor index (0, -1, ...) or timestamp.

        ``None`` is the current version; ``-n`` is the n-th ancestor of the
        current version; a ``datetime`` (UTC) or ``numpy.datetime64`` is the
        version committed at that time or the latest one before it.
        """
        if type(key) is str:
            # A name looked up before in a read-only file: found again without the
            # read lock while the file's stamp says no one wrote it since.
            found = self._looked_up.get(key)
            state = self._state
            guard = None if state is None else state.guard
            if (
                found is not None
                and guard is not None
                and found[0] == guard.quiet
                and guard.anchor.id.valid
                and guard.unchanged(found[0])
            ):
                return found[1]
        return self._lookup(key)

    @reads
    def _lookup(self, key: Any) -> CommittedGroup:
        state = self._open_state
        if key is None:
            return self.get_version_by_name(state.current_version)
        if isinstance(key, str):
            self._check_lookup(key, state)
            name = branching.resolve(state, key)
            if name != key:  # a tag or a branch: what it points at is checked too
                self._check_lookup(name, state)
            group = self._version_group(state, name)  # (inside this read already)
            quiet = None if state.guard is None else state.guard.quiet
            if quiet is not None and type(key) is str:
                if len(self._looked_up) >= _LOOKUPS_KEPT:
                    self._looked_up.clear()
                self._looked_up[key] = (quiet, group)
            return group
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

    def _check_lookup(self, name: str, state: FileState | None = None) -> None:
        """Refuse a path or the version being staged (as versioned-hdf5, ValueErrors
        that are also the KeyError of a version not found); ``state``: the open state,
        if the caller has it already."""
        if name.startswith("/"):
            raise VersionPathError(
                f"Expected a version name. Got the path {name!r}: versions are looked up "
                f"by name; open the file's own objects through h5py (vf.f[{name!r}])."
            )
        if name == (self._open_state if state is None else state).staging:
            raise VersionNotCommittedError(
                f"Version {name!r} is being staged: it can be read once it is committed "
                f"(leave its stage_version() block first)."
            )

    @reads
    def get_version_by_name(self, name: str) -> CommittedGroup:
        state = self._open_state
        if isinstance(name, str):
            self._check_lookup(name, state)
        return self._version_group(state, name)

    def _version_group(self, state: FileState, name: str) -> CommittedGroup:
        """The committed version ``name`` (checked by :meth:`_check_lookup`), inside
        a read of the file."""
        if name in ("", layout.FIRST_VERSION):
            raise VersionNotFoundError(f"{name!r} is not a committed version.")
        group = self._views.get((name, ""))
        if group is None:
            if name not in state.log:
                raise VersionNotFoundError(f"Version {name!r} not found.")
            where = f"The version group {state.versions.name}/{name}"
            with damaged(state.filename, where):
                h5group = state.log.opened(name)  # None: opened when first used
            group = CommittedGroup(state, name, h5group, views=self._views)
            self._views[(name, "")] = group
        return group

    @reads
    def get_version_by_timestamp(self, timestamp: Any, exact: bool = False) -> CommittedGroup:
        """The version committed at ``timestamp`` (or just before it unless ``exact``)."""
        ts = parse_timestamp(timestamp)
        return self.get_version_by_name(self._open_state.log.at_time(ts, exact=exact))

    @reads
    def version_info(self, name: str) -> VersionInfo:
        """Name, parent, timestamp, message and author of a committed version (a
        version, tag or branch)."""
        state = self._open_state
        if name in state.log:
            return state.log.info(name)
        return state.log.info(resolve_ref(state, name))

    # -- writing ------------------------------------------------------------------

    def _check_writable(self, action: str) -> None:
        self._open_state.check_writable(action)

    @contextlib.contextmanager
    def stage_version(
        self,
        version_name: str | None = None,
        prev_version: str | None = None,
        make_current: bool = True,
        timestamp: datetime | np.datetime64 | None = None,
        *,
        message: str | None = None,
        author: str | None = None,
        branch: str | None = None,
    ) -> Iterator[StagedGroup]:
        """Stage a new version and commit it when the ``with`` block exits.

        The yielded group starts as ``prev_version`` (a version, tag or branch; default:
        the current version; ``""`` for an empty version) and behaves like an
        ``h5py.Group``.  If the block raises, nothing is committed.  With ``branch``, the
        version starts from that branch's head, which then moves to it; without
        ``branch`` and ``prev_version``, a commit that becomes current moves the current
        branch (after :meth:`switch_branch`, like git's ``HEAD``).  Without
        ``version_name`` the version is named after the UTC time, sortable
        (``20261126T083912.123456Z``).  A name that is a version, branch or tag already
        is refused.
        """
        if version_name is None:
            version_name = generated_version_name(self._open_state)
        self._check_writable(f"stage version {version_name!r}")
        state = self._open_state
        if branch is None and prev_version is None and make_current:
            branch = self.current_branch  # None in a file without branches
        if branch is not None:
            prev_version = branching.branch_base(state, branch, prev_version)
        if state.staging is not None:
            raise StageInProgressError(
                f"Cannot stage version {version_name!r} while version {state.staging!r} is "
                f"being staged in the same file: leave that stage_version() block first."
            )
        from h5vc.versions import check_timestamp_order, commit_version

        name = check_version_name(state, version_name)
        ts = None if timestamp is None else parse_timestamp(timestamp)
        base = self._resolve_prev(prev_version)
        if ts is not None:
            check_timestamp_order(state, name, base, ts)  # refused before anything is staged
        group = StagedGroup(state, base, None if base is None else state.versions[base])
        state.staging = name
        try:
            # One operation from the first staged write to the commit: an abandoned
            # stage takes back what it wrote (large new datasets are written at once).
            with state.operation():
                yield group
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
                if branch is not None:
                    branching.after_branch_commit(state, branch, name, make_current)
        finally:
            state.staging = None
            group.close_staging(
                f"Version {name!r} is committed or abandoned and its staged group is "
                f"closed: nothing can be written through it any more. Stage a new version "
                f"to change the data."
            )

    def _resolve_prev(self, prev_version: str | None) -> str | None:
        state = self._open_state
        if prev_version is None:
            prev_version = state.current_version
        if prev_version in ("", layout.FIRST_VERSION):
            return None
        if prev_version in state.log:
            return prev_version
        try:
            return resolve_ref(state, prev_version)
        except RefNotFoundError:
            raise VersionNotFoundError(
                f"Previous version {prev_version!r} not found: expected a version, tag or branch."
            ) from None

    def __delitem__(self, name: str) -> None:
        lifecycle.delete_versions(self.file_state, [name])

    # -- refs: branches, tags, merges (logic in h5vc.lifecycle.branching) ------------
    #
    # Names given to ``vf[...]``, ``merge`` and these methods resolve in this order: a
    # version, a tag, a branch.  A name that is more than one of them and does not mean
    # one version is ambiguous: :class:`~h5vc.errors.AmbiguousRefError`.

    def resolve(self, name: str) -> str:
        """The committed version that ``name`` (version, tag or branch) points at."""
        return branching.resolve(self._open_state, name)

    @property
    def branches(self) -> dict[str, str]:
        """Branch name -> head version."""
        return self._open_state.refs.branches

    @property
    def tags(self) -> dict[str, str]:
        """Tag name -> version."""
        return self._open_state.refs.tags

    @property
    def current_branch(self) -> str | None:
        """The branch last committed to or switched to, while its head is the current
        version; otherwise None."""
        return branching.current_branch(self._open_state)

    def create_branch(self, name: str, at: str | None = None) -> str:
        """Create branch ``name`` at ``at`` (a version, tag or branch; default: the
        current version) and return its head.  Writes one attribute."""
        return branching.create_branch(self._open_state, name, at)

    def delete_branch(self, name: str) -> None:
        """Delete branch ``name`` (not its versions); not the current branch."""
        branching.delete_branch(self._open_state, name)

    def reset_branch(self, name: str, to: str) -> None:
        """Point branch ``name`` at ``to`` (a version, tag or branch)."""
        branching.reset_branch(self._open_state, name, to)

    def switch_branch(self, name: str) -> None:
        """Make ``name`` the current branch and its head the current version."""
        branching.switch_branch(self._open_state, name)

    def create_tag(self, name: str, version: str | None = None) -> str:
        """Tag ``version`` (a version, tag or branch; default: the current version) as
        ``name`` and return the version.  Tags never move."""
        return branching.create_tag(self._open_state, name, version)

    def delete_tag(self, name: str) -> None:
        """Delete tag ``name`` (not its version)."""
        branching.delete_tag(self._open_state, name)

    def merge_base(self, a: str, b: str) -> str | None:
        """The nearest common ancestor of two versions (or refs), None if unrelated."""
        return branching.merge_base(self._open_state, a, b)

    def merge(
        self,
        theirs: str,
        into: str | None = None,
        name: str | None = None,
        message: str | None = None,
        on_conflict: Any = "fail",
        *,
        author: str | None = None,
        allow_unrelated: bool = False,
        fast_forward: bool = True,
    ) -> MergeResult:
        """Three-way merge of ``theirs`` (a version, tag or branch) into branch ``into``.

        ``into`` defaults to the current branch, or the current version when no branch
        is current.  The merge commits version ``name`` (default: generated) with
        parents (``into``'s head, ``theirs``) and moves ``into`` to it; when ``into``'s
        head is an ancestor of ``theirs`` the branch is fast-forwarded instead (no new
        version) unless ``fast_forward=False``.  ``on_conflict``: ``"fail"`` raises
        :class:`~h5vc.errors.MergeConflictError` and writes nothing; ``"ours"`` or
        ``"theirs"`` take that side; a callable ``f(conflict, base, ours, theirs)``
        returns the merged values of each conflicting chunk region.
        """
        return branching.merge(
            self._open_state,
            theirs,
            into,
            name,
            message,
            on_conflict,
            author=author,
            allow_unrelated=allow_unrelated,
            fast_forward=fast_forward,
        )

    def cherry_pick(
        self,
        version: str,
        into: str | None = None,
        name: str | None = None,
        on_conflict: Any = "fail",
        *,
        parent: Any = None,
        message: str | None = None,
        author: str | None = None,
    ) -> MergeResult:
        """Apply the change ``version`` (a version, tag or branch) made to its parent onto
        branch ``into`` (default: the current branch, or the current version when no
        branch is current), as a new version ``name`` (default: generated), and move the
        branch to it.

        Three-way and chunk level, like :meth:`merge`, with ``version``'s parent as the
        base; ``on_conflict`` as for :meth:`merge`.  A merge version needs ``parent``
        (1-based position or name of the parent whose change is taken):
        :class:`~h5vc.errors.MergeParentError` otherwise.  A version already in
        ``into``'s history raises :class:`~h5vc.errors.EmptyChangeError`.
        """
        return branching.cherry_pick(
            self._open_state,
            version,
            into,
            name,
            on_conflict,
            parent=parent,
            message=message,
            author=author,
        )

    def revert(
        self,
        version: str,
        into: str | None = None,
        name: str | None = None,
        parent: Any = None,
        on_conflict: Any = "fail",
        *,
        message: str | None = None,
        author: str | None = None,
    ) -> MergeResult:
        """Apply the inverse of the change ``version`` made to its parent onto branch
        ``into`` (as :meth:`cherry_pick`): a new version that undoes it, later changes
        kept.  A merge version needs ``parent`` (whose side is kept)."""
        return branching.revert(
            self._open_state,
            version,
            into,
            name,
            parent,
            on_conflict,
            message=message,
            author=author,
        )

    # -- history tools (logic in h5vc.lifecycle) -------------------------------------

    def blame(self, path: str, index: Any = ..., ref: str | None = None) -> Blame:
        """Which version last changed each chunk region of dataset ``path`` in ``ref``
        (a version, tag or branch; default: the current version) that ``index``
        touches (default: all).  Decided from chunk maps and digests: no data is read.
        ``result.regions`` lists ``(region, version)``; ``result.version_of(i, j)``
        answers for one element."""
        return branching.blame(self._open_state, path, index, ref)

    def bisect(self, predicate: Callable[[Any], Any], good: str, bad: str) -> BisectResult:
        """The first version on the path from ``good`` to ``bad`` (versions, tags or
        branches) for which ``predicate(version_group)`` is true; ``good`` is taken as
        false and ``bad`` as true.  A binary search: ``ceil(log2(n))`` of the ``n``
        versions on the path are opened.  ``result.version`` is the version found,
        ``result.tested`` the ``(version, result)`` pairs in order."""
        return branching.bisect(self._open_state, predicate, good, bad, self.get_version_by_name)

    def squash(
        self,
        first: str,
        last: str,
        name: str | None = None,
        *,
        message: str | None = None,
        author: str | None = None,
    ) -> str:
        """Replace the linear run of versions from ``first`` to ``last`` (versions, tags
        or branches) by one new version ``name`` (default: generated) holding ``last``'s
        data, parent ``first``'s parent; ``last``'s children and branches move to it,
        and the run is deleted as :func:`~h5vc.delete_versions` deletes (the chunks
        only the run held are freed).  Returns the new version's name.

        Raises :class:`~h5vc.errors.NotLinearHistoryError` unless ``first`` is ``last``
        or a first-parent ancestor of it with no merge, and no other child, in between;
        :class:`~h5vc.errors.RefInUseError` for a tag on the run or a branch inside it.
        Nothing changes then.  The default message lists the run's messages.
        """
        return branching.squash(self._open_state, first, last, name, message=message, author=author)

    # -- lifecycle (implemented in h5vc.lifecycle) ----------------------------------

    @reads
    def diff(self, version1: str, version2: str) -> VersionDiff:
        """Groups, datasets, attributes and chunk regions that differ between two versions."""
        state = self.file_state
        return lifecycle.diff(state, resolve_ref(state, version1), resolve_ref(state, version2))

    @reads
    def get_diff(self, name: str, version1: str, version2: str) -> dict[Any, Any]:
        """``{region: (data in version1, data in version2)}`` for dataset ``name``."""
        state = self.file_state
        versions = (resolve_ref(state, version1), resolve_ref(state, version2))
        return lifecycle.get_diff(state, name, *versions)

    @reads
    def log(self, version: str | None = None, first_parent: bool = False) -> list[VersionInfo]:
        """``version`` (a version, tag or branch; default: the current one) and every
        ancestor once, children before parents (only first parents with
        ``first_parent=True``); see :func:`h5vc.log`."""
        return lifecycle.log(self.file_state, version, first_parent=first_parent)

    def rebuild_object_dtype_hashtables(self) -> RebuiltTables:
        """Rebuild the hash tables of string (object-dtype) datasets from their stored
        chunks, as versioned-hdf5's method of this name does for files whose string
        digests its older releases computed wrongly (h5vc repairs such files itself on
        their first writable open). Only hash tables change; returns what was rewritten.
        Not a repair for damaged chunks: run :func:`h5vc.verify` first."""
        from h5vc.lifecycle.verify import rebuild_hash_tables

        return rebuild_hash_tables(self.file_state, strings_only=True)

    def rebuild_hashtables(self) -> RebuiltTables:
        """Rebuild every dataset's hash table from its stored chunks (see
        :meth:`rebuild_object_dtype_hashtables`)."""
        from h5vc.lifecycle.verify import rebuild_hash_tables

        return rebuild_hash_tables(self.file_state)

    def __repr__(self) -> str:
        if self._state is None:
            return "<Closed VersionedHDF5File>"
        return (
            f"<VersionedHDF5File {self._file.file.filename!r} ({len(self)} versions, "
            f"current {self.current_version!r})>"
        )


@contextlib.contextmanager
def open(
    path: Any,
    mode: str = "r",
    *,
    data_version: int | None = None,
    durable_writes: bool = False,
    **kwargs: Any,
) -> Iterator[VersionedHDF5File]:
    """Open the HDF5 file at ``path`` and yield its :class:`VersionedHDF5File`.

    The file is closed when the ``with`` block exits.  ``mode`` is h5py's
    (``"r"``, ``"r+"``, ``"a"``, ``"w"``, ``"w-"``/``"x"``); ``data_version`` is
    the layout of a new file (see :class:`VersionedHDF5File`).

    A file opened for writing is crash safe: a killed process or a failed write never
    costs a committed version (see "Crash safety" in docs/design.md); one process
    writes it at a time (:class:`~h5vc.errors.WriterActiveError`).
    ``durable_writes=True`` also syncs every commit to the disk, so it survives a
    power loss.  A file created here keeps track of its free space across closes
    (:data:`h5vc.store.space.FILE_SPACE_OPTIONS`), so space released by
    ``delete_versions`` is reused by later commits.

    ``path`` may also be a URL (``"https://..."``, ``"s3://..."``, read through
    fsspec; pass fsspec's options as ``storage_options={...}``) or a Python file-like
    object; both are read-only (see :mod:`h5vc.remote`).
    """
    from h5vc.remote import is_url

    local = isinstance(path, str | os.PathLike) and not is_url(path)
    if not local or mode == "r":
        if local:
            durable.recover_abandoned(os.fspath(path))  # a crashed writer's journal
        where = os.fspath(path) if local else repr(path)
        with damaged(where, "The HDF5 file itself (superblock or root group)"):
            file, close = _open_read_only(path, mode, where if local else None, **kwargs)
        try:
            vf = VersionedHDF5File(file, data_version=data_version)
            try:
                yield vf
            finally:
                vf.close()
        finally:
            close()
        return
    from h5vc.store.space import FILE_SPACE_OPTIONS

    where = os.fspath(path)
    if mode in ("w", "w-", "x") or (mode == "a" and not os.path.exists(where)):
        kwargs = {**FILE_SPACE_OPTIONS, **kwargs}  # free space survives a close
    with damaged(where, "The HDF5 file itself (superblock or root group)"):
        file = durable.open_file(where, mode, durable=durable_writes, **kwargs)
    written = None
    try:
        written = VersionedHDF5File(file, data_version=data_version)
        yield written
    finally:
        current = file if written is None or written._state is None else written._state.root.file
        if written is not None:
            written.close()
        durable.close_file(current)  # also settles the file's free-space information


def _open_private(local: str) -> tuple[h5py.File, Any] | None:
    """The local file ``local`` opened read-only once, as h5vc's private handle
    (:func:`h5vc.remote.open_private`) under the file's read lock, which stays held
    until its read guard's first read ends: the guard reads through this handle until
    the file changes, instead of opening a second one, and takes the lock over
    without looking at the file again (:func:`h5vc.versions.reading.offer`). None
    where the file cannot be locked."""
    from h5vc.remote import open_private
    from h5vc.versions.reading import offer, withdraw

    lock = durable.ReadLock(local)
    try:
        lock.__enter__()
    except OSError:
        lock.close()
        return None  # no byte-range locks here: opened as before
    except BaseException:
        lock.close()
        raise
    try:
        file, close_file = open_private(local)
    except BaseException:
        lock.__exit__(None, None, None)
        lock.close()
        raise
    offer(file, lock)

    def close() -> None:
        left = withdraw(file)  # not taken by a guard (not a versioned file)
        try:
            close_file()
        finally:
            if left is not None:
                if left.held:
                    left.__exit__(None, None, None)
                left.close()

    return file, close


def _open_read_only(
    target: Any, mode: str, local: str | None, **kwargs: Any
) -> tuple[h5py.File, Any]:
    """Open ``target`` with ``mode`` (URLs and file objects refuse anything but
    ``"r"``); a ``local`` file under its read lock, so never in the middle of a commit."""
    from h5vc.remote import open_h5file

    if local is None:
        return open_h5file(target, mode, **kwargs)
    if mode == "r" and not kwargs:
        opened = _open_private(local)
        if opened is not None:
            return opened
    lock = durable.ReadLock(local)
    try:
        with lock:
            return open_h5file(target, "r", **kwargs)
    finally:
        lock.close()
