"""Free slots in files of the shared layout (data_version 4): h5vc's ``delete_versions``
leaves the released chunks at the end of raw_data for reuse, past ``largest_index``;
versioned-hdf5 treats rows past it as garbage to overwrite, so both libraries keep
reading and writing such files correctly, one after the other."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import versioned_hdf5

import h5vc

N, CHUNK = 10_500, 1000  # the last chunk is short


def _commit(lib, path: str, name: str, data: np.ndarray, compression: str | None) -> None:
    with h5py.File(path, "r+") as f:
        vf = lib.VersionedHDF5File(f)
        with vf.stage_version(name) as g:
            if "x" in g:
                g["x"][:] = data
            else:
                g.create_dataset("x", data=data, chunks=(CHUNK,), compression=compression)


def _read_all(lib, path: str, model: dict[str, np.ndarray]) -> None:
    with h5py.File(path, "r") as f:
        vf = lib.VersionedHDF5File(f)
        assert sorted(vf.versions) == sorted(model)
        for name, expected in model.items():
            np.testing.assert_array_equal(vf[name]["x"][:], expected, err_msg=f"{lib} {name}")


@pytest.mark.parametrize("erase", [False, True])
@pytest.mark.parametrize("compression", [None, "gzip"])
def test_both_libraries_use_a_file_with_free_slots(
    tmp_path, compression: str | None, erase: bool
) -> None:
    path = str(tmp_path / "data.h5")
    with h5py.File(path, "w") as f:
        versioned_hdf5.VersionedHDF5File(f)
    rng = np.random.default_rng(0)
    model = {}
    for i in range(6):
        model[f"v{i}"] = rng.integers(0, 100, N).astype("f8")
        _commit(versioned_hdf5, path, f"v{i}", model[f"v{i}"], compression)
    with h5py.File(path, "r+") as f:
        h5vc.delete_versions(f, ["v1", "v2", "v3"], erase=erase)
    for name in ("v1", "v2", "v3"):
        del model[name]
    with h5py.File(path, "r") as f:
        assert f["_version_data/versions"].attrs["data_version"] == 4
        # Erased chunks are no valid gzip stream: a compressed store drops them.
        erased_dropped = erase and compression is not None
        assert h5vc.stats(f).datasets["x"].free_chunks == (0 if erased_dropped else 3 * 11)
        f["_version_data/x/raw_data"][()]  # every chunk decodes, as other HDF5 tools need
    _read_all(versioned_hdf5, path, model)
    for name, lib in (("a", versioned_hdf5), ("b", h5vc), ("c", versioned_hdf5), ("d", h5vc)):
        model[name] = rng.integers(0, 100, N).astype("f8")
        _commit(lib, path, name, model[name], compression)
        _read_all(h5vc, path, model)
        _read_all(versioned_hdf5, path, model)
        with h5py.File(path, "r") as f:
            assert h5vc.verify(f).ok
    with h5py.File(path, "r+") as f:
        versioned_hdf5.delete_versions(f, ["a", "v0"])
    del model["a"], model["v0"]
    _read_all(h5vc, path, model)
    with h5py.File(path, "r") as f:
        assert h5vc.verify(f).ok
