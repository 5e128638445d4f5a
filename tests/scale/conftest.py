"""Fixtures for Dask, xarray and remote reads of versioned files."""

from __future__ import annotations

import importlib.metadata
import pathlib
import sys
from collections.abc import Iterator

import numpy as np
import pytest
from scale_helpers import TIMES, expected_x

import h5vc
from h5vc import filecache


@pytest.fixture
def versioned(tmp_path: pathlib.Path) -> pathlib.Path:
    """A file with versions v1, v2, v3 of a (300, 40) float64 dataset in 10x8 chunks."""
    path = tmp_path / "versions.h5"
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1", timestamp=TIMES["v1"]) as g:
            g.create_dataset("grid/x", data=expected_x("v1"), chunks=(10, 8))
            g.create_dataset("y", data=np.arange(1000, dtype=np.int32), chunks=(100,))
        with vf.stage_version("v2", timestamp=TIMES["v2"]) as g:
            g["grid/x"][5:15, 3:7] = -2
        with vf.stage_version("v3", timestamp=TIMES["v3"]) as g:
            g["grid/x"][250:, :] = -3
    return path


@pytest.fixture(autouse=True)
def _close_cached_files() -> Iterator[None]:
    """Every test starts and ends with no file open in this process's cache."""
    filecache.clear()
    yield
    filecache.clear()


@pytest.fixture(scope="session")
def h5vc_engine(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The engine name ``"h5vc"``, registered as ``pyproject.toml`` declares it.

    An installed h5vc registers it through its entry point; a source tree that is
    only on ``sys.path`` gets the same entry point from a minimal distribution
    record on ``sys.path``.
    """
    groups = importlib.metadata.entry_points(group="xarray.backends")
    if "h5vc" not in {entry.name for entry in groups}:
        site = tmp_path_factory.mktemp("site")
        info = site / "h5vc_source_tree-0.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: h5vc-source-tree\n")
        (info / "entry_points.txt").write_text(
            "[xarray.backends]\nh5vc = h5vc.xarray:H5vcBackendEntrypoint\n"
        )
        sys.path.append(str(site))
        from xarray.backends import plugins

        plugins.list_engines.cache_clear()
    return "h5vc"
