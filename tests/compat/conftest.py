"""Reference files written by versioned-hdf5, generated once per test session."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import make_vhdf5_files


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    """(directory, expectations) of the files versioned-hdf5 wrote; never modify them."""
    directory = tmp_path_factory.mktemp("vhdf5_reference")
    return directory, make_vhdf5_files.make_files(directory)


@pytest.fixture
def copy_reference(reference, tmp_path: Path):
    """``copy_reference(name)``: a private copy of one reference file, and its expectations."""
    directory, expected = reference

    def copy(name: str) -> tuple[str, dict]:
        target = tmp_path / name
        shutil.copyfile(directory / name, target)
        return str(target), expected[name]

    return copy
