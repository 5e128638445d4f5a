"""What sample-store tests read back from collection files."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

import h5py

from h5vc.samples import decode_record


def stored_chunks(directory: pathlib.Path) -> list[tuple[int, bytes]]:
    """(filter mask, stored bytes) of every written chunk of every collection file in
    ``directory``, files in creation order."""
    out = []
    files = sorted(directory.glob("*.hdf5"), key=lambda p: p.stat().st_mtime_ns)
    for path in files:
        with h5py.File(path, "r") as f:
            for name in sorted(f, key=int):
                dataset = f[name]
                for index in range(dataset.shape[0]):
                    corner = (index,) + (0,) * (dataset.ndim - 1)
                    if dataset.id.get_chunk_info_by_coord(corner).byte_offset is not None:
                        mask, data = dataset.id.read_direct_chunk(corner)
                        out.append((mask, bytes(data)))
    return out


def without_uid(records: list[str]) -> list[Any]:
    """The records with the collection file's uid left out (it is random)."""
    return [dataclasses.replace(decode_record(r), uid="x") for r in records]
