"""Large reads of files opened read-only copy uncompressed chunks from a memory map of
the file: they give what positioned reads and HDF5 give, for any selection and edit
history; writable files are never mapped; a file shorter than its chunk index says
is reported, not mapped."""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import numpy as np
import pytest
from forked import run_in_child

import h5vc
from h5vc.store import fastread, planner


@pytest.fixture(autouse=True)
def positioned_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planner, "HDF5_READ_BYTES", 0)  # every read by positioned reads
    monkeypatch.setattr(planner, "FAST_READ_MIN_BYTES", 0)


#: Readers made before the current step (alive until collected), held so that their
#: ids are not reused: readers() leaves them out.
_EARLIER: dict[int, fastread.FastReader] = {}


def all_readers() -> list[fastread.FastReader]:
    return [reader for reader in fastread._READERS.values() if reader is not None]


def forget_earlier_readers() -> None:
    _EARLIER.clear()
    _EARLIER.update((id(reader), reader) for reader in all_readers())


@pytest.fixture(autouse=True)
def earlier_readers() -> None:
    forget_earlier_readers()


def readers() -> list[fastread.FastReader]:
    """The readers made since the test (or the step of it) began."""
    return [reader for reader in all_readers() if id(reader) not in _EARLIER]


def write_versions(path: Path, chunks: tuple[int, ...]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    model = rng.random((60, 70))
    models = {"v0": model.copy()}
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v0") as group:
            group.create_dataset("x", data=model, chunks=chunks)
        for number in range(1, 4):
            row, col = rng.integers(0, 50, 2)
            model[row : row + 7, col : col + 9] = -number
            with vf.stage_version(f"v{number}") as group:
                group["x"][row : row + 7, col : col + 9] = -number
            models[f"v{number}"] = model.copy()
    return models


def mapped_reader(f: h5py.File) -> tuple[fastread.FastReader, fastread.ChunkTable]:
    """The positioned-read reader of ``f``'s raw_data of ``x``, mappable, and its table."""
    reader = fastread.fast_reader(f["_version_data/x/raw_data"])
    assert reader is not None and reader.mappable
    table = reader._table()
    assert table is not None
    return reader, table


INDICES = [(), np.s_[3:57, 5:66], np.s_[10], np.s_[:, 33], np.s_[7:8, 1:69]]


@pytest.mark.parametrize("chunks", [(8, 10), (60, 7), (5, 70), (13, 13)])
def test_mapped_reads_equal_positioned_reads_and_hdf5(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunks: tuple[int, ...]
) -> None:
    path = tmp_path / "f.h5"
    models = write_versions(path, chunks)
    for map_reads in (True, False):
        monkeypatch.setattr(fastread, "MAP_READS", map_reads)
        forget_earlier_readers()
        with h5vc.open(path, "r") as vf:
            for version, expected in models.items():
                for index in INDICES:
                    np.testing.assert_array_equal(vf[version]["x"][index], expected[index])
            mapped = [reader for reader in readers() if reader._map is not None]
            assert bool(mapped) == map_reads
    with h5py.File(path, "r") as f:
        vf = h5vc.VersionedHDF5File(f)
        for version, expected in models.items():
            np.testing.assert_array_equal(vf[version]["x"][()], expected)
            np.testing.assert_array_equal(f[f"_version_data/versions/{version}/x"][()], expected)


def test_writable_files_are_not_mapped(tmp_path: Path) -> None:
    path = tmp_path / "f.h5"
    models = write_versions(path, (8, 10))
    with h5vc.open(path, "r+") as vf:
        for version, expected in models.items():
            np.testing.assert_array_equal(vf[version]["x"][()], expected)
        with vf.stage_version("v9") as group:
            group["x"][:5] = 1.5
        expected = models["v3"].copy()
        expected[:5] = 1.5
        np.testing.assert_array_equal(vf["v9"]["x"][()], expected)
        # The reads asked for this file's positioned-read reader (which a writable file
        # may not have: then HDF5 reads it); none it has is mapped.
        asked = [
            reader
            for raw_data, reader in fastread._READERS.items()
            if raw_data.id.valid and raw_data.file.filename == str(path)
        ]
        assert asked and all(reader is None or reader._map is None for reader in asked)


def test_a_file_shorter_than_its_chunks_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "f.h5"
    write_versions(path, (8, 10))
    with h5py.File(path, "r") as f:
        reader, table = mapped_reader(f)
        end = int(table.offsets.max() + table.sizes.max())
        assert reader._mapped(end) is not None
        assert reader._mapped(end + (1 << 30)) is None  # past the end: not mapped


def test_the_datasets_of_a_file_share_its_map(tmp_path: Path) -> None:
    path = tmp_path / "f.h5"
    a, b = np.arange(4000.0).reshape(50, 80), -np.arange(4000.0).reshape(80, 50)
    with h5vc.open(path, "w") as vf, vf.stage_version("v0") as group:
        group.create_dataset("a", data=a, chunks=(10, 10))
        group.create_dataset("b", data=b, chunks=(10, 10))
    with h5vc.open(path, "r") as vf:
        np.testing.assert_array_equal(vf["v0"]["a"][()], a)
        np.testing.assert_array_equal(vf["v0"]["b"][()], b)
        maps = {id(reader._map) for reader in readers() if reader._map is not None}
        assert len(maps) == 1
        assert len(readers()) >= 2


def test_a_file_cut_by_another_program_after_mapping_raises(tmp_path: Path) -> None:
    """Another program cuts the file while a reader has it mapped, after the read's
    lock saw the file unchanged: the read of the cut bytes raises (positioned reads
    report them missing) instead of killing the process with SIGBUS. Run in a forked
    child, whose death the parent sees."""
    path = tmp_path / "f.h5"
    write_versions(path, (8, 10))
    with h5py.File(path, "r") as f:
        _, table = mapped_reader(f)
        last = int(np.argmax(table.offsets))
        start, size = int(table.offsets[last]), int(table.sizes[last])
        cut = (start // 4096) * 4096  # the last chunk's first page and after: gone

    def read_after_the_cut() -> bool:
        """True only if the read of the cut bytes raised."""
        with h5py.File(path, "r") as f:
            reader, _ = mapped_reader(f)
            assert reader._mapped(start + size) is not None
            os.truncate(path, cut)  # what another program does meanwhile
            rows = size // reader.row_bytes
            # Part of each row: copied from the map (whole rows are read with
            # positioned reads straight into the result).
            destination = np.empty((rows, 3), dtype=reader.dtype)
            try:
                reader.read(destination, [[last * reader.chunks[0], 2]], [[0, 0]], [[rows, 3]])
            except OSError:
                return True
            return False  # read bytes that are not there

    assert run_in_child(read_after_the_cut) == "ok"


def test_the_map_of_file_bytes_says_when_the_file_was_cut(tmp_path: Path) -> None:
    """First reads copy rows from the map of the file's bytes only while the file is
    as long as the map (else HDF5 reads, and reports the bytes missing)."""
    from h5vc.hdf5.filebytes import FileBytes

    path = tmp_path / "f.h5"
    write_versions(path, (8, 10))
    with h5py.File(path, "r") as f:
        file_bytes = FileBytes.of(f)
        assert file_bytes is not None and not file_bytes.cut()
        os.truncate(path, len(file_bytes.map) - 4096)
        assert file_bytes.cut()
        os.truncate(path, len(file_bytes.map) + 4096)  # longer: every mapped byte is there
        assert not file_bytes.cut()
        file_bytes.close()
        assert file_bytes.cut()  # unmapped: nothing to read either
