"""Readers in other processes read the newest committed version while a writer
commits: no error, no torn read."""

from __future__ import annotations

from pathlib import Path

import readerharness


def test_readers_during_commits_see_only_whole_versions(tmp_path: Path) -> None:
    results = readerharness.run(tmp_path, commits=60, reads=200)
    for reads, errors, torn, seen in results:
        assert reads >= 200
        assert errors == 0
        assert torn == 0
        assert seen > 5, "readers follow the writer's new versions"
