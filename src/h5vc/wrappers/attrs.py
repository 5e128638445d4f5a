"""Attributes of staged and committed objects.

Committed attributes are a read-only view that hides the bookkeeping attributes
of the layout (``prev_version``, ``raw_data``, ...).  Staged attributes are an
in-memory dict seeded from the previous version and written at commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import h5py
import numpy as np

from h5vc.errors import ReadOnlyError
from h5vc.store.attributes import attribute_names, read_attributes
from h5vc.wrappers.views import NamesView

__all__ = ["CommittedAttributes", "StagedAttributes"]


class CommittedAttributes(Mapping[str, Any]):
    """Read-only attributes of an object in a committed version.

    ``live``, if given, makes the context of one read: it yields the object's
    attributes as they are in the file then (the object may have been opened anew);
    ``attrs`` is then unused and may be None.
    """

    def __init__(
        self,
        attrs: h5py.AttributeManager | None,
        hidden: frozenset[str],
        owner: str,
        live: Callable[[], AbstractContextManager[h5py.AttributeManager]] | None = None,
    ):
        self._attrs = attrs
        self._hidden = hidden
        self._owner = owner
        self._live = live

    def _read(self) -> AbstractContextManager[h5py.AttributeManager]:
        if self._live is not None:
            return self._live()
        assert self._attrs is not None
        return nullcontext(self._attrs)

    def __getitem__(self, key: str) -> Any:
        if key in self._hidden:
            raise KeyError(f"Can't open attribute (attribute {key!r} doesn't exist)")
        with self._read() as attrs:
            return attrs[key]

    def __iter__(self) -> Iterator[str]:
        with self._read() as attrs:
            names = [key for key in attribute_names(attrs) if key not in self._hidden]
        return iter(names)

    def keys(self) -> NamesView:
        return NamesView(self)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, key: object) -> bool:
        if key in self._hidden:
            return False
        with self._read() as attrs:
            return key in attrs

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise ReadOnlyError(
            f"Attributes of {self._owner} belong to a committed version and are read-only; "
            f"stage a new version to change them."
        )

    __setitem__ = __delitem__ = create = modify = _read_only

    def __repr__(self) -> str:
        return f"<Attributes of committed {self._owner}: {dict(self)!r}>"


class StagedAttributes(MutableMapping[str, Any]):
    """Attributes of a staged object; ``modified`` tells whether they changed."""

    def __init__(
        self,
        base: h5py.AttributeManager | Callable[[], dict[str, Any]] | None,
        hidden: frozenset[str] = frozenset(),
    ):
        """``base`` holds the attributes to start from: an object's attributes (read
        when first needed, but for ``hidden``), a function giving them, or None (none)."""
        self._base = base
        self._hidden = hidden
        self._values: dict[str, Any] | None = None if base is not None else {}
        self.modified = False
        self.read_only_reason: str | None = None

    def _data(self) -> dict[str, Any]:
        if self._values is None:
            assert self._base is not None
            if callable(self._base):
                self._values = self._base()
            else:
                self._values = read_attributes(self._base, self._hidden)
        return self._values

    def _check_writable(self, key: str) -> None:
        if self.read_only_reason is not None:
            raise ReadOnlyError(self.read_only_reason)
        if not isinstance(key, str):
            raise TypeError(f"Expected a str attribute name. Got {type(key).__name__} instead.")
        if key in self._hidden:
            raise ValueError(
                f"Expected an attribute name other than {sorted(self._hidden)}, which the "
                f"versioned layout reserves. Got {key!r}."
            )

    def __getitem__(self, key: str) -> Any:
        try:
            return self._data()[key]
        except KeyError:
            raise KeyError(f"Can't open attribute (attribute {key!r} doesn't exist)") from None

    def __setitem__(self, key: str, value: Any) -> None:
        self._check_writable(key)
        self._data()[key] = _normalize(value)
        self.modified = True

    def __delitem__(self, key: str) -> None:
        self._check_writable(key)
        data = self._data()
        if key not in data:
            raise KeyError(f"Can't delete attribute (attribute {key!r} doesn't exist)")
        del data[key]
        self.modified = True

    def create(self, name: str, data: Any, shape: Any = None, dtype: Any = None) -> None:
        value = np.asarray(data, dtype=dtype)
        if shape is not None:
            value = value.reshape(shape)
        self[name] = value

    def modify(self, name: str, value: Any) -> None:
        self[name] = value

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._data()))

    def keys(self) -> NamesView:
        return NamesView(self)

    def __len__(self) -> int:
        return len(self._data())

    def __contains__(self, key: object) -> bool:
        return key in self._data()

    def to_dict(self) -> dict[str, Any]:
        return dict(self._data())

    def __repr__(self) -> str:
        return f"<Staged attributes: {self._data()!r}>"


def _normalize(value: Any) -> Any:
    """Store what HDF5 would give back: numpy scalars/arrays, str for text.

    Values HDF5 cannot store raise ``TypeError`` here, when they are set (as in
    h5py), rather than when the version is committed.
    """
    if isinstance(value, str | bytes):
        return value
    if isinstance(value, np.ndarray | np.generic):
        result = value
    else:
        array = np.asarray(value)
        if array.dtype.kind == "U":
            # HDF5 has no fixed-width unicode type: like h5py, store text as
            # variable-length UTF-8 strings (read back as an object array of str).
            return np.array(array.tolist(), dtype=h5py.string_dtype())
        array = _check_storable(array)
        return array[()] if array.shape == () else array
    return _check_storable(result)


def _check_storable(value: Any) -> Any:
    dtype = value.dtype
    if dtype.kind == "O" and h5py.check_string_dtype(dtype) is None:
        items = np.asarray(value).ravel().tolist()
        if items and all(isinstance(item, str) for item in items):
            return np.array(value.tolist(), dtype=h5py.string_dtype())
        if items and all(isinstance(item, bytes) for item in items):
            return np.array(value.tolist(), dtype=h5py.string_dtype("ascii"))
    try:
        h5py.h5t.py_create(dtype, logical=True)
    except TypeError as err:
        raise TypeError(
            f"Expected an attribute value HDF5 can store (numbers, text, arrays of them). "
            f"Got {type(value).__name__} of dtype {dtype} instead."
        ) from err
    return value
