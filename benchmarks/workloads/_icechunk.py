"""Icechunk's side of the workloads: a repository on the local file system, zarr arrays.

Imported only by runs with ``--lib icechunk`` (its own virtual environment, see
``benchmarks/run.py``), so that the other environments need neither Icechunk nor zarr.

Settings, the same in every workload: ``icechunk.local_filesystem_storage`` in the
work directory; one zarr v3 array per dataset, with the workload's chunk shape, no
filters, no compressor unless the workload names one (zarr's default would compress
with zstd), fill value 0; Icechunk's default repository configuration (chunks under
512 bytes are kept inline in the manifest). A version is one commit on branch ``main``,
timed from opening the writable session to the end of ``Session.commit``; versions are
read back by the snapshot id ``commit`` returned (the HDF5 libraries look a name up, in
the file), not by a tag. "Opening the file anew" is ``Repository.open`` on a new
storage object, a read-only session at the snapshot, ``zarr.open_array``.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import best_of, check_equal

#: Branch every workload commits to (Icechunk creates it with the repository).
MAIN = "main"


def quiet() -> None:
    """Keep Icechunk's warnings (local storage is not for concurrent writers) off stderr."""
    import icechunk

    icechunk.set_logs_filter("error")


def storage(path: pathlib.Path) -> Any:
    import icechunk

    return icechunk.local_filesystem_storage(str(path))


def create_repo(path: pathlib.Path) -> Any:
    import icechunk

    quiet()
    return icechunk.Repository.create(storage(path))


def open_repo(path: pathlib.Path) -> Any:
    import icechunk

    quiet()
    return icechunk.Repository.open(storage(path))


def create_array(
    store: Any,
    name: str,
    data: np.ndarray,
    chunks: tuple[int, ...],
    compressors: Any = None,
) -> Any:
    """A zarr array ``name`` holding ``data``, chunked as ``chunks``, no filters."""
    import zarr

    array = zarr.create_array(
        store,
        name=name,
        shape=data.shape,
        chunks=chunks,
        dtype=data.dtype,
        filters=None,
        compressors=compressors,
        fill_value=0,
    )
    array[...] = data
    return array


def open_array(store: Any, name: str, writable: bool = False) -> Any:
    import zarr

    return zarr.open_array(store, path=name, mode="r+" if writable else "r")


def commit(repo: Any, edit: Callable[[Any], None], message: str, branch: str = MAIN) -> str:
    """One version: a writable session on ``branch``, ``edit(store)``, commit; the snapshot id."""
    session = repo.writable_session(branch)
    edit(session.store)
    return str(session.commit(message))


def snapshot_store(repo: Any, snapshot: str) -> Any:
    return repo.readonly_session(snapshot_id=snapshot).store


def read_snapshot(path: pathlib.Path, snapshot: str, name: str) -> np.ndarray:
    """Open the repository anew, read array ``name`` of ``snapshot`` whole."""
    repo = open_repo(path)
    return np.asarray(open_array(snapshot_store(repo, snapshot), name)[...])


def read_back(
    path: pathlib.Path, snapshots: list[str], state_after: Callable[[int], np.ndarray]
) -> tuple[float, float, Any]:
    """Full reads (best of a few, each on a fresh open) of the last and the middle of
    ``snapshots`` (one per commit after the first), checked against ``state_after``
    with the first snapshot's; returns the two times and the middle snapshot's store."""
    commits = len(snapshots) - 1
    full_read, got_latest = best_of(lambda: read_snapshot(path, snapshots[commits], "x"))
    middle = snapshots[commits // 2]
    full_read_old, got_old = best_of(lambda: read_snapshot(path, middle, "x"))
    check_equal(got_latest, state_after(commits), "full read of the last snapshot")
    check_equal(got_old, state_after(commits // 2), "full read of the middle snapshot")
    check_equal(read_snapshot(path, snapshots[0], "x"), state_after(0), "full read of v0")
    return full_read, full_read_old, snapshot_store(open_repo(path), middle)


def directory_bytes(path: pathlib.Path) -> float:
    """Bytes of every file under ``path`` (the repository's size on disk, as file size)."""
    return float(sum(item.stat().st_size for item in path.rglob("*") if item.is_file()))


def zarr_codec(name: str) -> Any:
    """The zarr compressor that matches an HDF5 filter of the workloads."""
    from zarr.codecs import BloscCodec, GzipCodec, ZstdCodec

    if name == "gzip":
        return GzipCodec(level=4)
    if name == "zstd":  # HDF5's side: hdf5plugin.Blosc(zstd, level 5, byte shuffle)
        return BloscCodec(cname="zstd", clevel=5, shuffle="shuffle", typesize=8)
    if name == "zstd_plain":  # HDF5's side: hdf5plugin.Zstd(clevel=5)
        return ZstdCodec(level=5)
    raise ValueError(f"Expected a filter name gzip, zstd or zstd_plain. Got {name!r} instead.")
