"""Every read in these tests takes the positioned-read path whatever its size (in use,
boxes under ``FAST_READ_MIN_BYTES`` are read through h5py, and small selections of
virtual datasets with few mappings by HDF5 from the virtual dataset)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from h5vc.store import planner


@pytest.fixture(autouse=True, scope="module")
def _positioned_reads_for_every_size() -> Iterator[None]:
    saved = planner.FAST_READ_MIN_BYTES, planner.HDF5_READ_BYTES
    planner.FAST_READ_MIN_BYTES = 0
    planner.HDF5_READ_BYTES = -1
    yield
    planner.FAST_READ_MIN_BYTES, planner.HDF5_READ_BYTES = saved
