"""Scatter reads put every byte where the plan says, and nowhere else.

A file of known bytes is read by random segments (in any order, some reading the same
stored bytes, some with short gaps between them in the file) into an array, and
compared with the same copy done by numpy slicing; short reads are continued; a
segment outside the destination is refused before anything is read. Then the
positioned-read path with every uncompressed stretch sent through scatter reads is
compared with HDF5's own reads of the same versions.
"""

from __future__ import annotations

import ctypes
import itertools
import os

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from h5vc import VersionedHDF5File
from h5vc.hdf5 import scatter
from h5vc.store import fastread, planner

pytestmark = pytest.mark.skipif(not scatter.available(), reason="no preadv in the C library")

SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

FILE_BYTES = 1 << 16


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[int, np.ndarray]:
    content = np.random.default_rng(5).integers(0, 256, FILE_BYTES, dtype=np.uint8)
    path = tmp_path_factory.mktemp("scatter") / "bytes.bin"
    content.tofile(path)
    fd = os.open(path, os.O_RDONLY)
    yield fd, content
    os.close(fd)


@st.composite
def segments(draw: st.DrawFn) -> tuple[int, list[tuple[int, int, int]]]:
    """A destination size and segments (file offset, place, length) that do not
    overlap in the destination; file ranges may overlap, repeat and leave gaps."""
    size = draw(st.integers(1, 5000))
    cuts = sorted(set(draw(st.lists(st.integers(0, size), max_size=40))) | {0, size})
    out = []
    for start, stop in itertools.pairwise(cuts):
        if draw(st.booleans()):
            offset = draw(st.integers(0, FILE_BYTES - (stop - start)))
            out.append((offset, start, stop - start))
    return size, draw(st.permutations(out))


def _model(content: np.ndarray, size: int, segs) -> np.ndarray:
    expected = np.zeros(size, np.uint8)
    for offset, place, length in segs:
        expected[place : place + length] = content[offset : offset + length]
    return expected


def _plan(destination: np.ndarray, segs, piece_bytes: int) -> scatter.Plan:
    columns = np.array(segs, dtype=np.int64).reshape(-1, 3).T
    offsets, places, lengths = columns
    return scatter.plan(
        destination,
        offsets,
        destination.ctypes.data + places,
        lengths,
        piece_bytes,
        max_gap=planner.SCATTER_MAX_GAP,
    )


@SETTINGS
@given(
    case=segments(), piece_bytes=st.sampled_from([1, 7, 100, 1 << 20]), threads=st.integers(1, 4)
)
def test_segments_land_where_numpy_puts_them(stored, case, piece_bytes, threads) -> None:
    fd, content = stored
    size, segs = case
    destination = np.zeros(size, np.uint8)
    plan = _plan(destination, segs, piece_bytes)
    assert all(n <= scatter.IOV_MAX for n in np.diff(plan.starts))
    scatter.run(fd, plan, map, threads)
    np.testing.assert_array_equal(destination, _model(content, size, segs))


def test_short_reads_are_continued(stored, monkeypatch) -> None:
    """A ``preadv`` that returns after at most 37 bytes (as a signal or a slow device
    may make it) still fills every segment."""
    fd, content = stored
    calls = []

    def short_preadv(fd: int, iov_address: int, count: int, offset: int) -> int:
        iov = np.frombuffer((ctypes.c_uint64 * (2 * count)).from_address(iov_address), np.uint64)
        budget = 37
        done = 0
        for address, length in iov.reshape(count, 2).tolist():
            n = min(length, budget - done)
            if n <= 0:
                break
            target = (ctypes.c_char * n).from_address(address)
            got = os.preadv(fd, [memoryview(target).cast("B")], offset + done)
            done += got
        calls.append(done)
        return done

    monkeypatch.setattr(scatter, "_preadv", short_preadv)
    segs = [(100, 0, 50), (150, 50, 60), (400, 200, 300), (0, 110, 90)]
    destination = np.zeros(500, np.uint8)
    scatter.run(fd, _plan(destination, segs, 1 << 20), map, 1)
    np.testing.assert_array_equal(destination, _model(content, 500, segs))
    assert max(calls) == 37 and len(calls) > 10


def test_a_segment_outside_the_destination_is_refused() -> None:
    destination = np.zeros(100, np.uint8)
    with pytest.raises(ValueError, match="inside the destination"):
        _plan(destination, [(0, 0, 50), (0, 60, 41)], 1 << 20)
    with pytest.raises(ValueError, match="inside the destination"):
        scatter.plan(destination, [0], [destination.ctypes.data - 1], [10], 1 << 20, max_gap=0)
    assert not destination.any()


def test_reading_past_the_end_of_the_file_raises(stored) -> None:
    fd, _ = stored
    destination = np.zeros(100, np.uint8)
    with pytest.raises(OSError, match="more bytes"):
        scatter.run(fd, _plan(destination, [(FILE_BYTES - 10, 0, 100)], 1 << 20), map, 1)


@st.composite
def versions(draw: st.DrawFn) -> dict:
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 12), min_size=ndim, max_size=ndim)))
    chunks = tuple(draw(st.integers(1, n)) for n in shape)
    edits = draw(
        st.lists(
            st.tuples(
                st.tuples(*(st.integers(0, n - 1) for n in shape)),
                st.tuples(*(st.integers(1, n) for n in shape)),
            ),
            max_size=3,
        )
    )
    return {
        "shape": shape,
        "chunks": chunks,
        "edits": edits,
        "dtype": draw(st.sampled_from(["i1", "f8", "c16"])),
    }


@SETTINGS
@given(case=versions(), data=st.data())
def test_every_stretch_through_scatter_reads_what_hdf5_reads(
    tmp_path_factory, monkeypatch, case, data
) -> None:
    monkeypatch.setattr(planner, "SCATTER_MIN_BYTES", 0)
    monkeypatch.setattr(fastread, "MAP_READS", False)  # mapped files read most in bands
    calls = []
    real_run = scatter.run
    monkeypatch.setattr(scatter, "run", lambda *a: calls.append(a) or real_run(*a))
    path = tmp_path_factory.mktemp("scatter") / "f.h5"
    rng = np.random.default_rng(len(calls))
    model = (rng.random(case["shape"]) * 100).astype(case["dtype"])
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=model, chunks=case["chunks"])
        for i, (start, size) in enumerate(case["edits"]):
            with vf.stage_version(f"v{i + 1}") as g:
                g["x"][tuple(slice(a, a + b) for a, b in zip(start, size))] = i + 7
    with h5py.File(path, "r") as f:
        vf = VersionedHDF5File(f)
        for version in vf.versions:
            if version == "__first_version__":
                continue
            ours = vf[version]["x"]
            hdf5 = f[f"_version_data/versions/{version}/x"]
            np.testing.assert_array_equal(ours[()], hdf5[()])
            index = tuple(
                slice(*sorted(data.draw(st.lists(st.integers(0, n), min_size=2, max_size=2))))
                for n in case["shape"]
            )
            expected = hdf5[()][index]
            np.testing.assert_array_equal(ours[index], expected)
            if expected.size:  # HDF5 cannot read an empty selection of a VDS
                np.testing.assert_array_equal(ours[index], hdf5[index])
    assert calls  # the scatter path did the reading
