"""The ``h5vc`` command: a demo and tools to inspect and maintain versioned files."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

import h5vc

__all__ = ["main"]


def _print_log(vf: h5vc.VersionedHDF5File) -> None:
    stream = sys.stdout
    for info in vf.log():
        stamp = np.datetime_as_string(info.timestamp, unit="ms")
        parent = info.prev_version or "-"
        message = f"  {info.message}" if info.message else ""
        print(f"  {info.name:<12} parent {parent:<12} {stamp}{message}", file=stream)


def _print_diff(vf: h5vc.VersionedHDF5File, old: str, new: str) -> None:
    print(vf.diff(old, new).describe())


def demo(directory: Path) -> int:
    """Commit a few versions of a small dataset tree and show what the store holds."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "demo.h5"
    start = time.perf_counter()
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

    with h5vc.open(str(path), "r") as vf:
        print(f"h5vc {h5vc.__version__}: versioned file {path}")
        print(f"{len(vf)} versions, current {vf.current_version!r}; log (newest first):")
        _print_log(vf)
        print("\nWhat changed from v1 to v4:")
        _print_diff(vf, "v1", "v4")
        old = vf["v1"]["prices"]
        print(f"\nv1 read back: shape {old.shape}, prices[12345] = {old[12_345]:.4f}")
        print(
            f"v4 read back: shape {vf['v4']['prices'].shape}, prices[12345] = "
            f"{vf['v4']['prices'][12_345]:.4f}, unit {vf['v4']['prices'].attrs['unit']!r}"
        )
        at = vf[datetime.now(timezone.utc)]
        print(f"version at 'now': {at.version_name!r}")
    size = path.stat().st_size
    print(
        f"\nfile size {size / 1e6:.2f} MB for 4 versions of {prices.nbytes / 1e6:.2f} MB of data; "
        f"done in {time.perf_counter() - start:.2f} s"
    )
    return 0


def _cmd_log(args: argparse.Namespace) -> int:
    with h5vc.open(args.file, "r") as vf:
        _print_log(vf)
    return 0


def _cmd_diff(args: argparse.Namespace) -> int:
    with h5vc.open(args.file, "r") as vf:
        _print_diff(vf, args.old, args.new)
    return 0


def _cmd_repack(args: argparse.Namespace) -> int:
    h5vc.repack(args.src, args.dst)
    before, after = Path(args.src).stat().st_size, Path(args.dst).stat().st_size
    print(f"{args.src} ({before / 1e6:.2f} MB) -> {args.dst} ({after / 1e6:.2f} MB)")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="h5vc", description=__doc__)
    parser.add_argument("--version", action="version", version=f"h5vc {h5vc.__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo_cmd = commands.add_parser(
        "demo", help="commit a few versions of a demo file and show them"
    )
    demo_cmd.add_argument("directory", nargs="?", default="h5vc-demo", type=Path)
    log = commands.add_parser("log", help="list the versions of a file, newest first")
    log.add_argument("file")
    diff = commands.add_parser("diff", help="what changed between two versions")
    diff.add_argument("file")
    diff.add_argument("old")
    diff.add_argument("new")
    repack = commands.add_parser("repack", help="write a compact copy of a versioned file")
    repack.add_argument("src")
    repack.add_argument("dst")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "demo":
        return demo(args.directory)
    handlers = {"log": _cmd_log, "diff": _cmd_diff, "repack": _cmd_repack}
    try:
        return handlers[args.command](args)
    except (h5vc.H5vcError, OSError, KeyError) as err:
        print(f"h5vc {args.command}: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
