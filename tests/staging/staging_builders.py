"""Builders shared by the staging tests: base slabs laid out like raw_data."""

from __future__ import annotations

from typing import Any

import numpy as np

from h5vc.staging import StagedChangesArray


def chunk_grid(shape: tuple[int, ...], chunk_size: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(-(-n // c) for n, c in zip(shape, chunk_size))


def chunk_box(coords: tuple[int, ...], shape, chunk_size) -> tuple[slice, ...]:
    return tuple(slice(k * c, min((k + 1) * c, n)) for k, c, n in zip(coords, chunk_size, shape))


def build_base(
    data: np.ndarray,
    chunk_size: tuple[int, ...],
    rng: np.random.Generator,
    fill_value: Any,
    fill_share: float = 0.2,
    shuffle: bool = True,
    garbage: Any = -999,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Lay ``data`` out as a base slab; some chunks become fill-value chunks.

    Returns ``(model, base_slab, slab_indices, slab_offsets)`` where ``model`` is
    ``data`` with the fill-value chunks applied. Beyond the array's edge, chunks
    on the base slab hold ``garbage``.
    """
    model = data.copy()
    grid = chunk_grid(data.shape, chunk_size)
    slab_indices = np.zeros(grid, dtype=np.intp)
    slab_offsets = np.zeros(grid, dtype=np.intp)
    all_coords = list(np.ndindex(*grid))
    on_base = [coords for coords in all_coords if rng.random() >= fill_share]
    for coords in all_coords:
        if coords not in on_base:
            model[chunk_box(coords, data.shape, chunk_size)] = fill_value
    slots = rng.permutation(len(on_base)) if shuffle else np.arange(len(on_base))
    n_slots = len(on_base) + 1  # one unused slot
    base = np.full((n_slots * chunk_size[0], *chunk_size[1:]), garbage, dtype=data.dtype)
    for coords, slot in zip(on_base, slots):
        box = chunk_box(coords, data.shape, chunk_size)
        extent = tuple(s.stop - s.start for s in box)
        row = int(slot) * chunk_size[0]
        target = (slice(row, row + extent[0]), *(slice(0, n) for n in extent[1:]))
        base[target] = data[box]
        slab_indices[coords] = 1
        slab_offsets[coords] = row
    return model, base, slab_indices, slab_offsets


def staged_from_base(
    data: np.ndarray,
    chunk_size: tuple[int, ...],
    rng: np.random.Generator,
    fill_value: Any = 0,
    **kwargs: Any,
) -> tuple[StagedChangesArray, np.ndarray]:
    """A StagedChangesArray over a shuffled base slab, and its numpy model."""
    model, base, slab_indices, slab_offsets = build_base(
        data, chunk_size, rng, fill_value, **kwargs
    )
    base.flags.writeable = False
    staged = StagedChangesArray(
        data.shape,
        chunk_size,
        data.dtype,
        fill_value,
        base_slabs=[base],
        slab_indices=slab_indices,
        slab_offsets=slab_offsets,
    )
    return staged, model


def check_invariants(staged: StagedChangesArray) -> None:
    """Slab bookkeeping: referenced slabs exist, unreferenced staged slabs are gone."""
    referenced = set(np.unique(staged.slab_indices).tolist())
    for slab in referenced:
        assert staged.slabs[slab] is not None
    for slab in range(1 + staged.n_base_slabs, len(staged.slabs)):
        assert (staged.slabs[slab] is not None) == (slab in referenced)
    on_staged_slab = any(s > staged.n_base_slabs for s in referenced)
    assert staged.has_changes == (on_staged_slab or staged.dropped_data)
