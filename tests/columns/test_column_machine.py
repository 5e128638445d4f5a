"""A state machine of staged column edits, commits and deletions against a dict model."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import h5vc
from h5vc.errors import ColumnKeyError

keys = st.integers(0, 24)
#: A few distinct samples, so that equal samples (deduplicated) come up often.
samples = st.integers(0, 6).map(lambda v: np.array([v, v * 7 % 5], np.uint8))


class ColumnMachine(RuleBasedStateMachine):
    @initialize()
    def open_file(self) -> None:
        self.directory = tempfile.mkdtemp()
        self.files = contextlib.ExitStack()
        self.vf = self.files.enter_context(h5vc.open(Path(self.directory) / "machine.h5", "a"))
        self.committed: dict[str, dict[int, bytes]] = {}
        self.model: dict[int, bytes] = {}
        self.count = 0
        self._stage(create=True)

    def _stage(self, create: bool = False) -> None:
        self.count += 1
        self.name = f"v{self.count}"
        self.stage = self.vf.stage_version(self.name)
        group = self.stage.__enter__()
        self.col = group.create_column("c", shape=(2,), dtype="uint8") if create else group["c"]

    @rule(key=keys, sample=samples)
    def set_one(self, key: int, sample: np.ndarray) -> None:
        self.col[key] = sample
        self.model[key] = sample.tobytes()

    @rule(pairs=st.dictionaries(keys, samples, max_size=8))
    def set_many(self, pairs: dict[int, np.ndarray]) -> None:
        self.col.set_many(list(pairs), list(pairs.values()))
        self.model.update({k: v.tobytes() for k, v in pairs.items()})

    @rule(key=keys)
    def delete(self, key: int) -> None:
        if key in self.model:
            del self.col[key]
            del self.model[key]
        else:
            with pytest.raises(ColumnKeyError):
                del self.col[key]

    @rule()
    def commit(self) -> None:
        previous = dict(self.committed.get(f"v{self.count - 1}", {}))
        self.stage.__exit__(None, None, None)
        self.committed[self.name] = dict(self.model)
        if self.count > 1 and f"v{self.count - 1}" in self.committed:
            change = self.vf.diff(f"v{self.count - 1}", self.name).columns.get("c")
            added = sorted(set(self.model) - set(previous))
            removed = sorted(set(previous) - set(self.model))
            changed = sorted(k for k in set(previous) & set(self.model)
                             if previous[k] != self.model[k])  # fmt: skip
            got = ([], [], []) if change is None else (change.added, change.removed, change.changed)
            assert tuple(sorted(g) for g in got) == (added, removed, changed)
        self._check(self.name)
        self._stage()

    @precondition(lambda self: len(self.committed) > 1)
    @rule(data=st.data())
    def delete_version(self, data: st.DataObject) -> None:
        self.stage.__exit__(ValueError, ValueError("abandoned"), None)  # stage dropped
        self.count -= 1
        older = sorted(self.committed)[:-1]
        doomed = data.draw(st.sampled_from(older))
        h5vc.delete_versions(self.vf, [doomed])
        del self.committed[doomed]
        assert h5vc.verify(self.vf).ok
        for name in self.committed:
            self._check(name)
        self.model = dict(self.committed[max(self.committed, key=lambda n: int(n[1:]))])
        self._stage()

    def _check(self, name: str) -> None:
        col = self.vf[name]["c"]
        expected = self.committed[name]
        assert sorted(col) == sorted(expected)
        if expected:
            ordered = sorted(expected)
            got = col.get_many(ordered)
            assert [row.tobytes() for row in got] == [expected[k] for k in ordered]

    @invariant()
    def staged_column_matches_the_model(self) -> None:
        if not hasattr(self, "col"):
            return
        assert len(self.col) == len(self.model)
        assert sorted(self.col) == sorted(self.model)

    def teardown(self) -> None:
        if hasattr(self, "stage"):
            with contextlib.suppress(ValueError):
                self.stage.__exit__(ValueError, ValueError("done"), None)
        if hasattr(self, "files"):
            self.files.close()
            shutil.rmtree(self.directory, ignore_errors=True)


ColumnMachine.TestCase.settings = settings(max_examples=20, stateful_step_count=25, deadline=None)
test_column_machine = ColumnMachine.TestCase
