"""h5py's five filter keywords, one place: what they mean in HDF5 and back.

``create_dataset`` takes a dataset's filter pipeline as five keywords:
``compression``, ``compression_opts``, ``shuffle``, ``fletcher32`` and
``scaleoffset`` (:data:`KEYWORDS`, unset as in :data:`UNSET`). :func:`check`
builds the HDF5 pipeline they describe (refusing what HDF5 would refuse), and
:func:`keywords_of` reads a stored dataset's pipeline back as the same keywords,
so a dataset written again or rewritten keeps its filters.
"""

from __future__ import annotations

from typing import Any

import h5py
import numpy as np

__all__ = ["KEYWORDS", "UNSET", "check", "given", "keywords_of"]

KEYWORDS = ("compression", "compression_opts", "shuffle", "fletcher32", "scaleoffset")
#: What each keyword reads as on a dataset created without it.
UNSET: dict[str, Any] = {
    "compression": None,
    "compression_opts": None,
    "shuffle": False,
    "fletcher32": False,
    "scaleoffset": None,
}
#: Compression filters known by name to h5py (others are given by their filter id).
_NAMES = {h5py.h5z.FILTER_DEFLATE: "gzip", 32000: "lzf", h5py.h5z.FILTER_SZIP: "szip"}


def given(values: tuple[Any, ...]) -> dict[str, Any]:
    """The keywords set in ``values`` (one value per keyword of :data:`KEYWORDS`, in
    order): those neither None nor False."""
    return {k: v for k, v in zip(KEYWORDS, values, strict=True) if v is not None and v is not False}


def check(chunks: tuple[int, ...], dtype: np.dtype, filters: dict[str, Any]) -> None:
    """Build the pipeline ``filters`` describe for chunks ``chunks`` of ``dtype``
    (growable along the first axis, as every chunk store is); raises h5py's
    ValueError or TypeError for options HDF5 refuses."""
    plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    h5py.filters.fill_dcpl(
        plist, (0, *chunks[1:]), dtype, tuple(chunks),
        filters.get("compression"), filters.get("compression_opts"),
        filters.get("shuffle"), filters.get("fletcher32"),
        (None, *chunks[1:]), filters.get("scaleoffset"), None,
    )  # fmt: skip


def keywords_of(dataset: h5py.Dataset) -> dict[str, Any]:
    """The filter pipeline of ``dataset`` as ``create_dataset`` keywords (those set)."""
    dcpl = dataset.id.get_create_plist()
    filters: dict[str, Any] = {}
    for i in range(dcpl.get_nfilters()):
        code, _flags, values, _name = dcpl.get_filter(i)
        if code == h5py.h5z.FILTER_SHUFFLE:
            filters["shuffle"] = True
        elif code == h5py.h5z.FILTER_FLETCHER32:
            filters["fletcher32"] = True
        elif code == h5py.h5z.FILTER_SCALEOFFSET:
            filters["scaleoffset"] = dataset.scaleoffset
        elif code in _NAMES:
            filters["compression"] = _NAMES[code]
            if code == h5py.h5z.FILTER_DEFLATE:
                filters["compression_opts"] = int(values[0])
        else:
            filters["compression"] = int(code)
            filters["compression_opts"] = tuple(int(v) for v in values)
    return filters
