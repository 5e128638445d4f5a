"""Writing Dask arrays into staged versions, block by block."""

from __future__ import annotations

import pathlib

import dask
import dask.array as da
import numpy as np
import pytest

import h5vc
import h5vc.blockwrite


class CountingBlocks:
    """Builds a Dask array whose blocks record the largest block computed."""

    def __init__(self) -> None:
        self.computed: list[tuple[int, ...]] = []

    def array(self, shape: tuple[int, ...], chunks: tuple[int, ...]) -> da.Array:
        from dask.array.core import normalize_chunks

        def block(block_info: dict | None = None) -> np.ndarray:
            assert block_info is not None
            info = block_info[None]
            (start, stop), *rest = info["array-location"]
            self.computed.append(info["chunk-shape"])
            base = np.arange(shape[0], dtype=np.float64)[start:stop]
            return np.broadcast_to(base.reshape(-1, *(1,) * len(rest)), info["chunk-shape"]).copy()

        return da.map_blocks(
            block,
            chunks=normalize_chunks(chunks, shape),
            dtype=np.float64,
            meta=np.empty((0,) * len(shape)),
        )


def expected(shape: tuple[int, ...]) -> np.ndarray:
    base = np.arange(shape[0], dtype=np.float64)
    return np.broadcast_to(base.reshape(-1, *(1,) * (len(shape) - 1)), shape).copy()


def test_create_dataset_from_dask_streams_blocks(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        h5vc.blockwrite, "WRITE_BLOCK_BYTES", 100 * 30 * 8 * 2
    )  # 2 chunk rows a block
    path = tmp_path / "a.h5"
    counting = CountingBlocks()
    shape = (2000, 30)
    data = counting.array(shape, (250, 30))
    with h5vc.open(path, "w") as vf, vf.stage_version("v1") as g:
        dataset = g.create_dataset("x", data=data, chunks=(100, 10))
        assert dataset.shape == shape and dataset.dtype == np.float64
    assert counting.computed  # computed block by block, none of them the whole array
    assert max(np.prod(s) for s in counting.computed) <= 250 * 30
    with h5vc.open(path) as vf:
        np.testing.assert_array_equal(vf["v1"]["x"][:], expected(shape))
        assert vf["v1"]["x"].chunks == (100, 10)


def test_setitem_with_dask_array(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "a.h5"
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.zeros((100, 40)), chunks=(10, 8))
        with vf.stage_version("v2") as g:
            g["x"][20:60, 5:25] = da.ones((40, 20), chunks=(7, 6)) * 3
            g["x"][0] = da.arange(40.0, chunks=9)  # an integer axis
            g["x"][::50, 0] = da.from_array(np.array([-1.0, -2.0]))  # stepped: computed whole
            g["x"][np.array([97, 98]), 1:3] = da.full((2, 2), 9.0)
        want = np.zeros((100, 40))
        want[20:60, 5:25] = 3
        want[0] = np.arange(40.0)
        want[::50, 0] = [-1, -2]
        want[97:99, 1:3] = 9
        np.testing.assert_array_equal(vf["v2"]["x"][:], want)
        np.testing.assert_array_equal(vf["v1"]["x"][:], 0)


def test_dask_blocks_are_computed_in_parallel_batches(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "a.h5"
    data = da.random.default_rng(1).random((4000, 50), chunks=(500, 50))
    want = data.compute()
    with dask.config.set(scheduler="threads"), h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=data, chunks=(256, 50))
        np.testing.assert_array_equal(vf["v1"]["x"][:], want)


def test_dask_array_that_does_not_fit(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "a.h5"
    values = da.arange(10, chunks=5)
    attempts = [
        (r"shape \(30,\).*expected shape \(20,\)", lambda g: g["x"].__setitem__(slice(0, 20), da.ones(30, chunks=10))),
        (r"dtype complex128.*float64", lambda g: g["x"].__setitem__(slice(0, 20), da.ones(20, chunks=10, dtype=complex))),
        (r"shape \(5,\).*Dask array of shape", lambda g: g.create_dataset("y", shape=(5,), data=da.ones(6, chunks=3))),
        (r"unknown chunk sizes", lambda g: g.create_dataset("y", data=values[values > 3])),
    ]  # fmt: skip
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.zeros(100), chunks=(10,))
        size = path.stat().st_size
        for message, attempt in attempts:
            with pytest.raises(h5vc.ArrayMismatchError, match=message), vf.stage_version("v2") as g:
                attempt(g)
        assert vf.versions == ["v1"]
    assert path.stat().st_size == size
