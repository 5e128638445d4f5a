"""Deleted data really goes; freed space is reused after a reopen; stats reports it
(tests/safety/test_safety_space_reuse.py: reuse in every kind of file)."""

from __future__ import annotations

import os
import shutil

import h5py
import numpy as np
import pytest

import h5vc
from h5vc import VersionedHDF5File

#: 16 bytes that no other data of the tests contains.
MARKER = np.frombuffer(b"\xa7ERASE-ME\x5c\x19\xe3\x01\xfe\x42\x77", dtype=np.uint8)


def _secret(n: int, salt: int) -> np.ndarray:
    """``n`` bytes of the marker; the last byte of each copy numbers its 4000-byte chunk,
    so no two chunks are equal (and none is shared by deduplication)."""
    data = np.tile(MARKER, n // 16)
    data[15::16] = (np.arange(n // 16) * 16 // 4000 + 16 * salt).astype(np.uint8)
    return data


def _stored_chunks(raw_data: h5py.Dataset, first_slot: int, c0: int) -> list[bytes]:
    """The bytes of every stored chunk from ``first_slot`` on, as they are in the file."""
    slots = range(first_slot, raw_data.shape[0] // c0)
    return [raw_data.id.read_direct_chunk((slot * c0,))[1] for slot in slots]


def _versions_with_secret(path: str, compression: str | None) -> list[bytes]:
    """Versions v1, secret, v3; the stored chunks only 'secret' (and v1's 'gone') hold."""
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.zeros(64_000, np.uint8), chunks=(4000,),
                             compression=compression)  # fmt: skip
            g.create_dataset("gone", data=_secret(8000, 1), chunks=(4000,), compression=compression)
        raw = vf.file_state.version_data["x/raw_data"]
        first = raw.shape[0] // 4000
        with vf.stage_version("secret") as g:
            g["x"][8000:24000] = _secret(16000, 2)  # four chunks only this version holds
        with vf.stage_version("v3") as g:
            g["x"][8000:24000] = 1
            del g["gone"]
        gone = vf.file_state.version_data["gone/raw_data"]
        secrets = _stored_chunks(raw, first, 4000)[:4] + _stored_chunks(gone, 0, 4000)
    assert len(secrets) == 6 and all(len(chunk) > 16 for chunk in secrets)
    return secrets


def _holds_any(path: str, secrets: list[bytes]) -> bool:
    with open(path, "rb") as file:
        content = file.read()
    return MARKER[:15].tobytes() in content or any(chunk in content for chunk in secrets)


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_delete_and_repack_leave_no_byte_of_deleted_data(path: str, tmp_path, compression):
    secrets = _versions_with_secret(path, compression)
    assert _holds_any(path, secrets)
    with h5py.File(path, "r+") as f:
        h5vc.delete_versions(f, ["v1", "secret"])
    packed = str(tmp_path / "packed.h5")
    h5vc.repack(path, packed)
    assert not _holds_any(packed, secrets)
    with h5py.File(packed, "r") as f:
        vf = VersionedHDF5File(f)
        assert vf.versions == ["v3"]
        assert np.all(vf["v3"]["x"][8000:24000] == 1)
        assert h5vc.verify(f).ok


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_erase_in_place(path: str, compression) -> None:
    secrets = _versions_with_secret(path, compression)
    with h5py.File(path, "r+") as f:
        h5vc.delete_versions(f, ["v1", "secret"])
    assert _holds_any(path, secrets)  # released, not erased: documented
    secrets = _versions_with_secret(path, compression)
    with h5py.File(path, "r+") as f:
        h5vc.delete_versions(f, ["v1", "secret"], erase=True)
    assert not _holds_any(path, secrets)
    with h5py.File(path, "r") as f:
        vf = VersionedHDF5File(f)
        assert np.all(vf["v3"]["x"][8000:24000] == 1)
        assert np.all(vf["v3"]["x"][:8000] == 0)
        assert h5vc.verify(f).ok


def _rewrite_all(path: str, prefix: str, seed: int, n: int = 100) -> None:
    rng = np.random.default_rng(seed)
    with h5vc.open(path, "r+") as vf:
        for i in range(n):
            with vf.stage_version(f"{prefix}{i}") as g:
                g["x"][:] = rng.random(4000)


def test_space_released_by_delete_is_reused_after_reopen(path: str) -> None:
    with h5vc.open(path, "w") as vf, vf.stage_version("base") as g:
        g.create_dataset("x", data=np.zeros(4000), chunks=(500,))
    _rewrite_all(path, "v", 1)  # every version holds chunks of its own
    before = os.path.getsize(path)
    reference = path + ".ref"
    shutil.copy(path, reference)
    _rewrite_all(reference, "w", 2)
    added = os.path.getsize(reference) - before  # what the commits add to a full file
    with h5vc.open(path, "r+") as vf:
        h5vc.delete_versions(vf, [f"v{i}" for i in range(0, 100, 2)])
    with h5py.File(path, "r") as f:
        report = h5vc.stats(f)
        assert report.persists_free_space
        released = 50 * 8 * 500 * 8  # 50 versions of 8 chunks of 500 float64
        assert report.free_chunk_bytes == released  # kept as free slots of raw_data
        assert report.datasets["x"].free_chunks == 50 * 8
        assert report.datasets["x"].chunks == 50 * 8  # the base's zeros are not stored
        assert report.datasets["x"].stored_bytes == 50 * 8 * 500 * 8
    _rewrite_all(path, "w", 2)
    after = os.path.getsize(path)
    assert after <= before + added
    assert after - before <= 0.75 * added  # the released space was reused
    with h5py.File(path, "r") as f:
        assert h5vc.verify(f).ok


def test_plain_h5py_file_forgets_free_space_but_keeps_free_slots(path: str) -> None:
    """Documented: only files created with the property persist HDF5's free space; the
    chunks delete_versions released stay as free slots in every file."""
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(4000.0), chunks=(500,))
        with vf.stage_version("v2") as g:
            g["x"][:] = 1.0  # 8 equal chunks: one slot
        h5vc.delete_versions(f, ["v1"])
    with h5py.File(path, "r") as f:
        report = h5vc.stats(f)
        assert not report.persists_free_space
        assert report.free_bytes == 0
        assert report.datasets["x"].chunks == 1
        assert report.datasets["x"].free_chunks == 8
        assert report.free_chunk_bytes == 8 * 500 * 8


@pytest.mark.parametrize("mode", ["w", "x", "a"])
def test_open_creates_files_that_persist_free_space(path: str, mode: str) -> None:
    with h5vc.open(path, mode):
        pass
    with h5py.File(path, "r") as f:
        assert h5vc.stats(f).persists_free_space


def test_repack_output_persists_free_space(path: str, tmp_path) -> None:
    with h5py.File(path, "w") as f, VersionedHDF5File(f).stage_version("v1") as g:
        g.create_dataset("x", data=np.arange(10))
    packed = str(tmp_path / "packed.h5")
    h5vc.repack(path, packed)
    with h5py.File(packed, "r") as f:
        assert h5vc.stats(f).persists_free_space
