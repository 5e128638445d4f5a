"""Fixtures for the lifecycle tests: versioned files in both writable layouts."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from lifecycle_helpers import new_versioned

import h5vc


@pytest.fixture(params=["h5vc", "compat"])
def layout_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "data.h5"


@pytest.fixture
def vfile(path: Path, layout_name: str) -> Iterator[h5vc.VersionedHDF5File]:
    f, vf = new_versioned(path, layout_name)
    try:
        yield vf
    finally:
        f.close()


@pytest.fixture
def commit_series() -> Callable[..., dict[str, np.ndarray]]:
    """``commit_series(vf, n, ...)``: n versions editing dataset "x"; returns each state."""

    def commit(
        vf: h5vc.VersionedHDF5File, count: int, *, length: int = 2000, chunk: int = 100
    ) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(count)
        data = rng.random(length)
        states = {}
        for number in range(count):
            name = f"v{number}"
            with vf.stage_version(name) as group:
                if number == 0:
                    group.create_dataset("x", data=data, chunks=(chunk,))
                else:
                    start = int(rng.integers(0, length - 150))
                    data[start : start + 150] = rng.random(150)
                    group["x"][start : start + 150] = data[start : start + 150]
            states[name] = data.copy()
        return states

    return commit
