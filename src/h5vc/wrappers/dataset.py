"""h5py-like datasets of a versioned file.

:class:`StagedDataset` is a dataset of a version being staged: reads and writes
go to a :class:`~h5vc.staging.StagedChangesArray` whose base slab is the
dataset's ``raw_data``, so only touched chunks are read or held in memory.
:class:`CommittedDataset` is a read-only dataset of a committed version; it reads
through the same engine (with no staged slab), following the version's chunk
map and coalescing consecutive ``raw_data`` rows into single reads.
"""

from __future__ import annotations

import contextlib
import operator
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np

from h5vc.errors import (
    ClosedError,
    CorruptDataError,
    InvalidOptionError,
    ReadOnlyError,
    VersionNotFoundError,
)
from h5vc.hdf5 import filters as filter_keywords
from h5vc.hdf5.damage import damaged
from h5vc.hdf5.mappings import Mappings, StoredVirtual
from h5vc.store import layout, planner
from h5vc.store.chunkmap import ChunkMap
from h5vc.store.reading import (
    CommittedReader,
    FileView,
    RawDataSlab,
    SmallReads,
    first_read,
    read_fill,
    small_read,
    small_reads,
    staged_array,
)
from h5vc.versions import FileState
from h5vc.versions.reading import file_of, reads
from h5vc.wrappers.attrs import CommittedAttributes, StagedAttributes

if TYPE_CHECKING:  # the staging engine and the commit writer load on the first write
    from h5vc.staging import StagedChangesArray
    from h5vc.versions import DatasetCommit, Link

__all__ = [
    "CommittedDataset",
    "StagedDataset",
    "array_from_chunk_map",
    "coerce_value",
    "default_fill",
    "reopen_in",
    "reopen_version",
]


#: A staging array whose chunks sit on ``raw_data`` per a chunk map.
array_from_chunk_map = staged_array


def _extent(size: Any) -> int:
    """One axis length given to ``resize``: an int, or a float of a whole value (as
    h5py and versioned-hdf5 take ``9.0``); a fraction is refused, not truncated."""
    value = np.asarray(size)[()]
    if isinstance(value, float | np.floating):
        if not float(value).is_integer():
            raise InvalidOptionError(f"Expected a whole number as the new size. Got {size!r}.")
        return int(value)
    return operator.index(value)


def default_fill(dtype: np.dtype) -> Any:
    """The fill value HDF5 uses when none is given."""
    return read_fill(dtype, None)


class _DatasetBase:
    """What committed and staged datasets share: shape, dtype, reads, numpy protocol."""

    _name: str
    _chunks: tuple[int, ...]
    _fillvalue: Any
    _raw_data: h5py.Dataset | None
    _filters: dict[str, Any]

    @property
    def _data(self) -> StagedChangesArray:
        raise NotImplementedError

    @property
    def name(self) -> str:
        return self._name

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape)

    @property
    def dtype(self) -> np.dtype:
        raise NotImplementedError

    @property
    def chunks(self) -> tuple[int, ...]:
        return self._chunks

    @property
    def fillvalue(self) -> Any:
        return self._fillvalue

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def maxshape(self) -> tuple[int | None, ...]:
        return (None,) * self.ndim

    def _filter(self, key: str) -> Any:
        if self._raw_data is not None:
            return getattr(self._raw_data, key)
        return self._filters.get(key, filter_keywords.UNSET[key])

    @property
    def compression(self) -> str | None:
        return self._filter("compression")

    @property
    def compression_opts(self) -> Any:
        return self._filter("compression_opts")

    @property
    def shuffle(self) -> bool:
        return bool(self._filter("shuffle"))

    @property
    def fletcher32(self) -> bool:
        return bool(self._filter("fletcher32"))

    @property
    def scaleoffset(self) -> int | None:
        return self._filter("scaleoffset")

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("Attempt to take len() of scalar dataset")
        return self.shape[0]

    def __iter__(self) -> Iterator[Any]:
        if not self.shape:
            raise TypeError("Can't iterate over a scalar dataset")
        for i in range(self.shape[0]):
            yield self[i]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, str):
            raise ValueError(
                f"Expected an index of integers, slices, arrays or masks. Got the field "
                f"name {index!r}; compound field selection is not supported."
            )
        return self._data[index]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        data = np.asarray(self._data[...])
        return data if dtype is None else data.astype(dtype)

    def astype(self, dtype: Any) -> AstypeView:
        """A view reading this dataset converted to ``dtype`` (like h5py's)."""
        return AstypeView(self, np.dtype(dtype))

    def asstr(self, encoding: str = "utf-8", errors: str = "strict") -> AsStrView:
        """A view reading variable-length or fixed-length bytes as ``str``."""
        return AsStrView(self, encoding, errors)

    def read_direct(self, dest: np.ndarray, source_sel: Any = None, dest_sel: Any = None) -> None:
        """Read ``self[source_sel]`` into ``dest[dest_sel]``."""
        source = self[() if source_sel is None else source_sel]
        dest[() if dest_sel is None else dest_sel] = source

    def __repr__(self) -> str:
        return f'<{type(self).__name__} "{self.name}": shape {self.shape}, type "{self.dtype.str}">'


class AstypeView:
    """``dataset.astype(dtype)``: index it or convert it with numpy."""

    def __init__(self, dataset: _DatasetBase, dtype: np.dtype):
        self._dataset = dataset
        self.dtype = dtype

    def __getitem__(self, index: Any) -> Any:
        return np.asarray(self._dataset[index]).astype(self.dtype)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        data = np.asarray(self._dataset).astype(self.dtype)
        return data if dtype is None else data.astype(dtype)

    def __len__(self) -> int:
        return len(self._dataset)


class AsStrView:
    """``dataset.asstr()``: bytes decoded to ``str`` on read."""

    def __init__(self, dataset: _DatasetBase, encoding: str, errors: str):
        self._dataset = dataset
        self._encoding = encoding
        self._errors = errors

    def _decode(self, value: Any) -> Any:
        return value.decode(self._encoding, self._errors) if isinstance(value, bytes) else value

    def __getitem__(self, index: Any) -> Any:
        data = self._dataset[index]
        if isinstance(data, np.ndarray):
            out = np.empty(data.shape, dtype=object)
            out.ravel()[:] = [self._decode(v) for v in data.ravel()]
            return out
        return self._decode(data)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self[...], dtype=dtype)

    def __len__(self) -> int:
        return len(self._dataset)


class CommittedDataset(_DatasetBase):
    """A read-only dataset of a committed version.

    Opening one costs a link lookup: HDF5 opens the virtual dataset (after its
    mappings are checked, see :mod:`h5vc.hdf5.mappings`), and its chunk map and chunk
    store are found, on first use (a read, ``shape``, ``dtype``, ``chunks``, ``attrs``),
    inside the file's read guard and after the file's generation is checked: what is
    read first is what the file holds then."""

    def __init__(
        self,
        dataset: h5py.Dataset | None,
        *,
        version: str,
        path: str,
        chunk_map: ChunkMap | None = None,
        raw_data: h5py.Dataset | None = None,
        fillvalue: Any = None,
        state: FileState,
        mappings: Mappings | None = None,
        parent: h5py.Group | Callable[[], h5py.Group] | None = None,
        stored: StoredVirtual | None = None,
    ):
        self._version = version
        self._path = path
        self._name = "/" + path
        self._filters = {}
        #: The file's state, whose generation tells when the objects read here were
        #: changed (versions deleted, metadata rewritten, a failed write rolled back).
        self._state = state
        self._generation = state.generation
        loaded = None if chunk_map is None or raw_data is None else (chunk_map, raw_data, fillvalue)
        self._take(dataset, loaded, mappings, parent, stored)

    def _take(
        self,
        dataset: h5py.Dataset | None,
        loaded: tuple[ChunkMap, h5py.Dataset, Any] | None,
        mappings: Mappings | None,
        parent: h5py.Group | Callable[[], h5py.Group] | None = None,
        stored: StoredVirtual | None = None,
    ) -> None:
        if dataset is None and parent is None:
            raise TypeError("Expected the virtual dataset or the group holding it.")
        #: The virtual dataset, once HDF5 opened it; until then ``_parent`` holds it.
        self._opened = dataset
        self._parent = parent
        #: (chunk map, raw_data, fill value), found on first use.
        self._loaded = loaded
        #: The mappings read before HDF5 opened the dataset, kept until the chunk map
        #: is made from them.
        self._mappings = mappings
        self._reader: CommittedReader | None = None
        #: The view of the file's bytes last read through, and what it found of this
        #: dataset (see :meth:`_first_read`).
        self._in_view: tuple[FileView, Any] | None = None
        #: (stamp, generation, view, dataset) of the last read from the bytes under
        #: the lock, for reads without it (see :meth:`_quick_read`).
        self._quick: tuple[Any, ...] | None = None
        #: What the header of the virtual dataset said when it was opened, kept until
        #: the first read; then, if HDF5 serves small reads before (and without) the
        #: chunk map, how (see :func:`~h5vc.store.reading.small_reads`).
        self._stored = stored
        if stored is not None and mappings is None:
            self._mappings = stored.mappings
        self._small: SmallReads | None = None
        self._small_found = False

    @property
    def _dataset(self) -> h5py.Dataset:
        """The virtual dataset in the file, opened by HDF5 on first use (its mappings
        checked first), from the file as it is at that read."""
        dataset = self._opened
        if dataset is None:
            with self._state.reading():
                self._current()  # the file changed since the view was made: start anew
                dataset = self._opened
                if dataset is None:
                    # Mappings known were checked in this generation of the file.
                    dataset, stored = open_member(
                        self._state,
                        self._version,
                        self._path,
                        self._parent_group(),
                        checked=self._mappings is not None,
                    )
                    self._opened, self._parent = dataset, None
                    if self._loaded is None and stored is not None:
                        self._mappings = stored.mappings
                        self._stored = stored
        return dataset

    def _parent_group(self) -> h5py.Group:
        """The group holding the dataset (not opened yet: ``_parent`` opens it)."""
        parent = self._parent
        assert parent is not None
        if not isinstance(parent, h5py.Group):
            parent = self._parent = parent()
        return parent

    def _parts(self) -> tuple[ChunkMap, h5py.Dataset, Any]:
        """The chunk map, raw_data and fill value, found in the file on first use."""
        loaded = self._loaded
        if loaded is None:
            state = self._state
            with state.reading():
                # Entering the read may have opened the file anew (it changed): the
                # dataset is then opened again from the new handle first.
                self._current()
                loaded = self._loaded
                if loaded is None:
                    dataset = self._dataset
                    store = state.stores.require(self._path, self._version, dataset)
                    chunk_map = state.chunk_maps.get(
                        self._version, self._path, dataset, self._mappings
                    )
                    loaded = (chunk_map, store.raw_data, store.fillvalue)
                    self._loaded, self._mappings = loaded, None
        return loaded

    @property
    def _chunk_map(self) -> ChunkMap:
        return self._parts()[0]

    @property
    def _raw_data(self) -> h5py.Dataset:  # type: ignore[override]
        return self._parts()[1]

    @property
    def _fillvalue(self) -> Any:  # type: ignore[override]
        return self._parts()[2]

    @property
    def _chunks(self) -> tuple[int, ...]:  # type: ignore[override]
        return self._parts()[0].chunks

    @contextlib.contextmanager
    def _live_attrs(self) -> Iterator[h5py.AttributeManager]:
        """The dataset's attributes in the file, for one read of them."""
        with self._state.reading():
            self._current()
            yield self._dataset.attrs

    def _current(self) -> None:
        """Open the dataset anew if the file's objects changed since it was opened:
        chunks may have moved and virtual datasets been rebuilt, so what was read
        then would read other data now. Raises if its version is gone."""
        state = self._state
        if state.generation == self._generation:
            return
        with state.reading():
            generation = state.generation
            fresh = reopen_in(state, self._version, self._path)
            self._take(fresh._opened, fresh._loaded, fresh._mappings, fresh._parent, fresh._stored)
            self._generation = generation

    @property
    def attrs(self) -> CommittedAttributes:
        self._current()
        # Read through ``_live_attrs`` only: the dataset opens on the first read. Made
        # at each access (as h5py does): kept, it would hold this dataset through
        # ``live`` in a reference cycle.
        return CommittedAttributes(
            None, layout.DATASET_ATTRS, self._describe(), live=self._live_attrs
        )

    @property
    def chunks(self) -> tuple[int, ...]:
        self._current()
        return self._chunks

    @property
    def fillvalue(self) -> Any:
        self._current()
        return self._fillvalue

    @reads
    def _filter(self, key: str) -> Any:
        self._current()
        return super()._filter(key)

    @reads
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        data = np.asarray(self[...])
        return data if dtype is None else data.astype(dtype)

    def __getitem__(self, index: Any) -> Any:
        quick = self._quick
        if quick is not None:
            data = self._quick_read(quick, index)
            if data is not NotImplemented:
                return data
        return self._read(index)

    def _quick_read(self, quick: tuple[Any, ...], index: Any) -> Any:
        """``self[index]`` read from the file's bytes without the read lock, when the
        file is as it was at the last read under the lock; ``NotImplemented`` if it
        cannot tell or the read is not one :func:`first_read` serves.

        The bytes are copied first, then the file's stamp is looked at: unchanged,
        no writer touched the file since that read (so the view and the chunk
        addresses found then hold, and the bytes copied are theirs); changed, the
        copy is dropped and the read is made under the lock."""
        stamp, generation, view, dataset = quick
        guard = self._state.guard
        if guard is None or guard.quiet != stamp or self._state.generation != generation:
            self._quick = None
            return NotImplemented
        if not guard.anchor.id.valid:  # the caller closed the file: the lock says so
            return NotImplemented
        try:
            data = first_read(view, dataset, index)
        except Exception:  # what a changed file may do to a read: made under the lock
            return NotImplemented
        if data is NotImplemented or not guard.unchanged(stamp):
            return NotImplemented
        return data

    @reads
    def _read(self, index: Any) -> Any:
        if isinstance(index, str):
            return super().__getitem__(index)  # raises: no field names
        data = self._first_read(index)
        if data is not NotImplemented:
            return data
        if self._loaded is None:
            small = self._small_reads(index)
            if small is not None:
                data = small_read(small, index, self._state.filename, self._open_dataset)
                if small.once:
                    self._small = None
                if data is not NotImplemented:
                    return data
        return self._committed_reader().read(index)

    def _first_read(self, index: Any) -> Any:
        """``self[index]`` read from the file's bytes (:func:`~h5vc.store.reading.first_read`)
        in a file open read-only; ``NotImplemented`` where it is not read that way."""
        self._current()
        state = self._state
        found = file_view(state)
        if found is None:
            return NotImplemented
        view, versions = found
        known = self._in_view
        if known is not None and known[0] is view:
            dataset = known[1]
        else:
            dataset = self._bytes_dataset(view, versions)
            self._in_view = (view, dataset)
        if dataset is None:
            return NotImplemented
        data = first_read(view, dataset, index)
        quiet = None if state.guard is None else state.guard.quiet
        if data is not NotImplemented and quiet is not None:
            self._quick = (quiet, state.generation, view, dataset)
        return data

    def _bytes_dataset(self, view: FileView, versions: str) -> Any:
        """What :func:`first_read` needs of this dataset, from ``view`` (None: it is
        read otherwise)."""
        address = view.address(f"{versions}/{self._version}/{self._path}")
        if address is None:
            return None
        dataset = view.dataset(address, f"dataset {self._name!r} of version {self._version!r}")
        # (The chunk stores are next to the versions group.)
        if dataset is None or not dataset.source.startswith(versions.rpartition("/")[0] + "/"):
            # A tree copied with h5py names the original's stores: read its own.
            return None
        return dataset

    def _open_dataset(self) -> h5py.Dataset:
        return self._dataset

    def _small_reads(self, index: Any) -> SmallReads | None:
        """How HDF5 serves small reads before the chunk map is made (None: it does
        not); found once, on the first read (``self[index]``), from the headers of the
        dataset (read when it was opened) and of its ``raw_data``. A first read of
        more than :data:`~h5vc.store.planner.HDF5_READ_BYTES` (or not of a box) goes
        through the chunk map, as every read after it does: its ``raw_data`` is not
        looked at here."""
        self._current()
        if self._small_found:
            return self._small
        if self._stored is None and self._opened is None and self._mappings is None:
            # What its header says, read from the file's bytes (of a file open
            # read-only), its mappings checked: HDF5 need not open it.
            self._stored = read_header(self._state, self._version, self._path, self._parent_group())
            if self._stored is not None:
                self._mappings = self._stored.mappings
        if self._stored is None:
            self._dataset  # opening it reads its header (of a file open read-only)  # noqa: B018
        stored, self._stored = self._stored, None
        self._small_found = True
        if stored is not None and not _may_be_small(stored, index):
            return None
        if stored is not None:
            where = self._opened if self._opened is not None else self._parent_group()
            small = small_reads(
                stored,
                h5py.h5i.get_file_id(where.id),
                self._state.filename,
                f"{self._version!r}/{self._path}",
            )
            # A tree copied with h5py names the original's stores: the chunk map
            # reads its own.
            if small is not None and small.source.startswith(_stores_prefix(self._state)):
                self._small = small
        return self._small

    def _committed_reader(self) -> CommittedReader:
        """The reader (planner and executor) of this dataset's reads."""
        self._current()
        if self._reader is None:
            self._reader = CommittedReader(
                self._chunk_map, self._raw_data, self._fillvalue, virtual=self._dataset
            )
        return self._reader

    def _describe(self) -> str:
        return f"dataset {self._name!r} of version {self._version!r}"

    @property
    @reads
    def _data(self) -> StagedChangesArray:
        return self._committed_reader().engine()

    @property
    def shape(self) -> tuple[int, ...]:
        self._current()
        return self._chunk_map.shape

    @property
    def dtype(self) -> np.dtype:
        self._current()
        return self._raw_data.dtype

    @property
    @reads
    def dataset(self) -> h5py.Dataset:
        """The virtual dataset in the file (read it with any HDF5 tool)."""
        self._current()
        return self._dataset

    @property
    def version_name(self) -> str:
        return self._version

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise ReadOnlyError(
            f"The {self._describe()} is read-only: committed versions never change. "
            f"Stage a new version with stage_version() to modify it."
        )

    __setitem__ = resize = _read_only  # type: ignore[assignment]

    def write_direct(self, *args: Any, **kwargs: Any) -> None:
        self._read_only()

    def __reduce__(self) -> tuple[Any, ...]:
        where = self._opened if self._opened is not None else self._parent_group()
        root = where.name.rsplit(f"/{layout.VERSION_DATA}/", 1)[0] or "/"
        return (_reopen_committed, (self._state.filename, root, self._version, self._path))


def _may_be_small(stored: StoredVirtual, index: Any) -> bool:
    """Whether ``index`` may be a read :func:`small_read` serves (a box of at most
    :data:`~h5vc.store.planner.HDF5_READ_BYTES`) of the dataset ``stored`` describes."""
    datatype = stored.datatype
    if datatype is None or len(datatype) < 8:
        return True  # (small_reads looks)
    itemsize = int.from_bytes(datatype[4:8], "little")
    return planner.small_box(index, tuple(stored.shape), itemsize) is not None


#: The view of the file's bytes of each read-only state (see :func:`file_view`).
_VIEWS: weakref.WeakKeyDictionary[FileState, tuple[int, int, FileView | None, str, bool]] = (
    weakref.WeakKeyDictionary()
)


def file_view(state: FileState) -> tuple[FileView, str] | None:
    """The view of the file's bytes of ``state`` (read-only, under its read guard)
    and the name of its versions group, made once per handle and generation (what it
    read may be stale once either changes); None for a file read otherwise."""
    if state.guard is None or state.writable:
        return None
    root = state.root
    cached = _VIEWS.get(state)
    if cached is not None and cached[0] == id(root) and cached[1] == state.generation:
        view = cached[2]
        return None if view is None else (view, cached[3])
    if cached is not None and cached[2] is not None and not cached[4]:
        cached[2].close()
    # The file as an earlier handle read it (the same bytes): that handle's view.
    kept = state.guard.kept
    file = file_of(root)
    if kept is None:
        view = FileView.of(file, state.filename)
    else:
        if kept.view is False:
            made = FileView.of(file, state.filename)
            # Kept without this handle (each user gets a copy over its own).
            kept.view = None if made is None else made.over(None)
        view = None if kept.view is None else kept.view.over(file)
    versions = state.versions.name or ""
    _VIEWS[state] = (id(root), state.generation, view, versions, kept is not None)
    return None if view is None else (view, versions)


def _stores_prefix(state: FileState) -> str:
    """The start of the paths of the chunk stores of ``state``'s versioned root."""
    return (state.version_data.name or "").rstrip("/") + "/"


def known_view(state: FileState) -> tuple[FileView, str] | None:
    """:func:`file_view` of ``state`` if it was made for its current handle and
    generation already, by this handle or an earlier one of the same bytes (nothing
    is read: usable outside a read)."""
    cached = _VIEWS.get(state)
    if cached is None or cached[1] != state.generation or cached[0] != id(state.root):
        guard = state.guard
        kept = None if guard is None or state.writable else guard.kept
        if kept is None or not kept.view:
            return None
        return file_view(state)  # that view, over this handle: nothing to read
    if cached[2] is None:
        return None
    return cached[2], cached[3]


def _reopen_committed(filename: str, root: str, version: str, path: str) -> CommittedDataset:
    """Reopen a committed dataset in another process (pickling, dask workers), read-only,
    from the process's cache of open files (:mod:`h5vc.filecache`)."""
    from h5vc.filecache import open_file

    opened = open_file(filename, root)

    def reopen() -> CommittedDataset:
        return reopen_in(FileState.shared(opened.root), version, path)

    dataset: CommittedDataset = opened.memo(("h5vc.dataset", version, path), reopen)
    return dataset


def reopen_in(state: FileState, version: str, path: str) -> CommittedDataset:
    """Dataset ``path`` of committed ``version``, found again in the file of ``state``
    (HDF5 opens it on its first use)."""
    root = reopen_version(state, version, f"The dataset {'/' + path.strip('/')!r}")
    parent_path, _, name = path.strip("/").rpartition("/")
    parent = root[parent_path] if parent_path else root
    if not parent.id.links.exists(name.encode()):
        raise KeyError(
            f"Unable to open object {name!r} of version {version!r}: the dataset "
            f"{'/' + path.strip('/')!r} is no longer there"
        )
    return CommittedDataset(None, version=version, path=path, state=state, parent=parent)


def read_header(
    state: FileState, version: str, path: str, parent: h5py.Group
) -> StoredVirtual | None:
    """What the header of the virtual dataset ``path`` of ``version`` (a member of
    ``parent``) says, its mappings checked, read from the file's bytes (None where
    that cannot be done, see :meth:`~h5vc.versions.chunkmaps.ChunkMapCache.virtual_before_open`).
    Raises :class:`~h5vc.errors.CorruptDataError` if it is damaged."""
    name = path.strip("/").rpartition("/")[2]
    try:
        return state.chunk_maps.virtual_before_open(version, path, parent, name)
    except (KeyError, RuntimeError, OSError, AttributeError, ValueError):
        with damaged(state.filename, f"Object {parent.name}/{name}"):
            raise


@contextlib.contextmanager
def opening_member(
    state: FileState, parent: h5py.Group, name: str, missing: Callable[[], str]
) -> Iterator[None]:
    """Errors of opening ``parent[name]`` in the body: damage is raised as
    :class:`~h5vc.errors.CorruptDataError` naming the object, a member that is not
    there as ``KeyError(missing())`` (messages are made only when needed)."""
    try:
        try:
            yield
        except (KeyError, RuntimeError, OSError, AttributeError, ValueError):
            # Named only when something is wrong (a group's name costs an HDF5 call).
            with damaged(state.filename, f"Object {parent.name}/{name}"):
                raise
    except KeyError as error:
        if name in parent:  # the link is there, the object cannot be opened
            raise CorruptDataError(
                f"Object {parent.name}/{name} in {state.filename!r} is damaged and cannot "
                f"be opened: {error}."
            ) from error
        raise KeyError(missing()) from None


def open_member(
    state: FileState, version: str, path: str, parent: h5py.Group, *, checked: bool = False
) -> tuple[h5py.Dataset, StoredVirtual | None]:
    """HDF5's open of the virtual dataset ``path`` of ``version`` (a member of
    ``parent``), after its mappings are read and checked from the file's bytes (see
    :mod:`h5vc.hdf5.mappings`) unless ``checked`` (they were, in this generation of
    the file); returns it with what its header says (None if that was not read: a
    file open for writing, a chunk map known already, ``checked``). Raises
    :class:`~h5vc.errors.CorruptDataError` if it is damaged, KeyError if it is gone."""
    name = path.strip("/").rpartition("/")[2]

    def missing() -> str:
        return f"Unable to open object {name!r} of version {version!r}: no such member"

    with opening_member(state, parent, name, missing):
        stored = (
            None if checked else state.chunk_maps.virtual_before_open(version, path, parent, name)
        )
        obj = parent[name]
    if not isinstance(obj, h5py.Dataset):
        raise CorruptDataError(
            f"Expected {parent.name}/{name} in {state.filename!r} to be a dataset, as it was when "
            f"version {version!r} was opened. Got a {type(obj).__name__}."
        )
    return obj, stored


def reopen_version(state: FileState, version: str, what: str) -> h5py.Group:
    """The group of committed ``version``, for ``what`` (an object of it opened
    earlier) to be opened anew; raises if the version was deleted meanwhile."""
    if state.closed:
        raise ClosedError(
            f"{what} of version {version!r} belongs to {state.filename!r}, which was "
            f"closed. Reopen the file and open the version again."
        )
    try:
        return state.version_group(version)
    except VersionNotFoundError:
        raise VersionNotFoundError(
            f"{what} of version {version!r} was opened before version {version!r} was "
            f"deleted from {state.filename!r}; it can no longer be read. Open a version "
            f"that exists."
        ) from None


def open_committed_dataset(
    state: FileState,
    version: str,
    path: str,
    parent: h5py.Group | Callable[[], h5py.Group],
    stored: StoredVirtual | None = None,
) -> CommittedDataset:
    """The read-only view of dataset ``path`` of committed ``version``, a member of
    ``parent`` (or of the group a call of it opens, when first needed; ``stored``:
    what its header says, read from the file's bytes): HDF5
    opens it, and its chunk map and chunk store are found, when first needed."""
    return CommittedDataset(
        None, version=version, path=path, state=state, parent=parent, stored=stored
    )


class StagedDataset(_DatasetBase):
    """A dataset of a version being staged."""

    def __init__(
        self,
        name: str,
        array: StagedChangesArray,
        *,
        chunks: tuple[int, ...],
        fillvalue: Any,
        dtype: np.dtype,
        attrs: StagedAttributes,
        raw_data: h5py.Dataset | None = None,
        base: Link | None = None,
        base_shape: tuple[int, ...] | None = None,
        base_slots: np.ndarray | None = None,
        filters: dict[str, Any] | None = None,
        state: FileState | None = None,
    ):
        self._name = name
        self._array = array
        self._chunks = tuple(chunks)
        self._fillvalue = fillvalue
        self._dtype = dtype
        self._raw_data = raw_data
        self._base = base
        self._base_shape = base_shape
        #: The slots of the base version's chunks in raw_data (see DatasetCommit).
        self._base_slots = base_slots
        self._filters = dict(filters or {})
        self.attrs = attrs
        self._read_only_reason: str | None = None
        self._state = state
        self._stored_through = False

    @property
    def _data(self) -> StagedChangesArray:
        return self._array

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    def _check_writable(self) -> None:
        if self._read_only_reason is not None:
            raise ReadOnlyError(self._read_only_reason)

    def __setitem__(self, index: Any, value: Any) -> None:
        self._check_writable()
        if hasattr(value, "__dask_graph__"):  # a Dask array: written block by block
            from h5vc.blockwrite import store

            store(self, value, index)
            return
        self._array[index] = coerce_value(value, self._dtype)

    def write_through(self, region: tuple[slice, ...], values: np.ndarray) -> bool:
        """``self[region] = values``, stored in the file now instead of held in memory.

        ``region`` (step-1 slices, one per axis) must cover whole chunks: it starts on
        a chunk boundary on every axis and ends on one or at the dataset's edge. The
        chunks are hashed, deduplicated and written to the dataset's chunk store at
        once, as a commit would store them, and the staged dataset points at them;
        they are taken back if the version is not committed. Returns False, writing
        nothing, where this does not apply (text, a region not on chunk boundaries,
        a dataset not backed by the file's chunk stores): then write with ``[...]``.
        """
        self._check_writable()
        array, chunks = self._array, self._chunks
        if self._state is None or self._dtype.kind == "O" or len(region) != len(chunks):
            return False
        grid_box = []
        for box, c, n in zip(region, chunks, array.shape):
            start, stop = box.start, box.stop
            if not 0 <= start < stop <= n or start % c or (stop % c and stop != n):
                return False
            grid_box.append(slice(start // c, -(-stop // c)))
        values = np.asarray(values, dtype=self._dtype)
        if values.shape != tuple(b.stop - b.start for b in region):
            return False
        store = self._state.stores.writable(
            self._name.strip("/"),
            dtype=self._dtype,
            chunks=chunks,
            fillvalue=self._fillvalue,
            filters=self._filters,
        )
        base = array.slabs[1] if array.n_base_slabs else RawDataSlab(store.raw_data)
        if getattr(getattr(base, "dataset", None), "name", None) != store.raw_data.name:
            return False
        slots = store.store_array(values, fillvalue=self._fillvalue)
        array.place_stored(tuple(grid_box), slots, base)
        self._raw_data = store.raw_data
        self._stored_through = True
        return True

    def resize(self, size: Any, axis: int | None = None) -> None:
        """Resize like ``h5py.Dataset.resize``: grow or shrink any axis.

        ``size`` is an int (0-d arrays too) or a sequence of them; ``axis`` may be
        negative.
        """
        self._check_writable()
        if axis is not None:
            if np.ndim(size) != 0:
                raise TypeError("Argument 'size' must be an int when 'axis' is given")
            if not -self.ndim <= axis < self.ndim:
                raise ValueError(f"Invalid axis {axis} for a dataset of rank {self.ndim}")
            new_shape = list(self.shape)
            new_shape[axis] = _extent(size)
        elif np.ndim(size) == 0:
            new_shape = [_extent(size)]
        else:
            new_shape = [_extent(n) for n in size]
        if len(new_shape) != self.ndim:
            raise TypeError(
                f"New shape length ({len(new_shape)}) must match dataset rank ({self.ndim})"
            )
        if any(n < 0 for n in new_shape):
            raise ValueError(f"Expected a shape of non-negative sizes. Got {tuple(new_shape)}.")
        self._array.resize(tuple(new_shape))

    @property
    def changed(self) -> bool:
        if self._base is None or self.attrs.modified or self._array.has_changes:
            return True
        if self._stored_through:
            return True
        return self.shape != self._base_shape

    def to_commit(self, path: str) -> DatasetCommit | Link:
        from h5vc.versions import DatasetCommit

        if self._base is not None and not self.changed:
            return self._base
        return DatasetCommit(
            path=path,
            array=self._array,
            dtype=self._dtype,
            chunks=self._chunks,
            fillvalue=self._fillvalue,
            attrs=self.attrs.to_dict(),
            filters=self._filters,
            raw_data=self._raw_data,
            base_slots=self._base_slots,
            base_shape=self._base_shape,
        )

    def close_staging(self, reason: str) -> None:
        """Make the dataset read-only once its version is committed or abandoned."""
        self._read_only_reason = reason
        self.attrs.read_only_reason = reason


def coerce_value(value: Any, dtype: np.dtype) -> Any:
    """Values as the engine stores them: text in string datasets becomes bytes."""
    if dtype.kind != "O":
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    array = np.asarray(value, dtype=object)
    if array.shape == ():
        return array[()].encode("utf-8") if isinstance(array[()], str) else array
    out = np.empty(array.shape, dtype=object)
    out.ravel()[:] = [v.encode("utf-8") if isinstance(v, str) else v for v in array.ravel()]
    return out
