"""Functions of the HDF5 library h5py runs on, called through ctypes.

h5py wraps most of HDF5's API, but not every call h5vc needs: HDF5's metadata
checksum (``H5_checksum_lookup3``, Bob Jenkins' lookup3 ``hashlittle``, which HDF5
stores after a version-2 object header's blocks, an extensible array's blocks and a
virtual dataset's mapping list) runs here in C, about 100 times faster than the same
function in Python (:func:`h5vc.hdf5.header.checksum` falls back to Python where the
library cannot be found), and :func:`plist_codec` encodes and decodes property lists
(``H5Pencode2``/``H5Pdecode``, which h5py does not wrap), and :func:`small_transfer` makes a
transfer property list with a small conversion buffer (``H5Pset_buffer``);
:func:`short_writes` writes attributes and single elements without h5py's objects.
:func:`loaded_hdf5` finds the library among the files
mapped into the process (or in h5py's wheel); it is opened only if it is loaded
already, so h5vc never loads a second copy of HDF5.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable
from typing import NamedTuple

import h5py

__all__ = [
    "OPEN_LOADED",
    "PlistCodec",
    "hdf5_library",
    "loaded_hdf5",
    "lookup3",
    "ShortWrites",
    "plist_codec",
    "short_writes",
    "small_transfer",
    "string_buffer",
]

#: dlopen flags: only a library already loaded (where the flag exists).
OPEN_LOADED = getattr(os, "RTLD_NOW", 0) | getattr(os, "RTLD_NOLOAD", 0)


def loaded_hdf5() -> str | None:
    """The path of the HDF5 library mapped into this process (Linux), or of the one
    shipped in h5py's wheel. (Read without :mod:`pathlib`, which a first read of a
    file does not need otherwise.)"""
    try:
        with open("/proc/self/maps", "rb") as maps:
            for line in maps:
                name = line.rstrip(b"\n").rpartition(b" ")[2]
                base = os.path.basename(name)
                hdf5 = base.startswith(b"libhdf5") and not base.startswith(b"libhdf5_hl")
                if hdf5 and b".so" in base:
                    return os.fsdecode(name)
    except OSError:
        pass
    package = os.path.dirname(h5py.__file__)
    for folder in (
        os.path.join(os.path.dirname(package), "h5py.libs"),
        os.path.join(package, ".dylibs"),
    ):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        found = sorted(n for n in names if n.startswith("libhdf5.")) + sorted(
            n for n in names if n.startswith("libhdf5-")
        )
        if found:
            return os.path.join(folder, found[0])
    return None


@functools.cache
def hdf5_library() -> ctypes.CDLL | None:
    """The HDF5 library h5py runs on, opened only if already loaded (its functions are
    looked up on it), or None where it cannot be found."""
    path = loaded_hdf5()
    if path is None:
        return None
    try:
        return ctypes.CDLL(path, mode=OPEN_LOADED)
    except OSError:
        return None


@functools.cache
def lookup3() -> Callable[[bytes], int] | None:
    """HDF5's ``H5_checksum_lookup3(data, length, 0)`` as a function of bytes, or None
    where the library or the symbol cannot be found (or gives a wrong answer on a
    known input)."""
    library = hdf5_library()
    if library is None:
        return None
    try:
        function = library.H5_checksum_lookup3
    except AttributeError:
        return None
    # It reads the bytes only: a bytes object is passed as a pointer to its buffer.
    function.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint32]
    function.restype = ctypes.c_uint32

    def checksum(data: bytes) -> int:
        return int(function(data, len(data), 0))

    # lookup3's published test value ("Four score and seven years ago", initial 0).
    if checksum(b"Four score and seven years ago") != 0x17770551:
        return None
    return checksum


class PlistCodec(NamedTuple):
    """HDF5's property-list serialization: ``encode(plist)`` gives the bytes of a
    property list (``H5Pencode2``), ``decode_dcpl(data)`` the dataset creation
    property list of such bytes (``H5Pdecode``, as an h5py object that closes it)."""

    encode: Callable[[h5py.h5p.PropID], bytes]
    decode_dcpl: Callable[[bytes], h5py.h5p.PropDCID]


@functools.cache
def plist_codec() -> PlistCodec | None:
    """``H5Pencode2`` and ``H5Pdecode`` of the library h5py runs on, or None where the
    library or the symbols cannot be found. Both run under h5py's lock, as h5py's own
    calls do; a failure raises :class:`ValueError`."""
    library = hdf5_library()
    if library is None:
        return None
    try:
        encode_c, decode_c = library.H5Pencode2, library.H5Pdecode
    except AttributeError:
        return None
    hid = ctypes.c_int64
    encode_c.argtypes = [hid, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t), hid]
    encode_c.restype = ctypes.c_int
    decode_c.argtypes = [ctypes.c_char_p]
    decode_c.restype = hid
    from h5py import h5p
    from h5py._objects import phil

    def encode(plist: h5p.PropID) -> bytes:
        size = ctypes.c_size_t(0)
        with phil:
            if encode_c(plist.id, None, ctypes.byref(size), 0) < 0:
                raise ValueError(f"H5Pencode2 failed to size property list {plist.id}")
            buffer = ctypes.create_string_buffer(size.value)
            if encode_c(plist.id, buffer, ctypes.byref(size), 0) < 0:
                raise ValueError(f"H5Pencode2 failed to encode property list {plist.id}")
        return buffer.raw[: size.value]

    def decode_dcpl(data: bytes) -> h5p.PropDCID:
        with phil:
            ident = decode_c(data)
            if ident < 0:
                raise ValueError(f"H5Pdecode failed on {len(data)} bytes")
            plist = h5p.PropDCID(ident)
        if not plist.get_class().equal(h5p.DATASET_CREATE):
            raise ValueError("H5Pdecode gave a property list of another class")
        return plist

    return PlistCodec(encode, decode_dcpl)


#: The type-conversion buffer of :func:`small_transfer`, in bytes.
SMALL_TRANSFER_BUFFER = 4096


@functools.cache
def small_transfer() -> h5py.h5p.PropDXID | None:
    """A dataset transfer property list whose type-conversion buffer is
    :data:`SMALL_TRANSFER_BUFFER` bytes (``H5Pset_buffer``), or None where the library
    or the symbol cannot be found.

    HDF5 allocates the conversion buffer of a write that converts (variable-length
    strings do) at the list's size, 1 MiB by default, and zeroes it, whatever the
    number of elements: a write of one string costs a 1 MiB ``calloc`` (and, when
    HDF5's free lists are collected, a 1 MiB ``free``). A write of a few elements
    of a few bytes needs a buffer of a few bytes. Made once; the caller must not
    change it."""
    library = hdf5_library()
    if library is None:
        return None
    try:
        set_buffer = library.H5Pset_buffer
    except AttributeError:
        return None
    set_buffer.argtypes = [ctypes.c_int64, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p]
    set_buffer.restype = ctypes.c_int
    from h5py import h5p
    from h5py._objects import phil

    dxpl = h5p.create(h5p.DATASET_XFER)
    with phil:
        if set_buffer(dxpl.id, SMALL_TRANSFER_BUFFER, None, None) < 0:
            return None
    return dxpl


class ShortWrites(NamedTuple):
    """Small writes made with HDF5's calls alone, without h5py's objects.

    h5py makes an object for every identifier an HDF5 call returns (registered, then
    closed through it) and converts a string from a Python object through conversion
    functions of its own: for an attribute of a short string, about a third of the
    cost of writing it. These calls take the identifiers of h5py's objects and run
    under h5py's lock with the GIL held, as h5py's own calls do; a failure raises
    ``OSError``. ``utf8`` is the identifier of HDF5's memory type of a variable-length
    UTF-8 string (a C ``char *``), for buffers made by :func:`string_buffer`."""

    #: ``create_attribute(obj, name, file_type, space, mem_type, buffer)``: a new
    #: attribute ``name`` of ``obj`` (none of that name exists), written from the
    #: address ``buffer`` (removed again if the write fails).
    create_attribute: Callable[[int, bytes, int, int, int, int], None]
    #: ``write_attribute(obj, name, mem_type, buffer)``: the existing attribute
    #: ``name`` of ``obj`` written from ``buffer`` (``KeyError`` if there is none, as
    #: h5py raises).
    write_attribute: Callable[[int, bytes, int, int], None]
    #: ``append_one(dataset, n, mem_type, mem_space, dxpl, buffer)``: a 1-d dataset of
    #: ``n`` elements grown by one, and element ``n`` written from ``buffer``.
    append_one: Callable[[int, int, int, int, int, int], None]
    utf8: int


def string_buffer(text: str) -> ctypes.Array[ctypes.c_char_p] | None:
    """One variable-length string as HDF5 reads it from memory (``char *[1]``), or None
    for a string h5py writes otherwise (one with a NUL character, or not encodable as
    UTF-8); pass ``ctypes.addressof`` of it, and keep it until the write is done."""
    if "\0" in text:
        return None
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return (ctypes.c_char_p * 1)(data)


@functools.cache
def short_writes() -> ShortWrites | None:
    """The calls of :class:`ShortWrites` on the HDF5 library h5py runs on, or None where
    it (or one of the symbols) cannot be found or is not h5py's."""
    path = loaded_hdf5()
    if path is None:
        return None
    try:
        # PyDLL: the GIL is held through each call, as h5py holds it through its own.
        library = ctypes.PyDLL(path, mode=OPEN_LOADED)
        version = library.H5get_libversion
        create_a, open_a = library.H5Acreate2, library.H5Aopen
        write_a, close_a, delete_a = library.H5Awrite, library.H5Aclose, library.H5Adelete
        extent, get_space = library.H5Dset_extent, library.H5Dget_space
        select, write_d, close_s = library.H5Sselect_hyperslab, library.H5Dwrite, library.H5Sclose
    except (OSError, AttributeError):
        return None
    hid, herr, hsize = ctypes.c_int64, ctypes.c_int, ctypes.c_uint64
    pointer = ctypes.c_void_p
    version.argtypes = [ctypes.POINTER(ctypes.c_uint)] * 3
    version.restype = herr
    create_a.argtypes = [hid, ctypes.c_char_p, hid, hid, hid, hid]
    create_a.restype = hid
    open_a.argtypes = [hid, ctypes.c_char_p, hid]
    open_a.restype = hid
    write_a.argtypes = [hid, hid, pointer]
    write_a.restype = herr
    close_a.argtypes = [hid]
    close_a.restype = herr
    delete_a.argtypes = [hid, ctypes.c_char_p]
    delete_a.restype = herr
    extent.argtypes = [hid, ctypes.POINTER(hsize)]
    extent.restype = herr
    get_space.argtypes = [hid]
    get_space.restype = hid
    select.argtypes = [hid, ctypes.c_int, ctypes.POINTER(hsize), pointer]
    select.argtypes += [ctypes.POINTER(hsize), pointer]
    select.restype = herr
    write_d.argtypes = [hid, hid, hid, hid, hid, pointer]
    write_d.restype = herr
    close_s.argtypes = [hid]
    close_s.restype = herr
    from h5py import h5t
    from h5py._objects import phil

    numbers = [ctypes.c_uint() for _ in range(3)]
    with phil:
        found = version(*numbers)
    if found < 0 or tuple(n.value for n in numbers) != h5py.version.hdf5_version_tuple:
        return None  # not the library h5py's own identifiers belong to
    utf8 = h5t.C_S1.copy()
    utf8.set_size(h5t.VARIABLE)
    utf8.set_cset(h5t.CSET_UTF8)
    select_set = 0  # H5S_SELECT_SET

    def create_attribute(
        obj: int, name: bytes, file_type: int, space: int, mem_type: int, buffer: int
    ) -> None:
        with phil:
            attr = create_a(obj, name, file_type, space, 0, 0)  # H5P_DEFAULT
            if attr < 0:
                raise OSError(f"Unable to create attribute {name!r} (H5Acreate2 failed)")
            written = write_a(attr, mem_type, buffer)
            close_a(attr)
            if written < 0:
                delete_a(obj, name)
                raise OSError(f"Unable to write attribute {name!r} (H5Awrite failed)")

    def write_attribute(obj: int, name: bytes, mem_type: int, buffer: int) -> None:
        with phil:
            attr = open_a(obj, name, 0)  # H5P_DEFAULT
            if attr < 0:
                raise KeyError(f"Unable to open attribute {name!r} (H5Aopen failed)")
            written = write_a(attr, mem_type, buffer)
            close_a(attr)
            if written < 0:
                raise OSError(f"Unable to write attribute {name!r} (H5Awrite failed)")

    def append_one(
        dataset: int, n: int, mem_type: int, mem_space: int, dxpl: int, buffer: int
    ) -> None:
        size = hsize(n + 1)
        start, count = hsize(n), hsize(1)
        with phil:
            if extent(dataset, ctypes.byref(size)) < 0:
                raise OSError(f"Unable to grow dataset to {n + 1} elements (H5Dset_extent failed)")
            space = get_space(dataset)
            if space < 0:
                raise OSError("Unable to get a dataset's dataspace (H5Dget_space failed)")
            try:
                if (
                    select(space, select_set, ctypes.byref(start), None, ctypes.byref(count), None)
                    < 0
                ):
                    raise OSError(f"Unable to select element {n} (H5Sselect_hyperslab failed)")
                if write_d(dataset, mem_type, mem_space, space, dxpl, buffer) < 0:
                    raise OSError(f"Unable to write element {n} (H5Dwrite failed)")
            finally:
                close_s(space)

    calls = ShortWrites(create_attribute, write_attribute, append_one, utf8.id)
    _KEPT.append(utf8)  # its identifier lives as long as the object
    return calls


#: h5py objects whose identifiers the calls above use.
_KEPT: list[object] = []
