"""Crash safety: the rollback journal under HDF5 and the files opened through it.

``journal`` is the file object HDF5 writes through; ``files`` opens versioned files
with it, marks commit points, rolls a failed operation back and keeps one writer per
file.
"""
