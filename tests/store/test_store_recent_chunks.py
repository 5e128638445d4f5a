"""The commit path's shortcuts: what a commit skips must not change what is stored.

Appends (a short last chunk rewritten at every commit), fill chunks of shapes never
seen before, chunks kept in memory from the last commit and read back by the next.
"""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from store_helpers import assert_same_array

from h5vc import VersionedHDF5File


def largest_index(f: h5py.File, path: str) -> int:
    return int(f[f"_version_data/{path}/hash_table"].attrs["largest_index"])


@pytest.mark.parametrize("fillvalue", [0.0, 7.5, np.nan])
def test_short_chunks_equal_to_fill_are_not_stored(
    vf: VersionedHDF5File, h5file: h5py.File, fillvalue: float
) -> None:
    """Every short last chunk has a shape of its own: all fill, it is left unstored;
    starting with the fill value but not all fill, or not starting with it, it is
    stored."""
    with vf.stage_version("v0") as g:
        g.create_dataset("x", data=np.arange(8.0) + 100, chunks=(8,), fillvalue=fillvalue)
    assert largest_index(h5file, "x") == 1
    with vf.stage_version("v1") as g:  # a short chunk of fill values: unstored
        g["x"].resize((11,))
    assert largest_index(h5file, "x") == 1
    with vf.stage_version("v2") as g:  # first element the fill value, the rest not
        g["x"].resize((13,))
        g["x"][8:] = [fillvalue, fillvalue, fillvalue, 1.0, 2.0]
    assert largest_index(h5file, "x") == 2
    with vf.stage_version("v3") as g:  # first element not the fill value
        g["x"].resize((14,))
        g["x"][8:] = [3.0, fillvalue, fillvalue, fillvalue, fillvalue, fillvalue]
    assert largest_index(h5file, "x") == 3
    base = np.arange(8.0) + 100
    assert_same_array(vf["v1"]["x"][()], np.concatenate([base, [fillvalue] * 3]))
    assert_same_array(vf["v2"]["x"][()], np.concatenate([base, [fillvalue] * 3, [1.0, 2.0]]))
    assert_same_array(vf["v3"]["x"][()], np.concatenate([base, [3.0], [fillvalue] * 5]))
    assert_same_array(h5file["_version_data/versions/v3/x"][()], vf["v3"]["x"][()])


def test_fill_chunks_of_structured_and_string_dtypes(
    vf: VersionedHDF5File, h5file: h5py.File
) -> None:
    """Fill chunks are recognised for compound and variable-length string types."""
    dtype = np.dtype([("a", "i4"), ("b", "f8")])
    strings = h5py.string_dtype()
    with vf.stage_version("v0") as g:
        g.create_dataset("c", data=np.zeros(4, dtype=dtype), chunks=(4,))
        g.create_dataset("s", data=np.array([b"", b""], dtype=object), dtype=strings, chunks=(4,))
    assert largest_index(h5file, "c") == 0
    with vf.stage_version("v1") as g:
        g["c"].resize((6,))
        g["c"][5] = (1, 2.0)
        g["s"][1] = b"x"
    assert largest_index(h5file, "c") == 1
    assert largest_index(h5file, "s") == 1
    assert vf["v1"]["c"][5].tolist() == (1, 2.0)
    assert vf["v1"]["s"][1] == b"x"
