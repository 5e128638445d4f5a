"""The whole library against the ``{version: {path: array}}`` model, with its lifecycle.

:class:`LifecycleMachine` runs the rules of :class:`VersionedStoreMachine` (commits with
small edits, new datasets, resizes, attributes; commits abandoned by an exception
raised inside ``stage_version``) on a file opened with :func:`h5vc.open`, and adds:

* ``delete_versions`` of random versions other than the current one;
* ``modify_metadata``: a new fill value, a dtype cast that round-trips, compression,
  chunks; and a cast that cannot hold the data, which must change nothing;
* ``repack`` to a new file, then continuing on the repacked file;
* closing and reopening the file through ``h5vc.open`` (which runs the journal);
* a commit, delete or metadata change whose k-th write to the disk fails (the
  journal's fault hook, as in ``tests/crash/test_faults.py``): the operation raises
  ``OSError`` and is undone, in the same handle;
* a process killed at the k-th write of an operation: the file and its journal as
  they were on disk before that write, opened again, must hold the versions as they
  were before the operation.

After every step every version reads exactly as the model says.  ``CI`` set: a fixed
sequence of examples (about 25 s on two shared cores); ``H5VC_MACHINE_EXAMPLES=N`` runs
N random examples (a longer search: 300 take about 5 minutes), and ``H5VC_NO_SHRINK=1``
reports a failing sequence at once instead of shrinking it.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule
from test_store_machine import SPECS, Spec, VersionedStoreMachine, VersionModel

import h5vc
from h5vc.durable import files
from h5vc.durable.journal import journal_path
from h5vc.errors import MetadataMismatchError

#: dtypes each path may be cast to: they hold every value the machine writes there
#: (values are drawn from the domain of the path's dtype in ``SPECS``).
CASTS = {
    "a": ["i4", "i8", "i2", "f8"],
    "b": ["f8"],
    "g/c": ["bool"],
    "g/h/d": ["u1", "u2", "i2", "i4"],
}
#: Fill values each path may be given (in the domain of every dtype of ``CASTS``).
FILLS: dict[str, list[Any]] = {
    "a": [-1, 0, 9, 200],
    "b": [0.5, 3.0, -7.0],
    "g/c": [False, True],
    "g/h/d": [7, 0, 200],
}
COMPRESSIONS: list[dict[str, Any]] = [
    {"compression": None},
    {"compression": "gzip", "compression_opts": 1},
    {"compression": "gzip", "compression_opts": 9, "shuffle": True},
    {"compression": "lzf"},
]


def _read(path: str) -> bytes | None:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        return None


def _write(path: str, content: bytes | None) -> None:
    if content is None:
        Path(path).unlink(missing_ok=True)
    else:
        Path(path).write_bytes(content)


class _PlannedDataset:
    """What an edit does to one dataset of a :class:`_Plan`."""

    def __init__(self, plan: _Plan, path: str) -> None:
        self._plan, self._path = plan, path
        self.attrs = _PlannedAttrs(plan, path)

    def __setitem__(self, index: Any, value: Any) -> None:
        value = np.array(value, copy=True)
        self._plan.steps.append(lambda g, p=self._path: g[p].__setitem__(index, value))

    def resize(self, shape: tuple[int, ...]) -> None:
        self._plan.steps.append(lambda g, p=self._path: g[p].resize(shape))


class _PlannedAttrs:
    def __init__(self, plan: _Plan, path: str) -> None:
        self._plan, self._path = plan, path

    def __setitem__(self, key: str, value: Any) -> None:
        self._plan.steps.append(lambda g, p=self._path: g[p].attrs.__setitem__(key, value))


class _Plan:
    """Stands for a staged group while edits are drawn; :meth:`replay` makes them."""

    def __init__(self) -> None:
        self.steps: list[Any] = []

    def create_dataset(self, path: str, **options: Any) -> None:
        options = {**options, "data": np.array(options["data"], copy=True)}
        self.steps.append(lambda g: g.create_dataset(path, **options))

    def __getitem__(self, path: str) -> _PlannedDataset:
        return _PlannedDataset(self, path)

    def __delitem__(self, path: str) -> None:
        self.steps.append(lambda g: g.__delitem__(path))

    def replay(self, group: Any) -> None:
        for step in self.steps:
            step(group)


class Fault:
    """The journal's fault hook: counts writes; at the ``at``-th it fails (raises an
    ``OSError``) or records the file and its journal as a killed process leaves them."""

    def __init__(self, at: int, path: str, *, kill: bool, code: int = errno.EIO):
        self.at = at
        self.path = path
        self.kill = kill
        self.code = code
        self.count = 0
        self.snapshot: tuple[bytes | None, bytes | None] | None = None

    def __call__(self, kind: str) -> None:
        self.count += 1
        if self.count != self.at:
            return
        if self.kill:
            self.snapshot = (_read(self.path), _read(journal_path(self.path)))
        else:
            raise OSError(self.code, os.strerror(self.code))

    @property
    def fired(self) -> bool:
        return self.count >= self.at


class LifecycleMachine(VersionedStoreMachine):
    """The rules of :class:`VersionedStoreMachine` and the lifecycle rules, on a file
    opened with :func:`h5vc.open`."""

    def __init__(self) -> None:  # the base opens the file with h5py: not called
        super(VersionedStoreMachine, self).__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="h5vc-lifecycle-"))
        self.path = self.directory / "machine0.h5"
        self.files = 0
        self.model = {}
        self.current = ""
        self.counter = 0
        self.specs = dict(SPECS)
        self.compression: dict[str, dict[str, Any]] = {path: {} for path in SPECS}
        self._opened: Any = None
        self._pending_settings: tuple[str, Spec, dict[str, Any]] | None = None
        self._open("w")
        self._close()  # the empty versioned file is a commit point of its own
        self._open("r+")

    # -- the file -----------------------------------------------------------------------

    def _open(self, mode: str) -> None:
        self._opened = h5vc.open(str(self.path), mode)
        self.vf = self._opened.__enter__()

    def _close(self) -> None:
        opened, self._opened = self._opened, None
        if opened is not None:
            opened.__exit__(None, None, None)

    @property  # type: ignore[override]
    def file(self) -> h5py.File:
        return self.vf.f.file

    @rule()
    def reopen(self) -> None:
        self._close()
        assert not os.path.exists(journal_path(self.path))
        self._open("r+")

    def teardown(self) -> None:
        try:
            self._close()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    # -- operations, each as a function of the handle and the model it leads to -----------

    def _commit_op(self, data) -> tuple[Any, dict[str, VersionModel], str]:
        prev = data.draw(st.sampled_from(["", *sorted(self.model)]), label="prev")
        state = copy.deepcopy(self.model.get(prev, VersionModel()))
        name = f"v{self.counter}"
        self.counter += 1
        n_edits = data.draw(st.integers(1, 3), label="edits")
        # Every edit is drawn before the operation runs: a write made to fail stops
        # the staging at a point that may differ from run to run, and no draw may
        # depend on it.
        planned = _Plan()
        for _ in range(n_edits):
            self._edit(data, planned, state)

        def run(vf: h5vc.VersionedHDF5File) -> None:
            with vf.stage_version(name, prev_version=prev) as g:
                planned.replay(g)

        after = {**self.model, name: state}
        return run, after, name

    def _delete_op(self, data) -> tuple[Any, dict[str, VersionModel], str] | None:
        candidates = sorted(set(self.model) - {self.current})
        if not candidates:
            return None
        doomed = data.draw(
            st.lists(st.sampled_from(candidates), min_size=1, max_size=3, unique=True),
            label="doomed",
        )

        def run(vf: h5vc.VersionedHDF5File) -> None:
            h5vc.delete_versions(vf, doomed)

        after = {name: state for name, state in self.model.items() if name not in doomed}
        return run, after, self.current

    def _present(self) -> list[str]:
        return sorted({path for state in self.model.values() for path in state.data})

    def _metadata_op(self, data) -> tuple[Any, dict[str, VersionModel], str] | None:
        """A change of settings that succeeds; the new settings are applied to
        ``self.specs`` and ``self.compression`` by :meth:`_apply_settings`."""
        present = self._present()
        if not present:
            return None
        path = data.draw(st.sampled_from(present), label="path")
        spec = self.specs[path]
        kind = data.draw(st.sampled_from(["fill", "dtype", "compression", "chunks"]))
        kwargs: dict[str, Any] = {}
        new = spec
        if kind == "fill":
            fill = data.draw(st.sampled_from(FILLS[path]), label="fill")
            kwargs["fillvalue"] = fill
            new = replace(spec, fill=np.asarray(fill).astype(spec.dtype)[()])
        elif kind == "dtype":
            dtype = data.draw(st.sampled_from(CASTS[path]), label="dtype")
            kwargs["dtype"] = dtype
            new = replace(spec, dtype=dtype, fill=np.asarray(spec.fill).astype(dtype)[()])
        elif kind == "compression":
            kwargs.update(data.draw(st.sampled_from(COMPRESSIONS), label="compression"))
        else:
            chunks = tuple(data.draw(st.integers(1, 4)) for _ in range(spec.ndim))
            kwargs["chunks"] = chunks
            new = replace(spec, chunks=chunks)
        after = {}
        for name, state in self.model.items():
            state = copy.deepcopy(state)
            if path in state.data:
                array = state.data[path]
                if kind == "fill":
                    array = np.where(array == spec.fill, new.fill, array)
                state.data[path] = array.astype(new.dtype)
            after[name] = state

        def run(vf: h5vc.VersionedHDF5File) -> None:
            h5vc.modify_metadata(vf, path, **kwargs)

        self._pending_settings = (path, new, kwargs)
        return run, after, self.current

    def _apply_settings(self) -> None:
        assert self._pending_settings is not None
        path, new, kwargs = self._pending_settings
        self.specs[path] = new
        if "compression" in kwargs:
            self.compression[path] = {k: v for k, v in kwargs.items() if v}

    def _operation(self, data, kind: str) -> tuple[Any, dict[str, VersionModel], str] | None:
        self._pending_settings = None
        if kind == "commit":
            return self._commit_op(data)
        if kind == "delete":
            return self._delete_op(data)
        return self._metadata_op(data)

    def _succeeded(self, after: dict[str, VersionModel], current: str) -> None:
        self.model = after
        self.current = current
        if self._pending_settings is not None:
            self._apply_settings()
        # delete_versions removes the store of a path no version holds any more: a
        # dataset created there later starts with the settings it is created with.
        for path in set(SPECS) - set(self._present()):
            self.specs[path] = SPECS[path]
            self.compression[path] = {}

    # -- lifecycle rules ------------------------------------------------------------------

    @precondition(lambda self: len(self.model) > 1)
    @rule(data=st.data())
    def delete_versions(self, data) -> None:
        operation = self._operation(data, "delete")
        if operation is None:
            return
        run, after, current = operation
        run(self.vf)
        self._succeeded(after, current)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def modify_metadata(self, data) -> None:
        operation = self._operation(data, "metadata")
        if operation is None:
            return
        run, after, current = operation
        run(self.vf)
        assert self._pending_settings is not None
        event(f"modify_metadata: {sorted(self._pending_settings[2])}")
        self._succeeded(after, current)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def modify_metadata_refused(self, data) -> None:
        """A cast that cannot hold the fill value, or a fill value the dtype cannot
        hold: ``MetadataMismatchError``, and nothing changes."""
        if not self._present():
            return
        path = data.draw(st.sampled_from(self._present()), label="path")
        spec = self.specs[path]
        if np.dtype(spec.dtype).kind in "bf":
            return
        if data.draw(st.booleans(), label="fill"):
            kwargs: dict[str, Any] = {"fillvalue": 1e300}
        else:
            fill = np.asarray(spec.fill)
            dtype = "u1" if fill < 0 else "i1" if fill > 127 else None
            if dtype is None:
                return
            kwargs = {"dtype": dtype}
        event(f"modify_metadata refused: {sorted(kwargs)}")
        before = _read(str(self.path))
        with pytest.raises(MetadataMismatchError):
            h5vc.modify_metadata(self.vf, path, **kwargs)
        assert _read(str(self.path)) == before

    @precondition(lambda self: self.model)
    @rule()
    def repack(self) -> None:
        self._close()
        self.files += 1
        target = self.directory / f"machine{self.files}.h5"
        h5vc.repack(self.path, target)
        self.path.unlink()
        self.path = target
        self._open("r+")

    @rule(
        data=st.data(),
        kind=st.sampled_from(["commit", "delete", "metadata"]),
        at=st.integers(1, 48),
        full=st.booleans(),
    )
    def failing_write(self, data, kind: str, at: int, full: bool) -> None:
        """The ``at``-th write of the operation fails (EIO, or ENOSPC: a full disk)."""
        operation = self._operation(data, kind)
        if operation is None:
            return
        run, _, _ = operation
        saved = self._saved()
        journal = files.journal_of(self.vf.f)
        assert journal is not None
        code = errno.ENOSPC if full else errno.EIO
        journal.fault = fault = Fault(at, str(self.path), kill=False, code=code)
        try:
            run(self.vf)
        except OSError:
            assert fault.fired
            event(f"failing write: {kind} raised and was undone")
            return  # undone: the model stays (checked by the invariants)
        finally:
            journal.fault = None
        assert not fault.fired, "an operation whose write failed must raise"
        event(f"failing write: {kind} made fewer writes and completed")
        del journal
        self._restore(saved)

    def _saved(self) -> bytes | None:
        """The file's bytes before an operation (closed and opened again to take them).

        An operation that makes fewer writes than the failing one completes. How many
        writes it makes can vary from run to run (what HDF5 flushes when), so the file
        is then put back as it was: the model, and every later draw, stay the same
        whichever way it went."""
        self._close()
        saved = _read(str(self.path))
        self._open("r+")
        return saved

    def _restore(self, saved: bytes | None) -> None:
        self._close()
        _write(str(self.path), saved)
        _write(journal_path(self.path), None)
        self._open("r+")

    @rule(
        data=st.data(),
        kind=st.sampled_from(["commit", "delete", "metadata"]),
        at=st.integers(1, 48),
    )
    def killed(self, data, kind: str, at: int) -> None:
        """A process killed before the ``at``-th write of the operation leaves the file
        and its journal as they were then: opened again, the file is as it was before
        the operation."""
        operation = self._operation(data, kind)
        if operation is None:
            return
        run, _, _ = operation
        saved = self._saved()
        journal = files.journal_of(self.vf.f)
        assert journal is not None
        journal.fault = fault = Fault(at, str(self.path), kill=True)
        try:
            run(self.vf)
        finally:
            journal.fault = None
        # A caller's h5py.File that h5vc took over is finished when HDF5 lets go of
        # its journal: hold no reference to it past the close.
        del journal
        self._close()
        if fault.snapshot is None:  # the operation made fewer writes: it completed
            event(f"killed: {kind} made fewer writes and completed (put back)")
            _write(str(self.path), saved)  # see _saved
            _write(journal_path(self.path), None)
        else:
            event(f"killed: {kind} interrupted and rolled back")
            content, log = fault.snapshot
            _write(str(self.path), content)
            _write(journal_path(self.path), log)
        self._open("r+")
        assert not os.path.exists(journal_path(self.path))

    # -- checks -------------------------------------------------------------------------

    @invariant()
    def settings_match_the_model(self) -> None:
        for name, state in self.model.items():
            version = self.vf[name]
            for path in state.data:
                dataset = version[path]
                spec = self.specs[path]
                assert np.array_equal(np.asarray(dataset.fillvalue), np.asarray(spec.fill)), path
                expected = self.compression[path].get("compression")
                assert dataset.compression == expected, path


def _examples() -> int:
    return int(os.environ.get("H5VC_MACHINE_EXAMPLES", "35"))


TestLifecycle = LifecycleMachine.TestCase
TestLifecycle.settings = settings(
    settings.get_profile("h5vc-store-machine"),
    max_examples=_examples(),
    stateful_step_count=25,
    derandomize=bool(os.environ.get("CI")) and "H5VC_MACHINE_EXAMPLES" not in os.environ,
)
if os.environ.get("H5VC_NO_SHRINK"):
    from hypothesis import Phase

    TestLifecycle.settings = settings(
        TestLifecycle.settings, phases=[Phase.explicit, Phase.generate], print_blob=True
    )


class DropInLifecycleMachine(LifecycleMachine):
    """The same rules on a file opened as code written for versioned-hdf5 opens it:
    ``h5py.File`` then ``VersionedHDF5File``, which h5vc takes over for its journal."""

    def _open(self, mode: str) -> None:
        self._opened = contextlib.ExitStack()
        h5file = self._opened.enter_context(h5py.File(self.path, mode))
        self.vf = h5vc.VersionedHDF5File(h5file)


TestDropInLifecycle = DropInLifecycleMachine.TestCase
TestDropInLifecycle.settings = settings(
    TestLifecycle.settings, max_examples=max(1, _examples() * 2 // 3)
)

__all__ = ["DropInLifecycleMachine", "LifecycleMachine"]
