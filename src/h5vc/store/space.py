"""File space: how new files track free space, and what a file holds.

The chunks ``delete_versions`` releases stay allocated as *free slots* at the end of
their store's raw_data, which later commits fill before raw_data grows
(:mod:`h5vc.store.rawdata`): that reuse works in every file, however it was created
or opened.

The rest of what a file frees (objects of deleted versions, a chunk store no version
uses any more, the space a compressed chunk leaves when it is rewritten at another
size) is HDF5's free space, which HDF5 forgets when the file is closed unless the
file was *created* with a free-space strategy that persists it (a file-creation
property: it cannot be added to an existing file).  Files that h5vc creates
(:func:`h5vc.open` with ``"w"``, ``"w-"``/``"x"``, or ``"a"`` on a new path, and
:func:`h5vc.repack`'s output) persist it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import h5py

from h5vc.hdf5.header import check_dataset_header
from h5vc.store import layout
from h5vc.store.rawdata import slots_in_use

__all__ = [
    "FILE_SPACE_OPTIONS",
    "DatasetSpace",
    "FileSpace",
    "file_space",
    "persists_free_space",
    "settle",
]

#: ``h5py.File`` keywords of a new file whose free space outlives a close: HDF5's
#: free-space managers with aggregators, persisted, tracking sections of any size.
FILE_SPACE_OPTIONS: dict[str, Any] = {"fs_strategy": "fsm", "fs_persist": True, "fs_threshold": 1}


@dataclass(frozen=True, slots=True)
class DatasetSpace:
    """The chunk store of one dataset path."""

    stored_bytes: int  # the chunks in use, as stored (after filters)
    hash_table_bytes: int
    chunks: int  # slots in use
    free_chunks: int = 0  # free slots past them, reused by the next commits
    free_chunk_bytes: int = 0  # their stored bytes


@dataclass(frozen=True, slots=True)
class FileSpace:
    """Sizes of one versioned file; ``free_bytes`` is space HDF5 can reuse inside it,
    ``free_chunk_bytes`` the free slots of every chunk store (reused by commits)."""

    filename: str
    file_bytes: int
    free_bytes: int
    persists_free_space: bool
    datasets: dict[str, DatasetSpace] = field(default_factory=dict)

    @property
    def stored_bytes(self) -> int:
        return sum(d.stored_bytes + d.hash_table_bytes for d in self.datasets.values())

    @property
    def free_chunk_bytes(self) -> int:
        return sum(d.free_chunk_bytes for d in self.datasets.values())


def persists_free_space(file: h5py.File) -> bool:
    """Whether ``file`` was created to keep track of its free space across closes."""
    _strategy, persist, _threshold = file.id.get_create_plist().get_file_space_strategy()
    return bool(persist)


def settle(path: str) -> None:
    """Bring a closed file that persists its free space to its resting state.

    When a file that persists free space is closed after a session that wrote to it,
    HDF5 leaves its free-space information in a form that the *next* writable open
    rewrites at close, even if that session writes nothing.  Opening it for writing
    once more, right after the writing session, does that rewrite at once, so a later
    writable session that writes nothing (a refused operation) leaves every byte of
    the file as it was.  Files that do not persist free space are left alone.
    """
    with h5py.File(path, "r") as file:
        if not persists_free_space(file):
            return
    with h5py.File(path, "r+"):
        pass


def file_space(version_data: h5py.Group, store_paths: list[str]) -> FileSpace:
    """Sizes of the file holding ``version_data`` and of each chunk store."""
    file = version_data.file
    datasets = {}
    for path in store_paths:
        group = version_data[path]
        for name in (layout.RAW_DATA, layout.HASH_TABLE):
            check_dataset_header(group, name)  # before HDF5 decodes it
        raw_data, hash_table = group[layout.RAW_DATA], group[layout.HASH_TABLE]
        c0 = int(raw_data.chunks[0]) if raw_data.chunks else 1
        in_use = slots_in_use(hash_table, c0)
        n_slots = int(raw_data.shape[0]) // max(1, c0)
        free_bytes = _chunk_bytes(raw_data, range(in_use, n_slots), c0)
        datasets[path] = DatasetSpace(
            stored_bytes=int(raw_data.id.get_storage_size()) - free_bytes,
            hash_table_bytes=int(hash_table.id.get_storage_size()),
            chunks=in_use,
            free_chunks=max(0, n_slots - in_use),
            free_chunk_bytes=free_bytes,
        )
    return FileSpace(
        filename=str(file.filename),
        file_bytes=int(file.id.get_filesize()),
        free_bytes=int(file.id.get_freespace()),
        persists_free_space=persists_free_space(file),
        datasets=datasets,
    )


def _chunk_bytes(raw_data: h5py.Dataset, slots: range, c0: int) -> int:
    """The stored bytes of the chunks of ``slots`` (those allocated)."""
    tail = (0,) * (raw_data.ndim - 1)
    total = 0
    for slot in slots:
        info = raw_data.id.get_chunk_info_by_coord((slot * c0, *tail))
        if info.byte_offset is not None:
            total += int(info.size)
    return total
