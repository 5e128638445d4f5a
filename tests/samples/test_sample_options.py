"""Compression options: the seed's table of valid values, defaults and HDF5 filters."""

from __future__ import annotations

from typing import Any

import h5py
import hdf5plugin
import numpy as np
import pytest

from h5vc.errors import InvalidOptionError
from h5vc.samples import COMPLIBS, default_compression, parse_compression
from h5vc.samples.options import BLOSC_COMPLIBS

VALID = [
    *(
        {"complib": lib, "complevel": level, "shuffle": shuffle}
        for lib in BLOSC_COMPLIBS
        for level in (0, 5, 9)
        for shuffle in (None, "none", "byte", "bit")
    ),
    *(
        {"complib": "lzf", "complevel": level, "shuffle": shuffle}
        for level in (False, None, "none")
        for shuffle in (False, None, "none", True, "byte")
    ),
    *(
        {"complib": "gzip", "complevel": level, "shuffle": shuffle}
        for level in (0, 4, 9)
        for shuffle in (False, None, "none", True, "byte")
    ),
]

INVALID = [
    ({"complib": "blosc:snappy", "complevel": 5, "shuffle": "byte"}, "complib", COMPLIBS),
    ({"complib": "zstd", "complevel": 5, "shuffle": "byte"}, "complib", COMPLIBS),
    ({"complib": "blosc:lz4", "complevel": 10, "shuffle": "byte"}, "complevel", range(10)),
    ({"complib": "blosc:lz4", "complevel": -1, "shuffle": "byte"}, "complevel", range(10)),
    ({"complib": "blosc:lz4", "complevel": True, "shuffle": "byte"}, "complevel", range(10)),
    ({"complib": "blosc:lz4", "complevel": 5.0, "shuffle": "byte"}, "complevel", range(10)),
    ({"complib": "blosc:lz4", "complevel": 5, "shuffle": True}, "shuffle", ["byte", "bit"]),
    ({"complib": "blosc:lz4", "complevel": 5, "shuffle": "shuffle"}, "shuffle", ["byte"]),
    ({"complib": "lzf", "complevel": 0, "shuffle": None}, "complevel", ["'none'"]),
    ({"complib": "lzf", "complevel": 5, "shuffle": None}, "complevel", ["'none'"]),
    ({"complib": "lzf", "complevel": None, "shuffle": "bit"}, "shuffle", ["'byte'"]),
    ({"complib": "lzf", "complevel": None, "shuffle": 1}, "shuffle", ["True"]),
    ({"complib": "gzip", "complevel": None, "shuffle": True}, "complevel", range(10)),
    ({"complib": "gzip", "complevel": 4, "shuffle": "bit"}, "shuffle", ["'byte'"]),
]


def _store(tmp_path: Any, options: dict[str, Any], name: str = "x") -> h5py.Dataset:
    compression = parse_compression(options, "01")
    h5file = h5py.File(tmp_path / f"{name}.h5", "w")
    data = np.tile(np.arange(64, dtype=np.uint16), (64, 1))
    return h5file.create_dataset("d", data=data, chunks=data.shape, **compression.filter_kwargs())


@pytest.mark.parametrize("options", VALID, ids=str)
def test_valid_options_are_accepted(options: dict[str, Any]) -> None:
    compression = parse_compression(options, "01")
    assert compression.to_dict() == options
    assert parse_compression({**options, "backend": "00"}, "00") == compression


@pytest.mark.parametrize(("options", "key", "listed"), INVALID, ids=str)
def test_invalid_option_lists_valid_values(options: dict[str, Any], key: str, listed: Any) -> None:
    with pytest.raises(InvalidOptionError) as info:
        parse_compression(options, "01")
    message = str(info.value)
    assert repr(key) in message
    assert "Expected" in message and "Got" in message
    for value in listed:
        assert (value if isinstance(value, str) else str(value)) in message


@pytest.mark.parametrize(
    "options",
    [
        {"complib": "lzf"},
        {"complib": "gzip", "complevel": 4, "shuffle": True, "level": 3},
        {"complib": "gzip", "complevel": 4, "shuffle": True, "backend": "00"},
        ["complib", "gzip"],
    ],
    ids=str,
)
def test_malformed_option_dicts_raise(options: Any) -> None:
    with pytest.raises(InvalidOptionError, match="Expected"):
        parse_compression(options, "01")


@pytest.mark.parametrize(
    ("options", "filter_id"),
    [
        ({"complib": "blosc:zstd", "complevel": 3, "shuffle": "bit"}, hdf5plugin.BLOSC_ID),
        ({"complib": "lzf", "complevel": None, "shuffle": True}, h5py.h5z.FILTER_LZF),
        ({"complib": "gzip", "complevel": 7, "shuffle": "byte"}, h5py.h5z.FILTER_DEFLATE),
    ],
    ids=str,
)
def test_options_become_hdf5_filters(
    tmp_path: Any, options: dict[str, Any], filter_id: int
) -> None:
    dataset = _store(tmp_path, options)
    plist = dataset.id.get_create_plist()
    filters = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
    assert filter_id in filters
    shuffle = options["shuffle"] in (True, "byte") and options["complib"] in ("lzf", "gzip")
    assert (h5py.h5z.FILTER_SHUFFLE in filters) == shuffle
    if options["complib"] == "gzip":
        assert dataset.compression_opts == 7
    assert dataset.id.get_storage_size() < dataset.nbytes
    np.testing.assert_array_equal(dataset[0], np.arange(64))


@pytest.mark.parametrize(
    ("dtype", "shuffle"),
    [("bool", "bit"), ("uint8", "none"), ("int8", "none"), ("float32", "byte"), ("int64", "byte")],
)
def test_default_compression_depends_on_dtype(dtype: str, shuffle: str) -> None:
    compression = default_compression(np.dtype(dtype), (224, 224))
    assert compression.complib == "blosc:lz4"
    assert compression.shuffle == shuffle
    assert parse_compression(compression.to_dict(), "01") == compression
