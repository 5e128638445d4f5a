"""Attributes of the layout written with HDF5's own calls, as h5py would write them.

h5py's ``obj.attrs[name] = value`` works out the value's HDF5 type and dataspace on
every call, and replaces an existing attribute through a temporary one: about three
times the cost of HDF5's work. A commit writes half a dozen attributes of a few kinds
(names and timestamps as strings, counts, the ``committed`` flag, chunk shapes); for
those the HDF5 type and dataspace are made once and the attribute is written with
two calls. Every other value is left to h5py (:func:`write` returns False). A new
attribute, and a string written over one, is written with HDF5's calls alone
(:func:`~h5vc.hdf5.clib.short_writes`: no h5py object, a string given to HDF5 as a
C string) where the library h5py runs on is found.

The attributes are exactly h5py's: a ``str`` is a scalar variable-length UTF-8
string, a numpy ``int64`` a scalar 64-bit little-endian integer, a numpy ``bool_``
h5py's enum of ``FALSE``/``TRUE``, a 1-d ``int64`` array a simple dataspace of its
length (tests/store/test_fastattrs.py compares them with h5py's).
"""

from __future__ import annotations

import ctypes
from typing import Any

import h5py
import numpy as np
from h5py import h5a, h5s, h5t

from h5vc.hdf5.clib import short_writes, string_buffer

__all__ = ["read_str", "write", "write_str_over"]

_STR = h5py.string_dtype()
_I64 = np.dtype("<i8")
_kinds: dict[str, tuple[h5t.TypeID, h5t.TypeID, h5s.SpaceID]] = {}


def _kind(key: str) -> tuple[h5t.TypeID, h5t.TypeID, h5s.SpaceID]:
    """The HDF5 types in the file and in memory (h5py's for a Python object) and the
    scalar dataspace of a kind of value."""
    found = _kinds.get(key)
    if found is None:
        dtype = {"str": _STR, "int64": _I64, "bool": np.dtype(np.bool_)}[key]
        found = _kinds[key] = (
            h5t.py_create(dtype, logical=True),
            h5t.py_create(dtype),
            h5s.create(h5s.SCALAR),
        )
    return found


def write(obj: h5py.HLObject, name: str, value: Any, *, new: bool = False) -> bool:
    """Write attribute ``name`` of ``obj`` (replacing one of that name) if ``value`` is
    of a kind written here; False (nothing written) otherwise. ``new``: ``obj`` is
    known to have no attribute ``name`` (an object just created), so none is looked
    for."""
    data: np.ndarray | None = None
    if type(value) is str:
        tid, mtype, space = _kind("str")
    elif type(value) is np.int64:
        tid, mtype, space = _kind("int64")
        data = np.array(value, dtype=_I64)
    elif type(value) is np.bool_:
        tid, mtype, space = _kind("bool")
        data = np.array(value)
    elif (
        type(value) is np.ndarray
        and value.ndim == 1
        and value.dtype == _I64
        and 0 < len(value) < 2**16
    ):
        tid, mtype, _ = _kind("int64")
        space = h5s.create_simple(value.shape)
        data = np.ascontiguousarray(value)
    else:
        return False
    key = name.encode()
    if not new and h5a.exists(obj.id, key):
        if _rewrite(obj, key, tid, _data(value, data), mtype):
            return True
        h5a.delete(obj.id, key)
    calls = short_writes()
    if calls is not None:
        if data is not None:
            calls.create_attribute(obj.id.id, key, tid.id, space.id, mtype.id, data.ctypes.data)
            return True
        text = string_buffer(value)
        if text is not None:
            address = ctypes.addressof(text)
            calls.create_attribute(obj.id.id, key, tid.id, space.id, calls.utf8, address)
            return True
    attr = h5a.create(obj.id, key, tid, space)
    try:
        attr.write(_data(value, data), mtype=mtype)
    except BaseException:
        attr.close()
        h5a.delete(obj.id, key)
        raise
    attr.close()
    return True


def _data(value: Any, data: np.ndarray | None) -> np.ndarray:
    """The array h5py writes for ``value`` (``data``, or a string's object array)."""
    return np.array(value, dtype=_STR) if data is None else data


def write_str_over(obj: h5py.HLObject, name: str, value: str) -> None:
    """Write ``value`` over the attribute ``name`` of ``obj``, known to be a scalar
    variable-length UTF-8 string (:func:`write` wrote it for a ``str`` in this state
    of the file): three HDF5 calls, where :func:`write` first makes sure the attribute
    exists and is of that type and dataspace, twice the work for a short value."""
    calls = short_writes()
    text = None if calls is None else string_buffer(value)
    if calls is not None and text is not None:
        calls.write_attribute(obj.id.id, name.encode(), calls.utf8, ctypes.addressof(text))
        return
    _, mtype, _ = _kind("str")
    attr = h5a.open(obj.id, name.encode())
    try:
        attr.write(np.array(value, dtype=_STR), mtype=mtype)
    finally:
        attr.close()


def _rewrite(
    obj: h5py.HLObject, key: bytes, tid: h5t.TypeID, data: np.ndarray, mtype: h5t.TypeID
) -> bool:
    """Write ``data`` over the attribute ``key`` in place if it has the same type and
    the same dataspace (a scalar, or a simple one of ``data``'s shape): True when done.

    The attribute keeps its place in the object header instead of being deleted and
    made anew.  For a string (variable-length: the attribute holds a reference to the
    string in the file's global heap) HDF5 frees the old string when it writes a new
    one (not an empty one) over it, where deleting the attribute leaves the old string
    in the heap: every ref moved or ``current_version`` set grew the file by about 50
    bytes.
    """
    attr = h5a.open(obj.id, key)
    try:
        space = attr.get_space()
        if data.ndim == 0:
            if space.get_simple_extent_type() != h5s.SCALAR:
                return False
        elif (
            space.get_simple_extent_type() != h5s.SIMPLE
            or space.get_simple_extent_dims() != data.shape
        ):
            return False
        if attr.get_type() != tid:
            return False
        attr.write(data, mtype=mtype)
        return True
    finally:
        attr.close()


def read_str(obj: h5py.HLObject, name: str, *, exact: bool = False) -> str | None:
    """The scalar variable-length string attribute ``name`` of ``obj`` read with two
    HDF5 calls; None when ``obj`` has no such attribute or it is of another kind
    (then read it through h5py). ``exact``: None too unless it is stored exactly as
    :func:`write` stores a ``str`` (UTF-8, the type h5py writes)."""
    key = name.encode()
    try:
        attr = h5a.open(obj.id, key)
    except KeyError:
        return None
    try:
        tid = attr.get_type()
        file_type, mtype, _ = _kind("str")
        if (
            tid != file_type if exact else not _variable_str(tid)
        ) or attr.get_space().get_simple_extent_type() != h5s.SCALAR:
            return None
        out = np.empty((), dtype=_STR)
        attr.read(out, mtype=mtype)
    finally:
        attr.close()
    value = out[()]
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def _variable_str(tid: h5t.TypeID) -> bool:
    return isinstance(tid, h5t.TypeStringID) and tid.is_variable_str()
