"""Compression options of the sample backends: validation, defaults, HDF5 filter arguments.

The accepted options are a dict with the keys ``complib``, ``complevel`` and ``shuffle``
(and optionally ``backend``, which must then name the store's backend):

============================  ===============================  ==================================
``complib``                   ``complevel``                    ``shuffle``
============================  ===============================  ==================================
``'blosc:blosclz'``,          int in [0, 9]                    ``None``, ``'none'``, ``'byte'``,
``'blosc:lz4'``,                                               ``'bit'``
``'blosc:lz4hc'``,
``'blosc:zlib'``,
``'blosc:zstd'``
``'lzf'``                     ``False``, ``None``, ``'none'``  ``False``, ``None``, ``'none'``,
                                                               ``True``, ``'byte'``
``'gzip'``                    int in [0, 9]                    ``False``, ``None``, ``'none'``,
                                                               ``True``, ``'byte'``
============================  ===============================  ==================================

Complevel 0 means "no compression", 9 "most compression". Values are compared by type as
well as by value: ``True`` is not the int 1 and ``0`` is not ``False``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import hdf5plugin
import numpy as np

from h5vc.errors import InvalidOptionError

__all__ = [
    "BLOSC_COMPLIBS",
    "COMPLIBS",
    "Compression",
    "default_compression",
    "parse_compression",
]

BLOSC_COMPLIBS = ("blosc:blosclz", "blosc:lz4", "blosc:lz4hc", "blosc:zlib", "blosc:zstd")
COMPLIBS = (*BLOSC_COMPLIBS, "lzf", "gzip")
_KEYS = ("complib", "complevel", "shuffle")
_LEVELS = tuple(range(10))
_BLOSC_SHUFFLES: tuple[Any, ...] = (None, "none", "byte", "bit")
_FILTER_SHUFFLES: tuple[Any, ...] = (False, None, "none", True, "byte")
_LZF_LEVELS: tuple[Any, ...] = (False, None, "none")
_BLOSC_SHUFFLE_CODES = {
    None: hdf5plugin.Blosc.NOSHUFFLE,
    "none": hdf5plugin.Blosc.NOSHUFFLE,
    "byte": hdf5plugin.Blosc.SHUFFLE,
    "bit": hdf5plugin.Blosc.BITSHUFFLE,
}


def _same(value: Any, candidate: Any) -> bool:
    """Equality that also compares types, so that 0 != False and 1 != True."""
    return type(value) is type(candidate) and value == candidate


def _is_one_of(value: Any, valid: tuple[Any, ...]) -> bool:
    return any(_same(value, candidate) for candidate in valid)


@dataclass(frozen=True, slots=True, kw_only=True)
class Compression:
    """Validated compression options; build with :func:`parse_compression`."""

    complib: str
    complevel: Any
    shuffle: Any

    def to_dict(self) -> dict[str, Any]:
        return {"complib": self.complib, "complevel": self.complevel, "shuffle": self.shuffle}

    def filter_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``h5py.Group.create_dataset`` that apply these options."""
        if self.complib in BLOSC_COMPLIBS:
            cname: Any = self.complib.split(":", 1)[1]
            blosc = hdf5plugin.Blosc(
                cname=cname,
                clevel=self.complevel,
                shuffle=_BLOSC_SHUFFLE_CODES[self.shuffle],
            )
            return dict(blosc)
        shuffle = _same(self.shuffle, True) or _same(self.shuffle, "byte")
        if self.complib == "lzf":
            return {"compression": "lzf", "shuffle": shuffle}
        return {"compression": "gzip", "compression_opts": self.complevel, "shuffle": shuffle}


def _invalid(name: str, key: str, valid: tuple[Any, ...], got: Any) -> InvalidOptionError:
    return InvalidOptionError(
        f"Expected {key!r} of compression {name!r} to be one of {list(valid)}. Got {got!r} instead."
    )


def parse_compression(options: Mapping[str, Any], backend: str) -> Compression:
    """Validate user compression ``options`` for a store of ``backend``.

    Raises InvalidOptionError naming the offending key and listing its valid values.
    """
    if not isinstance(options, Mapping):
        raise InvalidOptionError(
            f"Expected compression options as a dict with keys {list(_KEYS)}. "
            f"Got {type(options).__name__} instead."
        )
    unknown = sorted(set(options) - {*_KEYS, "backend"}, key=str)
    missing = [key for key in _KEYS if key not in options]
    if unknown or missing:
        raise InvalidOptionError(
            f"Expected compression options with keys {list(_KEYS)} (and optionally 'backend'). "
            f"Got unknown keys {unknown} and missing keys {missing} instead."
        )
    if "backend" in options and not _same(options["backend"], backend):
        raise InvalidOptionError(
            f"Expected compression option 'backend' to be {backend!r}, the store's backend. "
            f"Got {options['backend']!r} instead."
        )
    complib, complevel, shuffle = (options[key] for key in _KEYS)
    if not _is_one_of(complib, COMPLIBS):
        raise _invalid("options", "complib", COMPLIBS, complib)
    if complib in BLOSC_COMPLIBS:
        valid_levels, valid_shuffles = _LEVELS, _BLOSC_SHUFFLES
    elif complib == "lzf":
        valid_levels, valid_shuffles = _LZF_LEVELS, _FILTER_SHUFFLES
    else:
        valid_levels, valid_shuffles = _LEVELS, _FILTER_SHUFFLES
    if not _is_one_of(complevel, valid_levels):
        raise _invalid(complib, "complevel", valid_levels, complevel)
    if not _is_one_of(shuffle, valid_shuffles):
        raise _invalid(complib, "shuffle", valid_shuffles, shuffle)
    return Compression(complib=complib, complevel=complevel, shuffle=shuffle)


def default_compression(dtype: np.dtype, shape: tuple[int, ...]) -> Compression:
    """The compression used when a store is created without options.

    Blosc with LZ4 at level 5: fast enough that reads are bound by HDF5, not by
    decompression. Booleans get the bit shuffle (it packs the one meaningful bit of each
    byte), wider elements the byte shuffle (it groups the high bytes, which are mostly
    equal), one-byte elements no shuffle (byte shuffle is a no-op for them). The shape
    does not change the choice: each sample is compressed as one block either way.
    """
    del shape
    if dtype.kind == "b":
        shuffle = "bit"
    elif dtype.itemsize == 1:
        shuffle = "none"
    else:
        shuffle = "byte"
    return Compression(complib="blosc:lz4", complevel=5, shuffle=shuffle)
