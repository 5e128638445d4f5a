"""Decoding stored sample chunks with the floor's pipeline (h5vc.hdf5.codecs) instead
of HDF5: every compression option, with and without Fletcher-32, against HDF5's own
reads and checksums."""

from __future__ import annotations

import os
import pathlib
import struct
from typing import Any

import h5py
import hdf5plugin
import numpy as np
import pytest

from h5vc.errors import ChunkDecodeError
from h5vc.hdf5 import codecs
from h5vc.hdf5.chunktable import ChunkLocation, sample_table
from h5vc.hdf5.codecs import FILTER_BLOSC, fletcher32, pipeline_for
from h5vc.samples.options import BLOSC_COMPLIBS, parse_compression


def _bytes(array: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous array, as the pipeline decodes into them."""
    return array.reshape(-1).view(np.uint8)


def chunk_locations(dataset: h5py.Dataset) -> list[ChunkLocation] | None:
    """Every sample's chunk location in the floor's chunk table of ``dataset``."""
    table = sample_table(dataset)
    return None if table is None else [table.location(i) for i in range(len(table))]


#: Every combination of compression options the options module accepts.
ACCEPTED = [
    *(
        {"complib": lib, "complevel": level, "shuffle": shuffle}
        for lib in BLOSC_COMPLIBS
        for level in range(10)
        for shuffle in (None, "none", "byte", "bit")
    ),
    *(
        {"complib": "lzf", "complevel": level, "shuffle": shuffle}
        for level in (False, None, "none")
        for shuffle in (False, None, "none", True, "byte")
    ),
    *(
        {"complib": "gzip", "complevel": level, "shuffle": shuffle}
        for level in range(10)
        for shuffle in (False, None, "none", True, "byte")
    ),
]
DTYPES = ("uint8", "int16", "float32", "bool")

#: Blosc frame flags: byte shuffle, stored uncompressed, bit shuffle; compressor format code.
_BYTE_SHUFFLE, _MEMCPYED, _BIT_SHUFFLE = 0x1, 0x2, 0x4
#: Blosc compressor code (HDF5 cd_values[6]) -> compressed-format code in the frame flags.
_FORMAT_OF_COMPRESSOR = {0: 0, 1: 1, 2: 1, 4: 3, 5: 4}


def _samples(dtype: str, shape: tuple[int, ...], count: int, seed: int) -> np.ndarray:
    """Smooth (compressible) samples, then noise (incompressible), then a zero sample."""
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape, dtype=int))
    steps = np.arange(size).reshape(shape) // 16
    smooth = np.stack([steps + rng.integers(0, 100) for _ in range(count)])
    noise = rng.integers(0, 256, size=(count, *shape))
    data = np.concatenate([smooth, noise, np.zeros((1, *shape), int)])
    if dtype == "bool":
        return (data % 2).astype(bool)
    if np.dtype(dtype).kind == "f":
        return (data * 1.25 + rng.random(data.shape)).astype(dtype)
    return data.astype(dtype)


def _dataset(
    tmp_path: pathlib.Path,
    options: dict[str, Any],
    dtype: str,
    shape: tuple[int, ...],
    fletcher: bool = False,
) -> h5py.Dataset:
    """A dataset laid out like a backend '01' collection (``fletcher``: like a backend
    '00' one of samples that fit one chunk): one sample per chunk."""
    compression = parse_compression(options, "00" if fletcher else "01")
    data = _samples(dtype, shape, count=3, seed=len(str(options)))
    h5file = h5py.File(tmp_path / f"chunks-{dtype}.h5", "w")
    return h5file.create_dataset(
        "0",
        data=data,
        chunks=(1, *(max(dim, 1) for dim in shape)),
        fletcher32=fletcher,
        **compression.filter_kwargs(),
    )


def _decode_all(dataset: h5py.Dataset) -> int:
    """Decode every chunk from its file bytes, compare with HDF5; the count decoded."""
    decoder = pipeline_for(dataset)
    assert decoder is not None
    locations = chunk_locations(dataset)
    assert locations is not None and len(locations) == dataset.shape[0]
    fd = os.open(dataset.file.filename, os.O_RDONLY)
    try:
        for index, location in enumerate(locations):
            assert location is not None
            offset, size, mask = location
            data = os.pread(fd, size, offset)
            assert (mask, data) == dataset.id.read_direct_chunk((index, *[0] * (dataset.ndim - 1)))
            out = np.empty(dataset.shape[1:], dataset.dtype)
            decoder.decode_into(data, mask, _bytes(out))
            np.testing.assert_array_equal(out, dataset[index])
    finally:
        os.close(fd)
    return len(locations)


@pytest.mark.parametrize("options", ACCEPTED, ids=str)
def test_decoding_matches_hdf5_for_every_option(
    tmp_path: pathlib.Path, options: dict[str, Any]
) -> None:
    for dtype in DTYPES:
        dataset = _dataset(tmp_path, options, dtype, (24, 20))
        if options["complib"] == "lzf":
            assert pipeline_for(dataset) is None  # read through HDF5
        else:
            assert _decode_all(dataset) == 7
        dataset.file.close()


@pytest.mark.parametrize("options", ACCEPTED, ids=str)
def test_decoding_with_fletcher32_matches_hdf5_for_every_option(
    tmp_path: pathlib.Path, options: dict[str, Any]
) -> None:
    for dtype in ("uint8", "float32"):
        dataset = _dataset(tmp_path, options, dtype, (24, 20), fletcher=True)
        plist = dataset.id.get_create_plist()
        last_filter = plist.get_filter(plist.get_nfilters() - 1)[0]
        assert last_filter == h5py.h5z.FILTER_FLETCHER32  # applied last, undone first
        if options["complib"] == "lzf":
            assert pipeline_for(dataset) is None  # read through HDF5
        else:
            assert _decode_all(dataset) == 7
        dataset.file.close()


@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 4)])
@pytest.mark.parametrize(
    "options",
    [
        {"complib": "blosc:lz4", "complevel": 5, "shuffle": "byte"},
        {"complib": "gzip", "complevel": 4, "shuffle": True},
    ],
    ids=str,
)
def test_decoding_other_sample_shapes(
    tmp_path: pathlib.Path, options: dict[str, Any], shape: tuple[int, ...]
) -> None:
    assert _decode_all(_dataset(tmp_path, options, "int64", shape)) == 7


@pytest.mark.parametrize(
    "options", [o for o in ACCEPTED if o["complib"] in BLOSC_COMPLIBS], ids=str
)
def test_blosc_frames_are_what_the_filter_settings_say(
    tmp_path: pathlib.Path, options: dict[str, Any]
) -> None:
    # The HDF5 Blosc filter stores cd_values (filter revision, Blosc version, type size,
    # chunk bytes, level, shuffle, compressor); each compressed chunk must be one Blosc 1
    # frame with that type size, size, shuffle and compressor.
    dataset = _dataset(tmp_path, options, "int16", (24, 20))
    plist = dataset.id.get_create_plist()
    assert plist.get_nfilters() == 1
    code, _flags, values, _name = plist.get_filter(0)
    assert code == FILTER_BLOSC == hdf5plugin.BLOSC_ID
    _revision, _version, typesize, chunk_bytes, level, shuffle, compressor = values
    assert (typesize, chunk_bytes, level) == (2, 24 * 20 * 2, options["complevel"])
    frames = 0
    for index in range(dataset.shape[0]):
        mask, frame = dataset.id.read_direct_chunk((index, 0, 0))
        if mask:  # the filter failed to shrink the chunk: stored as it is
            assert mask == 1 and len(frame) == chunk_bytes
            continue
        frames += 1
        version, _codec, flags, frame_typesize, nbytes, _block, cbytes = struct.unpack_from(
            "<BBBBIII", frame
        )
        assert version == 2 and frame_typesize == typesize
        assert (nbytes, cbytes) == (chunk_bytes, len(frame))
        if not flags & _MEMCPYED:
            assert flags >> 5 == _FORMAT_OF_COMPRESSOR[compressor]
            shuffle_flags = flags & (_BYTE_SHUFFLE | _BIT_SHUFFLE)
            assert shuffle_flags == (0, _BYTE_SHUFFLE, _BIT_SHUFFLE)[shuffle]
    if options["complevel"] > 0:
        assert frames > 0  # the smooth samples compress


def test_chunks_stored_without_a_failed_filter_decode(tmp_path: pathlib.Path) -> None:
    # Blosc at level 0 cannot shrink a chunk, so HDF5 stores every chunk unfiltered
    # (filter mask 1); the decoder then only copies.
    options = {"complib": "blosc:lz4", "complevel": 0, "shuffle": None}
    dataset = _dataset(tmp_path, options, "float32", (24, 20))
    locations = chunk_locations(dataset)
    assert locations is not None and {loc[2] for loc in locations if loc} == {1}
    assert _decode_all(dataset) == 7


def test_pipelines_it_does_not_know_are_left_to_hdf5(tmp_path: pathlib.Path) -> None:
    with h5py.File(tmp_path / "other.h5", "w") as h5file:
        data = np.arange(60, dtype=np.int32).reshape(3, 20)
        unknown = {
            "lzf": {"compression": "lzf"},
            "blosc2": dict(hdf5plugin.Blosc2()),
            "lzf+fletcher32": {"compression": "lzf", "fletcher32": True},
        }
        for name, kwargs in unknown.items():
            dataset = h5file.create_dataset(name, data=data, chunks=(1, 20), **kwargs)
            assert pipeline_for(dataset) is None, name
        known = {
            "plain": {},  # no filter: a copy
            "fletcher32": {"fletcher32": True},
            "shuffle+gzip+fletcher32": {"compression": "gzip", "shuffle": True, "fletcher32": True},
        }
        for name, kwargs in known.items():
            dataset = h5file.create_dataset(name, data=data, chunks=(1, 20), **kwargs)
            assert _decode_all(dataset) == 3, name


def test_chunk_locations_need_one_sample_per_chunk(tmp_path: pathlib.Path) -> None:
    with h5py.File(tmp_path / "layout.h5", "w") as h5file:
        two = h5file.create_dataset("two", shape=(4, 6), dtype="u1", chunks=(2, 6))
        half = h5file.create_dataset("half", shape=(4, 6), dtype="u1", chunks=(1, 3))
        one = h5file.create_dataset("one", shape=(4, 6), dtype="u1", chunks=(1, 6))
        one[1] = 7
        assert chunk_locations(two) is None
        assert chunk_locations(half) is None
        locations = chunk_locations(one)
        assert locations is not None
        assert [loc is None for loc in locations] == [True, False, True, True]


def test_chunk_locations_refuse_files_with_a_user_block(tmp_path: pathlib.Path) -> None:
    with h5py.File(tmp_path / "ub.h5", "w", userblock_size=512) as h5file:
        dataset = h5file.create_dataset("d", data=np.ones((2, 3)), chunks=(1, 3))
        assert chunk_locations(dataset) is None


@pytest.mark.parametrize(
    "options",
    [
        {"complib": "blosc:lz4", "complevel": 5, "shuffle": "byte"},
        {"complib": "gzip", "complevel": 4, "shuffle": True},
    ],
    ids=str,
)
def test_damaged_or_misfit_bytes_raise(tmp_path: pathlib.Path, options: dict[str, Any]) -> None:
    dataset = _dataset(tmp_path, options, "int16", (24, 20))
    decoder = pipeline_for(dataset)
    assert decoder is not None
    mask, data = dataset.id.read_direct_chunk((0, 0, 0))
    assert mask == 0
    out = np.empty((24, 20), np.int16)
    damaged = [data[:-1], data[:10], b"", data[:5] + bytes([data[5] ^ 0xFF]) + data[6:]]
    if options["complib"] != "gzip":  # zlib, like HDF5's inflate, stops at the stream's end
        damaged.append(data + b"\0")
    for bad in damaged:
        with pytest.raises(Exception):  # noqa: B017  (each codec raises its own type)
            decoder.decode_into(bad, 0, _bytes(out))
    with pytest.raises(ChunkDecodeError, match="Expected 64 bytes"):
        decoder.decode_into(data, 0, _bytes(np.empty(32, np.int16)))  # too small for the sample


#: Filters before Fletcher-32 in the checksum tests: none, deflate, shuffle + deflate, Blosc.
FLETCHER_PIPELINES = {
    "alone": {},
    "gzip": {"compression": "gzip"},
    "shuffle+gzip": {"compression": "gzip", "shuffle": True},
    "blosc": dict(hdf5plugin.Blosc(cname="lz4", clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE)),
}


def _rows(rng: np.random.Generator, length: int) -> np.ndarray:
    """Chunk contents that stress the sums: noise, smooth, all 0xFF (sums that are
    multiples of 65535), all zero, two-valued, and a single nonzero byte."""
    rows = [rng.integers(0, 256, length) for _ in range(6)]
    rows += [np.arange(length) // 7 % 256 + rng.integers(0, 50) for _ in range(3)]
    rows += [np.full(length, 255), np.zeros(length, int), rng.choice([0, 255], length)]
    single = np.zeros(length, int)
    single[rng.integers(0, length)] = rng.integers(1, 256)
    return np.stack([*rows, single]).astype(np.uint8)


@pytest.mark.parametrize("pipeline", FLETCHER_PIPELINES, ids=str)
def test_fletcher32_is_the_checksum_hdf5_stores(tmp_path: pathlib.Path, pipeline: str) -> None:
    # The filter appends the checksum of the (filtered) chunk bytes as a little-endian uint32.
    rng = np.random.default_rng(sum(map(ord, pipeline)))
    parities = set()
    with h5py.File(tmp_path / "fletcher.h5", "w") as h5file:
        # Up to 70001 bytes: several of fletcher32's summing blocks.
        for length in (1, 2, 3, 4, 5, 63, 64, 255, 1000, 4097, 32768, 32769, 70001):
            data = _rows(rng, length)
            dataset = h5file.create_dataset(
                str(length),
                data=data,
                chunks=(1, length),
                fletcher32=True,
                **FLETCHER_PIPELINES[pipeline],
            )
            for row in range(len(data)):
                _mask, chunk = dataset.id.read_direct_chunk((row, 0))
                stored = int.from_bytes(chunk[-4:], "little")
                assert fletcher32(chunk[:-4]) == stored, (length, row)
                assert fletcher32(memoryview(chunk)[:-4]) == stored
                parities.add(len(chunk) % 2)
    assert parities == {0, 1}  # chunk bytes of even and odd length


def test_fletcher32_check_accepts_what_hdf5_accepts(tmp_path: pathlib.Path) -> None:
    data = _samples("uint8", (101,), count=2, seed=3)
    with h5py.File(tmp_path / "variants.h5", "w", rdcc_nbytes=0) as h5file:
        dataset = h5file.create_dataset(
            "d", data=data, chunks=(1, 101), compression="gzip", fletcher32=True
        )
        decoder = pipeline_for(dataset)
        assert decoder is not None
        expected = dataset[0]
        mask, chunk = dataset.id.read_direct_chunk((0, 0))
        body, checksum = chunk[:-4], int.from_bytes(chunk[-4:], "little")
        swapped = (checksum & 0x00FF00FF) << 8 | (checksum >> 8) & 0x00FF00FF
        assert len({checksum, swapped, int.from_bytes(chunk[-4:], "big")}) == 3
        flipped = bytearray(chunk)
        flipped[len(body) // 2] ^= 0x10
        variants = {
            "as stored": (chunk, True),
            "16-bit halves byte-swapped (HDF5 before 1.6.3)": (
                body + swapped.to_bytes(4, "little"),
                True,
            ),
            "big-endian": (body + checksum.to_bytes(4, "big"), False),
            "flipped data byte": (bytes(flipped), False),
            "checksum off by one": (body + (checksum ^ 1).to_bytes(4, "little"), False),
        }
        out = np.empty(101, np.uint8)
        for name, (variant, accepted) in variants.items():
            dataset.id.write_direct_chunk((1, 0), variant, mask)
            try:
                hdf5_read = dataset[1]
            except OSError:
                hdf5_read = None
            assert (hdf5_read is not None) == accepted, name
            if accepted:
                decoder.decode_into(variant, mask, _bytes(out))
                np.testing.assert_array_equal(out, expected)
                np.testing.assert_array_equal(hdf5_read, expected)
            else:
                with pytest.raises(ChunkDecodeError, match="Fletcher-32"):
                    decoder.decode_into(variant, mask, _bytes(out))
        for short in (b"", b"\0", b"\0\0\0"):  # HDF5 2.0 crashes on these: never handed to it
            with pytest.raises(ChunkDecodeError, match="Fletcher-32"):
                decoder.decode_into(short, mask, _bytes(out))
        # A chunk stored with the Fletcher-32 filter skipped (filter mask bit 1) has no
        # checksum; HDF5 reads it unchecked, and so does the decoder.
        dataset.id.write_direct_chunk((1, 0), body, mask | 0b10)
    with h5py.File(
        tmp_path / "variants.h5", "r"
    ) as h5file:  # HDF5 2.0 sees the mask after reopening
        dataset = h5file["d"]
        locations = chunk_locations(dataset)
        assert locations is not None and locations[1] is not None
        assert locations[1][1:] == (len(body), mask | 0b10)
        np.testing.assert_array_equal(dataset[1], expected)
        decoder.decode_into(body, mask | 0b10, _bytes(out))
        np.testing.assert_array_equal(out, expected)


def test_without_numcodecs_blosc_is_left_to_hdf5(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {"complib": "blosc:zstd", "complevel": 5, "shuffle": "bit"}
    dataset = _dataset(tmp_path, options, "uint8", (24, 20))
    monkeypatch.setattr(codecs, "_have_numcodecs", lambda: False)
    assert pipeline_for(dataset) is None
