"""How versions are stored: chunk dedup, unstored fill chunks, hard links, plain-HDF5 reads."""

from __future__ import annotations

import hashlib
import os
import pickle
import subprocess
import sys

import dask.array as da
import h5py
import numpy as np
from store_helpers import assert_same_array

import h5vc
from h5vc import VersionedHDF5File

C = 4  # chunk length of the 1-D datasets below


def raw_rows(f: h5py.File, path: str) -> int:
    return f[f"_version_data/{path}/raw_data"].shape[0]


def largest_index(f: h5py.File, path: str) -> int:
    return int(f[f"_version_data/{path}/hash_table"].attrs["largest_index"])


def address(obj: h5py.HLObject) -> int:
    return h5py.h5o.get_info(obj.id).addr


def chunk_digest(chunk: np.ndarray) -> bytes:
    """The format's chunk hash: SHA-256 of the bytes then the shape as Python prints it."""
    return hashlib.sha256(
        np.ascontiguousarray(chunk).tobytes() + repr(chunk.shape).encode()
    ).digest()


def test_identical_chunks_are_stored_once(vf: VersionedHDF5File, h5file: h5py.File) -> None:
    data = np.tile(np.arange(C, dtype="i8") + 1, 6)  # six equal chunks
    data = np.concatenate([data, [9, 9]])  # and an edge chunk
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=data, chunks=(C,))
    assert raw_rows(h5file, "x") == 2 * C
    assert largest_index(h5file, "x") == 2
    assert_same_array(vf["v1"]["x"][()], data)
    assert_same_array(h5file["_version_data/versions/v1/x"][()], data)


def test_committing_identical_data_again_stores_nothing(
    vf: VersionedHDF5File, h5file: h5py.File
) -> None:
    data = np.arange(50, dtype="f8")
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=data, chunks=(C,))
    rows = raw_rows(h5file, "x")
    with vf.stage_version("v2") as g:
        g["x"][:] = data.copy()  # rewritten, same contents
    with vf.stage_version("v3") as g:
        g["x"][0] = 100.0
    with vf.stage_version("v4") as g:
        g["x"][0] = 0.0  # back to the content of v1's first chunk
    assert raw_rows(h5file, "x") == rows + C  # only v3's chunk is new
    assert largest_index(h5file, "x") * C == raw_rows(h5file, "x")
    for name in ("v1", "v2", "v4"):
        assert_same_array(vf[name]["x"][()], data)


def test_hash_table_rows(vf: VersionedHDF5File, h5file: h5py.File) -> None:
    data = np.arange(10, dtype="i4")
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=data, chunks=(C,))
    with vf.stage_version("v2") as g:
        g["x"][5] = -1
        g["x"].resize((13,))
        g["x"][12] = 7
    table = h5file["_version_data/x/hash_table"]
    n = largest_index(h5file, "x")
    raw = h5file["_version_data/x/raw_data"]
    assert raw.shape[0] == n * C
    assert table.shape[0] >= n
    hashes = set()
    for row in table[:n]:
        start, stop = (int(v) for v in row["shape"])
        assert start % C == 0 and 0 < stop - start <= C
        chunk = raw[start:stop]
        assert bytes(row["hash"]) == chunk_digest(chunk)
        hashes.add(bytes(row["hash"]))
    assert len(hashes) == n  # no duplicate rows


def test_fill_chunks_are_not_stored(vf: VersionedHDF5File, h5file: h5py.File) -> None:
    with vf.stage_version("v1") as g:
        g.create_dataset("empty", shape=(40,), dtype="f8", chunks=(C,), fillvalue=3.0)
        g.create_dataset("filled", data=np.full(40, 3.0), chunks=(C,), fillvalue=3.0)
        g.create_dataset("half", data=np.r_[np.zeros(8), np.ones(8)], chunks=(C,))
    assert raw_rows(h5file, "empty") == 0
    assert raw_rows(h5file, "filled") == 0
    assert raw_rows(h5file, "half") == C  # the two chunks of ones are one slot
    assert_same_array(vf["v1"]["empty"][()], np.full(40, 3.0))
    assert_same_array(h5file["_version_data/versions/v1/filled"][()], np.full(40, 3.0))
    with vf.stage_version("v2") as g:
        g["half"][8:] = 0.0  # every chunk is fill now
        g["half"].resize((100,))
    assert raw_rows(h5file, "half") == C
    assert_same_array(h5file["_version_data/versions/v2/half"][()], np.zeros(100))


def test_unchanged_objects_are_hard_links(vf: VersionedHDF5File, h5file: h5py.File) -> None:
    with vf.stage_version("v1") as g:
        g.create_dataset("same", data=np.arange(8), chunks=(C,))
        g.create_dataset("grp/inner", data=np.arange(3), chunks=(C,))
        g.create_dataset("edit", data=np.arange(8), chunks=(C,))
    with vf.stage_version("v2") as g:
        g["edit"][0] = 5
    versions = h5file["_version_data/versions"]
    assert address(versions["v1/same"]) == address(versions["v2/same"])
    assert address(versions["v1/grp"]) == address(versions["v2/grp"])
    assert address(versions["v1/grp/inner"]) == address(versions["v2/grp/inner"])
    assert address(versions["v1/edit"]) != address(versions["v2/edit"])
    assert_same_array(versions["v2/edit"][()], np.r_[5, np.arange(1, 8)])
    assert_same_array(versions["v1/edit"][()], np.arange(8))


def test_attribute_change_breaks_the_link(vf: VersionedHDF5File, h5file: h5py.File) -> None:
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=np.arange(8), chunks=(C,))
    with vf.stage_version("v2") as g:
        g["x"].attrs["note"] = "v2 only"
    versions = h5file["_version_data/versions"]
    assert address(versions["v1/x"]) != address(versions["v2/x"])
    assert "note" not in versions["v1/x"].attrs
    assert raw_rows(h5file, "x") == 2 * C  # data still shared


def test_every_version_is_plain_hdf5(path: str) -> None:
    expected = {}
    with h5vc.open(path, "w") as vf:
        x = np.arange(60, dtype="i2").reshape(10, 6)
        for i in range(4):
            with vf.stage_version(f"v{i}") as g:
                if i == 0:
                    g.create_dataset("x", data=x, chunks=(3, 4), fillvalue=-1)
                else:
                    g["x"][i, :] = -i
                    g["x"].resize((10 + i, 6 - i))
                    x2 = np.full((10 + i, 6 - i), -1, dtype="i2")
                    x2[: 10 + i - 1] = x[:, : 6 - i]
                    x = x2
                    x[i, :] = -i
            expected[f"v{i}"] = x.copy()
    with h5py.File(path, "r") as f:
        versions = f["_version_data/versions"]
        assert versions.attrs["data_version"] == 1001
        for name, want in expected.items():
            ds = versions[name]["x"]
            assert ds.is_virtual
            assert_same_array(ds[()], want)
            assert list(ds.attrs["chunks"]) == [3, 4]


def test_dask(vf: VersionedHDF5File) -> None:
    data = np.arange(200.0).reshape(20, 10)
    with vf.stage_version("v1") as g:
        g.create_dataset("x", data=data, chunks=(6, 4))
    x = vf["v1"]["x"]
    arr = da.from_array(x, chunks=x.chunks)
    assert_same_array(arr.sum(axis=0).compute(scheduler="threads"), data.sum(axis=0))
    assert_same_array(arr[3:17:2, ::3].compute(scheduler="sync"), data[3:17:2, ::3])


READER = """
import pickle, sys
import numpy as np
dataset = pickle.loads(sys.stdin.buffer.read())
sys.stdout.write(repr((dataset.shape, dataset[()].tolist(), dataset.attrs["k"])))
"""


def test_committed_dataset_pickles_to_another_process(path: str) -> None:
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("a/x", data=np.arange(6).reshape(2, 3), chunks=(1, 2))
            g["a/x"].attrs["k"] = "v"
        with vf.stage_version("v2") as g:
            g["a/x"][1, 1] = 40
        payload = pickle.dumps(vf["v1"]["a/x"])
        assert pickle.loads(payload)[1, 1] == 4  # in this process too
    env = dict(os.environ)
    src = os.path.dirname(os.path.dirname(h5vc.__file__))
    env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "-c", READER], input=payload, capture_output=True, env=env, check=True
    )
    assert result.stdout.decode() == "((2, 3), [[0, 1, 2], [3, 4, 5]], 'v')"
