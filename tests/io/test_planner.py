"""The read planner: each path is chosen where expected (plans inspected, not timed), and
every path returns what h5py's data gives under numpy's indexing, for the same data,
chunks and selection (h5py itself differs from numpy in corners: ``d[0, ...]`` of a 1-D
dataset is a scalar there, a 0-d array in numpy and h5vc)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import h5vc
from h5vc.store import planner
from h5vc.store.reading import CommittedReader

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

#: Thresholds as shipped (tests/io/conftest.py sends every read to positioned reads).
SHIPPED = {"HDF5_READ_BYTES": 1 << 20, "FAST_READ_MIN_BYTES": 128 * 1024}


@pytest.fixture
def shipped(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SHIPPED.items():
        monkeypatch.setattr(planner, name, value)


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    """``x``: 400x300 float64 in 100x100 chunks, committed whole (v1: one run per chunk
    column), then one chunk rewritten (v2: the column split in three runs) and one
    chunk set to the fill value (v3: unstored); ``s``: variable-length strings."""
    path = Path(tmp_path_factory.mktemp("planner")) / "grid.h5"
    values = np.arange(400 * 300, dtype="f8").reshape(400, 300)
    expected = {"v1": values.copy()}
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=values, chunks=(100, 100), fillvalue=-1.0)
            g.create_dataset(
                "s", data=[b"a", b"bc"] * 20, dtype=h5py.string_dtype("ascii"), chunks=(4,)
            )
        with vf.stage_version("v2") as g:
            g["x"][100:200, 100:200] = 7.0
            g["s"][5] = b"new"
        values[100:200, 100:200] = 7.0
        expected["v2"] = values.copy()
        with vf.stage_version("v3") as g:
            g["x"][300:400, 0:100] = -1.0
        values[300:400, 0:100] = -1.0
        expected["v3"] = values.copy()
    return path, expected


def _reader(dataset: Any) -> CommittedReader:
    return dataset._committed_reader()


ALL = (slice(None), slice(None))
RAW = -1  # HDF5_READ_BYTES that sends every read to raw_data


@pytest.mark.usefixtures("shipped")
@pytest.mark.parametrize(
    ("version", "index", "hdf5_read_bytes", "path"),
    [
        ("v1", (slice(0, 10), slice(0, 10)), None, "virtual"),  # 800 bytes, few blocks
        ("v1", (5, slice(None)), None, "virtual"),
        ("v1", (Ellipsis, 0), None, "virtual"),
        ("v3", ALL, None, "virtual"),  # 960,000 bytes; the fill chunk is HDF5's too
        ("v1", ALL, 900_000, "pieces"),
        ("v1", (slice(0, 400), slice(0, 100)), RAW, "block"),  # one column, one run
        ("v2", (slice(0, 400), slice(0, 100)), RAW, "block"),
        ("v2", (slice(None), slice(100, 200)), RAW, "pieces"),  # a column in three runs
        ("v3", (slice(250, 400), slice(0, 100)), RAW, "pieces"),  # a run, a fill chunk
        ("v1", (slice(0, 400, 2), slice(None)), RAW, "engine"),  # a step
        ("v1", ([1, 5], slice(None)), RAW, "engine"),  # an array
        ("v1", (400, 0), RAW, "engine"),  # out of range: numpy's IndexError
        ("v1", (slice(3, 3), 0), RAW, "engine"),  # empty
        ("v1", (0, Ellipsis, 0), RAW, "engine"),  # numpy gives a 0-d array
    ],
)
def test_each_path_is_chosen_where_expected(
    grid, monkeypatch, version, index, hdf5_read_bytes, path
) -> None:
    file_path, expected = grid
    if hdf5_read_bytes is not None:
        monkeypatch.setattr(planner, "HDF5_READ_BYTES", hdf5_read_bytes)
    with h5vc.open(file_path, "r") as vf:
        dataset = vf[version]["x"]
        assert _reader(dataset).planner.virtual  # few blocks, the dataset's fill value
        plan = _reader(dataset).planner.plan(index)
        assert plan.path == path, plan
        assert plan.reason
        if path == "engine" and index == (400, 0):
            with pytest.raises(IndexError):
                dataset[index]
            return
        got, want = dataset[index], expected[version][index]
        assert type(got) is type(want) and np.shape(got) == np.shape(want)
        np.testing.assert_array_equal(got, want)


def test_a_plan_of_pieces_names_every_run_and_column(grid, monkeypatch) -> None:
    file_path, _ = grid
    monkeypatch.setattr(planner, "HDF5_READ_BYTES", -1)
    with h5vc.open(file_path, "r") as vf:
        plan = _reader(vf["v3"]["x"]).planner.plan((slice(50, 400), slice(50, 250)))
    assert plan.path == "pieces" and plan.pieces is not None
    # Columns 0..2; column 0 holds a run of rows 0-2 and a fill chunk (row 3), column 1
    # three runs (v2 rewrote chunk 1,1), column 2 one run.
    assert plan.pieces.fill.tolist() == [False, True, False, False, False, False]
    assert plan.pieces.count.tolist() == [
        [250, 50],
        [100, 50],
        [50, 100],
        [100, 100],
        [200, 100],
        [350, 50],
    ]
    assert plan.pieces.dst.tolist() == [[0, 0], [250, 0], [0, 50], [50, 50], [150, 50], [0, 150]]
    assert len(plan.pieces) == 6


def test_too_many_pieces_and_variable_length_go_to_the_engine(grid, monkeypatch) -> None:
    file_path, expected = grid
    monkeypatch.setattr(planner, "HDF5_READ_BYTES", -1)
    with h5vc.open(file_path, "r") as vf:
        x = vf["v2"]["x"]
        assert _reader(x).planner.plan(slice(None)).path == "pieces"
        monkeypatch.setattr(planner, "MAX_PIECES", 4)
        plan = _reader(x).planner.plan(slice(None))
        assert plan.path == "engine" and "MAX_PIECES" in plan.reason
        np.testing.assert_array_equal(x[:], expected["v2"])
        s = vf["v2"]["s"]
        assert _reader(s).planner.plan(slice(0, 3)).path == "block"
        assert _reader(s).planner.plan(slice(None)).path == "engine"
        assert s[:].tolist() == [b"a", b"bc", b"a", b"bc", b"a", b"new"] + [b"a", b"bc"] * 17


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 12), min_size=ndim, max_size=ndim)))
    chunks = tuple(draw(st.integers(1, n)) for n in shape)
    edits = draw(
        st.lists(
            st.tuples(
                st.tuples(*(st.integers(0, n - 1) for n in shape)),
                st.tuples(*(st.integers(1, n) for n in shape)),
                st.sampled_from([0.0, 1.5, -2.0]),  # 0.0 is the fill value: unstored
            ),
            max_size=4,
        )
    )
    return {"shape": shape, "chunks": chunks, "edits": edits}


def _selection(draw: st.DrawFn, shape: tuple[int, ...]) -> Any:
    """Integers (negative too), slices (steps too, empty too) and an Ellipsis."""
    items: list[Any] = []
    for n in shape:
        kind = draw(st.sampled_from(["int", "slice", "all"]))
        if kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            start = draw(st.integers(0, n))
            stop = draw(st.integers(0, n))
            items.append(slice(start, stop, draw(st.sampled_from([None, 1, 2]))))
        else:
            items.append(slice(None))
    if draw(st.booleans()):  # an Ellipsis in place of some of the axes
        first = draw(st.integers(0, len(items)))
        last = draw(st.integers(first, len(items)))
        return (*items[:first], Ellipsis, *items[last:])
    return tuple(items[: draw(st.integers(1, len(items)))])


@SETTINGS
@given(case=cases(), data=st.data(), thresholds=st.sampled_from(["shipped", "positioned"]))
@example(
    case={"shape": (12, 12), "chunks": (3, 4), "edits": [((0, 0), (5, 5), 1.5)]},
    data=None,
    thresholds="shipped",
)
def test_every_path_returns_what_h5py_returns(
    tmp_path_factory, monkeypatch, case, data, thresholds
) -> None:
    if thresholds == "shipped":
        for name, value in SHIPPED.items():
            monkeypatch.setattr(planner, name, value)
    path = tmp_path_factory.mktemp("planner") / "f.h5"
    shape, chunks = case["shape"], case["chunks"]
    values = np.arange(1, int(np.prod(shape)) + 1, dtype="f8").reshape(shape)
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=values, chunks=chunks)
        for number, (corner, size, value) in enumerate(case["edits"]):
            box = tuple(slice(c, min(n, c + k)) for c, k, n in zip(corner, size, shape))
            values[box] = value
            with vf.stage_version(f"v{number + 1}") as g:
                g["x"][box] = value
    plain = tmp_path_factory.mktemp("plain") / "h.h5"
    with h5py.File(plain, "w") as f:
        f.create_dataset("x", data=values, chunks=chunks)
    last = f"v{len(case['edits'])}"
    selections = [tuple(slice(None) for _ in shape)]
    if data is not None:
        selections += [data.draw(st.composite(lambda d: _selection(d, shape))()) for _ in range(4)]
    with h5vc.open(path, "r") as vf, h5py.File(plain, "r") as f:
        dataset = vf[last]["x"]
        stored = f["x"][()]
        for selection in selections:
            want = stored[selection]
            got = dataset[selection]
            assert _reader(dataset).planner.plan(selection).path  # planned, whatever way
            assert type(got) is type(want), selection
            assert np.shape(got) == np.shape(want), selection
            np.testing.assert_array_equal(got, want)
