"""Reading a versioned file while another process commits to it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from h5vc.api import VersionedHDF5File
from h5vc.durable.files import recover_abandoned
from h5vc.remote import open_private

__all__ = ["Reader"]


class Reader:
    """Reads committed versions of the file at ``path``, in batches, while another
    process may be writing it.

    >>> with h5vc.Reader("data.h5") as reader:          # doctest: +SKIP
    ...     with reader.batch() as vf:
    ...         latest = vf[vf.current_version]["x"][:]

    A batch waits while the writer is at a commit point (a few milliseconds), or
    waits for one (writers go first), and holds it off until the batch ends, so
    nothing a batch reads changes under it: a batch sees every version committed
    before it began. Every read of the same file through ``h5vc.open(path)`` or
    ``VersionedHDF5File(h5py.File(path, "r"))`` is such a batch of its own; a batch
    makes several reads one. Objects taken from one batch stay usable in the next
    (a version deleted meanwhile raises :class:`~h5vc.errors.VersionNotFoundError`).

    The file is read through a handle private to the reader, so other handles of
    the same file in this process (``h5py.File``, ``h5vc.open`` for writing,
    ``repack``) open and close as if it were not there. A thread inside a batch
    must not write the same file (:class:`~h5vc.errors.ReadLockHeldError`).
    """

    def __init__(self, path: str | os.PathLike[str], **kwargs: Any):
        self.path = os.fspath(path)
        if kwargs:
            raise TypeError(
                f"Expected no options for h5vc.Reader (it opens the file itself). "
                f"Got {sorted(kwargs)}."
            )
        recover_abandoned(self.path)
        self._file, self._close = open_private(self.path)
        try:
            self._vf: VersionedHDF5File | None = VersionedHDF5File(self._file)
        except BaseException:
            self._close()
            raise

    @contextlib.contextmanager
    def batch(self) -> Iterator[VersionedHDF5File]:
        """One read batch: the versioned file as of the batch's start."""
        vf = self._vf
        if vf is None:
            raise ValueError(f"This Reader of {self.path!r} is closed.")
        with vf.file_state.reading():
            yield vf

    def close(self) -> None:
        if self._vf is not None:
            self._vf.close()
            self._vf = None
            self._close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
