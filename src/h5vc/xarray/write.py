"""Writing an ``xarray.Dataset`` as a new version (see :func:`h5vc.xarray.to_version`)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import h5py
import numpy as np

from h5vc.errors import ArrayMismatchError
from h5vc.store import layout

__all__ = ["to_version"]

DIMENSIONS_ATTR = "_ARRAY_DIMENSIONS"
SCALAR_ATTR = "_h5vc_scalar"


@contextlib.contextmanager
def _versioned(target: Any, root: str) -> Iterator[Any]:
    from h5vc.api import VersionedHDF5File, open

    if isinstance(target, VersionedHDF5File):
        yield target
        return
    if isinstance(target, h5py.Group):
        yield VersionedHDF5File(target)
        return
    if not isinstance(target, str | os.PathLike):
        raise TypeError(
            f"Expected a path, an h5py file or group, or a VersionedHDF5File to write to. "
            f"Got {type(target).__name__} instead."
        )
    if root == "/":
        with open(target, "a") as vf:
            yield vf
        return
    with h5py.File(target, "a") as f:
        vf = VersionedHDF5File(f.require_group(root))
        try:
            yield vf
        finally:
            vf.close()


def _encode(ds: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    from xarray.conventions import cf_encoder, encode_dataset_coordinates

    variables, attrs = encode_dataset_coordinates(ds)
    return cf_encoder(variables, attrs)


def _values(var: Any) -> Any:
    """The variable's data: a Dask array as is, anything else as numpy (text as bytes)."""
    data = var.data
    if is_dask(data):
        return data
    data = np.asarray(data)
    if data.dtype.kind in "UO":
        out = np.empty(data.shape, dtype=object)
        out.ravel()[:] = [v.encode("utf-8") if isinstance(v, str) else v for v in data.ravel()]
        return out
    return data


def is_dask(value: Any) -> bool:
    from h5vc.blockwrite import is_dask_array

    return is_dask_array(value)


def _storage_dtype(data: Any) -> np.dtype:
    dtype = np.dtype(data.dtype)
    return h5py.string_dtype() if dtype.kind in "UO" else dtype


def _set_attrs(target: Any, attrs: dict[str, Any]) -> None:
    for key in list(target.attrs):
        if key not in attrs:
            del target.attrs[key]
    for key, value in attrs.items():
        target.attrs[key] = value


def _variable_attrs(var: Any) -> dict[str, Any]:
    attrs = dict(var.attrs)
    if var.ndim == 0:
        attrs[SCALAR_ATTR] = np.int8(1)
    else:
        attrs[DIMENSIONS_ATTR] = [str(d) for d in var.dims]
    return attrs


def _write_data(dataset: Any, data: Any, region: tuple[slice, ...] | None = None) -> None:
    if is_dask(data):
        from h5vc.blockwrite import store

        store(dataset, data, ... if region is None else region)
    else:
        dataset[... if region is None else region] = data


def _create(group: Any, name: str, var: Any, data: Any, options: dict[str, Any]) -> None:
    shape = (1,) if var.ndim == 0 else tuple(var.shape)
    kwargs = {k: v for k, v in options.items() if v is not None and k != "chunks"}
    # The chunks of the dataset this one replaces (the file stores one chunk shape
    # per dataset path), else those the variable was read with, else h5vc's choice.
    chunks = options.get("chunks") or var.encoding.get("chunksizes")
    if chunks is not None and len(chunks) == len(shape):
        kwargs["chunks"] = tuple(int(c) for c in chunks)
    if not is_dask(data) and var.ndim:
        dataset = group.create_dataset(name, data=data, dtype=_storage_dtype(data), **kwargs)
    else:
        dataset = group.create_dataset(name, shape=shape, dtype=_storage_dtype(data), **kwargs)
        _write_data(dataset, data.reshape(shape) if var.ndim == 0 else data)
    _set_attrs(dataset, _variable_attrs(var))


def _append(group: Any, name: str, var: Any, data: Any, append_dim: str) -> None:
    dataset = group[name]
    axis = var.dims.index(append_dim)
    expected = tuple(n for i, n in enumerate(dataset.shape) if i != axis)
    got = tuple(n for i, n in enumerate(var.shape) if i != axis)
    if expected != got:
        raise ArrayMismatchError(
            f"Cannot append variable {name!r} along {append_dim!r}: its other dimensions "
            f"have sizes {got}, the stored ones {expected}."
        )
    old = dataset.shape[axis]
    dataset.resize(old + var.shape[axis], axis=axis)
    region = tuple(
        slice(old, old + n) if i == axis else slice(0, n) for i, n in enumerate(var.shape)
    )
    _write_data(dataset, data, region)
    _set_attrs(dataset, _variable_attrs(var))


def _check_append(ds: Any, group: Any, append_dim: str) -> None:
    if append_dim not in ds.dims:
        raise ArrayMismatchError(
            f"append_dim {append_dim!r} is not a dimension of the Dataset "
            f"(dimensions: {sorted(map(str, ds.dims))})."
        )
    missing = [
        str(name)
        for name, var in ds.variables.items()
        if append_dim in var.dims and str(name) not in group
    ]
    if missing:
        raise ArrayMismatchError(
            f"Cannot append along {append_dim!r}: variables {missing} are not in the "
            f"version being appended to (it has {sorted(group.keys())})."
        )


def _keep_root_attrs(vf: Any, staged: Any, prev_version: str | None) -> None:
    """A version's root attributes belong to it alone: writing a subgroup keeps
    those of the version it starts from."""
    if prev_version in ("", layout.FIRST_VERSION):
        return  # an empty version
    base = vf.current_version if prev_version is None else vf.resolve(prev_version)
    if base in vf:
        for key, value in vf[base].attrs.items():
            if key not in layout.VERSION_ATTRS:  # the version's own metadata is new
                staged.attrs[key] = value


def to_version(
    ds: Any,
    target: Any,
    version: str,
    *,
    group: str = "/",
    prev_version: str | None = None,
    append_dim: str | None = None,
    root: str = "/",
    compression: Any = None,
    compression_opts: Any = None,
    message: str | None = None,
    author: str | None = None,
    timestamp: Any = None,
    branch: str | None = None,
) -> None:
    """Write the Dataset ``ds`` as the new version ``version`` of ``target``.

    ``target`` is a path (opened with mode ``"a"``), an h5py file or group, or a
    :class:`~h5vc.VersionedHDF5File`. The version starts from ``prev_version`` (a
    version, tag or branch; default: the current version), or with ``branch`` from
    that branch's head, which then moves to it; the group ``group`` then holds exactly the
    variables of ``ds`` (CF-encoded as netCDF writers do, dimension names in
    ``_ARRAY_DIMENSIONS``) and its attributes; other groups are kept.
    ``xr.open_dataset(target, engine="h5vc", version=version, group=group)`` gives
    ``ds`` back. Unchanged chunks are shared with earlier versions.

    With ``append_dim``, ``ds`` holds only what is appended: variables along
    ``append_dim`` grow by ``ds``'s length there, so a version costs what was
    appended; the other variables of ``ds`` replace the stored ones.

    Dask-backed variables are written block by block (see :func:`h5vc.dask.store`).
    """
    import xarray as xr

    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"Expected an xarray.Dataset. Got {type(ds).__name__} instead.")
    variables, attrs = _encode(ds)
    path = group.strip("/")
    options = {"compression": compression, "compression_opts": compression_opts}
    with (
        _versioned(target, root) as vf,
        vf.stage_version(
            version,
            prev_version,
            timestamp=timestamp,
            message=message,
            author=author,
            branch=branch,
        ) as staged,
    ):
        if path:
            _keep_root_attrs(vf, staged, prev_version if branch is None else branch)
        node = staged.require_group(path) if path else staged
        _write_group(node, ds, variables, append_dim, options)
        _set_attrs(node, dict(attrs))


def _write_group(
    node: Any,
    ds: Any,
    variables: dict[str, Any],
    append_dim: str | None,
    options: dict[str, Any],
) -> None:
    """Make the staged group ``node`` hold exactly ``variables`` (or append them)."""
    if append_dim is not None:
        _check_append(ds, node, append_dim)
    previous = {}
    for name in list(node.keys()):
        if hasattr(node[name], "keys"):
            continue  # a subgroup: another Dataset of the tree
        previous[name] = node[name].chunks
        if append_dim is None or name not in variables:
            del node[name]
    for name, var in variables.items():
        data = _values(var)
        if append_dim is not None and append_dim in var.dims:
            _append(node, str(name), var, data, append_dim)
        else:
            if str(name) in node:
                del node[str(name)]
            chunks = previous.get(str(name))
            _create(node, str(name), var, data, {**options, "chunks": chunks})
