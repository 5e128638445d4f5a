"""History commands: ``blame``, ``bisect`` and ``squash``."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import click
import numpy as np

from h5vc.cli._app import CliError, cli, emit_json, json_option, open_versioned, print_table
from h5vc.lifecycle.blame import Blame, BlameRegion

__all__ = ["bisect", "blame", "blame_rows", "squash"]

FILE = click.argument("file", type=click.Path(dir_okay=False))


def blame_rows(result: Blame) -> list[BlameRegion]:
    """The blamed regions, neighbouring chunks of a 1-d dataset with one version joined."""
    regions = result.regions
    if len(result.shape) != 1:
        return regions
    joined: list[BlameRegion] = []
    for item in regions:
        last = joined[-1] if joined else None
        if (
            last is not None
            and last.version == item.version
            and last.region[0].stop == item.region[0].start
        ):
            joined[-1] = BlameRegion(
                (slice(last.region[0].start, item.region[0].stop),), item.version
            )
            continue
        joined.append(item)
    return joined


@cli.command()
@FILE
@click.argument("dataset")
@click.argument("ref", required=False)
@json_option
def blame(file: str, dataset: str, ref: str | None, as_json: bool) -> None:
    """Which version last changed each chunk region of DATASET in REF (a version, tag
    or branch; default: the current version).  Decided from chunk hashes: no data is
    read."""
    with open_versioned(file) as vf:
        result = vf.blame(dataset, ref=ref)
    rows = blame_rows(result)
    if as_json:
        report: dict[str, Any] = {
            "dataset": result.path,
            "version": result.version,
            "shape": list(result.shape),
            "chunks": list(result.chunks),
            "regions": [
                {"region": [[s.start, s.stop] for s in row.region], "version": row.version}
                for row in rows
            ],
        }
        emit_json(report)
        return
    print_table(
        f"/{result.path} in {result.version}",
        ["region", "version"],
        [[row.describe(), row.version] for row in rows],
    )


#: ``git bisect run``'s exit status for "cannot test this version".
SKIP_STATUS = 125


def _expression_test(expression: str) -> Any:
    try:
        code = compile(expression, "<--expr>", "eval")
    except SyntaxError as err:
        raise CliError(f"--expr is not a Python expression: {err.msg} in {expression!r}") from err

    def test(group: Any) -> bool:
        return bool(eval(code, {"np": np, "numpy": np}, {"g": group}))

    return test


def _command_test(command: str, file: str) -> Any:
    def test(group: Any) -> bool:
        env = {**os.environ, "H5VC_FILE": file, "H5VC_VERSION": group.version_name}
        status = subprocess.run(command, shell=True, env=env, check=False).returncode
        if status == SKIP_STATUS or not 0 <= status < 128:
            raise CliError(
                f"--cmd exited with status {status} on version {group.version_name}: expected "
                f"0 (good) or 1-127 except {SKIP_STATUS} (bad); bisect stopped"
            )
        return status != 0

    return test


@cli.command()
@FILE
@click.argument("good")
@click.argument("bad")
@click.option(
    "--expr",
    metavar="EXPR",
    help="Python expression over g (the version's group) and np, true where the version is bad.",
)
@click.option(
    "--cmd",
    metavar="COMMAND",
    help="Shell command run for each version tested (H5VC_FILE and H5VC_VERSION set): "
    "exit status 0 means good, 1-127 bad.",
)
@json_option
def bisect(
    file: str, good: str, bad: str, expr: str | None, cmd: str | None, as_json: bool
) -> None:
    """Find the first version after GOOD up to BAD (versions, tags or branches) that is
    bad, testing about log2(n) of the n versions between them."""
    if (expr is None) == (cmd is None):
        raise CliError("expected one of --expr or --cmd")
    test = _expression_test(expr) if expr is not None else _command_test(str(cmd), file)
    with open_versioned(file) as vf:
        result = vf.bisect(test, good, bad)
    if as_json:
        emit_json(
            {
                "first_bad": result.version,
                "good": result.good,
                "bad": result.bad,
                "versions_between": len(result.path),
                "tested": [{"version": v, "bad": b} for v, b in result.tested],
            }
        )
        return
    for version, found in result.tested:
        click.echo(f"{version}: {'bad' if found else 'good'}")
    click.echo(
        f"first bad version: {result.version} ({len(result.tested)} of "
        f"{len(result.path)} version(s) tested)"
    )


@cli.command()
@FILE
@click.argument("first")
@click.argument("last")
@click.option("--name", help="Name of the new version (default: generated).")
@click.option("-m", "--message", help="Message of the new version (default: the run's).")
def squash(file: str, first: str, last: str, name: str | None, message: str | None) -> None:
    """Replace the linear run of versions FIRST..LAST by one version holding LAST's data;
    LAST's children and branches move to it, and the space only the run used is freed."""
    with open_versioned(file, "r+") as vf:
        count = len(vf)
        new = vf.squash(first, last, name=name, message=message)
        removed = count + 1 - len(vf)
    click.echo(f"squashed {removed} version(s) {first}..{last} into {new}")
