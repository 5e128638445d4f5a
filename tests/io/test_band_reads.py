"""Reads of chunks narrower than the result, band by band: what numpy selects, for any
band height, selection and edit history."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import h5vc
from h5vc.store import fastread, planner

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@st.composite
def cases(draw: st.DrawFn) -> dict:
    ndim = draw(st.integers(2, 3))
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
    index = []
    for n in shape:
        if draw(st.booleans()):
            index.append(draw(st.integers(-n, n - 1)))
        else:
            a, b = sorted(draw(st.lists(st.integers(0, n), min_size=2, max_size=2)))
            index.append(slice(a, b))
    return {
        "shape": shape,
        "chunks": chunks,
        "dtype": draw(st.sampled_from(["<f8", "<i2", "u1", "<c8"])),
        "edits": edits,
        "index": tuple(index),
        "band_bytes": draw(st.sampled_from([1, 8, 100, 4096])),
        "map_reads": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**16)),
    }


def _write(path: Path, case: dict) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(case["seed"])
    model = (rng.random(case["shape"]) * 100).astype(case["dtype"])
    models = {}
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v0") as group:
            group.create_dataset("x", data=model, chunks=case["chunks"])
        models["v0"] = model.copy()
        for number, (start, size) in enumerate(case["edits"], 1):
            box = tuple(slice(a, a + b) for a, b in zip(start, size))
            model[box] = number + 100
            with vf.stage_version(f"v{number}") as group:
                group["x"][box] = number + 100
            models[f"v{number}"] = model.copy()
    return models


@SETTINGS
@given(case=cases())
def test_band_reads_equal_numpy(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, case: dict
) -> None:
    monkeypatch.setattr(planner, "HDF5_READ_BYTES", 0)  # every read by positioned reads
    monkeypatch.setattr(planner, "FAST_READ_MIN_BYTES", 0)
    monkeypatch.setattr(planner, "SCATTER_MIN_BYTES", 1 << 40)  # none straight into the result
    monkeypatch.setattr(fastread, "BAND_BYTES", case["band_bytes"])
    monkeypatch.setattr(fastread, "MAP_BAND_BYTES", case["band_bytes"])
    monkeypatch.setattr(fastread, "MAP_READS", case["map_reads"])
    path = tmp_path_factory.mktemp("bands") / "f.h5"
    models = _write(path, case)
    with h5vc.open(path, "r") as vf:
        for version, expected in models.items():
            dataset = vf[version]["x"]
            np.testing.assert_array_equal(dataset[()], expected)
            np.testing.assert_array_equal(dataset[case["index"]], expected[case["index"]])
    with h5py.File(path, "r") as f:
        vf = h5vc.VersionedHDF5File(f)
        for version, expected in models.items():
            np.testing.assert_array_equal(vf[version]["x"][()], expected)


def test_chunk_columns_of_a_2d_result_are_read_in_bands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100 chunks of 4x4 (a 40x40 result) in bands of 4 rows: each band one scatter of
    ten chunks' rows and one copy; an edited chunk breaks the tiling of its band only."""
    monkeypatch.setattr(planner, "HDF5_READ_BYTES", 0)
    monkeypatch.setattr(planner, "FAST_READ_MIN_BYTES", 0)
    monkeypatch.setattr(fastread, "BAND_BYTES", 4 * 40 * 8)
    monkeypatch.setattr(fastread, "MAP_READS", False)  # bands read into a buffer
    data = np.arange(1600, dtype=np.float64).reshape(40, 40)
    with h5vc.open(tmp_path / "f.h5", "w") as vf:
        with vf.stage_version("v0") as group:
            group.create_dataset("x", data=data, chunks=(4, 4))
        with vf.stage_version("v1") as group:
            group["x"][5, 5] = -1.0
    tiled: list[bool] = []
    real = fastread._copy_tiled

    def spy(*args: object) -> bool:
        tiled.append(real(*args))  # type: ignore[arg-type]
        return tiled[-1]

    monkeypatch.setattr(fastread, "_copy_tiled", spy)
    with h5vc.open(tmp_path / "f.h5", "r") as vf:
        np.testing.assert_array_equal(vf["v0"]["x"][()], data)
        assert tiled == [True] * 10
        tiled.clear()
        edited = data.copy()
        edited[5, 5] = -1.0
        np.testing.assert_array_equal(vf["v1"]["x"][()], edited)
        assert len(tiled) == 10 and tiled.count(False) <= 1
