"""Dask arrays over committed versions (and Dask arrays written into versions).

:func:`from_version` gives a ``dask.array.Array`` pinned to one committed version of
one dataset. Its tasks carry a :class:`VersionArray` (the file's path or URL, the
version name, the dataset path), never an open handle: each process that runs a task
opens the file read-only once and keeps it in a small cache (see
:mod:`h5vc.filecache`), so the threaded, processes and ``dask.distributed``
schedulers all work.

Dask blocks are whole multiples of the stored chunks, each block about
:data:`DEFAULT_BLOCK_BYTES` (64 MiB) or smaller, so that a block never reads part
of a chunk and a task does enough work to be worth scheduling. A task reads (and
decodes) its block in its own thread, without h5vc's pool of readers: Dask already
runs one task per worker thread, so the scheduler's thread count (``num_workers``,
a worker's ``nthreads``) is what a computation uses.

Writing: ``create_dataset(name, data=dask_array)`` and ``staged[...] = dask_array``
in a staged version go through :func:`store` (from :mod:`h5vc.blockwrite`), block by
block, so the whole array is never in memory at once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from h5vc import blockwrite
from h5vc.api import VersionedHDF5File
from h5vc.blockwrite import block_chunks, check_fits, create_dataset, is_dask_array, store
from h5vc.errors import DatasetNotFoundError, MissingDependencyError, VersionNotFoundError
from h5vc.filecache import OpenFile, clear, file_stamp, forget, open_file
from h5vc.hdf5.codecs import serial
from h5vc.remote import is_url
from h5vc.wrappers import CommittedDataset

if TYPE_CHECKING:
    import dask.array

__all__ = [
    "DEFAULT_BLOCK_BYTES",
    "Source",
    "VersionArray",
    "block_chunks",
    "check_fits",
    "close_files",
    "committed_dataset",
    "create_dataset",
    "from_version",
    "is_dask_array",
    "lookup_dataset",
    "resolve_version",
    "store",
]

#: Target size of one Dask block of :func:`from_version` when ``chunks`` is not given.
DEFAULT_BLOCK_BYTES = blockwrite.DEFAULT_BLOCK_BYTES


@dataclass(frozen=True, slots=True)
class Source:
    """Where a committed dataset lives: all a task needs to read it anywhere."""

    path: str
    version: str
    dataset: str
    root: str = "/"
    #: fsspec options for URLs, as sorted (key, value) pairs (hashable).
    storage_options: tuple[tuple[str, Any], ...] = field(default=())


def versioned(opened: OpenFile) -> VersionedHDF5File:
    """The versioned view of a cached open file (one per file)."""
    return opened.memo("h5vc.versioned", lambda: VersionedHDF5File(opened.root))


def open_source(source: Source) -> OpenFile:
    """The cached read-only file ``source`` names."""
    return open_file(source.path, source.root, source.storage_options)


def lookup_dataset(vf: VersionedHDF5File, version: str, path: str) -> CommittedDataset:
    """``vf[version][path]`` with errors that name what exists."""
    if version not in vf:
        raise VersionNotFoundError(
            f"Version {version!r} not found in {vf.f.file.filename!r}. "
            f"Committed versions: {vf.versions}."
        )
    group = vf[version]
    try:
        node = group[path]
    except KeyError:
        node = None
    if not isinstance(node, CommittedDataset):
        names: list[str] = []
        group.visititems(
            lambda name, obj: names.append(name) if isinstance(obj, CommittedDataset) else None
        )
        raise DatasetNotFoundError(
            f"Dataset {path!r} not found in version {version!r}. "
            f"Datasets in that version: {sorted(names)}."
        )
    return node


def committed_dataset(source: Source) -> CommittedDataset:
    """The committed dataset ``source`` names, from this process's cache of files.

    A version committed after the file was opened here is not seen by the open
    handle: on a miss, the file is opened again once before giving up.
    """

    def find(opened: OpenFile) -> CommittedDataset:
        return opened.memo(
            ("h5vc.dataset", source.version, source.dataset),
            lambda: lookup_dataset(versioned(opened), source.version, source.dataset),
        )

    try:
        return find(open_source(source))
    except VersionNotFoundError:
        forget(source.path, source.root)
        return find(open_source(source))


def _dask_array_module() -> Any:
    try:
        import dask.array as da
    except ImportError:
        raise MissingDependencyError(
            "h5vc.dask needs dask: pip install 'dask[array]' (or pip install 'h5vc[dask]')."
        ) from None
    return da


class VersionArray:
    """A committed dataset named by (file, version, dataset path), opened lazily.

    Indexing reads through the per-process file cache; pickling carries only the
    names, so it travels to any worker. ``dask.array.from_array`` takes it directly.
    """

    __slots__ = ("chunks", "dtype", "shape", "source")

    def __init__(
        self, source: Source, shape: tuple[int, ...], dtype: np.dtype, chunks: tuple[int, ...]
    ):
        self.source = source
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.chunks = tuple(chunks)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, index: Any) -> Any:
        # Read in this thread alone: a Dask task is one of several running side by
        # side (one per worker thread), and a pool of readers per task would only
        # compete with the others for the same cores.
        with serial():
            return committed_dataset(self.source)[index]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        data = np.asarray(self[...])
        return data if dtype is None else data.astype(dtype)

    def __reduce__(self) -> tuple[Any, ...]:
        return (VersionArray, (self.source, self.shape, self.dtype.str, self.chunks))

    def __dask_tokenize__(self) -> Any:
        return (type(self).__name__, self.source, self.shape, self.dtype.str, self.chunks)

    def __repr__(self) -> str:
        src = self.source
        return (
            f"<VersionArray {src.dataset!r} of version {src.version!r} in {src.path!r}: "
            f"shape {self.shape}, type {self.dtype.str!r}>"
        )


def resolve_version(vf: Any, version: Any) -> str:
    """The name of the committed version ``version`` names (name, ancestor index,
    timestamp or None for the current one); the error lists the versions there are."""
    try:
        return str(vf[version].version_name)
    except VersionNotFoundError as err:
        # AncestorNotFoundError keeps its type (it is also an IndexError).
        raise type(err)(f"{err} Committed versions: {vf.versions}.") from None


def _location(path: Any) -> str:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise TypeError(
            f"Expected the path or URL of a versioned file (tasks reopen it by name). "
            f"Got {type(path).__name__} instead."
        )
    return path if is_url(path) else os.path.abspath(path)


def from_version(
    path: str | os.PathLike[str],
    version: Any,
    dataset: str,
    chunks: Any = None,
    *,
    root: str = "/",
    storage_options: dict[str, Any] | None = None,
) -> dask.array.Array:
    """A Dask array of ``dataset`` as committed in ``version`` of the file at ``path``.

    ``version`` is a name, an ancestor index (``0`` current, ``-1`` its parent, ...),
    a UTC timestamp, or None (the current version); it is resolved to a name now,
    so the array stays pinned to that version. ``chunks=None`` makes blocks of whole
    stored chunks of about :data:`DEFAULT_BLOCK_BYTES`; anything else is passed to
    Dask (``"auto"``, a block shape, explicit chunks). ``path`` may be a URL read
    through fsspec (``storage_options`` are fsspec's options); ``root`` is the group
    holding the versioned data.
    """
    da = _dask_array_module()
    location = _location(path)
    options = tuple(sorted((storage_options or {}).items()))
    name = resolve_version(versioned(open_file(location, root, options)), version)
    source = Source(location, name, dataset.strip("/"), root, options)
    node = committed_dataset(source)
    array = VersionArray(source, node.shape, node.dtype, node.chunks)
    if chunks is None:
        chunks = block_chunks(array.shape, array.chunks, array.dtype, DEFAULT_BLOCK_BYTES)
    elif isinstance(chunks, str) and chunks == "auto":
        from dask.array.core import normalize_chunks

        chunks = normalize_chunks(
            "auto", array.shape, dtype=array.dtype, previous_chunks=array.chunks
        )
    from dask.base import tokenize

    token = tokenize(array, chunks, file_stamp(location))
    return da.from_array(
        array,
        chunks=chunks,
        name=f"h5vc-{dataset.strip('/').replace('/', '.')}-{token}",
        lock=False,
        asarray=True,
        fancy=True,  # also lets Dask push slices of a block into the read
        meta=np.empty((0,) * array.ndim, dtype=array.dtype),
        inline_array=True,
    )


def close_files() -> None:
    """Close the files this process keeps open for Dask tasks and pickled datasets.

    HDF5 lets no other process open a file for writing while a handle holds it
    read-only: run this on the workers (``client.run(close_files)``) first.
    """
    clear()
