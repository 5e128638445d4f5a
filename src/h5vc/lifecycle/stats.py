"""Space used and free in a versioned file."""

from __future__ import annotations

from typing import Any

from h5vc.store import FileSpace, file_space, tree
from h5vc.versions.state import resolve_state

__all__ = ["stats"]


def stats(f: Any) -> FileSpace:
    """Sizes of the versioned file ``f``: the file, its reusable free space, and the
    stored bytes of every dataset's chunk store and hash table.

    ``free_chunk_bytes`` (per dataset ``free_chunks`` and ``free_chunk_bytes``) is
    the chunks ``delete_versions`` released, kept for the next commits to fill, in
    every file.  ``free_bytes`` is the space HDF5 knows to be free inside the file
    (objects of deleted versions, for instance).  A file created without persistent
    free-space tracking (plain ``h5py.File(path, "w")``) forgets that when closed:
    ``persists_free_space`` tells which kind ``f`` is.
    """
    state = resolve_state(f)
    return file_space(state.version_data, tree.store_paths(state.version_data))
