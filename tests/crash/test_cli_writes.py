"""The ``h5vc`` command writes through the journal: it is refused while another process
writes the file, rolls back a journal a crashed writer left, and a write that fails
leaves the file at its last commit point."""

from __future__ import annotations

import errno
import functools
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest
from click.testing import CliRunner, Result

import h5vc
from h5vc.cli import cli
from h5vc.durable import files
from h5vc.durable.journal import JournaledFile, journal_path


def _run(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args], catch_exceptions=False)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    path = tmp_path / "data.h5"
    with h5vc.open(str(path), "w") as vf:
        for number in range(1, 4):
            with vf.stage_version(f"v{number}") as g:
                if number == 1:
                    g.create_dataset("x", data=np.arange(100), chunks=(10,))
                g["x"][number] = -number
    return path


@pytest.fixture
def held(path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process that has ``path`` open for writing until the test ends."""
    code = f"""
        import sys, h5vc
        with h5vc.open({str(path)!r}, "r+"):
            print("open", flush=True)
            sys.stdin.read()
    """
    with subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdout is not None and process.stdout.readline() == "open\n"
        yield process
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=60)


WRITING_COMMANDS = [
    ("delete", "{file}", "v2"),
    ("branch", "create", "{file}", "side"),
    ("tag", "create", "{file}", "t1", "v1"),
    ("branch", "switch", "{file}", "side"),
]


@pytest.mark.parametrize("command", WRITING_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_writing_command_is_refused_while_another_process_writes(
    path: Path, held: subprocess.Popen[str], command: tuple[str, ...]
) -> None:
    before = path.read_bytes()
    result = _run(*(part.format(file=path) for part in command))
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"h5vc {command[0]}: error: ")
    assert str(path) in lines[0] and "another process is writing" in lines[0]
    assert path.read_bytes() == before


def test_reading_commands_run_while_another_process_writes(
    path: Path, held: subprocess.Popen[str]
) -> None:
    result = _run("log", path, "--json")
    assert result.exit_code == 0, result.output
    assert [entry["version"] for entry in json.loads(result.stdout)] == ["v3", "v2", "v1"]


def _interrupted(path: Path) -> None:
    """Leave ``path`` as a writer killed in the middle of committing ``v4`` leaves it."""
    taken: list[tuple[bytes, bytes | None]] = []

    def snapshot(kind: str) -> None:
        journal = Path(journal_path(path))
        taken.append((path.read_bytes(), journal.read_bytes() if journal.exists() else None))

    with h5vc.open(str(path), "r+") as vf:
        journal = files.journal_of(vf.f)
        assert journal is not None
        journal.fault = snapshot
        with vf.stage_version("v4") as g:
            g["x"][:] = 7
        journal.fault = None
    dirty = [(data, log) for data, log in taken if log is not None]
    data, log = dirty[len(dirty) // 2]  # a write in the middle of the commit point
    path.write_bytes(data)
    Path(journal_path(path)).write_bytes(log)


def test_a_writing_command_rolls_back_an_interrupted_journal(path: Path) -> None:
    _interrupted(path)
    result = _run("tag", "create", path, "t1", "v3")
    assert result.exit_code == 0, result.output
    assert not os.path.exists(journal_path(path))
    with h5vc.open(str(path)) as vf:
        assert vf.versions == ["v1", "v2", "v3"]
        assert vf.tags == {"t1": "v3"}
        assert vf["v3"]["x"][3] == -3 and vf["v3"]["x"][4] == 4
        assert h5vc.verify(vf).ok


def test_a_reading_command_rolls_back_an_interrupted_journal(path: Path) -> None:
    _interrupted(path)
    result = _run("log", path, "--json")
    assert result.exit_code == 0, result.output
    assert "v4" not in result.stdout and '"v3"' in result.stdout
    assert not os.path.exists(journal_path(path))


@pytest.mark.parametrize("failing", [1, 3, 6, 10])
def test_a_write_failing_under_a_command_leaves_the_last_commit_point(
    path: Path, monkeypatch: pytest.MonkeyPatch, failing: int
) -> None:
    count = 0

    def fault(kind: str) -> None:
        nonlocal count
        count += 1
        if count == failing:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files, "JournaledFile", functools.partial(JournaledFile, fault=fault))
    result = _run("delete", path, "v2")
    monkeypatch.undo()
    assert count >= failing
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and "h5vc delete: error:" in result.stderr
    assert str(path) in result.stderr
    with h5vc.open(str(path)) as vf:
        assert vf.versions == ["v1", "v2", "v3"]
        assert vf["v2"]["x"][2] == -2
        assert h5vc.verify(vf).ok


def test_an_export_that_fails_leaves_no_output(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OUT appears only once complete; a failed export leaves neither OUT nor its
    partial copy, and a partial copy left by a crash is written over."""
    from h5vc.cli import _maintain

    out = tmp_path / "out.h5"
    real = _maintain._copy_group

    def failing(*args: object) -> None:
        real(*args)  # type: ignore[arg-type]
        assert Path(str(out) + _maintain.EXPORT_PARTIAL_SUFFIX).stat().st_size > 0
        assert not out.exists()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(_maintain, "_copy_group", failing)
    result = _run("export", path, "v2", out)
    assert result.exit_code == 1 and "h5vc export: error:" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.h5"]
    monkeypatch.undo()
    Path(str(out) + _maintain.EXPORT_PARTIAL_SUFFIX).write_bytes(b"left by a crash")
    assert _run("export", path, "v2", out).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.h5", "out.h5"]
    with h5py.File(out, "r") as f:
        assert f["x"][2] == -2
