"""Global heap collections walked at once (filebytes._heap_objects) find the objects
FileBytes._collection finds, one collection at a time."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

import h5vc
from h5vc.hdf5 import filebytes
from h5vc.hdf5.filebytes import FileBytes, many_datasets


@pytest.fixture
def many(tmp_path: Path) -> Path:
    """40 versions of one dataset, one chunk changed a version, and attributes of
    variable-length strings (heap objects of other sizes in the same collections)."""
    path = tmp_path / "many.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v00") as g:
            g.create_dataset("x", data=np.arange(400.0), chunks=(10,))
        for n in range(1, 40):
            with vf.stage_version(f"v{n:02d}") as g:
                g["x"][10 * n : 10 * n + 3] = -n
                g["x"].attrs["note"] = "n" * (n % 7)
    return path


def _heaps(path: Path) -> tuple[h5py.File, FileBytes, np.ndarray]:
    f = h5py.File(path, "r")
    file_bytes = FileBytes.of(f)
    assert file_bytes is not None
    versions = f["_version_data/versions"]
    addresses = [
        h5py.h5o.get_info(versions.id, f"{name}/x".encode()).addr
        for name in versions
        if name.startswith("v")
    ]
    read = many_datasets(file_bytes, addresses)
    assert read.ok.all() and read.has_heap.all()
    return f, file_bytes, read.heap


@pytest.mark.parametrize("at_once", [64, 3, 1])
def test_heap_objects_are_those_of_the_collections(many, monkeypatch, at_once):
    """However many objects a collection has beyond those walked at once."""
    monkeypatch.setattr(filebytes, "_MANY_HEAP_OBJECTS", at_once)
    f, file_bytes, heap = _heaps(many)
    with f, file_bytes:
        # Ask for every object of every collection, and for indexes no object has.
        wanted_heap, wanted_index, expected = [], [], []
        for address in np.unique(heap).tolist():
            objects = file_bytes._collection(address)
            assert len(objects) > 1
            for number in [*objects, max(objects) + 1, 0]:
                wanted_heap.append(address)
                wanted_index.append(number)
                expected.append(objects.get(number))
        rows = filebytes._Rows(file_bytes)
        ok, starts, sizes = filebytes._heap_objects(
            file_bytes, rows, np.asarray(wanted_heap, np.uint64), np.asarray(wanted_index)
        )
        got = [
            (start, size) if good else None
            for good, start, size in zip(ok.tolist(), starts.tolist(), sizes.tolist())
        ]
        assert got == expected
        for address in np.unique(heap).tolist():  # kept for the one-by-one reader
            kept = file_bytes._walked_collection(address) or file_bytes._collections[address]
            for number, where in file_bytes._collection(address).items():
                assert kept.get(number) == where


def test_a_damaged_collection_finds_no_object(many, tmp_path):
    """A collection whose object overruns it, or that is no collection, finds
    nothing (as FileBytes._collection, which raises)."""
    f, file_bytes, heap = _heaps(many)
    with f, file_bytes:
        first = int(np.unique(heap)[0])
        objects = file_bytes._collection(first)
        number = min(objects)
        at = objects[number][0] - file_bytes.base - 8  # the object's length field
    damaged = tmp_path / "damaged.h5"
    data = bytearray(many.read_bytes())
    data[at : at + 8] = (1 << 40).to_bytes(8, "little")
    second = int(np.unique(heap)[-1])
    data[second : second + 4] = b"XXXX"
    damaged.write_bytes(bytes(data))
    f = h5py.File(damaged, "r")
    file_bytes = FileBytes.of(f)
    assert file_bytes is not None
    with f, file_bytes:
        rows = filebytes._Rows(file_bytes)
        ok, _, _ = filebytes._heap_objects(
            file_bytes, rows, np.asarray([first, second], np.uint64), np.asarray([number, 1])
        )
        assert ok.tolist() == [False, False]
        for address in (first, second):
            with pytest.raises(filebytes.Unreadable):
                file_bytes._collection(address)


@pytest.mark.parametrize(
    "values",
    [
        np.array([5, 3, 5, 1, 3, 9], dtype=np.uint64),
        np.zeros(0, dtype=np.int64),
        np.frombuffer(b"bbbbaaaabbbbccccaaaa", dtype="V4"),
    ],
)
def test_unique_is_numpys(values):
    """filebytes._unique: np.unique's values and inverse (without numpy.ma)."""
    got, inverse = filebytes._unique(values)
    expected, expected_inverse = np.unique(values, return_inverse=True)
    assert got.tobytes() == expected.tobytes() and got.dtype == expected.dtype
    assert inverse.tolist() == expected_inverse.ravel().tolist()
