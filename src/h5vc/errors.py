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
    "UnknownVersionToDeleteError",
    "MissingOptionError",
    "NotSupportedError",
    "RecordFormatError",
    "SchemaMismatchError",
    "DataFileNotFoundError",
    "ClosedError",
    "StageInProgressError",
    "InvalidVersionNameError",
    "ChunkDecodeError",
    "RefNotFoundError",
    "RefExistsError",
    "InvalidRefNameError",
    "AmbiguousRefError",
    "TagImmutableError",
    "RefInUseError",
    "MergeError",
    "NothingToMergeError",
    "UnrelatedHistoriesError",
    "MergeConflictError",
    "MissingDependencyError",
    "ArrayMismatchError",
    "UnsupportedDtypeError",
    "TimestampOrderError",
    "WriterActiveError",
    "JournalConflictError",
    "JournalPendingError",
    "UnjournaledFileWarning",
    "MergeBaseInUseError",
    "TimestampTypeError",
    "VersionNotCommittedError",
    "VersionPathError",
    "InvalidPathError",
    "InvalidFillValueError",
    "MergeParentError",
    "EmptyChangeError",
    "BisectError",
    "NotLinearHistoryError",
    "ColumnKeyError",
    "ColumnKeyTypeError",
    "SampleShapeError",
    "SampleDtypeError",
]


class H5vcError(Exception):
    """Base class of every error raised by h5vc."""


class VersionNotFoundError(H5vcError, KeyError):
    """A version name, ancestor index or timestamp matches no committed version."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class UnknownVersionToDeleteError(VersionNotFoundError, ValueError):
    """``delete_versions`` was given a name that is not a committed version.

    Both a ``KeyError`` (as h5vc's other lookups) and a ``ValueError`` (as
    versioned-hdf5's ``delete_versions`` raises)."""


class VersionNotCommittedError(VersionNotFoundError, ValueError):
    """A version was asked for while it is being staged: it is readable once committed.

    Both a ``KeyError`` (as h5vc's other lookups) and a ``ValueError`` (as
    versioned-hdf5 raises here).
    """


class VersionPathError(VersionNotFoundError, ValueError):
    """A version was asked for by an HDF5 path (``vf["/_version_data"]``): versions are
    looked up by name; the file's own objects through h5py.

    Both a ``KeyError`` (as h5vc's other lookups) and a ``ValueError`` (as
    versioned-hdf5 raises here).
    """


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


class NotSupportedError(H5vcError, NotImplementedError):
    """A valid HDF5 feature that versioned datasets do not support (scalar datasets)."""


class MissingOptionError(H5vcError, TypeError):
    """An option was given without the one it depends on (compression_opts, no compression)."""


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


class InvalidPathError(H5vcError, ValueError):
    """An object path cannot be used here (an absolute path for a new object in a
    staged version, which would name the file's root)."""


class ChunkDecodeError(H5vcError, ValueError):
    """A stored chunk's bytes are not a valid encoding of the expected array."""


class RefNotFoundError(VersionNotFoundError):
    """A name is no branch, tag or version (or not a branch/tag where one was required)."""


class RefExistsError(H5vcError, ValueError):
    """A branch or tag with this name already exists."""


class InvalidRefNameError(H5vcError, ValueError):
    """A branch or tag name is empty, contains ``/``, or is also a version's name."""


class AmbiguousRefError(H5vcError, ValueError):
    """A name given to ``vf[...]`` is more than one of: a version, a tag, a branch."""


class TagImmutableError(RefExistsError):
    """A tag was asked to point somewhere else: tags never move."""


class RefInUseError(H5vcError, ValueError):
    """A version or branch cannot go: a branch or tag names it, or it is the current branch."""


class MergeBaseInUseError(RefInUseError):
    """A version to delete is the merge base of two live branches: a later merge of
    them would find an older base and report changes as conflicts."""


class MergeError(H5vcError, ValueError):
    """A merge that cannot be done as asked."""


class NothingToMergeError(MergeError):
    """The version to merge is already part of the target's history (or is the target)."""


class UnrelatedHistoriesError(MergeError):
    """The two versions have no common ancestor (allowed only when asked explicitly)."""


class MergeConflictError(MergeError):
    """Both sides changed the same thing differently; nothing was written.

    ``conflicts`` lists :class:`h5vc.lifecycle.merge.Conflict` records: the object
    path, the kind of conflict and, for data, the chunk-aligned regions and the number
    of conflicting elements.
    """

    def __init__(self, message: str, conflicts: list | None = None):
        super().__init__(message)
        self.conflicts = list(conflicts or [])


class MergeParentError(MergeError):
    """A cherry-pick or revert of a merge version without choosing which parent its
    change is taken against (or with a parent it does not have)."""


class EmptyChangeError(MergeError):
    """A cherry-pick whose change is already part of the target: nothing to apply."""


class BisectError(H5vcError, ValueError):
    """A bisection that cannot run as asked (``good`` is not an ancestor of ``bad``)."""


class NotLinearHistoryError(H5vcError, ValueError):
    """Versions to squash are not one linear run (a merge, a version with another
    child, or ``first`` not an ancestor of ``last``)."""


class MissingDependencyError(H5vcError, ImportError):
    """An optional package a feature needs (fsspec, dask, xarray) is not installed."""


class ArrayMismatchError(H5vcError, ValueError):
    """An array's dtype or shape does not fit the dataset or region it is written to."""


class UnsupportedDtypeError(H5vcError, TypeError):
    """HDF5 has no type for this dtype (``datetime64``, ``timedelta64``, Python objects)."""


class TimestampTypeError(InvalidTimestampError, TypeError):
    """A timestamp is neither a ``datetime.datetime`` nor a ``numpy.datetime64`` (a
    string, a number): a ``TypeError``, as in versioned-hdf5."""


class InvalidFillValueError(H5vcError, TypeError):
    """A fill value the dataset's dtype cannot hold (a complex one for a real dtype)."""


class TimestampOrderError(InvalidTimestampError):
    """A version's timestamp must be strictly later than its parent version's.

    Versions are looked up by time along their history, so a timestamp earlier
    than or equal to the parent's would make a lookup by time return the wrong
    version.  The first version of a file (no parent) may carry any timestamp.
    """


class WriterActiveError(H5vcError, BlockingIOError):
    """The file is being written by another process (or another handle of this one)."""


class JournalConflictError(H5vcError, OSError):
    """A crashed writer's journal cannot be rolled back: another program changed the
    file after the crash, and rolling back would undo its changes."""


class JournalPendingError(H5vcError, OSError):
    """A crashed writer left a journal that must be rolled back before the file is
    written, and the handle given cannot do it (see the message for the command)."""


class UnjournaledFileWarning(UserWarning):
    """A writable h5py file that h5vc cannot take over (other objects of it are open,
    or it uses a driver other than HDF5's default): it is written without the rollback
    journal, so a crash in the middle of a write can damage it."""


class ColumnKeyError(H5vcError, KeyError):
    """A sample column has no sample under the key asked for."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class ColumnKeyTypeError(H5vcError, TypeError):
    """A key is not of the column's key type (str or int, fixed by its first key)."""


class SampleShapeError(H5vcError, ValueError):
    """A sample's shape does not fit its column (fixed shape, or at most the maximum)."""


class SampleDtypeError(H5vcError, TypeError):
    """A sample's dtype is not its column's dtype."""
