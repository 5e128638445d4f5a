"""``h5vc demo``: commit a few versions of a small dataset tree and show what the file holds."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

import click
import numpy as np

import h5vc
from h5vc.cli._app import cli
from h5vc.cli._inspect import history, human_size, render_log

__all__ = ["demo", "write_demo"]


def write_demo(path: Path) -> np.ndarray:
    """Write four versions of a small price series to ``path``; return the first prices."""
    rng = np.random.default_rng(0)
    prices = rng.normal(100, 5, size=100_000).cumsum() / 1000
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1", message="initial prices") as g:
            g.create_dataset("prices", data=prices, chunks=(4096,))
            g["prices"].attrs["unit"] = "USD"
        with vf.stage_version("v2", message="fix one tick") as g:
            g["prices"][12_345] = 0.0
        with vf.stage_version("v3", message="append a day of ticks") as g:
            n = g["prices"].shape[0]
            g["prices"].resize((n + 5_000,))
            g["prices"][n:] = rng.normal(100, 5, size=5_000)
        with vf.stage_version("v4", message="add metadata group") as g:
            meta = g.create_group("meta")
            meta.create_dataset("symbols", data=np.array([b"AAA", b"BBB", b"CCC"]))
            meta.attrs["source"] = "demo"
            g["prices"].attrs["unit"] = "EUR"
    return prices


@cli.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default="h5vc-demo")
def demo(directory: Path) -> None:
    """Commit a few versions of a demo file to DIRECTORY/demo.h5 (default: h5vc-demo)
    and show its log, a diff and old data read back."""
    start = time.perf_counter()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "demo.h5"
    prices = write_demo(path)
    echo = click.echo
    with h5vc.open(str(path), "r") as vf:
        echo(f"h5vc {h5vc.__version__}: versioned file {path}")
        echo(f"{len(vf)} versions, current {vf.current_version!r}; log (newest first):\n")
        echo(render_log(history(vf, None, False), None, graph=False))
        echo("\nWhat changed from v1 to v4:")
        echo(vf.diff("v1", "v4").describe())
        old = vf["v1"]["prices"]
        echo(f"\nv1 read back: shape {old.shape}, prices[12345] = {old[12_345]:.4f}")
        new = vf["v4"]["prices"]
        echo(
            f"v4 read back: shape {new.shape}, prices[12345] = {new[12_345]:.4f}, "
            f"unit {new.attrs['unit']!r}"
        )
        at = vf[datetime.now(timezone.utc)]
        echo(f"version at 'now': {at.version_name!r}")
    echo(
        f"\nfile size {human_size(path.stat().st_size)} for 4 versions of "
        f"{human_size(prices.nbytes)} of data; done in {time.perf_counter() - start:.2f} s"
    )
    echo(f"try: h5vc log {path} --graph;  h5vc show {path} v4;  h5vc du {path}")
