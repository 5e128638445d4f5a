"""Reading and writing versioned datasets gives numpy's results and numpy's errors.

Each example indexes a committed dataset, and a staged copy of it, the way it
indexes a numpy array of the same contents, and asserts the same result or the
same exception (type and message).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from store_helpers import assert_same_array

from h5vc import VersionedHDF5File

STORE = settings.get_profile("h5vc-store")

ARRAYS = {
    "one": ((13,), (4,)),
    "two": ((7, 5), (3, 2)),
    "three": ((4, 3, 5), (2, 2, 2)),
    "empty": ((0, 3), (2, 2)),
}


def expected_array(name: str) -> np.ndarray:
    shape, _ = ARRAYS[name]
    return (np.arange(int(np.prod(shape)), dtype="i8") * 3 - 7).reshape(shape)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VersionedHDF5File]:
    path = Path(tmp_path_factory.mktemp("indexing")) / "index.h5"
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("base") as g:
            for name, (_, chunks) in ARRAYS.items():
                g.create_dataset(name, data=expected_array(name), chunks=chunks, fillvalue=-1)
        yield vf


def outcome(func):
    """``("ok", value)`` or ``("error", type, message)``."""
    try:
        return ("ok", func())
    except Exception as err:
        return ("error", type(err), str(err))


def assert_same_outcome(actual, expected) -> None:
    if expected[0] == "error" or actual[0] == "error":
        assert actual == expected
        return
    got, want = actual[1], expected[1]
    if isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray), (type(got), want)
        assert_same_array(got, want)
    else:
        assert not isinstance(got, np.ndarray) or got.shape == ()
        assert got == want
        assert np.asarray(got).dtype == np.asarray(want).dtype


def _axis_element(n: int) -> st.SearchStrategy:
    bound = n + 2
    ints = st.integers(-bound, bound)
    opt = st.none() | ints
    steps = st.none() | st.integers(-3, 3).filter(lambda s: s != 0)
    return ints | st.builds(slice, opt, opt, steps)


@st.composite
def indices(draw, shape: tuple[int, ...]):
    """Basic indices (possibly out of bounds), one integer array, or a boolean mask."""
    kind = draw(st.sampled_from(["basic", "basic_valid", "array", "mask"]))
    if kind == "basic_valid":
        return draw(hnp.basic_indices(shape, min_dims=0, allow_newaxis=True, allow_ellipsis=True))
    if kind == "mask":
        mask = draw(hnp.arrays(np.bool_, shape))
        return mask if draw(st.booleans()) else (mask,)
    n_axes = draw(st.integers(0, len(shape)))
    parts = [draw(_axis_element(shape[axis])) for axis in range(n_axes)]
    if kind == "array" and n_axes:
        axis = draw(st.integers(0, n_axes - 1))
        n = shape[axis]
        parts[axis] = draw(
            hnp.arrays(np.intp, st.integers(0, 4), elements=st.integers(-n - 1, n))
            | st.lists(st.integers(-n, max(n - 1, -n)), max_size=3)
        )
    if draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), Ellipsis)
    if draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), np.newaxis)
    return tuple(parts) if len(parts) != 1 or draw(st.booleans()) else parts[0]


@st.composite
def name_and_index(draw):
    name = draw(st.sampled_from(sorted(ARRAYS)))
    return name, draw(indices(ARRAYS[name][0]))


@STORE
@given(name_and_index())
@example(("one", 13))
@example(("one", -14))
@example(("two", (1, 2, 3)))
@example(("one", slice(None, None, -2)))
@example(("two", (Ellipsis, [4, 0, 4])))
@example(("three", (np.newaxis, 1, Ellipsis, slice(1, None, 2))))
@example(("empty", (slice(None), 1)))
@example(("one", np.array([True] * 12)))
# An ellipsis standing for no axis still separates the array from the integer, so the
# broadcast dimension goes first.
@example(("empty", (None, np.array([], dtype=np.int64), Ellipsis, 0)))
@example(("two", (None, [4, 1], Ellipsis, 0)))
@example(("three", ([1, 0], Ellipsis, 2)))
def test_getitem_like_numpy(store: VersionedHDF5File, case) -> None:
    name, index = case
    expected = outcome(lambda: expected_array(name)[index])
    assert_same_outcome(outcome(lambda: store["base"][name][index]), expected)
    assert_same_outcome(staged_outcome(store, lambda g: g[name][index]), expected)


class Abort(Exception):
    """Raised inside ``stage_version`` to leave without committing."""


def staged_outcome(store: VersionedHDF5File, action) -> tuple:
    """Run ``action(group)`` inside an aborted staging; return its outcome."""
    result: tuple = ()
    try:
        with store.stage_version("scratch") as g:
            result = outcome(lambda: action(g))
            raise Abort
    except Abort:
        pass
    assert "scratch" not in store
    return result


@st.composite
def values_for(draw, shape: tuple[int, ...], index):
    """A value to assign at ``index``: the selection's shape, a broadcastable one,
    a scalar, or a wrong shape."""
    try:
        target = np.empty(shape)[index].shape
    except Exception:
        target = (2,)
    kind = draw(st.sampled_from(["exact", "scalar", "row", "wrong"]))
    if kind == "scalar":
        return draw(st.integers(-100, 100))
    if kind == "row":
        target = target[-1:] if target else ()
    if kind == "wrong":
        target = (*target[:-1], target[-1] + 1) if target else (2,)
    return draw(hnp.arrays(np.int64, target, elements=st.integers(-100, 100)))


@st.composite
def name_index_value(draw):
    name, index = draw(name_and_index())
    return name, index, draw(values_for(ARRAYS[name][0], index))


@STORE
@given(name_index_value())
@example(("one", slice(0, 5), np.arange(3)))
@example(("two", (slice(None), 7), 1))
@example(("three", (Ellipsis, [0, 4]), np.arange(6).reshape(2, 3, 1)))
def test_setitem_like_numpy(store: VersionedHDF5File, case) -> None:
    name, index, value = case
    expected_data = expected_array(name).copy()

    def assign_numpy():
        expected_data[index] = value
        return expected_data.copy()

    expected = outcome(assign_numpy)

    def assign(g):
        g[name][index] = value
        return g[name][()]

    assert_same_outcome(staged_outcome(store, assign), expected)


def test_committed_write_is_refused(store: VersionedHDF5File) -> None:
    committed = store["base"]["two"]
    with pytest.raises(ValueError, match="read-only"):
        committed[0, 0] = 5
    with pytest.raises(ValueError, match="read-only"):
        committed.resize((3, 3))
    assert committed[0, 0] == expected_array("two")[0, 0]


def test_scalar_reads_are_numpy_scalars(store: VersionedHDF5File) -> None:
    value = store["base"]["two"][1, 2]
    assert isinstance(value, np.integer) and value == expected_array("two")[1, 2]


def test_every_element_through_both_paths(store: VersionedHDF5File) -> None:
    committed = store["base"]["three"]
    data = expected_array("three")
    for point in itertools.product(*map(range, data.shape)):
        assert committed[point] == data[point]
