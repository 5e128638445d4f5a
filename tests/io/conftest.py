"""Every read in these tests takes the positioned-read path whatever its size (in use,
boxes under ``FAST_READ_MIN_BYTES`` are read through h5py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from h5vc.store import reading


@pytest.fixture(autouse=True, scope="module")
def _positioned_reads_for_every_size() -> Iterator[None]:
    saved = reading.FAST_READ_MIN_BYTES
    reading.FAST_READ_MIN_BYTES = 0
    yield
    reading.FAST_READ_MIN_BYTES = saved
