"""Writers killed with SIGKILL at random moments lose nothing they reported committed.

A bounded run of the harness in ``killharness.py``; ``benchmarks/crash_kill.py`` runs
the long one.
"""

from __future__ import annotations

from pathlib import Path

import killharness
import pytest

import h5vc


@pytest.mark.parametrize("opener", killharness.OPENERS)
def test_the_writer_model_agrees_with_the_file_without_kills(tmp_path: Path, opener: str) -> None:
    """The harness itself: with no kill, every logged version reads as logged."""
    path, log = tmp_path / "data.h5", tmp_path / "data.log"
    for run in range(2):
        writer = killharness.Writer(path, log, seed=run, run=run, opener=opener)
        for _ in range(12):
            writer.step()
        writer.files.close()
    state = killharness.read_log(log)
    assert state.pending is None and not state.errors
    assert len(state.committed) > 6
    with h5vc.open(str(path)) as vf:
        for name, checksum in state.committed.items():
            assert killharness.tree_checksum(*killharness.read_tree(vf[name])) == checksum, name
        assert any(killharness.COLUMN in vf[name] for name in state.committed)


@pytest.mark.parametrize("opener", killharness.OPENERS)
def test_killed_writers_lose_no_committed_version(tmp_path: Path, opener: str) -> None:
    tally = killharness.run_kills(
        tmp_path, 16, seed=15, max_delay=0.9, kills_per_file=6, opener=opener
    )
    assert tally.kills == 16
    assert tally.checked > 16
    assert tally.ok(), tally.summary() + "\n" + "\n".join(tally.examples)
