"""Basic reads of committed versions served straight from raw_data equal numpy's.

The versions here are edited after their first commit, so their chunks sit in many runs,
some chunks are fill, and a box read crosses runs and chunk columns: the reads that
the read planner cuts into pieces (one per run and chunk column).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from h5vc import VersionedHDF5File
from h5vc.store.reading import CommittedReader

STORE = settings.get_profile("h5vc-store")

#: name -> (shape, chunks, dtype, fill value)
ARRAYS = {
    "one": ((37,), (4,), "i8", -1),
    "two": ((11, 9), (3, 2), "f4", 0.5),
    "three": ((5, 6, 7), (2, 3, 2), "u2", 9),
    "bytes": ((10, 4), (3, 3), "S3", b"zz"),
    "flags": ((13, 5), (4, 2), "?", False),
}


def _initial(name: str) -> np.ndarray:
    shape, _, dtype, _ = ARRAYS[name]
    values = np.arange(int(np.prod(shape))).reshape(shape)
    if dtype == "S3":
        return values.astype("S3")
    if dtype == "?":
        return values % 3 == 0
    return values.astype(dtype)


def _edits(name: str) -> list[tuple[tuple[slice, ...], np.ndarray]]:
    """Edits that split runs and make some chunks all fill value."""
    shape, chunks, dtype, fill = ARRAYS[name]
    rng = np.random.default_rng(len(name))
    edits = []
    for number in range(6):
        corner = [int(rng.integers(0, n)) for n in shape]
        region = tuple(slice(c, min(n, c + k)) for c, n, k in zip(corner, shape, chunks))
        block = np.full([s.stop - s.start for s in region], fill, dtype=dtype)
        if number % 3:  # two of three edits write data, one writes fill
            block = _initial(name)[region][::-1].copy()
        edits.append((region, block))
    # A whole first chunk of fill, which is left unstored.
    edits.append((tuple(slice(0, k) for k in chunks), np.full(chunks, fill, dtype=dtype)))
    return edits


@pytest.fixture(scope="module")
def edited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[VersionedHDF5File, dict]]:
    path = Path(tmp_path_factory.mktemp("direct")) / "direct.h5"
    expected = {}
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v0") as g:
            for name, (_, chunks, dtype, fill) in ARRAYS.items():
                g.create_dataset(
                    name, data=_initial(name), chunks=chunks, dtype=dtype, fillvalue=fill
                )
        for name in ARRAYS:
            expected[name] = _initial(name)
        edits = {name: _edits(name) for name in ARRAYS}
        for number in range(7):
            with vf.stage_version(f"v{number + 1}") as g:
                for name in ARRAYS:
                    region, block = edits[name][number]
                    g[name][region] = block
                    expected[name][region] = block
        yield vf, expected


@st.composite
def boxes(draw, shape: tuple[int, ...]):
    """Integers and step-1 slices (some out of bounds, some empty)."""
    parts = []
    for size in shape[: draw(st.integers(0, len(shape)))]:
        if draw(st.booleans()):
            parts.append(draw(st.integers(-size - 1, size)))
        else:
            parts.append(slice(draw(st.integers(-size, size)), draw(st.integers(-size, size))))
    return tuple(parts) if draw(st.booleans()) or len(parts) != 1 else parts[0]


@st.composite
def name_and_box(draw):
    name = draw(st.sampled_from(sorted(ARRAYS)))
    return name, draw(boxes(ARRAYS[name][0]))


@STORE
@given(name_and_box())
@example(("two", (slice(1, 10), slice(1, 8))))
@example(("one", slice(2, 30)))
@example(("three", (1, slice(0, 6), slice(1, 6))))
@example(("bytes", (slice(None), 2)))
def test_basic_reads_equal_numpy(edited, case) -> None:
    vf, expected = edited
    name, box = case
    want = expected[name]
    try:
        numpy_result = want[box]
    except IndexError as error:
        with pytest.raises(IndexError, match=str(error).split(" with ")[0]):
            vf["v7"][name][box]
        return
    got = vf["v7"][name][box]
    np.testing.assert_array_equal(got, numpy_result)
    assert np.asarray(got).shape == np.shape(numpy_result)
    assert np.asarray(got).dtype == np.asarray(numpy_result).dtype
    assert isinstance(got, np.ndarray) == isinstance(numpy_result, np.ndarray)


def test_boxes_across_runs_and_columns_are_read_directly(edited) -> None:
    vf, expected = edited
    for name in ARRAYS:
        dataset = vf["v7"][name]
        reader = CommittedReader(dataset._chunk_map, dataset._raw_data, dataset.fillvalue)
        whole = tuple(slice(None) for _ in expected[name].shape)
        plan = reader.planner.plan(whole)
        assert plan.path == "pieces", (name, plan)  # many runs and fill chunks, one box
        result = reader.read(whole)
        np.testing.assert_array_equal(result, expected[name])
        inner = tuple(slice(1, n - 1) for n in expected[name].shape)
        np.testing.assert_array_equal(reader.read(inner), expected[name][inner])
