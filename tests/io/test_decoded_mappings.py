"""First reads from a file's bytes decode a virtual dataset's mapping list once for all
handles and files holding the same bytes: what they decode to is kept by the bytes
themselves, so any change of them (a new version, damage) is decoded and checked
anew, and a list whose checksum disagrees is refused however often an intact one was
read before."""

from __future__ import annotations

import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest

import h5vc
from h5vc import config
from h5vc.errors import CorruptDataError
from h5vc.hdf5.filebytes import FileBytes
from h5vc.store import planner
from h5vc.store import reading as store_reading
from h5vc.versions import reading


@pytest.fixture(autouse=True)
def _reads_as_in_use(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Small reads take the paths they take in use (this directory's conftest sends
    every read through positioned reads); nothing kept from other tests."""
    monkeypatch.setattr(planner, "FAST_READ_MIN_BYTES", config.FAST_READ_MIN_BYTES)
    monkeypatch.setattr(planner, "HDF5_READ_BYTES", config.HDF5_READ_BYTES)
    monkeypatch.setattr(store_reading, "_DECODED", {})
    monkeypatch.setattr(store_reading, "_decoded_bytes", 0)
    reading.forget_generations()
    yield
    reading.forget_generations()


_STEP = 1000  # rows a commit appends


def _make(path: Path, appends: int) -> np.ndarray:
    """A table grown by ``appends`` commits of 1000 rows of 8 numbers (chunks of 4096
    rows, 256 KiB): version ``v{n}`` has ``1000 * (n + 1)`` rows. Each commit writes
    the last chunk anew (placed ahead of its hash), so the chunks of a version lie
    apart in the store: a mapping each."""
    rows = np.arange(_STEP * (appends + 1) * 8, dtype=np.float64).reshape(-1, 8)
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v0") as g:
            g.create_dataset("t", data=rows[:_STEP], chunks=(4096, 8))
        for n in range(1, appends + 1):
            with vf.stage_version(f"v{n}") as g:
                table = g["t"]
                table.resize((_STEP * (n + 1), 8))
                table[_STEP * n :] = rows[_STEP * n : _STEP * (n + 1)]
    return rows


def _mappings(path: Path, version: str) -> int:
    with h5py.File(path, "r") as f:
        return len(f[f"_version_data/versions/{version}/t"].virtual_sources())


def _tail(path: Path, version: str) -> np.ndarray:
    with h5vc.open(path) as vf:
        return np.asarray(vf[version]["t"][-5:])


# Lists decoded in Python (at most 16 mappings), and with numpy.
@pytest.mark.parametrize("appends", [20, 70])
def test_the_same_bytes_are_decoded_once(tmp_path: Path, appends: int) -> None:
    first, second = tmp_path / "a.h5", tmp_path / "b.h5"
    rows = _make(first, appends)
    last = f"v{appends}"
    assert (_mappings(first, last) > 16) is (appends > 20)
    assert _tail(first, last).tolist() == rows[-5:].tolist()
    decoded = dict(store_reading._DECODED)
    assert decoded
    shutil.copyfile(first, second)  # another file of the same bytes
    assert _tail(second, last).tolist() == rows[-5:].tolist()
    assert decoded == store_reading._DECODED
    # Another version's list: other bytes, decoded on their own.
    middle = appends // 2
    assert _tail(second, f"v{middle}").tolist() == rows[: _STEP * (middle + 1)][-5:].tolist()
    assert len(store_reading._DECODED) == len(decoded) + 1


def _mapping_list_at(path: Path, version: str) -> tuple[int, int]:
    """Where the mapping list of table ``t`` of ``version`` lies in the file, and its
    length (its checksum is its last four bytes)."""
    with h5py.File(path, "r") as f:
        address = h5py.h5o.get_info(f[f"_version_data/versions/{version}/t"].id).addr
        file_bytes = FileBytes.of(f)
        assert file_bytes is not None
        with file_bytes:
            header = file_bytes.header(address)
            layout_at = header.messages[0x0008][0]
            heap, index = struct.unpack_from("<QI", file_bytes.map, layout_at + 2)
            start, length = file_bytes._collection(heap)[index]
            return start - file_bytes.base, length


@pytest.mark.parametrize("where", ["checksum", "coordinates"])
@pytest.mark.parametrize("appends", [20, 70])
def test_damaged_bytes_are_refused_after_intact_ones_were_read(
    tmp_path: Path, appends: int, where: str
) -> None:
    path, damaged = tmp_path / "a.h5", tmp_path / "damaged.h5"
    rows = _make(path, appends)
    last = f"v{appends}"
    assert _tail(path, last).tolist() == rows[-5:].tolist()
    start, length = _mapping_list_at(path, last)
    data = bytearray(path.read_bytes())
    # The last byte of the checksum, or one of the last block's coordinates.
    data[start + length - (1 if where == "checksum" else 5)] ^= 0x01
    damaged.write_bytes(bytes(data))
    with pytest.raises(CorruptDataError, match="checksum disagrees"):
        _tail(damaged, last)
    assert _tail(path, last).tolist() == rows[-5:].tolist()  # the intact file still reads


def test_lists_beyond_the_limit_are_decoded_each_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.h5"
    rows = _make(path, 70)
    _, length = _mapping_list_at(path, "v70")
    monkeypatch.setattr(store_reading, "DECODED_BYTES", length - 1)
    for _ in range(2):
        assert _tail(path, "v70").tolist() == rows[-5:].tolist()
    assert not store_reading._DECODED
    # Within the limit, the oldest lists go first.
    monkeypatch.setattr(store_reading, "DECODED_BYTES", 2 * length)
    for version in ("v70", "v69", "v68"):
        assert (
            _tail(path, version)[-1].tolist() == rows[: _STEP * (int(version[1:]) + 1)][-1].tolist()
        )
    kept = store_reading._DECODED
    assert 1 <= len(kept) <= 2
    assert store_reading._decoded_bytes == sum(len(key[0]) for key in kept) <= 2 * length
    start, _ = _mapping_list_at(path, "v70")
    assert path.read_bytes()[start : start + length] not in {key[0] for key in kept}
