"""Fixtures and Hypothesis profiles for the versioned store tests.

The ``h5vc-store`` profile bounds the property and state-machine tests so the
whole directory runs in well under two minutes on two cores; the tests opt in
with ``@settings(settings.get_profile("h5vc-store"))``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import h5py
import pytest
from hypothesis import HealthCheck, settings
from store_helpers import snapshot_group

import h5vc

settings.register_profile(
    "h5vc-store",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "h5vc-store-machine",
    max_examples=40,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture
def path(tmp_path: Path) -> str:
    """Path of a fresh HDF5 file (not created yet)."""
    return str(tmp_path / "data.h5")


@pytest.fixture
def h5file(path: str) -> Iterator[h5py.File]:
    """A new writable h5py file, closed after the test."""
    with h5py.File(path, "w") as f:
        yield f


@pytest.fixture
def vf(h5file: h5py.File) -> h5vc.VersionedHDF5File:
    """A new versioned file."""
    return h5vc.VersionedHDF5File(h5file)


@pytest.fixture
def snapshot() -> Callable[[str], dict[str, object]]:
    """``snapshot(path)``: the structure and contents of the file at ``path``."""

    def take(file_path: str) -> dict[str, object]:
        with h5py.File(file_path, "r") as f:
            return snapshot_group(f)

    return take


@pytest.fixture(params=["staged", "written through"])
def creation_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test twice: datasets created with data are staged in memory, then
    written to the file right away (as large ones are)."""
    if request.param == "written through":
        monkeypatch.setattr(h5vc.wrappers.group, "WRITE_THROUGH_BYTES", 0)
    return str(request.param)
