"""``StagedChangesArray.has_changes``: whether a commit must write the array anew."""

from __future__ import annotations

import numpy as np
import pytest

from h5vc.staging import StagedChangesArray


def on_base(n: int, chunk: int) -> StagedChangesArray:
    """An array of ``n`` elements whose every chunk lies on one base slab."""
    base = np.arange(1, n + 1)
    grid = -(-n // chunk)
    padded = np.zeros(grid * chunk, dtype=base.dtype)
    padded[:n] = base
    return StagedChangesArray(
        (n,),
        (chunk,),
        base.dtype,
        base_slabs=[padded],
        slab_indices=np.ones(grid, dtype=np.intp),
        slab_offsets=np.arange(grid) * chunk,
    )


def test_reads_and_a_grow_alone_are_no_change() -> None:
    array = on_base(8, 2)
    assert not array.has_changes
    array[3:5]
    array.resize((10,))
    assert not array.has_changes


@pytest.mark.parametrize("kept", [0, 2, 4, 6])
def test_cutting_off_stored_chunks_is_a_change_even_after_growing_back(kept: int) -> None:
    array = on_base(8, 2)
    array.resize((kept,))
    array.resize((8,))
    assert array.has_changes
    assert array[:].tolist() == list(range(1, kept + 1)) + [0] * (8 - kept)


def test_cutting_off_fill_chunks_is_no_change() -> None:
    array = on_base(4, 2)
    array.resize((8,))
    array.resize((4,))
    assert not array.has_changes
