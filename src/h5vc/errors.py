"""Exception types raised by h5vc.

Every error derives from :class:`H5vcError` *and* from the built-in exception a
caller would naturally catch (``KeyError`` for a missing version, ``ValueError``
for bad input, ``OSError`` for damaged data), so code written against h5py or
versioned-hdf5 keeps working.
"""

from __future__ import annotations

__all__ = [
    "H5vcError",
    "VersionNotFoundError",
    "AncestorNotFoundError",
    "VersionExistsError",
    "DatasetNotFoundError",
    "ReadOnlyError",
    "NotVersionedError",
    "UnsupportedFormatError",
    "InvalidTimestampError",
    "MetadataMismatchError",
    "CorruptDataError",
    "InvalidOptionError",
    "RecordFormatError",
    "SchemaMismatchError",
    "DataFileNotFoundError",
    "ClosedError",
    "StageInProgressError",
    "InvalidVersionNameError",
    "ChunkDecodeError",
]


class H5vcError(Exception):
    """Base class of every error raised by h5vc."""


class VersionNotFoundError(H5vcError, KeyError):
    """A version name, ancestor index or timestamp matches no committed version."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class AncestorNotFoundError(VersionNotFoundError, IndexError):
    """``vf[-n]`` asked for more ancestors than the current version has."""


class DatasetNotFoundError(H5vcError, KeyError):
    """A dataset path names no dataset in any version."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class VersionExistsError(H5vcError, ValueError):
    """A version with this name is already committed."""


class ReadOnlyError(H5vcError, ValueError):
    """A write was attempted on a committed version or a file opened read-only."""


class NotVersionedError(H5vcError, ValueError):
    """An HDF5 file or group holds no versioned data where some was required."""


class UnsupportedFormatError(H5vcError, ValueError):
    """The file was written in an on-disk format this version of h5vc cannot read."""


class InvalidTimestampError(H5vcError, ValueError):
    """A timestamp is naive, not in UTC, or not after the previous version's."""


class MetadataMismatchError(H5vcError, ValueError):
    """A dataset's dtype, chunks or other fixed metadata differs from an earlier version."""


class CorruptDataError(H5vcError, OSError):
    """Stored bytes do not match their checksum or hash."""


class InvalidOptionError(H5vcError, ValueError):
    """An option (compression, backend code, ...) has a value outside the valid set."""


class RecordFormatError(H5vcError, ValueError):
    """A sample record string does not follow its format."""


class SchemaMismatchError(H5vcError, ValueError):
    """An array or setting does not fit a sample store's schema (dtype, shape, order)."""


class DataFileNotFoundError(H5vcError, FileNotFoundError):
    """A data file that a record or index points to does not exist."""


class ClosedError(H5vcError, ValueError):
    """A handle (versioned file, sample writer) was used after it was closed."""


class StageInProgressError(H5vcError, ValueError):
    """A version is already being staged in this file: one stage at a time."""


class InvalidVersionNameError(H5vcError, ValueError):
    """A version name cannot be used here (empty, with '/', or ``__first_version__``)."""


class ChunkDecodeError(H5vcError, ValueError):
    """A stored chunk's bytes are not a valid encoding of the expected array."""


class WriterActiveError(H5vcError, BlockingIOError):
    """The file is being written by another process (or another handle of this one)."""
