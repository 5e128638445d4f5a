"""Fixtures for the refs and merge tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import h5vc


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "data.h5"


@pytest.fixture
def vf(path: Path) -> Iterator[h5vc.VersionedHDF5File]:
    """A file with v1 (x: 100 int64 in chunks of 10, attr unit='m'; group g with y)."""
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(100), chunks=(10,))
            g["x"].attrs["unit"] = "m"
            g.create_group("g").create_dataset("y", data=np.zeros((6, 4)), chunks=(2, 2))
        yield vf
