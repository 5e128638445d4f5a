"""How the layout's groups are created: new-style groups, links in the header.

HDF5 has two kinds of group.  The old kind (a symbol table), which h5py creates by
default in files without ``libver="latest"``, costs a local heap and a B-tree of
about 9 KiB once a group holds more than a few links: a version group of 100
datasets is 10 KiB, most of it empty.  The new kind (HDF5 1.8, 2008) keeps up to
``max_compact`` links as messages in the group's own object header (about 25 bytes
a link: the same group is 2.5 KiB), and moves them to a fractal heap with a v2
B-tree past that.  Every reader of HDF5 1.8 or later (h5py, h5dump, versioned-hdf5)
reads both kinds alike, in the same (alphabetical) order.

At the default library bounds HDF5 makes a group of the new kind only when its
creation property list tracks link creation order (which would make h5py list the
group's members in creation order) or holds a filter pipeline (applied to the heap
of dense storage only).  So the layout's groups get a Fletcher-32 pipeline and a
compact limit of :data:`COMPACT_LINKS` links.  h5py wraps neither call
(``H5Pset_fletcher32`` and ``H5Pset_link_phase_change`` on a group creation list):
they are called on the HDF5 library h5py itself loaded (found among the mapped files
of the process, opened only if it is loaded already, and checked to be h5py's by its
version and by a call on one of h5py's property lists).  Where that library cannot be
found, groups are created as h5py creates them (the old kind).

:func:`compact_chunk_index` uses the same library for the chunk index of small chunk
stores: see its docstring.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from collections.abc import Callable, Iterator

import h5py

from h5vc.hdf5.clib import hdf5_library

__all__ = ["COMPACT_LINKS", "compact_chunk_index", "new_group", "require_groups"]

#: Links kept in a group's header before it moves to dense storage (a lookup scans
#: the header's link messages, so very large groups are better indexed).
COMPACT_LINKS = 512
#: Below this many links a dense group moves back to the header.
_DENSE_BELOW = 384


def new_group(parent: h5py.Group, name: str) -> h5py.Group:
    """A new group ``parent[name]`` of the new kind (links in its header);
    ``name`` is one path component."""
    gcpl = _group_creation()
    if gcpl is None:
        return parent.create_group(name)
    # The new group's identifier, wrapped as h5py's create_group wraps it (no lookup).
    return h5py.Group(h5py.h5g.create(parent.id, name.encode("utf-8"), gcpl=gcpl))


def require_groups(parent: h5py.Group, path: str) -> h5py.Group:
    """The group ``parent/path``, creating each missing group of ``path`` with
    :func:`new_group`."""
    group = parent
    for part in path.strip("/").split("/"):
        if not part:
            continue
        if part in group:
            child = group[part]
            if not isinstance(child, h5py.Group):
                raise TypeError(
                    f"Expected a group at {child.name!r}. Got a {type(child).__name__}."
                )
            group = child
        else:
            group = new_group(group, part)
    return group


@contextlib.contextmanager
def compact_chunk_index(file: h5py.File) -> Iterator[bool]:
    """Chunked datasets created in ``file`` inside this block get HDF5 1.10's chunk
    indexes (yields True when so, False where they cannot).

    HDF5 writes a chunked dataset's layout message at version 4 when the file's low
    library bound is 1.10 or later at its creation; its chunks are then indexed by an
    extensible array (one unlimited dimension: about 150 bytes for a few chunks),
    not by a version-1 B-tree, whose first node takes 2 KiB however few chunks it
    indexes.  The low bound is raised for the block (``H5Fset_libver_bounds``, which
    h5py does not wrap) and put back as it was, so nothing else in the file is written
    in a newer format; the superblock keeps its version.  Where the library cannot be
    found, or the file's high bound is below 1.10, nothing changes.
    """
    call = _bounds_call()
    low, high = file.id.get_access_plist().get_libver_bounds()
    if call is None or low >= h5py.h5f.LIBVER_V110 or high < h5py.h5f.LIBVER_V110:
        yield low >= h5py.h5f.LIBVER_V110
        return
    if not call(file.id.id, h5py.h5f.LIBVER_V110, high):
        yield False
        return
    try:
        yield True
    finally:
        if not call(file.id.id, low, high):
            raise OSError(
                f"Could not restore the library bounds ({low}, {high}) of {file.filename!r}."
            )


@functools.cache
def _bounds_call() -> Callable[[int, int, int], bool] | None:
    """``H5Fset_libver_bounds`` of the HDF5 library h5py runs on (True when done), or
    None where that library cannot be found."""
    if _group_calls() is None:  # not h5py's own library
        return None
    library = hdf5_library()
    if library is None:
        return None
    try:
        from h5py._objects import phil

        bounds = library.H5Fset_libver_bounds
    except (ImportError, OSError, AttributeError):
        return None
    bounds.argtypes = [ctypes.c_int64, ctypes.c_int, ctypes.c_int]
    bounds.restype = ctypes.c_int

    def call(file_id: int, low: int, high: int) -> bool:
        with phil:
            return bool(bounds(file_id, low, high) >= 0)

    return call


@functools.cache
def _group_creation() -> h5py.h5p.PropGCID | None:
    """A group creation list for a new-style group with compact links, or None (made
    once: HDF5 copies it into every group it creates)."""
    calls = _group_calls()
    if calls is None:
        return None
    gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
    if not calls(gcpl.id):
        return None
    return gcpl


@functools.cache
def _group_calls() -> Callable[[int], bool] | None:
    """What makes a group creation list new-style with compact links (True when
    done), through the HDF5 library h5py runs on; None when it cannot be found."""
    library = hdf5_library()
    if library is None:
        return None
    try:
        # h5py's lock around every call into HDF5 (its library is not thread-safe).
        from h5py._objects import phil

        phase = library.H5Pset_link_phase_change
        fletcher = library.H5Pset_fletcher32
        version = library.H5get_libversion
    except (ImportError, OSError, AttributeError):
        return None
    phase.argtypes = [ctypes.c_int64, ctypes.c_uint, ctypes.c_uint]
    phase.restype = ctypes.c_int
    fletcher.argtypes = [ctypes.c_int64]
    fletcher.restype = ctypes.c_int
    version.argtypes = [ctypes.POINTER(ctypes.c_uint)] * 3
    version.restype = ctypes.c_int
    numbers = [ctypes.c_uint() for _ in range(3)]
    with phil:
        found = version(*numbers)
    if found < 0 or tuple(n.value for n in numbers) != h5py.version.hdf5_version_tuple:
        return None  # not the library h5py's own identifiers belong to

    def calls(gcpl: int) -> bool:
        with phil:
            return phase(gcpl, COMPACT_LINKS, _DENSE_BELOW) >= 0 and fletcher(gcpl) >= 0

    # A library that does not know h5py's identifiers fails here.  (The list is
    # kept in a name: its identifier is closed as soon as the object is freed.)
    probe = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
    if not calls(probe.id):
        return None
    return calls
