"""Files of versioned-hdf5's layouts before data_version 4: read as they are, repaired
before the first write.

The files are written by versioned-hdf5 2.6.0 and then given what the older releases
left behind: no ``data_version`` attribute (1) or 2 or 3, and hash tables whose rows
for string (object-dtype) chunks do not match the stored chunks (digests over the
Python objects' identities in 1 and 2, over the concatenated bytes in 3).
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import versioned_hdf5

import h5vc
from h5vc.hashing import chunk_hash
from h5vc.store import legacy

STRINGS = np.array(["ab", "c", "a", "bc", "zz", "", "ü"], dtype=object)
EXPECTED = {
    "v1": {
        "x": np.arange(13),
        "s": STRINGS,
        "m": np.arange(35).reshape(7, 5),
    },
    "v2": {
        "x": np.array([100, *range(1, 11)]),
        "s": np.array(["ab", "c", "q", "bc", "zz", "", "ü"], dtype=object),
        "m": np.arange(35).reshape(7, 5),
        "grp/y": np.linspace(0, 1, 9),
    },
}
STORES = ("x", "s", "m", "grp/y")


def write_reference(path: Path) -> None:
    """Two versions by versioned-hdf5 2.6.0: numbers, strings, a 2-d array with edge
    chunks on both axes, a nested dataset, a shrunk dataset."""
    with h5py.File(path, "w") as f:
        vf = versioned_hdf5.VersionedHDF5File(f)
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(13), chunks=(5,))
            g.create_dataset("s", data=STRINGS, dtype=h5py.string_dtype(), chunks=(2,))
            g.create_dataset("m", data=np.arange(35).reshape(7, 5), chunks=(3, 2))
        with vf.stage_version("v2") as g:
            g["x"][0] = 100
            g["x"].resize((11,))
            g["s"][2] = "q"
            g.create_group("grp").create_dataset("y", data=np.linspace(0, 1, 9), chunks=(4,))


def old_digest(chunk: np.ndarray, data_version: int | None) -> bytes:
    """A string chunk's digest as the older releases computed it."""
    if data_version == 3:  # the bytes of every element one after the other
        joined = b"".join(
            v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in chunk.ravel()
        )
        return hashlib.sha256(joined + str(chunk.shape).encode()).digest()
    return hashlib.sha256(str([id(v) for v in chunk.ravel()]).encode()).digest()


def make_legacy(path: Path, data_version: int | None) -> None:
    """Mark ``path`` as written by an older release and spoil its string digests."""
    with h5py.File(path, "r+") as f:
        versions = f["_version_data/versions"]
        if data_version is None:
            del versions.attrs["data_version"]
        else:
            versions.attrs["data_version"] = np.int64(data_version)
        table = f["_version_data/s/hash_table"]
        raw = f["_version_data/s/raw_data"]
        n = int(table.attrs["largest_index"])
        rows = table[:n]
        for i, (start, stop) in enumerate(rows["shape"]):
            chunk = raw[start:stop]
            rows["hash"][i] = np.frombuffer(old_digest(chunk, data_version), dtype=np.uint8)
        table[:n] = rows


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("legacy") / "reference.h5"
    write_reference(path)
    return path


@pytest.fixture(params=[None, 2, 3], ids=["no-data_version", "data_version-2", "data_version-3"])
def legacy_file(request: pytest.FixtureRequest, reference: Path, tmp_path: Path):
    path = tmp_path / "legacy.h5"
    shutil.copyfile(reference, path)
    make_legacy(path, request.param)
    return path, request.param


def assert_versions_read(vf, expected=EXPECTED) -> None:
    for version, datasets in expected.items():
        for name, values in datasets.items():
            got = vf[version][name][()]
            if values.dtype == object:
                got = np.array([v.decode() if isinstance(v, bytes) else v for v in got], object)
            np.testing.assert_array_equal(got, values, err_msg=f"{version}/{name}")


def table_rows(f: h5py.File, path: str) -> tuple[np.ndarray, np.ndarray]:
    table = f[f"_version_data/{path}/hash_table"]
    rows = table[: int(table.attrs["largest_index"])]
    return rows["hash"], rows["shape"]


def test_read_only_open_reads_and_changes_nothing(legacy_file) -> None:
    path, data_version = legacy_file
    before = path.read_bytes()
    with h5vc.open(path, "r") as vf:
        assert vf.data_version == (data_version or 1)
        assert_versions_read(vf)
    with h5py.File(path, "r") as f:
        assert_versions_read(h5vc.VersionedHDF5File(f))
    assert path.read_bytes() == before


def test_writable_open_rebuilds_hash_tables(legacy_file, caplog) -> None:
    path, data_version = legacy_file
    with caplog.at_level(logging.INFO, logger="h5vc"), h5vc.open(path, "r+") as vf:
        assert vf.data_version == 4
        assert_versions_read(vf)
    records = [r for r in caplog.records if r.levelno == logging.INFO]
    assert len(records) == 1
    message = records[0].getMessage()
    assert str(path) in message and f"data_version {data_version or 1}" in message
    assert all(name in message for name in STORES)
    with h5py.File(path, "r") as f:
        assert int(f["_version_data/versions"].attrs["data_version"]) == 4
        for store in STORES:
            raw = f[f"_version_data/{store}/raw_data"]
            c0 = raw.chunks[0]
            digests, ranges = table_rows(f, store)
            # one row per slot, in slot order, each the digest of the slot's chunk
            np.testing.assert_array_equal(ranges[:, 0], np.arange(len(ranges)) * c0)
            assert len(ranges) == raw.shape[0] // c0
            for digest, (start, stop) in zip(digests, ranges):
                chunk = raw[start:stop]
                if store == "m":  # the last chunk column is 1 wide (5 = 2 + 2 + 1)
                    column = (start // c0) // 3
                    chunk = chunk[:, : 1 if column % 3 == 2 else 2]
                assert bytes(digest) == chunk_hash(chunk), (store, start)
    with h5vc.open(path, "r") as vf:
        report = h5vc.verify(vf)
    assert report.ok, str(report)
    # A second writable open finds a data_version 4 file: nothing to repair.
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="h5vc"), h5vc.open(path, "r+"):
        pass
    assert not [r for r in caplog.records if "Repaired" in r.getMessage()]


def test_commits_after_repair_deduplicate(legacy_file) -> None:
    path, _ = legacy_file
    with h5vc.open(path, "r+") as vf:
        sizes = {s: vf.f[f"_version_data/{s}/raw_data"].shape[0] for s in STORES}
        with vf.stage_version("v3", "v1") as g:
            # v1's content again: every chunk is stored already
            g["s"][:] = STRINGS
            g["x"].resize((11,))
            g["x"][...] = EXPECTED["v2"]["x"]
            g["m"][...] = np.arange(35).reshape(7, 5)
        assert {s: vf.f[f"_version_data/{s}/raw_data"].shape[0] for s in STORES} == sizes
        with vf.stage_version("v4") as g:
            # ["a", "bc"] was stored; ["abc", ""] collides with it under data_version 3's
            # digest but is other data: it needs a slot of its own.
            g["s"][2:4] = np.array(["abc", ""], dtype=object)
        assert vf.f["_version_data/s/raw_data"].shape[0] == sizes["s"] + 2
    expected = {
        **EXPECTED,
        "v3": {**EXPECTED["v1"], "x": EXPECTED["v2"]["x"]},
        "v4": {
            **EXPECTED["v1"],
            "x": EXPECTED["v2"]["x"],
            "s": np.array(["ab", "c", "abc", "", "zz", "", "ü"], dtype=object),
        },
    }
    with h5vc.open(path, "r") as vf:
        assert_versions_read(vf, expected)
        assert h5vc.verify(vf).ok
    # versioned-hdf5 2.6.0 reads the repaired and extended file
    with h5py.File(path, "r") as f:
        vf = versioned_hdf5.VersionedHDF5File(f)
        assert vf.current_version == "v4"
        assert_versions_read(vf, expected)


def test_repair_through_plain_h5py_and_lifecycle_calls(reference: Path, tmp_path: Path) -> None:
    path = tmp_path / "plain.h5"
    shutil.copyfile(reference, path)
    make_legacy(path, 2)
    with h5py.File(path, "r+") as f:
        h5vc.delete_versions(f, ["v1"])  # the shared state repairs before writing
        assert int(f["_version_data/versions"].attrs["data_version"]) == 4
        assert h5vc.verify(f).ok
        assert_versions_read(h5vc.VersionedHDF5File(f), {"v2": EXPECTED["v2"]})


def test_failed_repair_leaves_the_file_as_it_was(reference: Path, tmp_path, monkeypatch) -> None:
    path = tmp_path / "failing.h5"
    shutil.copyfile(reference, path)
    make_legacy(path, 3)
    with h5py.File(path, "r") as f:
        tables = {s: table_rows(f, s) for s in STORES}
    written = []
    real_write = legacy._write_table

    def failing_write(group, rows):
        if written:
            raise OSError("disk full")
        written.append(group.name)
        real_write(group, rows)

    monkeypatch.setattr(legacy, "_write_table", failing_write)
    with pytest.raises(OSError, match="disk full"), h5vc.open(path, "r+"):
        pass
    assert written  # one table had been rewritten when the write failed
    monkeypatch.undo()
    with h5py.File(path, "r") as f:
        assert int(f["_version_data/versions"].attrs["data_version"]) == 3
        for store in STORES:
            for old, now in zip(tables[store], table_rows(f, store)):
                np.testing.assert_array_equal(old, now)
    with h5vc.open(path, "r+") as vf:  # the writer lock was released; repaired now
        assert vf.data_version == 4
        assert_versions_read(vf)


# -- what versioned-hdf5 2.6.0 does with the same files ---------------------------------


@pytest.mark.parametrize("data_version", [2, 3])
def test_versioned_hdf5_refuses_data_version_2_and_3(reference, tmp_path, data_version) -> None:
    """versioned-hdf5 refuses to open these at all (it suggests recreating the file);
    h5vc reads them (see above) and repairs them when opened for writing."""
    path = tmp_path / "bad.h5"
    shutil.copyfile(reference, path)
    make_legacy(path, data_version)
    with h5py.File(path, "r") as f, pytest.raises(ValueError, match="corrupted hash_tables"):
        versioned_hdf5.VersionedHDF5File(f)


def test_rebuilt_tables_match_versioned_hdf5s_rebuild(reference: Path, tmp_path: Path) -> None:
    """A file without data_version: versioned-hdf5 warns about its string datasets
    and rebuilds their tables on request (``rebuild_hashtables``); h5vc rebuilds every
    table when the file is opened for writing.  The digest of every stored chunk is
    the same in both; versioned-hdf5 may add a row per extent a chunk is read with."""
    paths = {lib: tmp_path / f"{lib}.h5" for lib in ("versioned_hdf5", "h5vc")}
    for path in paths.values():
        shutil.copyfile(reference, path)
        make_legacy(path, None)
    with h5py.File(paths["versioned_hdf5"], "r+") as f:
        vf = versioned_hdf5.VersionedHDF5File(f)
        assert "data_version" not in f["_version_data/versions"].attrs  # only a warning
        vf.rebuild_hashtables()
        vf.data_version_identifier = 4
    with h5vc.open(paths["h5vc"], "r+"):
        pass
    with h5py.File(paths["versioned_hdf5"], "r") as fv, h5py.File(paths["h5vc"], "r") as fh:
        for store in STORES:
            c0 = fh[f"_version_data/{store}/raw_data"].chunks[0]
            theirs: dict[int, set[bytes]] = {}
            for digest, (start, _) in zip(*table_rows(fv, store)):
                theirs.setdefault(int(start) // c0, set()).add(bytes(digest))
            ours = {int(start) // c0: bytes(d) for d, (start, _) in zip(*table_rows(fh, store))}
            assert set(theirs) <= set(ours), store
            for slot, digests in theirs.items():
                assert ours[slot] in digests, (store, slot)
        assert int(fv["_version_data/versions"].attrs["data_version"]) == 4
        assert int(fh["_version_data/versions"].attrs["data_version"]) == 4
