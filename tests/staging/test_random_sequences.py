"""Random sequences of operations on a StagedChangesArray against a numpy model."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from staging_builders import check_invariants, staged_from_base

from h5vc.staging import StagedChangesArray

FILL = 42


@st.composite
def shapes_and_chunks(draw: st.DrawFn, max_ndim: int = 4) -> tuple[tuple[int, ...], ...]:
    ndim = draw(st.integers(1, max_ndim))
    max_side = {1: 30, 2: 12, 3: 7, 4: 5}[ndim]
    shape = tuple(draw(st.lists(st.integers(0, max_side), min_size=ndim, max_size=ndim)))
    chunks = tuple(draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    return shape, chunks


def axis_index(draw: st.DrawFn, size: int, allow_int: bool = True) -> Any:
    kind = draw(st.sampled_from(["slice", "int", "full"] if allow_int and size else ["slice"]))
    if kind == "int":
        return draw(st.integers(-size, size - 1))
    if kind == "full":
        return slice(None)
    bound = st.none() | st.integers(-size - 2, size + 2)
    step = st.none() | st.integers(-4, 4).filter(bool)
    return slice(draw(bound), draw(bound), draw(step))


@st.composite
def indices(draw: st.DrawFn, shape: tuple[int, ...]) -> Any:
    """Basic indices, one integer array at any axis, or a boolean mask."""
    kind = draw(st.sampled_from(["basic", "basic", "ellipsis", "array", "mask", "full_mask"]))
    ndim = len(shape)
    if kind == "full_mask":
        seed = draw(st.integers(0, 2**32 - 1))
        return np.random.default_rng(seed).random(shape) < 0.4
    n_axes = draw(st.integers(0, ndim))
    if kind == "ellipsis":  # the explicit items index the last axes
        return (Ellipsis, *(axis_index(draw, n) for n in shape[ndim - n_axes :]))
    items = [axis_index(draw, shape[axis]) for axis in range(n_axes)]
    if kind == "array" and n_axes:
        axis = draw(st.integers(0, n_axes - 1))
        size = shape[axis]
        values = st.integers(-size, size - 1) if size else st.nothing()
        items[axis] = draw(st.lists(values, max_size=6) if size else st.just([]))
    elif kind == "mask" and n_axes:
        axis = draw(st.integers(0, n_axes - 1))
        items[axis] = np.array(
            draw(st.lists(st.booleans(), min_size=shape[axis], max_size=shape[axis])), dtype=bool
        )
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), None)
    if len(items) == 1 and draw(st.booleans()):
        return items[0]
    return tuple(items)


def value_for(draw: st.DrawFn, target_shape: tuple[int, ...], rng: np.random.Generator) -> Any:
    kind = draw(st.sampled_from(["array", "scalar", "broadcast", "list"]))
    if kind == "scalar":
        return int(rng.integers(-100, 100))
    shape = target_shape
    if kind == "broadcast" and shape:
        drop = draw(st.integers(0, len(shape)))
        shape = tuple(1 if draw(st.booleans()) else n for n in shape[drop:])
    value = rng.integers(-100, 100, size=shape)
    return value.tolist() if kind == "list" and value.size else value


def check_same_read(staged: StagedChangesArray, model: np.ndarray, index: Any) -> None:
    expected = model[index]
    actual = staged[index]
    assert type(actual) is type(expected)
    np.testing.assert_array_equal(actual, expected)
    assert np.shape(actual) == np.shape(expected)


@st.composite
def operations(draw: st.DrawFn, shape: tuple[int, ...]) -> list[tuple[str, Any]]:
    """A sequence of operations; shapes track resizes so indices stay meaningful."""
    ops: list[tuple[str, Any]] = []
    current = shape
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["get", "set", "set", "resize", "load"]))
        if kind == "resize":
            current = tuple(draw(st.integers(0, max(n + 4, 3))) for n in current)
            ops.append(("resize", current))
        elif kind in ("get", "set"):
            ops.append((kind, draw(indices(current))))
        else:
            ops.append(("load", None))
    return ops


def resize_model(model: np.ndarray, new_shape: tuple[int, ...]) -> np.ndarray:
    grown = np.full(new_shape, FILL, dtype=model.dtype)
    common = tuple(slice(0, min(a, b)) for a, b in zip(model.shape, new_shape))
    grown[common] = model[common]
    return grown


@given(
    case=shapes_and_chunks(),
    with_base=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_random_sequences_match_numpy(case, with_base, seed, data) -> None:
    shape, chunks = case
    rng = np.random.default_rng(seed)
    initial = rng.integers(-1000, 1000, size=shape)
    if with_base:
        staged, model = staged_from_base(initial, chunks, rng, fill_value=FILL)
    else:
        staged = StagedChangesArray(shape, chunks, np.int64, fill_value=FILL)
        model = np.full(shape, FILL, dtype=np.int64)
    base_content = model.copy()
    for kind, argument in data.draw(operations(shape)):
        if kind == "get":
            check_same_read(staged, model, argument)
        elif kind == "set":
            value = value_for(data.draw, model[argument].shape, rng)
            model[argument] = value
            staged[argument] = value
        elif kind == "resize":
            staged.resize(argument)
            model = resize_model(model, argument)
        else:
            staged.load()
            assert all(slab is None for slab in staged.slabs[1 : 1 + staged.n_base_slabs])
        assert staged.shape == model.shape
        np.testing.assert_array_equal(np.asarray(staged), model)
        check_invariants(staged)
        if not staged.has_changes:  # a commit would link the base: it must hold the data
            np.testing.assert_array_equal(model, resize_model(base_content, model.shape))
    for coords, chunk in staged.changes():
        box = tuple(slice(k * c, k * c + n) for k, c, n in zip(coords, chunks, chunk.shape))
        np.testing.assert_array_equal(chunk, model[box])


@pytest.mark.parametrize("dtype", ["f8", "u1", "S3", object])
def test_dtypes_round_trip(dtype) -> None:
    fill = {"S3": b"x", object: "fill"}.get(dtype, 3)
    staged = StagedChangesArray((7, 5), (3, 2), dtype, fill_value=fill)
    model = np.full((7, 5), fill, dtype=dtype)
    values = np.arange(6).astype("U3" if dtype is object else dtype).reshape(2, 3)
    staged[2:4, 1:4] = values
    model[2:4, 1:4] = values
    staged.resize((9, 4))
    model = np.concatenate([model[:, :4], np.full((2, 4), fill, dtype=dtype)])
    np.testing.assert_array_equal(np.asarray(staged), model)
    assert np.asarray(staged).dtype == np.dtype(dtype)
    assert staged[0, 0] == fill
