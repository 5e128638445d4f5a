"""Reading a versioned file while another process commits to it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import h5py

from h5vc.api import VersionedHDF5File
from h5vc.durable.files import ReadLock, recover_abandoned

__all__ = ["Reader"]


class Reader:
    """Reads committed versions of the file at ``path``, in batches, while another
    process may be writing it.

    >>> with h5vc.Reader("data.h5") as reader:          # doctest: +SKIP
    ...     with reader.batch() as vf:
    ...         latest = vf[vf.current_version]["x"][:]

    A batch waits while the writer is at a commit point (a few milliseconds) and
    holds it off until the batch ends, so nothing a batch reads changes under it. The
    file is reopened when it changed since the last batch: a batch sees every version
    committed before it began. Objects taken from one batch must not be used in the
    next. ``kwargs`` go to ``h5py.File`` (HDF5's own file locking is off).
    """

    def __init__(self, path: str | os.PathLike[str], **kwargs: Any):
        self.path = os.fspath(path)
        self._kwargs = {"locking": False, **kwargs}
        recover_abandoned(self.path)
        self._lock = ReadLock(self.path)
        self._file: h5py.File | None = None
        self._vf: VersionedHDF5File | None = None

    @contextlib.contextmanager
    def batch(self) -> Iterator[VersionedHDF5File]:
        """One read batch: the versioned file as of the batch's start."""
        if self._lock.closed:
            raise ValueError(f"This Reader of {self.path!r} is closed.")
        with self._lock:
            if self._lock.changed or self._vf is None:
                self._close_file()
                self._file = h5py.File(self.path, "r", **self._kwargs)
                self._vf = VersionedHDF5File(self._file)
            yield self._vf

    def _close_file(self) -> None:
        if self._vf is not None:
            self._vf.close()
            self._vf = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def close(self) -> None:
        self._close_file()
        self._lock.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
