"""Small selections of virtual datasets of few mapped blocks are read by HDF5 from the
virtual dataset; what they give equals the positioned reads from raw_data and numpy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import h5vc
from h5vc.store import planner
from h5vc.store.chunkmap import ChunkMap
from h5vc.store.reading import CommittedReader
from h5vc.store.vds import create_virtual_dataset, read_chunk_map

#: name -> (values, chunks, fill value)
ARRAYS: dict[str, tuple[np.ndarray, tuple[int, ...], Any]] = {
    "ints": (np.arange(60, dtype="i8"), (8,), -7),
    "floats": (np.linspace(0.0, 1.0, 99 * 7, dtype="f4").reshape(99, 7), (10, 3), np.nan),
    "cube": (np.arange(4 * 5 * 6, dtype="u2").reshape(4, 5, 6), (2, 2, 4), 9),
    "complex": (np.arange(30, dtype="c16") * (1 - 2j), (4,), 1j),
    "text": (np.array([b"ab", b"cd", b"ef", b"gh"] * 5, dtype="S2"), (3,), b"zz"),
}


def _boxes(shape: tuple[int, ...]) -> list[Any]:
    """Whole, inner, single-element and negative-integer selections."""
    ndim = len(shape)
    return [
        (),
        tuple(slice(None) for _ in shape),
        tuple(slice(1, n - 1) for n in shape),
        tuple(n // 2 for n in shape),
        tuple(-1 for _ in shape),
        (shape[0] - 3, *(slice(None) for _ in range(ndim - 1))),
        slice(2, shape[0]),
    ]


@pytest.fixture(scope="module")
def edited(tmp_path_factory: pytest.TempPathFactory):
    """v2 of every array: some chunks edited, one chunk set to the fill value (left
    unstored, so unmapped)."""
    path = Path(tmp_path_factory.mktemp("small")) / "small.h5"
    expected = {}
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            for name, (values, chunks, fill) in ARRAYS.items():
                g.create_dataset(name, data=values, chunks=chunks, fillvalue=fill)
        with vf.stage_version("v2") as g:
            for name, (values, chunks, fill) in ARRAYS.items():
                want = values.copy()
                corner = tuple(slice(0, c) for c in chunks)
                want[corner] = fill  # a whole chunk of fill: not stored
                middle = tuple(slice(n // 2, n // 2 + 1) for n in values.shape)
                want[middle] = values[(0,) * values.ndim]
                g[name][corner] = want[corner]
                g[name][middle] = want[middle]
                expected[name] = want
    with h5vc.open(path, "r") as vf:
        yield vf, expected


@pytest.mark.parametrize("name", [name for name in ARRAYS if name != "text"])
def test_small_selections_are_read_from_the_virtual_dataset(edited, name, monkeypatch) -> None:
    vf, expected = edited
    dataset = vf["v2"][name]
    assert dataset._chunk_map.slots.min() < 0  # an unmapped chunk, filled by HDF5
    through_vds = CommittedReader(
        dataset._chunk_map, dataset._raw_data, dataset.fillvalue, virtual=dataset.dataset
    )
    from_raw_data = CommittedReader(dataset._chunk_map, dataset._raw_data, dataset.fillvalue)
    assert through_vds.planner.virtual
    for box in _boxes(expected[name].shape):
        want = expected[name][box]
        positioned = from_raw_data.read(box)
        assert through_vds.planner.plan(box).path == "virtual"
        assert from_raw_data.planner.plan(box).path in ("block", "pieces")
        with monkeypatch.context() as patch:
            patch.setattr(CommittedReader, "_read_block", _not_called)
            patch.setattr(CommittedReader, "_read_pieces", _not_called)
            got = through_vds.read(box)
        for result in (got, positioned):
            np.testing.assert_array_equal(result, want)
            assert np.asarray(result).dtype == np.asarray(want).dtype
            assert np.shape(result) == np.shape(want)
        assert np.asarray(got).tobytes() == np.asarray(positioned).tobytes()  # NaN fill too
        np.testing.assert_array_equal(dataset[box], want)


def _not_called(*args: Any) -> None:
    raise AssertionError("expected HDF5 to read the selection from the virtual dataset")


def test_text_is_read_from_raw_data(edited) -> None:
    vf, expected = edited
    dataset = vf["v2"]["text"]
    reader = CommittedReader(
        dataset._chunk_map, dataset._raw_data, dataset.fillvalue, virtual=dataset.dataset
    )
    assert not reader.planner.virtual
    assert reader.planner.plan(slice(None)).path == "pieces"
    np.testing.assert_array_equal(dataset[:], expected["text"])


def test_large_selections_take_positioned_reads(edited, monkeypatch) -> None:
    vf, expected = edited
    dataset = vf["v2"]["floats"]
    monkeypatch.setattr(planner, "HDF5_READ_BYTES", 40)  # 10 float32
    reader = CommittedReader(
        dataset._chunk_map, dataset._raw_data, dataset.fillvalue, virtual=dataset.dataset
    )
    want = expected["floats"]
    for index, positioned in [
        ((slice(0, 2), slice(0, 7)), True),  # 14 float32
        ((0, slice(0, 7)), False),
        ((slice(0, 10), 3), False),  # 10 float32: at the limit
        ((slice(0, 11), 3), True),
    ]:
        path = reader.planner.plan(index).path
        assert (path != "virtual") == positioned, (index, path)
        np.testing.assert_array_equal(reader.read(index), want[index])


def test_many_blocks_take_positioned_reads(tmp_path: Path) -> None:
    """HDF5 looks at every block of every mapping on every read of a virtual dataset."""
    path = tmp_path / "many.h5"
    values = np.arange(4000.0)
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=values, chunks=(10,))
        with vf.stage_version("v2") as g:
            for start in range(0, 4000, 40):  # every fourth chunk: a run of its own
                g["x"][start] = -1.0
                values[start] = -1.0
    with h5vc.open(path, "r") as vf:
        dataset = vf["v2"]["x"]
        blocks = dataset._chunk_map.blocks
        assert blocks is not None and blocks > planner.HDF5_READ_BLOCKS
        with h5py.File(path, "r") as plain:
            sources = plain["_version_data/versions/v2/x"].virtual_sources()
            assert blocks == sum(source.vspace.get_select_hyper_nblocks() for source in sources)
        reader = CommittedReader(
            dataset._chunk_map, dataset._raw_data, dataset.fillvalue, virtual=dataset.dataset
        )
        assert not reader.planner.virtual
        assert reader.planner.plan(slice(35, 45)).path == "pieces"
        np.testing.assert_array_equal(dataset[:], values)
        np.testing.assert_array_equal(dataset[35:45], values[35:45])


@pytest.mark.parametrize(("vds_fill", "used"), [(5.0, True), (6.0, False), (None, False)])
def test_virtual_fill_must_match(tmp_path: Path, vds_fill: Any, used: bool) -> None:
    """HDF5 fills unmapped chunks with the virtual dataset's fill value: the shortcut is
    taken only where that is the dataset's own."""
    with h5py.File(tmp_path / "fill.h5", "w") as f:
        raw = f.create_dataset(
            "raw", data=np.arange(12.0), chunks=(4,), maxshape=(None,), fillvalue=5.0
        )
        chunk_map = ChunkMap((12,), (4,), np.array([2, -1, 0]))
        virtual = create_virtual_dataset(f, "v", raw, chunk_map, fillvalue=vds_fill)
        read_back = read_chunk_map(virtual, (4,))
        assert read_back == chunk_map and read_back.blocks == 2
        reader = CommittedReader(read_back, raw, 5.0, virtual=virtual)
        assert reader.planner.virtual == used
        want = np.array([8, 9, 10, 11, 5, 5, 5, 5, 0, 1, 2, 3], dtype=float)
        np.testing.assert_array_equal(reader.read(slice(None)), want)
        np.testing.assert_array_equal(reader.read(slice(3, 9)), want[3:9])


@pytest.mark.parametrize("name", ["a%b", "p%%q", "c%d", "ends%", "sub%s/x%b"])
def test_names_with_percent_signs(tmp_path: Path, name: str) -> None:
    """HDF5 reads "%b" in a virtual dataset's source name as a block number: the source
    names of such datasets are written with "%%", and the versions commit and read."""
    path = tmp_path / "percent.h5"
    values = np.arange(50.0)
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset(name, data=values, chunks=(10,))
        with vf.stage_version("v2") as g:
            g[name][3] = -1.0
    edited = values.copy()
    edited[3] = -1.0
    with h5vc.open(path, "r") as vf:
        for version, want in (("v1", values), ("v2", edited)):
            dataset = vf[version][name]
            assert dataset._committed_reader().planner.virtual
            np.testing.assert_array_equal(dataset[:], want)
            np.testing.assert_array_equal(dataset[2:5], want[2:5])
    with h5py.File(path, "r") as plain:
        for version, want in (("v1", values), ("v2", edited)):
            virtual = plain[f"_version_data/versions/{version}/{name}"]
            np.testing.assert_array_equal(virtual[:], want)
    with h5vc.open(path, "r") as vf:
        assert h5vc.verify(vf).ok


@pytest.mark.parametrize("mode", ["r", "r+"])  # mappings read from the file, or from HDF5
@pytest.mark.filterwarnings("ignore::h5vc.errors.UnjournaledFileWarning")  # group roots
def test_a_copied_tree_is_read_from_its_own_chunks(tmp_path: Path, mode: str) -> None:
    """A versioned tree copied within the file keeps virtual datasets whose source names
    point at the original's chunks: h5vc reads the copy's own chunks (HDF5's read of the
    copy's virtual datasets would read the original's)."""
    path = tmp_path / "copied.h5"
    with h5py.File(path, "w") as f:
        vf = h5vc.VersionedHDF5File(f.create_group("data"))
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(40.0), chunks=(10,))
        with vf.stage_version("v2") as g:
            g["x"][:] = np.arange(40.0) + 100
        with vf.stage_version("v3") as g:
            g["x"][0] = -1.0
    want = np.arange(40.0) + 100
    want[0] = -1.0
    with h5py.File(path, "r+") as f:
        f.copy(f["data"], "backup")
        h5vc.delete_versions(h5vc.VersionedHDF5File(f["data"]), ["v1", "v2"])  # chunks move
    with h5py.File(path, mode) as f:
        source = f["backup/_version_data/versions/v3/x"].virtual_sources()[0].dset_name
        assert source.startswith("/data/")  # the copy's virtual dataset reads the original's
        copied = h5vc.VersionedHDF5File(f["backup"])["v3"]["x"]
        np.testing.assert_array_equal(copied[:], want)
        np.testing.assert_array_equal(copied[5:15], want[5:15])
        assert not copied._committed_reader().planner.virtual
        original = h5vc.VersionedHDF5File(f["data"])["v3"]["x"]
        np.testing.assert_array_equal(original[:], want)
        assert original._committed_reader().planner.virtual
        assert h5vc.verify(h5vc.VersionedHDF5File(f["data"])).ok
        report = h5vc.verify(h5vc.VersionedHDF5File(f["backup"]))
        assert not report.ok
        assert any("/data/_version_data/x/raw_data" in str(p) for p in report.problems)
        assert all(p.kind == "mapping" for p in report.problems)
