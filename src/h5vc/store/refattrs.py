"""Branches and tags on disk: attributes of the ``versions`` group.

``h5vc_branch:<name>`` and ``h5vc_tag:<name>`` each hold a version name;
``h5vc_current_branch`` names the branch last committed to or switched to.  One
attribute per ref, so creating, moving or deleting a ref is one attribute write,
whatever the length of history.  versioned-hdf5 reads only ``current_version`` and
``data_version`` on this group and ignores the rest.

Each value is a scalar variable-length UTF-8 string, exactly what h5py's
``attrs[key] = "..."`` writes, written with HDF5's own calls
(:func:`h5vc.store.tree.write_attrs`): h5py's assignment writes a temporary attribute
and renames it, several times the cost.
"""

from __future__ import annotations

import h5py

from h5vc.store import fastattrs, tree

__all__ = ["KINDS", "delete_ref", "read_refs", "set_current_branch", "write_ref"]

KINDS = ("branch", "tag")
_PREFIX = {"branch": "h5vc_branch:", "tag": "h5vc_tag:"}
ATTR_CURRENT_BRANCH = "h5vc_current_branch"


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def read_refs(versions: h5py.Group) -> tuple[dict[str, dict[str, str]], str | None]:
    """``({"branch": {name: version}, "tag": {...}}, current branch or None)``."""
    refs: dict[str, dict[str, str]] = {kind: {} for kind in KINDS}
    # The names through HDF5's own iteration: a tenth of the cost of h5py's, which
    # every first lookup of a version by name pays.
    names: list[bytes] = []
    h5py.h5a.iterate(versions.id, lambda name, *_: names.append(name))
    if not any(name.startswith(b"h5vc_") for name in names):
        return refs, None
    attrs = versions.attrs
    for key in (name.decode("utf-8", "surrogateescape") for name in names):
        for kind, prefix in _PREFIX.items():
            if key.startswith(prefix):
                refs[kind][key[len(prefix) :]] = _text(attrs[key])
    current = attrs.get(ATTR_CURRENT_BRANCH)
    return refs, None if current is None else _text(current)


def write_ref(
    versions: h5py.Group,
    kind: str,
    name: str,
    version: str,
    *,
    written: bool = False,
    new: bool = False,
) -> None:
    """Point ref ``name`` of ``kind`` at ``version`` (creating or moving it).
    ``written``: the ref was written so since the file was last read (it exists and is
    of the kind written here): it is written over without checking.  ``new``: the
    refs read from the file have no such ref, so the attribute is created without
    first looking for one of its name (in a group of many refs the lookup walks the
    attribute index); should one exist after all, HDF5 refuses the creation, having
    changed nothing, and it is written over as without ``new``."""
    key = _PREFIX[kind] + name
    if written:
        fastattrs.write_str_over(versions, key, version)
        return
    if new:
        try:
            if fastattrs.write(versions, key, version, new=True):
                return
        except OSError:
            pass  # the attribute exists: written over below
    tree.write_attrs(versions, {key: version})


def delete_ref(versions: h5py.Group, kind: str, name: str) -> None:
    """Delete ref ``name`` of ``kind``; ``KeyError`` if there is none."""
    h5py.h5a.delete(versions.id, (_PREFIX[kind] + name).encode())


def set_current_branch(versions: h5py.Group, name: str | None) -> None:
    """Record ``name`` as the current branch (None: there is none)."""
    if name is not None:
        tree.write_attrs(versions, {ATTR_CURRENT_BRANCH: name})
    elif h5py.h5a.exists(versions.id, ATTR_CURRENT_BRANCH.encode()):
        h5py.h5a.delete(versions.id, ATTR_CURRENT_BRANCH.encode())
