"""Fixtures of the safety tests: a fresh file path."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def path(tmp_path: Path) -> str:
    """Path of a fresh HDF5 file (not created yet)."""
    return str(tmp_path / "data.h5")
