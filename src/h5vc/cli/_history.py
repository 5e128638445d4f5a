"""History commands: ``blame``, ``bisect`` and ``squash``."""

from __future__ import annotations

from typing import Any

import click

from h5vc.cli._app import cli, emit_json, json_option, open_versioned, print_table
from h5vc.lifecycle.blame import Blame, BlameRegion

__all__ = ["blame", "blame_rows"]

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
