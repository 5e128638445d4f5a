"""Rebuilding the groups of a file as another kind of HDF5 group, for tests of code that
reads groups from a file's bytes."""

from __future__ import annotations

import h5py


def rebuild_groups(group: h5py.Group, header: int) -> None:
    """Make every group below ``group`` (and not ``group``) a group keeping its links as
    link messages in an object header of version ``header`` (1 or 2), or, for 0, a group
    of the old kind (a symbol table), holding the same objects (hard links to them) and
    attributes. Soft and external links are left as they are."""
    if header not in (0, 1, 2):
        raise ValueError(f"Expected an object header version of 0, 1 or 2. Got {header!r}.")
    for name in list(group):
        if not isinstance(group.get(name, getlink=True), h5py.HardLink):
            continue
        old = group[name]
        if not isinstance(old, h5py.Group):
            continue
        rebuild_groups(old, header)
        gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
        if header:
            gcpl.set_link_creation_order(h5py.h5p.CRT_ORDER_TRACKED)
        if header == 2:  # attribute creation order needs a version-2 header
            gcpl.set_attr_creation_order(h5py.h5p.CRT_ORDER_TRACKED)
        h5py.h5g.create(group.id, b"_new", gcpl=gcpl)
        new = group["_new"]
        for member in old:
            new[member] = old[member]
        for key, value in old.attrs.items():
            new.attrs[key] = value
        del group[name]
        group.move("_new", name)
