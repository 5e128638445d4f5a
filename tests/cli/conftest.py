"""Fixtures for the command-line tests: a small versioned file and a CliRunner."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

import h5vc
from h5vc.cli import cli


@pytest.fixture
def run() -> Callable[..., Result]:
    """``run("log", path, ...)``: invoke the ``h5vc`` command; stderr is kept apart."""
    runner = CliRunner()

    def invoke(*args: object) -> Result:
        return runner.invoke(cli, [str(arg) for arg in args], catch_exceptions=False)

    return invoke


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """v1 (x: 100 int64 in chunks of 10, attr unit), v2 (x[15] = -1), v3 (group g with
    y), and b1 branching off v1 (x[95] = 7), committed last."""
    path = tmp_path / "data.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1", message="first") as g:
            g.create_dataset("x", data=np.arange(100), chunks=(10,))
            g["x"].attrs["unit"] = "m"
        with vf.stage_version("v2", message="edit one chunk") as g:
            g["x"][15] = -1
        with vf.stage_version("v3") as g:
            g.create_group("g").create_dataset("y", data=np.ones((4, 6)), chunks=(2, 3))
        with vf.stage_version("b1", prev_version="v1", make_current=False) as g:
            g["x"][95] = 7
    return path
