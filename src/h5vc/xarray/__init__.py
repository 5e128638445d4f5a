"""xarray on any version: a backend (``engine="h5vc"``) and :func:`to_version`.

``xr.open_dataset(path, engine="h5vc", version="v3", group="/sub")`` opens one group
of one committed version (by name, ancestor index or UTC timestamp; the current one
by default) lazily: each variable is a :class:`H5vcBackendArray` that names the file,
version and dataset and reads through the per-process cache of open files, so it
pickles to Dask workers. ``chunks={}`` gives Dask arrays on the stored chunks.

Dimension names come from, in this order: HDF5 dimension scales (``DIMENSION_LIST``,
as netCDF-4 and h5netcdf write them); the ``_ARRAY_DIMENSIONS`` attribute (what
:func:`to_version` writes, the convention of xarray's Zarr backend); else phony names
``phony_dim_<n>``, one per distinct length in the group, numbered in the order of the
sorted variable names (as h5netcdf's ``phony_dims="sort"``).

:func:`to_version` writes a Dataset as a new version. It stores dimension names in
``_ARRAY_DIMENSIONS`` rather than as dimension scales: HDF5 accepts dimension scales
on a version's virtual datasets, but their ``DIMENSION_LIST`` and ``REFERENCE_LIST``
attributes hold object references, and a version's unchanged objects are hard links
shared with other versions, so the references of one version would show up in others.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from h5vc.dask import Source, _location, committed_dataset, open_source, resolve_version, versioned
from h5vc.errors import DatasetNotFoundError, MissingDependencyError
from h5vc.store import layout
from h5vc.xarray.write import to_version

try:
    import xarray as xr
    from xarray.backends import BackendArray, BackendEntrypoint
    from xarray.backends.common import AbstractDataStore
    from xarray.backends.store import StoreBackendEntrypoint
    from xarray.core import indexing
except ImportError as err:  # pragma: no cover - exercised only without xarray
    raise MissingDependencyError(
        "h5vc.xarray needs xarray: pip install xarray (or pip install 'h5vc[xarray]')."
    ) from err

__all__ = [
    "DIMENSIONS_ATTR",
    "H5vcBackendArray",
    "H5vcBackendEntrypoint",
    "H5vcStore",
    "SCALAR_ATTR",
    "open_dataset",
    "to_version",
]

#: Attribute holding a variable's dimension names (xarray's Zarr convention).
DIMENSIONS_ATTR = "_ARRAY_DIMENSIONS"
#: Attribute marking a 0-d variable, stored as one element (versioned data is chunked).
SCALAR_ATTR = "_h5vc_scalar"
#: Attributes that describe storage, not the variable: never shown as attributes.
_STORAGE_ATTRS = frozenset(
    {
        DIMENSIONS_ATTR,
        SCALAR_ATTR,
        "DIMENSION_LIST",
        "REFERENCE_LIST",
        "CLASS",
        "NAME",
        "_Netcdf4Dimid",
        "_Netcdf4Coordinates",
        "_NCProperties",
        "_nc3_strict",
    }
)
_NETCDF_DIM_ONLY = "This is a netCDF dimension but not a netCDF variable"


def _is_str_dtype(dtype: np.dtype) -> bool:
    import h5py

    return h5py.check_string_dtype(dtype) is not None and dtype.kind == "O"


class H5vcBackendArray(BackendArray):
    """One dataset of one version, read lazily; pickles as (file, version, dataset)."""

    __slots__ = ("dtype", "scalar", "shape", "source")

    def __init__(self, source: Source, shape: tuple[int, ...], dtype: np.dtype, scalar: bool):
        self.source = source
        self.shape = () if scalar else tuple(shape)
        self.dtype = np.dtype(dtype)
        self.scalar = scalar

    def __getitem__(self, key: indexing.ExplicitIndexer) -> Any:
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER_1VECTOR, self._raw_getitem
        )

    def _raw_getitem(self, key: tuple[Any, ...]) -> np.ndarray:
        dataset = committed_dataset(self.source)
        if self.scalar:
            data = np.asarray(dataset[0:1]).reshape(())
        else:
            data = np.asarray(dataset[key])
        if self.dtype.kind == "O":
            data = _decode_strings(data)
        return data

    def __reduce__(self) -> tuple[Any, ...]:
        return (H5vcBackendArray, (self.source, self.shape, self.dtype.str, self.scalar))


def _decode_strings(data: np.ndarray) -> np.ndarray:
    out = np.empty(data.shape, dtype=object)
    out.ravel()[:] = [v.decode("utf-8") if isinstance(v, bytes) else v for v in data.ravel()]
    return out


def _attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in attrs.items():
        if key in _STORAGE_ATTRS:
            continue
        if isinstance(value, bytes):
            value = value.decode("utf-8")
        elif isinstance(value, np.ndarray) and value.dtype.kind == "O":
            value = [v.decode("utf-8") if isinstance(v, bytes) else v for v in value.tolist()]
        out[key] = value
    return out


def _scale_names(dataset: Any) -> list[str | None]:
    """Dimension names from HDF5 dimension scales attached to the virtual dataset."""
    h5 = dataset.dataset
    if h5.attrs.get("CLASS") == b"DIMENSION_SCALE" and dataset.ndim == 1:
        return [posixpath.basename(h5.name)]  # a scale is indexed by itself
    if "DIMENSION_LIST" not in h5.attrs:
        return [None] * dataset.ndim
    names: list[str | None] = []
    for dim in h5.dims:
        names.append(posixpath.basename(dim[0].name) if len(dim) else None)
    return names


class H5vcStore(AbstractDataStore):
    """One group of one committed version, as xarray's data store."""

    def __init__(self, source: Source, group: str):
        self._source = source  # path, version and root; dataset unused
        self._group_path = group.strip("/")
        found = self._find_group()
        if found is None:
            groups: list[str] = ["/"]
            self._version_group.visititems(
                lambda name, obj: groups.append("/" + name) if hasattr(obj, "keys") else None
            )
            raise DatasetNotFoundError(
                f"Group {group!r} not found in version {source.version!r}. "
                f"Groups in that version: {sorted(groups)}."
            )

    # Only names are kept: the store pickles (with the Dataset) to any process.

    @property
    def _version_group(self) -> Any:
        return versioned(open_source(self._source))[self._source.version]

    def _find_group(self) -> Any:
        version_group = self._version_group
        if not self._group_path:
            return version_group
        try:
            node = version_group[self._group_path]
        except KeyError:
            return None
        return node if hasattr(node, "keys") else None

    @property
    def _group(self) -> Any:
        return self._find_group()

    @classmethod
    def open(
        cls,
        path: Any,
        version: Any = None,
        group: str | None = None,
        *,
        root: str = "/",
        storage_options: dict[str, Any] | None = None,
    ) -> H5vcStore:
        location = _location(path)
        options = tuple(sorted((storage_options or {}).items()))
        name = resolve_version(
            versioned(open_source(Source(location, "", "", root, options))), version
        )
        return cls(Source(location, name, "", root, options), group or "/")

    def _datasets(self) -> list[tuple[str, Any]]:
        from h5vc.wrappers import CommittedDataset

        found = []
        for name in sorted(self._group.keys()):
            node = self._group[name]
            if isinstance(node, CommittedDataset):
                found.append((name, node))
        return found

    def _dimension_names(self) -> dict[str, tuple[str, ...]]:
        phony: dict[int, str] = {}
        dims: dict[str, tuple[str, ...]] = {}
        for name, node in self._datasets():
            if SCALAR_ATTR in node.attrs:
                dims[name] = ()
                continue
            scales = _scale_names(node)
            stored = node.attrs.get(DIMENSIONS_ATTR)
            if stored is not None:
                stored = [s.decode() if isinstance(s, bytes) else str(s) for s in stored]
            names: list[str] = []
            for axis, size in enumerate(node.shape):
                scale = scales[axis]
                if scale is not None:
                    names.append(scale)
                elif stored is not None and len(stored) == node.ndim:
                    names.append(stored[axis])
                else:
                    names.append(phony.setdefault(size, f"phony_dim_{len(phony)}"))
            dims[name] = tuple(names)
        return dims

    def get_variables(self) -> dict[str, Any]:
        variables = {}
        dims = self._dimension_names()
        for name, node in self._datasets():
            if str(node.attrs.get("NAME", "")).startswith(_NETCDF_DIM_ONLY):
                continue  # a netCDF dimension without a variable
            scalar = SCALAR_ATTR in node.attrs
            source = Source(
                self._source.path,
                self._source.version,
                posixpath.join(self._group_path, name),
                self._source.root,
                self._source.storage_options,
            )
            dtype = np.dtype(object) if _is_str_dtype(node.dtype) else node.dtype
            array = H5vcBackendArray(source, node.shape, dtype, scalar)
            encoding: dict[str, Any] = {"chunksizes": node.chunks, "source": self._source.path}
            if not scalar:
                encoding["preferred_chunks"] = dict(zip(dims[name], node.chunks))
            if dtype.kind == "O":
                encoding["dtype"] = str
            variables[name] = xr.Variable(
                dims[name], indexing.LazilyIndexedArray(array), _attrs(node.attrs), encoding
            )
        return variables

    def get_attrs(self) -> dict[str, Any]:
        attrs = _attrs(self._group.attrs)
        if self._group.name in ("/", self._version_group.name):
            # a version's own metadata (parent, timestamp, ...) is not the Dataset's
            attrs = {k: v for k, v in attrs.items() if k not in layout.VERSION_ATTRS}
        return attrs

    def get_dimensions(self) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for var in self.get_variables().values():
            sizes.update(zip(var.dims, var.shape))
        return sizes

    def child_groups(self) -> list[str]:
        from h5vc.wrappers import CommittedGroup

        return [name for name in self._group if isinstance(self._group[name], CommittedGroup)]

    def close(self) -> None:
        """Nothing to do: the file stays in the per-process cache (see h5vc.filecache)."""


class H5vcBackendEntrypoint(BackendEntrypoint):
    """``xr.open_dataset(path, engine="h5vc", version=..., group=...)``."""

    description = "Open any version of an h5vc versioned HDF5 file"
    url = "https://github.com/h5vc/h5vc/blob/main/docs/scale.md"
    open_dataset_parameters = (
        "filename_or_obj",
        "version",
        "group",
        "root",
        "storage_options",
        "mask_and_scale",
        "decode_times",
        "concat_characters",
        "decode_coords",
        "drop_variables",
        "use_cftime",
        "decode_timedelta",
    )
    supports_groups = True

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        return False  # plain HDF5 files belong to h5netcdf; ask for engine="h5vc"

    def open_dataset(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        version: Any = None,
        group: str | None = None,
        root: str = "/",
        storage_options: dict[str, Any] | None = None,
        drop_variables: str | Iterable[str] | None = None,
        **decode: Any,
    ) -> xr.Dataset:
        store = H5vcStore.open(
            filename_or_obj, version, group, root=root, storage_options=storage_options
        )
        return StoreBackendEntrypoint().open_dataset(store, drop_variables=drop_variables, **decode)

    def open_groups_as_dict(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        version: Any = None,
        group: str | None = None,
        root: str = "/",
        storage_options: dict[str, Any] | None = None,
        drop_variables: str | Iterable[str] | None = None,
        **decode: Any,
    ) -> dict[str, xr.Dataset]:
        top = H5vcStore.open(
            filename_or_obj, version, group, root=root, storage_options=storage_options
        )
        out: dict[str, xr.Dataset] = {}
        pending = [("/", top)]
        while pending:
            relative, store = pending.pop(0)
            out[relative] = StoreBackendEntrypoint().open_dataset(
                store, drop_variables=drop_variables, **decode
            )
            for child in sorted(store.child_groups()):
                path = posixpath.join(store._group_path, child)
                pending.append((posixpath.join(relative, child), H5vcStore(top._source, path)))
        return out

    def open_datatree(  # type: ignore[override]
        self, filename_or_obj: Any, **kwargs: Any
    ) -> xr.DataTree:
        return xr.DataTree.from_dict(self.open_groups_as_dict(filename_or_obj, **kwargs))


def open_dataset(path: Any, version: Any = None, group: str | None = None, **kwargs: Any) -> Any:
    """``xr.open_dataset(path, engine="h5vc", version=version, group=group, **kwargs)``."""
    return xr.open_dataset(path, engine="h5vc", version=version, group=group, **kwargs)
