"""The xarray backend (engine "h5vc") and to_version."""

from __future__ import annotations

import pathlib
import pickle
from datetime import datetime, timezone

import dask.array as da
import h5py
import numpy as np
import pandas as pd
import pytest
import tomllib
import xarray as xr
from scale_helpers import expected_x

import h5vc
import h5vc.filecache
import h5vc.xarray as hx

REPO = pathlib.Path(__file__).resolve().parents[2]


def sample_dataset(n_time: int = 12) -> xr.Dataset:
    rng = np.random.default_rng(7)
    return xr.Dataset(
        {
            "temp": (("time", "x"), rng.random((n_time, 5)), {"units": "K", "scale": 2.5}),
            "count": (("x",), np.array([1, 0, 3, 4, 2], dtype="i2")),
            "offset": ((), 3.5, {"note": "a scalar"}),
            "label": (("x",), np.array(["a", "bb", "c", "dd", "e"])),
        },
        coords={
            "time": pd.date_range("2021-01-01", periods=n_time, freq="D"),
            "x": [10, 20, 30, 40, 50],
            "lat": (("x",), [1.0, 2.0, 3.0, 4.0, 5.0]),
        },
        attrs={"title": "sample", "n": 3, "levels": [1, 2]},
    )


def test_entry_point_is_declared_in_pyproject() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["xarray.backends"]["h5vc"] == (
        "h5vc.xarray:H5vcBackendEntrypoint"
    )
    for extra in ("dask", "xarray", "remote"):
        assert project["optional-dependencies"][extra]


def test_round_trip_is_identical(tmp_path: pathlib.Path, h5vc_engine: str) -> None:
    ds = sample_dataset()
    hx.to_version(ds, tmp_path / "a.h5", "v1")
    back = xr.open_dataset(tmp_path / "a.h5", engine=h5vc_engine, version="v1")
    assert not back["temp"].variable._in_memory  # lazy until loaded
    xr.testing.assert_identical(back.load(), ds)
    assert back["temp"].encoding["chunksizes"]


def test_versions_by_name_index_and_timestamp(tmp_path: pathlib.Path, h5vc_engine: str) -> None:
    path = tmp_path / "a.h5"
    first, second = sample_dataset(), sample_dataset()
    second["temp"][:] = 0.0
    times = [datetime(2024, 1, d, tzinfo=timezone.utc) for d in (1, 2)]
    hx.to_version(first, path, "v1", timestamp=times[0])
    hx.to_version(second, path, "v2", timestamp=times[1])
    opened = {
        key: xr.open_dataset(path, engine=h5vc_engine, version=key).load()
        for key in ("v1", "v2", None, 0, -1, datetime(2024, 1, 1, 12, tzinfo=timezone.utc))
    }
    for key in ("v1", -1, datetime(2024, 1, 1, 12, tzinfo=timezone.utc)):
        xr.testing.assert_identical(opened[key], first)
    for key in ("v2", None, 0):
        xr.testing.assert_identical(opened[key], second)


def test_groups_and_datatree(tmp_path: pathlib.Path, h5vc_engine: str) -> None:
    path = tmp_path / "a.h5"
    top = sample_dataset()
    sub = xr.Dataset(
        {"pressure": (("level",), [1000.0, 850.0, 500.0])},
        coords={"level": [0, 1, 2]},
        attrs={"where": "sub"},
    )
    with h5vc.open(path, "w") as vf:
        hx.to_version(top, vf, "v1")
        hx.to_version(sub, vf, "v2", group="/sub")  # v2 keeps the top group of v1
    xr.testing.assert_identical(
        xr.open_dataset(path, engine=h5vc_engine, version="v2", group="/sub").load(), sub
    )
    xr.testing.assert_identical(xr.open_dataset(path, engine=h5vc_engine).load(), top)
    tree = xr.open_datatree(path, engine=h5vc_engine, version="v2")
    assert set(tree.children) == {"sub"}
    xr.testing.assert_identical(tree["sub"].to_dataset(inherit=False).load(), sub)
    assert xr.Dataset(attrs=tree.attrs).identical(xr.Dataset(attrs=top.attrs))


def test_chunks_gives_dask_arrays_on_stored_chunks(
    tmp_path: pathlib.Path, h5vc_engine: str
) -> None:
    path = tmp_path / "a.h5"
    with h5vc.open(path, "w") as vf, vf.stage_version("v1") as g:
        g.create_dataset("v", data=np.arange(3000.0).reshape(300, 10), chunks=(40, 5))
    ds = xr.open_dataset(path, engine=h5vc_engine, chunks={})
    data = ds["v"].data
    assert isinstance(data, da.Array)
    assert data.chunks == ((40,) * 7 + (20,), (5, 5))
    assert float(ds["v"].sum().compute(scheduler="threads")) == float(np.arange(3000.0).sum())


def test_lazy_dataset_pickles_as_names(tmp_path: pathlib.Path, h5vc_engine: str) -> None:
    path = tmp_path / "a.h5"
    hx.to_version(sample_dataset(), path, "v1")
    ds = xr.open_dataset(path, engine=h5vc_engine, version="v1")
    payload = pickle.dumps(ds)
    h5vc.filecache.clear()
    xr.testing.assert_identical(pickle.loads(payload).load(), sample_dataset())


def test_phony_dimensions_for_plain_datasets(versioned: pathlib.Path, h5vc_engine: str) -> None:
    ds = xr.open_dataset(versioned, engine=h5vc_engine, version="v2", group="grid")
    assert ds["x"].dims == ("phony_dim_0", "phony_dim_1")
    np.testing.assert_array_equal(ds["x"].values, expected_x("v2"))
    with h5vc.open(versioned, "r+") as vf, vf.stage_version("v4") as g:
        g.create_dataset("grid/w", data=np.zeros(40), chunks=(8,))
    ds = xr.open_dataset(versioned, engine=h5vc_engine, group="/grid")
    assert ds["w"].dims == ("phony_dim_0",)  # one phony dimension per length, sorted names
    assert ds["x"].dims == ("phony_dim_1", "phony_dim_0")


def test_dimension_scales_name_dimensions(versioned: pathlib.Path, h5vc_engine: str) -> None:
    with h5vc.open(versioned, "r+") as vf, vf.stage_version("v4") as g:
        g.create_dataset("grid/lon", data=np.linspace(0, 39, 40), chunks=(8,))
    with h5py.File(versioned, "r+") as f:  # scales as netCDF-4 writes them
        version = f["_version_data/versions/v4/grid"]
        version["lon"].make_scale("lon")
        version["x"].dims[1].attach_scale(version["lon"])
    ds = xr.open_dataset(versioned, engine=h5vc_engine, group="grid")
    assert ds["x"].dims == ("phony_dim_0", "lon")
    assert ds["lon"].dims == ("lon",) and "lon" in ds.indexes
    assert "CLASS" not in ds["lon"].attrs and "DIMENSION_LIST" not in ds["x"].attrs


def test_append_stores_only_the_appended_chunks(tmp_path: pathlib.Path, h5vc_engine: str) -> None:
    path = tmp_path / "a.h5"
    rng = np.random.default_rng(3)
    full = xr.Dataset(
        {"v": (("time", "x"), rng.random((4000, 100)))},
        coords={"time": np.arange(4000), "x": np.arange(100)},
    )
    full["v"].encoding["chunksizes"] = (100, 100)
    full["time"].encoding["chunksizes"] = (1000,)
    hx.to_version(full.isel(time=slice(0, 3000)), path, "v1")
    before = path.stat().st_size
    hx.to_version(full.isel(time=slice(3000, 4000)), path, "v2", append_dim="time")
    grown = path.stat().st_size - before
    appended = 1000 * 100 * 8 + 1000 * 8
    assert appended <= grown < appended + 200_000  # not the 2.4 MB already stored
    xr.testing.assert_identical(
        xr.open_dataset(path, engine=h5vc_engine, version="v2").load(), full
    )
    xr.testing.assert_identical(
        xr.open_dataset(path, engine=h5vc_engine, version="v1").load(),
        full.isel(time=slice(0, 3000)),
    )


def test_rewriting_unchanged_data_shares_chunks(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "a.h5"
    ds = xr.Dataset({"v": (("t",), np.arange(200_000.0))})
    hx.to_version(ds, path, "v1")
    before = path.stat().st_size
    ds2 = ds.copy(deep=True)
    ds2["v"][:10] = -1
    hx.to_version(ds2, path, "v2")
    assert path.stat().st_size - before < 200_000  # one chunk and metadata, not 1.6 MB


def test_dask_variables_are_written(tmp_path: pathlib.Path, h5vc_engine: str) -> None:
    path = tmp_path / "a.h5"
    ds = xr.Dataset({"v": (("a", "b"), da.arange(6000.0, chunks=700).reshape(60, 100))})
    hx.to_version(ds, path, "v1")
    back = xr.open_dataset(path, engine=h5vc_engine).load()
    xr.testing.assert_identical(back, ds.compute())


def test_unknown_version_and_group_list_what_exists(
    versioned: pathlib.Path, h5vc_engine: str
) -> None:
    with pytest.raises(h5vc.VersionNotFoundError, match=r"'v7'.*\['v1', 'v2', 'v3'\]"):
        xr.open_dataset(versioned, engine=h5vc_engine, version="v7")
    with pytest.raises(h5vc.DatasetNotFoundError, match=r"'/nope'.*\['/', '/grid'\]"):
        xr.open_dataset(versioned, engine=h5vc_engine, group="/nope")


def test_to_version_bad_input_writes_nothing(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "a.h5"
    hx.to_version(sample_dataset(), path, "v1")
    size = path.stat().st_size
    with pytest.raises(TypeError, match=r"xarray\.Dataset"):
        hx.to_version(sample_dataset()["temp"], path, "v2")  # type: ignore[arg-type]
    with pytest.raises(h5vc.ArrayMismatchError, match="'depth' is not a dimension"):
        hx.to_version(sample_dataset(), path, "v2", append_dim="depth")
    wrong = sample_dataset(3).isel(x=slice(0, 2))
    with pytest.raises(h5vc.ArrayMismatchError, match="'temp' along 'time'"):
        hx.to_version(wrong, path, "v2", append_dim="time")
    with pytest.raises(h5vc.VersionExistsError):
        hx.to_version(sample_dataset(), path, "v1")
    with h5vc.open(path) as vf:
        assert vf.versions == ["v1"]
    assert path.stat().st_size == size
