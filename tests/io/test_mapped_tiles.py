"""Chunks narrower than a 2-D result, copied from the memory map of a file opened
read-only in tiles (parts of a band side by side, equally far apart in the file, one
numpy copy each): the tiles give what a copy task by task gives, whatever the steps in
the file (growing, shrinking, none: one stored chunk read into several places), and a
dataset written in one go is copied in one tile per band."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import h5vc
from h5vc.store import fastread, planner

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@st.composite
def layouts(draw: st.DrawFn) -> dict:
    """A 2-D result cut into tasks (column strips cut into runs of rows), each reading
    rows of one of a few stored chunks of ``c0`` rows of ``c1`` items."""
    c0, c1 = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    n_chunks = draw(st.integers(1, 6))
    rows = draw(st.integers(1, 16))
    widths = draw(st.lists(st.integers(1, c1), min_size=1, max_size=6))
    tasks = []
    column = 0
    for width in widths:
        row = 0
        while row < rows:
            n = draw(st.integers(1, min(c0, rows - row)))
            chunk = draw(st.integers(0, n_chunks - 1))
            first = draw(st.integers(0, c0 - n))
            src_column = draw(st.integers(0, c1 - width))
            tasks.append((chunk, first, src_column, row, column, n, width))
            row += n
        column += width
    return {
        "c0": c0,
        "c1": c1,
        "n_chunks": n_chunks,
        "shape": (rows, column),
        "tasks": tasks,
        "order": draw(st.permutations(range(n_chunks))),
        "band_rows": draw(st.integers(1, 20)),
        "pad": draw(st.integers(0, 3)),
        "dtype": draw(st.sampled_from(["<f8", "<i2", "u1"])),
    }


@SETTINGS
@given(layout=layouts())
def test_tiles_copy_what_tasks_copy(layout: dict) -> None:
    dtype = np.dtype(layout["dtype"])
    c0, c1 = layout["c0"], layout["c1"]
    row_bytes = c1 * dtype.itemsize
    chunk_bytes = c0 * row_bytes
    # Chunks at shuffled places, some bytes apart (unaligned), behind a few header bytes.
    place = [layout["pad"] + k * (chunk_bytes + layout["pad"]) for k in layout["order"]]
    stored = np.random.default_rng(0).integers(
        0, 256, place and max(place) + chunk_bytes + 1, dtype=np.uint8
    )
    expected = np.zeros(layout["shape"], dtype)
    starts, dst, counts = [], [], []
    for chunk, first, src_column, row, column, n, width in layout["tasks"]:
        at = place[chunk] + first * row_bytes
        rows = stored[at : at + n * row_bytes].view(dtype).reshape(n, c1)
        expected[row : row + n, column : column + width] = rows[:, src_column : src_column + width]
        starts.append(at + src_column * dtype.itemsize)
        dst.append((row, column))
        counts.append((n, width))
    tiles = fastread._tiles(
        np.array(starts, np.int64),
        np.array(dst, np.int64),
        np.array(counts, np.int64),
        row_bytes,
        layout["band_rows"],
    )
    got = np.full(layout["shape"], 7, dtype)
    fastread._copy_tiles(got, stored, row_bytes, tiles)
    np.testing.assert_array_equal(got, expected)
    # Every tile lies in one band; together they cover the result once.
    covered = np.zeros(layout["shape"], np.int64)
    for row, rows, column, n, width, _, _ in tiles:
        assert row // layout["band_rows"] == (row + rows - 1) // layout["band_rows"]
        covered[row : row + rows, column : column + n * width] += 1
    assert (covered == 1).all()


def test_tiles_convert_as_numpy_assigns() -> None:
    """Stored float64 copied into a float32 result: converted, not reinterpreted."""
    values = np.arange(80, dtype=np.float64)
    tiles = fastread._tiles(
        np.array([0, 32 * 10], np.int64), np.array([[0, 0], [0, 4]], np.int64),
        np.array([[10, 4], [10, 4]], np.int64), 32, 4,
    )  # fmt: skip
    got = np.zeros((10, 8), np.float32)
    fastread._copy_tiles(got, values.view(np.uint8), 32, tiles, np.dtype(np.float64))
    expected = np.hstack([values[:40].reshape(10, 4), values[40:].reshape(10, 4)])
    np.testing.assert_array_equal(got, expected.astype(np.float32))


def test_a_tile_past_the_stored_bytes_raises() -> None:
    stored = np.zeros(100, np.uint8)
    got = np.zeros((2, 4), np.float64)
    with pytest.raises(ValueError):
        fastread._copy_tiles(got, stored, 32, [(0, 2, 0, 1, 4, 90, 0)])


def test_one_tile_per_band_whose_chunks_are_equally_far_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 40x40 result of 8x8 chunks, bands of 8 rows: a band whose five chunks lie
    equally far apart in the file is one tile (HDF5 may put index nodes between
    chunks); an edited chunk splits the tiles of its band only."""
    monkeypatch.setattr(planner, "HDF5_READ_BYTES", 0)
    monkeypatch.setattr(planner, "FAST_READ_MIN_BYTES", 0)
    monkeypatch.setattr(fastread, "MAP_BAND_BYTES", 8 * 40 * 8)
    data = np.arange(1600, dtype=np.float64).reshape(40, 40)
    with h5vc.open(tmp_path / "f.h5", "w") as vf:
        with vf.stage_version("v0") as group:
            group.create_dataset("x", data=data, chunks=(8, 8))
        with vf.stage_version("v1") as group:
            group["x"][5, 5] = -1.0  # in band 0
    copied: list[list[tuple[int, ...]]] = []
    real = fastread._copy_tiles

    def spy(
        destination: np.ndarray, stored: np.ndarray, row_bytes: int, tiles: list, dtype: object
    ) -> None:
        copied.append(tiles)
        real(destination, stored, row_bytes, tiles, dtype)  # type: ignore[arg-type]

    monkeypatch.setattr(fastread, "_copy_tiles", spy)
    edited = data.copy()
    edited[5, 5] = -1.0
    with h5vc.open(tmp_path / "f.h5", "r") as vf:
        np.testing.assert_array_equal(vf["v0"]["x"][()], data)
        np.testing.assert_array_equal(vf["v1"]["x"][()], edited)
        np.testing.assert_array_equal(vf["v1"]["x"][3:37, 2:39], edited[3:37, 2:39])
        slots = vf["v0"]["x"]._chunk_map.slots
        reader = fastread.fast_reader(vf["v0"]["x"]._committed_reader()._raw_data)
        assert reader is not None and reader.mappable
        table = reader._table()
        assert table is not None
        offsets = table.offsets[slots]
    assert len(copied) == 3
    tiles_of_band = np.bincount([tile[0] // 8 for tile in copied[0]], minlength=5)
    steps = np.diff(offsets, axis=1)
    even = (steps == steps[:, :1]).all(axis=1)
    assert even.any() and (tiles_of_band[even] == 1).all()
    tiles_of_edited_band = np.bincount([tile[0] // 8 for tile in copied[1]], minlength=5)
    assert (np.delete(tiles_of_edited_band, 0) == np.delete(tiles_of_band, 0)).all()
    assert 1 < tiles_of_edited_band[0] <= tiles_of_band[0] + 2
