"""Same result or same exception as numpy, for reads and for writes."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from staging_builders import staged_from_base

from h5vc.staging import StagedChangesArray


def outcome(function: Any) -> tuple[str, Any]:
    try:
        return "ok", function()
    except Exception as error:
        return "error", (type(error), str(error))


def check_same_getitem(staged: StagedChangesArray, model: np.ndarray, index: Any) -> None:
    expected = outcome(lambda: model[index])
    actual = outcome(lambda: staged[index])
    assert actual[0] == expected[0], (actual, expected)
    if expected[0] == "error":
        assert actual[1] == expected[1]
        return
    assert type(actual[1]) is type(expected[1])
    np.testing.assert_array_equal(actual[1], expected[1])
    assert np.shape(actual[1]) == np.shape(expected[1])


def snapshot(staged: StagedChangesArray) -> tuple[Any, ...]:
    slabs = [None if slab is None else np.array(slab) for slab in staged.slabs]
    return staged.shape, staged.slab_indices.copy(), staged.slab_offsets.copy(), slabs


def assert_same_state(staged: StagedChangesArray, before: tuple[Any, ...]) -> None:
    shape, slab_indices, slab_offsets, slabs = before
    assert staged.shape == shape
    np.testing.assert_array_equal(staged.slab_indices, slab_indices)
    np.testing.assert_array_equal(staged.slab_offsets, slab_offsets)
    assert len(staged.slabs) == len(slabs)
    for slab, old in zip(staged.slabs, slabs):
        np.testing.assert_array_equal(np.asarray(slab), old)


def check_same_setitem(
    staged: StagedChangesArray, model: np.ndarray, index: Any, value: Any
) -> None:
    before = snapshot(staged)
    expected_model = model.copy()
    expected = outcome(lambda: expected_model.__setitem__(index, copy.deepcopy(value)))
    actual = outcome(lambda: staged.__setitem__(index, value))
    assert actual[0] == expected[0], (actual, expected)
    if expected[0] == "error":
        assert actual[1] == expected[1]
        assert_same_state(staged, before)
    else:
        np.testing.assert_array_equal(np.asarray(staged), expected_model)


SHAPE = (6, 7, 4)
CHUNKS = (4, 3, 4)


def make_staged_and_model() -> tuple[StagedChangesArray, np.ndarray]:
    rng = np.random.default_rng(0)
    return staged_from_base(rng.integers(-50, 50, SHAPE), CHUNKS, rng)


@pytest.fixture
def staged_and_model() -> tuple[StagedChangesArray, np.ndarray]:
    return make_staged_and_model()


index_strategy = (
    hnp.basic_indices(SHAPE, min_dims=0, allow_newaxis=True, allow_ellipsis=True)
    | hnp.integer_array_indices(SHAPE, result_shape=hnp.array_shapes(max_dims=2, max_side=3))
    | hnp.arrays(bool, SHAPE)
    | hnp.arrays(bool, SHAPE[:2])
    | st.tuples(st.integers(-8, 8), st.lists(st.integers(-9, 9), max_size=4), st.integers(-5, 5))
    | st.tuples(st.slices(6), st.just(slice(None)), st.lists(st.integers(-5, 5), max_size=3))
    | st.tuples(st.lists(st.integers(-7, 7), max_size=3), st.slices(7), st.integers(-5, 5))
)


@given(index=index_strategy)
def test_getitem_matches_numpy(index) -> None:
    staged, model = make_staged_and_model()
    check_same_getitem(staged, model, index)


@given(index=index_strategy, value_kind=st.sampled_from(["right", "scalar", "wrong", "row"]))
def test_setitem_matches_numpy(index, value_kind) -> None:
    staged, model = make_staged_and_model()
    target = outcome(lambda: model[index])
    shape = np.shape(target[1]) if target[0] == "ok" else (2,)
    value: Any = {
        "right": np.full(shape, 77),
        "scalar": 5,
        "wrong": np.zeros((*shape[:-1], shape[-1] + 1) if shape else (3,)),
        "row": np.arange(shape[-1] if shape else 1),
    }[value_kind]
    check_same_setitem(staged, model, index, value)


BAD_INDICES = [
    10,
    -7,
    (0, 0, 0, 0),
    1.5,
    "a",
    (..., ...),
    [0.5],
    np.array([True, False]),
    ([0, 1], [0, 1, 2]),
    (slice(0, 2, 0),),
    np.ones((6, 7, 5), dtype=bool),
    [[0, 9]],
    (slice(None), [7]),
    {1: 2},
]


@pytest.mark.parametrize("index", BAD_INDICES, ids=repr)
def test_bad_indices_raise_numpys_errors(staged_and_model, index) -> None:
    staged, model = staged_and_model
    check_same_getitem(staged, model, index)
    check_same_setitem(staged, model, index, 1)


BAD_VALUES = [
    np.zeros((3, 2)),
    np.zeros((2, 2, 2, 2)),
    [[1, 2, 3]],
    "not a number",
    np.zeros(5),
    2**70,
]


@pytest.mark.parametrize("value", BAD_VALUES, ids=repr)
@pytest.mark.parametrize(
    "index", [(slice(0, 5), 2, slice(1, 3)), (..., [0, 3]), np.arange(6) % 2 == 0], ids=repr
)
def test_bad_values_raise_and_leave_state_unchanged(staged_and_model, index, value) -> None:
    staged, model = staged_and_model
    staged[0, 0, 0] = 3  # some staged chunks exist too
    model[0, 0, 0] = 3
    check_same_setitem(staged, model, index, value)


def test_scalar_results_are_numpy_scalars(staged_and_model) -> None:
    staged, model = staged_and_model
    assert type(staged[1, 2, 3]) is np.int64
    assert staged[1, 2, 3] == model[1, 2, 3]
    assert isinstance(staged[1, 2, 3, ...], np.ndarray)
    assert staged[1, 2, 3, ...].shape == ()


@pytest.mark.parametrize("shape", [(0,), (0, 5), (4, 0, 2)])
def test_zero_length_axes(shape) -> None:
    staged = StagedChangesArray(shape, (3,) * len(shape), np.float32, 1.5)
    model = np.full(shape, 1.5, dtype=np.float32)
    check_same_getitem(staged, model, ...)
    staged[...] = 2
    staged.resize(tuple(n + 2 for n in shape))
    model = np.full(staged.shape, 1.5, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(staged), model)
    assert not staged.has_changes
    assert list(staged.changes()) == []


def test_resize_rejects_bad_shapes(staged_and_model) -> None:
    staged, _ = staged_and_model
    with pytest.raises(ValueError, match="Expected a shape with 3 dimensions"):
        staged.resize((4, 4))
    with pytest.raises(ValueError, match="negative dimensions"):
        staged.resize((4, -1, 4))
    assert staged.shape == SHAPE
