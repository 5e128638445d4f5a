"""The ``h5vc`` command group, its error handling and shared output helpers."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import click
import h5py

import h5vc
from h5vc.api import VersionedHDF5File
from h5vc.durable.files import ReadLock, recover_abandoned
from h5vc.errors import H5vcError, NotVersionedError
from h5vc.store import layout

if TYPE_CHECKING:  # rich is loaded by the first table, tree or progress bar drawn
    from rich.console import Console

__all__ = [
    "CliError",
    "cli",
    "emit_json",
    "json_option",
    "main",
    "open_versioned",
    "print_table",
    "progress",
    "stdout_console",
]

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class CliError(click.ClickException):
    """Bad input or a failed operation: one line on stderr, exit code 1."""

    def __init__(self, message: str, command: str | None = None):
        super().__init__(" ".join(message.split()))
        self.command = command
        #: The command was given ``--json``: the error is also printed as JSON on stdout.
        self.as_json = False

    def show(self, file: Any = None) -> None:
        where = self.command
        if where is None:
            ctx = click.get_current_context(silent=True)
            where = ctx.command_path if ctx is not None else "h5vc"
        click.echo(f"{where}: error: {self.format_message()}", err=True)
        if self.as_json:
            emit_json({"error": self.format_message(), "command": where})


#: The module defining each command: a command's module is imported when the command
#: is asked for (every one for the list of ``--help``), so a command starts without
#: the others' imports.
COMMAND_MODULES = {
    "bisect": "_history",
    "blame": "_history",
    "branch": "_refs",
    "cherry-pick": "_refs",
    "delete": "_maintain",
    "demo": "_demo",
    "diff": "_inspect",
    "du": "_inspect",
    "export": "_maintain",
    "log": "_inspect",
    "merge": "_refs",
    "repack": "_maintain",
    "revert": "_refs",
    "show": "_inspect",
    "squash": "_history",
    "tag": "_refs",
    "verify": "_verify",
}


class _Group(click.Group):
    """A command group that turns library and OS errors into one-line messages, and
    imports a command's module when the command is asked for."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMAND_MODULES.get(cmd_name)
        if module is not None and cmd_name not in self.commands:
            importlib.import_module(f"h5vc.cli.{module}")
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        for module in sorted(set(COMMAND_MODULES.values())):
            importlib.import_module(f"h5vc.cli.{module}")
        return super().list_commands(ctx)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CliError as err:
            if err.command is None and ctx.invoked_subcommand:
                err.command = f"h5vc {ctx.invoked_subcommand}"
            err.as_json = bool(ctx.meta.get(_JSON_KEY))
            raise
        except (H5vcError, OSError, KeyError, ValueError) as err:
            message = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
            sub = ctx.invoked_subcommand
            error = CliError(message, f"h5vc {sub}" if sub else "h5vc")
            error.as_json = bool(ctx.meta.get(_JSON_KEY))
            raise error from err


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: the installed version, looked up only when asked for (reading
    the package's metadata costs 40-60 ms of every command's start)."""
    if value and not ctx.resilient_parsing:
        click.echo(f"h5vc {h5vc.__version__}")
        ctx.exit()


@click.group(cls=_Group, context_settings=CONTEXT_SETTINGS)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
def cli() -> None:
    """Inspect and maintain versioned HDF5 files.

    Commands take the versioned file first (h5vc log data.h5); listing commands
    print JSON with --json.  Run "h5vc demo" to make a file to try them on.
    """


#: ``ctx.meta`` key (shared by a command and its group) set when ``--json`` was given.
_JSON_KEY = "h5vc.json"


def _remember_json(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.meta[_JSON_KEY] = True
    return value


def json_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--json`` (machine-readable output, no progress bars; errors also as JSON on
    stdout) to a command."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        callback=_remember_json,
        help="Print JSON instead of a table or text.",
    )(func)


def emit_json(value: Any) -> None:
    """Print ``value`` as JSON: indented for a terminal, one line for a pipe or a
    file (Python's indenting encoder is several times slower: ``du`` of 10,000
    versions spent 0.11 s indenting, 0.03 s not)."""
    isatty = getattr(sys.stdout, "isatty", None)
    indent = 2 if isatty is not None and isatty() else None
    click.echo(json.dumps(value, indent=indent, default=_json_default))


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    return str(value)


def stdout_console() -> Console:
    """A rich console on stdout; as wide as the terminal, or 120 columns when piped."""
    from rich.console import Console

    file = sys.stdout
    if file.isatty():
        return Console(file=file)
    return Console(file=file, width=120, no_color=True, highlight=False)


def print_table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[str] = ()
) -> None:
    """A table on stdout: drawn by rich on a terminal, plain aligned text otherwise
    (quick for thousands of rows, and easy to pipe)."""
    file = sys.stdout
    if file.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title)
        for column in columns:
            table.add_column(column, justify="right" if column in right else "left")
        for row in rows:
            table.add_row(*row)
        Console(file=file).print(table)
        return
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(w) if column in right else cell.ljust(w)
            for cell, w, column in zip(cells, widths, columns)
        ]
        return "  ".join(parts).rstrip()

    click.echo("\n".join([f"{title}:", line(columns), *(line(row) for row in rows)]))


def _interactive() -> bool:
    try:
        return sys.stdout.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _ignore(n: float = 1) -> None:
    pass


@contextlib.contextmanager
def progress(
    description: str, total: float | None = None, *, quiet: bool = False
) -> Iterator[Callable[[float], None]]:
    """A progress bar on stderr (a spinner when ``total`` is None), yielding ``advance(n)``.

    Nothing is shown when stdout is not a terminal or ``quiet`` (``--json``) is set.
    """
    if quiet or not _interactive():
        yield _ignore
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), TextColumn("{task.percentage:>3.0f}%")]
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)

        def advance(n: float = 1) -> None:
            bar.advance(task, n)

        yield advance


def check_file(path: str) -> None:
    """Raise a one-line error unless ``path`` is an existing HDF5 file."""
    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    if os.path.isdir(path):
        raise CliError(f"{path}: is a directory, expected an HDF5 file")
    if not h5py.is_hdf5(path):
        raise CliError(f"{path}: not an HDF5 file")


@contextlib.contextmanager
def open_versioned(path: str, mode: str = "r") -> Iterator[VersionedHDF5File]:
    """Open the versioned file ``path``; a missing, non-HDF5 or unversioned file is an error.

    Opening runs the journal: a file left by a writer that crashed is rolled back to
    its last commit point first.  A writable open goes through :func:`h5vc.open`: the
    command's writes end in commit points, a failed one is rolled back, and a file
    another process is writing is refused (``WriterActiveError``).  A writable open
    never initializes a file that holds no versioned data.
    """
    check_file(path)
    recover_abandoned(path)
    lock = ReadLock(path)
    try:
        with lock:  # opened between commits of a writer at work
            f = h5py.File(path, "r")
            versioned = layout.VERSION_DATA in f
    finally:
        lock.close()
    with f:
        if not versioned:
            raise NotVersionedError(
                f"{path}: not an h5vc file (no {layout.VERSION_DATA!r} group at its root)"
            )
        if mode == "r":
            vf = VersionedHDF5File(f)
            try:
                # The whole command reads the file as one read: a writer at work
                # waits for it, and it sees one committed state.
                with vf.file_state.reading():
                    yield vf
            finally:
                vf.close()
            return
    with h5vc.open(path, "r+" if mode == "a" else mode) as vf:
        yield vf


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``h5vc`` command with ``argv`` (default: the process arguments)."""
    try:
        result = cli.main(args=argv, prog_name="h5vc", standalone_mode=False)
    except click.ClickException as err:
        err.show()
        return err.exit_code
    except click.exceptions.Exit as err:
        return err.exit_code
    except click.exceptions.Abort:
        click.echo("Aborted!", err=True)
        return 1
    return result if isinstance(result, int) else 0
