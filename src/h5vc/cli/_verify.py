"""``h5vc verify``: check every stored chunk and every version of a file."""

from __future__ import annotations

import dataclasses

import click

import h5vc
from h5vc.cli._app import cli, emit_json, json_option, open_versioned, progress

__all__ = ["verify"]


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@json_option
def verify(file: str, as_json: bool) -> None:
    """Recompute every stored chunk's SHA-256 and check every version's mappings,
    hash tables and version metadata; exit 1 if any problem is found."""
    with open_versioned(file) as vf, progress(f"Verifying {file}", 1.0, quiet=as_json) as bar:
        done_fraction = 0.0

        def advance(done: int, total: int) -> None:
            nonlocal done_fraction
            fraction = done / total if total else 1.0
            bar(fraction - done_fraction)
            done_fraction = fraction

        report = h5vc.verify(vf, progress=advance)
    if as_json:
        emit_json(
            {
                "file": file,
                "ok": report.ok,
                "versions": report.versions,
                "chunks": report.chunks,
                "bytes": report.bytes,
                "problems": [dataclasses.asdict(p) for p in report.problems],
            }
        )
    else:
        for problem in report.problems:
            where = ", ".join(problem.versions) or "-"
            click.echo(f"{problem.kind}: {problem.object}: {problem.message} (versions: {where})")
        state = "ok" if report.ok else f"{len(report.problems)} problem(s)"
        click.echo(
            f"{file}: {state}; {report.versions} version(s), {report.chunks} chunk(s), "
            f"{report.bytes} bytes checked"
        )
    if not report.ok:
        raise click.exceptions.Exit(1)
