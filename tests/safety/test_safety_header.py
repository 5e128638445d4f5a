"""A flipped byte in a chunk store's object header: harmless or CorruptDataError, never
another error and never a crash inside HDF5.

Each flip runs in a forked child (``flipscan.py``), so a crash fails the test
instead of ending the test run.  A sample of offsets runs by default, among them
those that crashed HDF5 before the header was checked (the datatype's bit fields at
64-67, the fill value's size at 92-95) and the layout message's; set
``H5VC_FULL_HEADER_SCAN=1`` to flip every one of the first 300 bytes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

import h5vc
from h5vc.errors import CorruptDataError
from h5vc.hdf5.header import HeaderDamage, PositionedReader, check_header_bytes

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import flipscan  # noqa: E402

FULL = bool(os.environ.get("H5VC_FULL_HEADER_SCAN"))

#: Offsets into the 256-byte header of the small file's raw_data: the prefix, the
#: dataspace, the datatype (bit fields at 64-75), both fill-value messages (sizes at
#: 92-95 and 112-115) and the layout message (136-155: version, class,
#: dimensionality, chunk-index address, chunk sizes).
SAMPLE = [
    0, 8, 20, 24, 37, 39, 56, 57, 64, 65, 66, 67, 73, 88, 92, 95, 112, 115, 136, 137,
    138, 139, 142, 147, 150, 154,
]  # fmt: skip

#: For a file large enough to be read by positioned reads: the dataspace's extent
#: and the chunk index's address, which those reads depend on.
SAMPLE_LARGE = [32, 36, 37, 38, 39, 139, 140, 143, 144, 146]


def _scan(
    path: str,
    offsets: list[int],
    obj: str = "_version_data/x/raw_data",
    action: str = "read_all_and_commit",
) -> dict[int, str]:
    env = dict(os.environ)
    env["H5VC_FLIP_ACTION"] = action
    source = str(Path(h5vc.__file__).parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([source, env.get("PYTHONPATH", "")])
    command = [sys.executable, str(HERE / "flipscan.py"), path, obj]
    done = subprocess.run(
        [*command, *map(str, offsets)], env=env, capture_output=True, text=True, check=True
    )
    found = dict(line.split() for line in done.stdout.splitlines())
    return {int(offset): outcome for offset, outcome in found.items()}


def _assert_harmless_or_corrupt(results: dict[int, str], offsets: list[int]) -> None:
    assert sorted(results) == sorted(offsets)
    wrong = {
        offset: outcome for offset, outcome in results.items() if outcome not in {"ok", "corrupt"}
    }
    assert not wrong, f"flips neither harmless nor CorruptDataError: {wrong}"


@pytest.mark.parametrize(
    ("size", "libver", "offsets"),
    [
        (1000, None, list(range(300)) if FULL else SAMPLE),
        (200_000, None, list(range(300)) if FULL else SAMPLE_LARGE),
        (1000, "latest", list(range(300)) if FULL else SAMPLE[::6]),
    ],
    ids=["small", "positioned-reads", "header-v2"],
)
def test_flipped_store_header_byte(
    path: str, size: int, libver: str | None, offsets: list[int]
) -> None:
    flipscan.make(path, size, libver)
    results = _scan(path, offsets)
    _assert_harmless_or_corrupt(results, offsets)
    if not FULL and libver is None and size == 1000:
        # Those HDF5 crashed on: each is reported as damage.
        assert all(results[offset] == "corrupt" for offset in (64, 65, 66, 67, 95, 147))


@pytest.mark.parametrize("action", ["commit_first", "commit_first_drop_in"])
def test_a_writer_checks_a_store_header_before_hdf5_decodes_it(path: str, action: str) -> None:
    """A writer opening a damaged chunk store itself (nothing read before), through
    either way of opening: the flips that crashed HDF5 are reported as damage."""
    flipscan.make(path)
    crashed = [64, 65, 66, 67, 92, 95]
    results = _scan(path, crashed, action=action)
    assert results == dict.fromkeys(crashed, "corrupt")


def test_damaged_fill_value_is_named(path: str, tmp_path: Path) -> None:
    flipscan.make(path)
    damaged = str(tmp_path / "flipped.h5")
    address = flipscan.header_address(path, "_version_data/x/raw_data")
    with open(path, "rb") as file:
        data = file.read()
    with open(damaged, "wb") as file:
        file.write(flipscan.flipped(data, address, 95))
    with pytest.raises(
        CorruptDataError, match=r"/_version_data/x/raw_data in .*flipped\.h5.*fill value"
    ):
        flipscan.read_all_and_commit(damaged)


DTYPES = {
    "f8": np.arange(300.0),
    "i1": np.arange(300, dtype="i1"),
    "u8": np.arange(300, dtype=">u8"),
    "f2": np.arange(300, dtype="f2"),
    "c16": np.arange(300) * 1j,
    "b": np.arange(300) % 3 == 0,
    "S3": np.array([b"abc", b"d"] * 150),
    "str": np.array(["xy", "z"] * 150, dtype=h5py.string_dtype()),
    "rec": np.zeros(300, dtype=[("a", "i4"), ("b", "f8")]),
    "2d": np.arange(3000.0).reshape(300, 10),
}


@pytest.mark.parametrize(
    "options",
    [{}, {"compression": "gzip", "shuffle": True}, {"fillvalue": 7}],
    ids=["plain", "gzip", "fillvalue"],
)
@pytest.mark.parametrize(
    "file_options", [{}, {"userblock_size": 512}, {"libver": "latest"}], ids=str
)
def test_undamaged_stores_unchanged(path: str, options: dict, file_options: dict) -> None:
    """Every store's headers pass the check, and reading and committing work as before."""
    with h5vc.open(path, "w", **file_options) as vf, vf.stage_version("v1") as g:
        for name, values in DTYPES.items():
            extra = dict(options)
            if "fillvalue" in extra and values.dtype.kind not in "iuf":
                del extra["fillvalue"]
            g.create_dataset(
                name, data=values, dtype=values.dtype, chunks=(30, *values.shape[1:]), **extra
            )
    with h5vc.open(path, "r+") as vf, vf.stage_version("v2") as g:
        for name in DTYPES:
            g[name][1] = g[name][0]
    with h5vc.open(path, "r") as vf:
        for name, values in DTYPES.items():
            expected = values.copy()
            expected[1] = expected[0]
            for version, want in (("v1", values), ("v2", expected)):
                got = vf[version][name][:]
                if values.dtype.kind == "O":  # variable-length strings read as bytes
                    got = np.array([item.decode() for item in got], dtype=object)
                np.testing.assert_array_equal(got, want)
    checked = 0
    with h5py.File(path, "r") as f, open(path, "rb") as file:
        plist = f.id.get_create_plist()
        sizeof_addr, sizeof_size = plist.get_sizes()
        reader = PositionedReader(file.fileno(), plist.get_userblock())
        for name in DTYPES:
            for member in ("raw_data", "hash_table"):
                address = h5py.h5o.get_info(f[f"_version_data/{name}/{member}"].id).addr
                check_header_bytes(reader, address, sizeof_addr, sizeof_size)
                checked += 1
    assert checked == 2 * len(DTYPES)


def test_header_check_reads_the_bytes(path: str, tmp_path: Path) -> None:
    """The check itself, without HDF5 opening the dataset: the undamaged header passes,
    a fill value whose size exceeds its message and a float wider than its size fail."""
    flipscan.make(path)
    address = flipscan.header_address(path, "_version_data/x/raw_data")
    with open(path, "rb") as file:
        data = file.read()
    for offset, expected in [(None, None), (95, "fill value"), (66, "bits")]:
        damaged = tmp_path / f"flip{offset}.h5"
        damaged.write_bytes(data if offset is None else flipscan.flipped(data, address, offset))
        with open(damaged, "rb") as file:
            reader = PositionedReader(file.fileno(), 0)
            if expected is None:
                check_header_bytes(reader, address, 8, 8)
                continue
            with pytest.raises(HeaderDamage, match=expected):
                check_header_bytes(reader, address, 8, 8)


#: Offsets into the mapping list of the small file's v2 (two mappings): the version
#: and count (0-8), the first source selection (37-64: type, version, length, rank at
#: 53-56, number of blocks at 57-60, coordinates) and the checksum at the end.
MAPPING_SAMPLE = [0, 1, 4, 8, *range(37, 65), -4, -1]


def test_flipped_mapping_list_byte(path: str) -> None:
    """HDF5 decodes a virtual dataset's mapping list before checking its checksum: a
    damaged rank or block count crashed the process when a version was opened. Read
    from a file opened read-only, every flip is harmless or CorruptDataError."""
    flipscan.make(path)
    obj = "_version_data/versions/v2/x"
    blob_size = _mapping_list_size(path, obj)
    offsets = [o % blob_size for o in (range(blob_size) if FULL else MAPPING_SAMPLE)]
    results = _scan(path, offsets, f"mappings:{obj}")
    _assert_harmless_or_corrupt(results, offsets)
    assert results[56] == "corrupt"  # the rank's high byte: HDF5 crashed on it


def _mapping_list_size(path: str, obj: str) -> int:
    from h5vc.hdf5.header import LAYOUT, stored_messages
    from h5vc.hdf5.mappings import _heap_object

    parent, _, name = obj.rpartition("/")
    with h5py.File(path, "r") as f:
        stored = stored_messages(f[parent], name, frozenset((LAYOUT,)))
        assert stored is not None
        blob = _heap_object(stored.reader, stored.messages[LAYOUT], 8, 8)
    assert blob is not None and len(blob) > 70
    return len(blob)
