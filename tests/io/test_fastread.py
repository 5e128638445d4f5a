"""Positioned reads and parallel codecs give exactly what HDF5 itself reads.

Every version is read three ways and compared: through h5vc (positioned reads and
h5vc's own decoding), through plain h5py reading the version's virtual dataset
(HDF5's read path and filter pipeline), and from a numpy model of the edits.
"""

from __future__ import annotations

import io
from pathlib import Path

import h5py
import hdf5plugin
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from h5vc import VersionedHDF5File, delete_versions
from h5vc.hashing import hash_in_batches
from h5vc.hdf5 import codecs
from h5vc.store import fastread, planner, rawdata
from h5vc.store.fastread import fast_reader

DTYPES = ["i1", "u2", "i4", "i8", "f4", "f8", "c16", "?"]
FILTERS: dict[str, dict] = {
    "none": {},
    "gzip": {"compression": "gzip", "compression_opts": 4},
    "gzip+shuffle": {"compression": "gzip", "compression_opts": 1, "shuffle": True},
    "blosc-lz4hc": dict(hdf5plugin.Blosc(cname="lz4hc", clevel=5)),
    "blosc-zstd": dict(hdf5plugin.Blosc(cname="zstd", clevel=3, shuffle=2)),
    "zstd": dict(hdf5plugin.Zstd(clevel=2)),
}

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def vds(f: h5py.File, version: str, name: str = "x") -> h5py.Dataset:
    return f[f"_version_data/versions/{version}/{name}"]


@st.composite
def cases(draw: st.DrawFn) -> dict:
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 13), min_size=ndim, max_size=ndim)))
    chunks = tuple(draw(st.integers(1, max(1, n))) for n in shape)
    edits = draw(
        st.lists(
            st.tuples(
                st.tuples(*(st.integers(0, n - 1) for n in shape)),
                st.tuples(*(st.integers(1, n) for n in shape)),
                st.integers(0, 100),
            ),
            max_size=4,
        )
    )
    return {
        "dtype": draw(st.sampled_from(DTYPES)),
        "filters": draw(st.sampled_from(sorted(FILTERS))),
        "shape": shape,
        "chunks": chunks,
        "fill": draw(st.sampled_from([None, 3])),
        "edits": edits,
        "seed": draw(st.integers(0, 2**16)),
    }


def _basic_index(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple:
    index = []
    for n in shape:
        if draw(st.booleans()):
            index.append(draw(st.integers(-n, n - 1)))
        else:
            a, b = sorted(draw(st.lists(st.integers(0, n), min_size=2, max_size=2)))
            index.append(slice(a, b))
    return tuple(index)


@SETTINGS
@given(case=cases(), data=st.data())
def test_reads_equal_hdf5_and_the_model(tmp_path_factory, case: dict, data) -> None:
    path = tmp_path_factory.mktemp("io") / "f.h5"
    rng = np.random.default_rng(case["seed"])
    dtype = np.dtype(case["dtype"])
    model = (rng.random(case["shape"]) * 200 - 100).astype(dtype)
    kwargs = dict(FILTERS[case["filters"]])
    if case["fill"] is not None:
        kwargs["fillvalue"] = dtype.type(case["fill"])
        model[tuple(slice(0, c) for c in case["chunks"])] = case["fill"]  # a fill chunk
    models = {}
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=model, chunks=case["chunks"], **kwargs)
        models["v0"] = model.copy()
        for i, (start, size, value) in enumerate(case["edits"]):
            box = tuple(slice(a, a + b) for a, b in zip(start, size))
            model[box] = value
            with vf.stage_version(f"v{i + 1}") as g:
                g["x"][box] = value
            models[f"v{i + 1}"] = model.copy()
    with h5py.File(path, "r") as f:
        vf = VersionedHDF5File(f)
        for version, expected in models.items():
            through_hdf5 = vds(f, version)[()]
            np.testing.assert_array_equal(through_hdf5, expected)
            ours = vf[version]["x"]
            result = ours[()]
            assert result.dtype == dtype
            np.testing.assert_array_equal(result, expected)
            index = _basic_index(data.draw, case["shape"])
            np.testing.assert_array_equal(ours[index], expected[index])
            if expected[index].size:  # HDF5 cannot read an empty selection of a VDS
                np.testing.assert_array_equal(ours[index], vds(f, version)[index])
            rows = data.draw(st.lists(st.integers(0, case["shape"][0] - 1), min_size=1))
            np.testing.assert_array_equal(ours[sorted(set(rows))], expected[sorted(set(rows))])
        raw_data = f["_version_data/x/raw_data"]
        assert fast_reader(raw_data) is not None  # every case here is served by pread


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_every_filter_is_run_by_h5vc(name: str, tmp_path: Path) -> None:
    with h5py.File(tmp_path / "f.h5", "w") as f:
        d = f.create_dataset("x", shape=(10,), chunks=(5,), dtype="f8", **FILTERS[name])
        pipeline = codecs.pipeline_of(d.id.get_create_plist(), 8, 40)
        assert (pipeline is None) == (name == "none")
        if pipeline is not None:
            chunk = np.arange(5.0)
            d.id.write_direct_chunk((5,), pipeline.encode(chunk), 0)
            np.testing.assert_array_equal(d[5:], chunk)  # HDF5 decodes what h5vc encoded
            d[:5] = chunk + 1
            mask, stored = d.id.read_direct_chunk((0,))  # a skipped filter has its bit set
            assert pipeline.decode(stored, mask) == (chunk + 1).tobytes()


def _write(path: Path, data: np.ndarray, **kwargs) -> None:
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=data, chunks=(7,), **kwargs)
        with vf.stage_version("v2") as g:
            g["x"][3:20] = -1
        with vf.stage_version("v3") as g:
            g["x"][40:] = 5


def test_a_python_file_object_is_read_through_hdf5(tmp_path: Path) -> None:
    data = np.arange(100, dtype="f8")
    _write(tmp_path / "f.h5", data, compression="gzip")
    with open(tmp_path / "f.h5", "rb") as raw, h5py.File(raw, "r") as f:
        assert fast_reader(f["_version_data/x/raw_data"]) is None
        np.testing.assert_array_equal(VersionedHDF5File(f)["v1"]["x"][:], data)
    buffer = io.BytesIO((tmp_path / "f.h5").read_bytes())
    with h5py.File(buffer, "r") as f:
        expected = data.copy()
        expected[3:20] = -1
        np.testing.assert_array_equal(VersionedHDF5File(f)["v2"]["x"][:], expected)


@pytest.mark.parametrize("kwargs", [{"dtype": ">f8"}, {"dtype": "f8", "fletcher32": True}])
def test_what_pread_cannot_serve_is_read_by_hdf5(tmp_path: Path, kwargs: dict) -> None:
    data = np.arange(100, dtype=kwargs.pop("dtype"))
    _write(tmp_path / "f.h5", data, **kwargs)
    with h5py.File(tmp_path / "f.h5", "r") as f:
        assert fast_reader(f["_version_data/x/raw_data"]) is None
        vf = VersionedHDF5File(f)
        np.testing.assert_array_equal(vf["v1"]["x"][:], data)
        np.testing.assert_array_equal(vf["v3"]["x"][40:], 5)


@pytest.mark.parametrize("name", ["none", "gzip", "blosc-zstd"])
def test_chunks_moved_by_delete_versions_are_looked_up_again(tmp_path: Path, name: str) -> None:
    data = np.arange(100, dtype="f8")
    path = tmp_path / "f.h5"
    _write(path, data, **FILTERS[name])
    with h5py.File(path, "r+") as f:
        vf = VersionedHDF5File(f)
        expected = vf["v3"]["x"][:]  # builds the chunk table
        np.testing.assert_array_equal(vf["v2"]["x"][:30], np.r_[data[:3], [-1] * 17, data[20:30]])
        delete_versions(vf, ["v1", "v2"])
        np.testing.assert_array_equal(vf["v3"]["x"][:], expected)
        np.testing.assert_array_equal(vds(f, "v3")[:], expected)
        with vf.stage_version("v4") as g:
            g["x"][:10] = 9
        expected[:10] = 9
        np.testing.assert_array_equal(vf["v4"]["x"][:], expected)
        np.testing.assert_array_equal(vds(f, "v4")[:], expected)


@pytest.mark.parametrize("name", ["none", "gzip"])
def test_staged_reads_see_chunks_written_in_the_same_stage(tmp_path: Path, name: str) -> None:
    data = np.arange(1 << 20, dtype="f8")  # large enough to be written through
    with h5py.File(tmp_path / "f.h5", "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v0") as g:
            g.create_dataset("y", data=data[:5000], chunks=(4096,), **FILTERS[name])
        np.testing.assert_array_equal(vf["v0"]["y"][:], data[:5000])  # builds the table
        with vf.stage_version("v1") as g:
            g["y"][4000:] = 1  # one slot appended: the table grows by a lookup
            np.testing.assert_array_equal(g["y"][3990:4010], np.r_[data[3990:4000], [1] * 10])
            g.create_dataset("x", data=data, chunks=(4096,), **FILTERS[name])
            np.testing.assert_array_equal(g["x"][:], data)
            g["x"][5:9] = 0
        expected = data.copy()
        expected[5:9] = 0
        np.testing.assert_array_equal(vf["v1"]["x"][:], expected)
        np.testing.assert_array_equal(vds(f, "v1")[:], expected)
        np.testing.assert_array_equal(vf["v1"]["y"][:], np.r_[data[:4000], [1] * 1000])


def test_small_boxes_are_read_through_hdf5(tmp_path: Path, monkeypatch) -> None:
    """Below the size where positioned reads pay, a read goes to h5py, with the same
    result; above it, to the positioned-read path."""
    data = np.arange(40_000, dtype="f8")
    with h5py.File(tmp_path / "g.h5", "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=data, chunks=(1000,))
    monkeypatch.setattr(planner, "FAST_READ_MIN_BYTES", 128 * 1024)
    calls = []
    monkeypatch.setattr(fastread, "fast_reader", lambda d: calls.append(d) or fast_reader(d))
    with h5py.File(tmp_path / "g.h5", "r") as f:
        x = VersionedHDF5File(f)["v1"]["x"]
        np.testing.assert_array_equal(x[10:500], data[10:500])  # 4 KB: through h5py
        assert calls == []
        np.testing.assert_array_equal(x[:20_000], data[:20_000])  # 160 KB: positioned
        assert len(calls) == 1


@pytest.mark.parametrize(("cores", "buffer_bytes"), [(1, 64), (2, 64), (2, 1000)])
@settings(SETTINGS, max_examples=15)
@given(case=cases(), data=st.data())
def test_small_buffers_and_one_core_read_what_hdf5_reads(
    tmp_path_factory, monkeypatch, cores: int, buffer_bytes: int, case: dict, data
) -> None:
    """Reads cut into many pieces and runs (every chunk its own run, fetched by the
    thread that decodes it) and commits in batches of a chunk or a few (each encoded
    while the one before is written), on one core (HDF5's filters write, h5vc decodes in
    the calling thread) and on two."""
    monkeypatch.setattr(codecs, "workers", lambda: cores)
    monkeypatch.setattr(planner, "BUFFER_BYTES", buffer_bytes)
    monkeypatch.setattr(planner, "PIECE_BYTES", buffer_bytes)
    monkeypatch.setattr(rawdata, "HASH_BATCH_BYTES", buffer_bytes)
    monkeypatch.setattr(
        rawdata,
        "hash_in_batches",
        lambda chunks, ahead=1, bases=None: hash_in_batches(chunks, buffer_bytes, ahead, bases),
    )
    path = tmp_path_factory.mktemp("io") / "f.h5"
    rng = np.random.default_rng(case["seed"])
    dtype = np.dtype(case["dtype"])
    model = (rng.random(case["shape"]) * 200 - 100).astype(dtype)
    kwargs = dict(FILTERS[case["filters"]])
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=model, chunks=case["chunks"], **kwargs)
        for i, (start, size, value) in enumerate(case["edits"]):
            box = tuple(slice(a, a + b) for a, b in zip(start, size))
            model[box] = value
            with vf.stage_version(f"v{i + 1}") as g:
                g["x"][box] = value
    last = f"v{len(case['edits'])}"
    with h5py.File(path, "r") as f:
        ours = VersionedHDF5File(f)[last]["x"]
        np.testing.assert_array_equal(vds(f, last)[()], model)
        np.testing.assert_array_equal(ours[()], model)
        index = _basic_index(data.draw, case["shape"])
        np.testing.assert_array_equal(ours[index], model[index])
        if model[index].size:  # HDF5 cannot read an empty selection of a VDS
            np.testing.assert_array_equal(ours[index], vds(f, last)[index])
        assert fast_reader(f["_version_data/x/raw_data"]) is not None
