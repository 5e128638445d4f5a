"""Bad input: one line on stderr, exit code 1 (2 for usage errors), nothing changed."""

from __future__ import annotations

import subprocess
import sys

import click
import h5py
import numpy as np
import pytest
from cli_helpers import file_digest

from h5vc.cli import cli

VERBS = {
    "log": [],
    "show": ["v1"],
    "diff": ["v1", "v2"],
    "du": [],
    "delete": ["v1"],
    "export": ["v1", "{tmp}/out.h5"],
}


def _args(verb, path, tmp_path):
    return [verb, path, *(arg.format(tmp=tmp_path) for arg in VERBS[verb])]


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_missing_file(run, verb, tmp_path):
    result = run(*_args(verb, tmp_path / "missing.h5", tmp_path))
    assert result.exit_code == 1
    assert result.stderr == f"h5vc {verb}: error: {tmp_path / 'missing.h5'}: no such file\n"
    assert not (tmp_path / "missing.h5").exists()


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_not_an_hdf5_file(run, verb, tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    result = run(*_args(verb, path, tmp_path))
    assert result.exit_code == 1
    assert result.stderr == f"h5vc {verb}: error: {path}: not an HDF5 file\n"
    assert path.read_text() == "hello"


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_not_an_h5vc_file(run, verb, tmp_path):
    path = tmp_path / "plain.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(3)
    before = file_digest(path)
    result = run(*_args(verb, path, tmp_path))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"h5vc {verb}: error: {path}: not an h5vc file")
    assert result.stderr.count("\n") == 1
    assert file_digest(path) == before


@pytest.mark.parametrize(
    "args",
    [["show", "{f}", "nope"], ["diff", "{f}", "v1", "nope"], ["log", "{f}", "nope"]],
)
def test_unknown_version(run, history, args):
    before = file_digest(history)
    result = run(*(arg.format(f=history) for arg in args))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"h5vc {args[0]}: error: ")
    assert "nope" in result.stderr and result.stderr.count("\n") == 1
    assert file_digest(history) == before


def test_usage_errors_exit_2(run, history):
    assert run("show").exit_code == 2
    assert run("log", history, "-n", "-1").exit_code == 2
    assert run("frobnicate").exit_code == 2


def _commands(group, prefix=()):
    """Every command path, as click lists them (modules imported as they are asked for)."""
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        yield (*prefix, name)
        if isinstance(command, click.Group):
            yield from _commands(command, (*prefix, name))


@pytest.mark.parametrize("path", [(), *_commands(cli)], ids=lambda p: " ".join(p) or "h5vc")
def test_help_everywhere(run, path):
    result = run(*path, "--help")
    assert result.exit_code == 0
    assert result.output.startswith("Usage: ")
    assert len(result.output.splitlines()) > 3


def test_version_flag(run):
    result = run("--version")
    assert result.exit_code == 0 and result.output.startswith("h5vc ")


def test_a_command_starts_without_the_others_modules():
    """``h5vc du`` imports its own module, not the demo's, the merge's or verify's."""
    code = (
        "import sys\n"
        "from h5vc.cli import main\n"
        "try:\n"
        "    main(['du', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('h5vc.cli.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = out.stdout.strip().splitlines()[-1]
    assert "h5vc.cli._inspect" in loaded
    for other in ("h5vc.cli._demo", "h5vc.cli._refs", "h5vc.cli._verify", "h5vc.cli._history"):
        assert other not in loaded


def test_every_command_is_listed_with_its_module():
    """``COMMAND_MODULES`` names every command of the CLI's modules, each with the
    module that defines it (a command left out would never be found)."""
    import importlib
    import pkgutil

    import h5vc.cli
    from h5vc.cli._app import COMMAND_MODULES

    for info in pkgutil.iter_modules(h5vc.cli.__path__):
        if not info.name.startswith("__"):  # not __main__, which runs the command
            importlib.import_module(f"h5vc.cli.{info.name}")
    defined = {
        name: command.callback.__module__.rsplit(".", 1)[1]
        for name, command in cli.commands.items()
        if command.callback is not None
    }
    assert defined == COMMAND_MODULES
