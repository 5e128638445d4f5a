"""Workload: the small edits of ``small_edits`` on 1 MiB chunks.

The same 10M-element float64 array as ``small_edits``, stored in 131072-element chunks
(1 MiB) instead of 1024 (8 KiB); 100 commits each overwrite 100 consecutive elements at a
random offset, so that every commit rewrites one or two whole 1 MiB chunks. Measures what
``small_edits`` measures, with the same code: the initial commit, every commit, the file
size, full reads of the newest and an old version (the file opened anew for each) and 200
reads of 100 elements of an old version. The plain h5py reference applies the same edits
in place.
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _common import Metrics, main, require_library
from small_edits import Sizes, run_sized

NAME = "big_chunk_edits"
LIBRARIES = ("h5vc", "versioned_hdf5", "h5py", "icechunk")
H5PY_BASELINE = {"initial_commit_s": "write_s"}

FULL = Sizes(
    length=10_000_000,
    chunk=131_072,
    commits=100,
    edit_length=100,
    window=10,
    small_reads=200,
    read_length=100,
)
QUICK = Sizes(
    length=1_000_000,
    chunk=131_072,
    commits=10,
    edit_length=100,
    window=3,
    small_reads=50,
    read_length=100,
)


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    return run_sized(lib, workdir, NAME, QUICK if quick else FULL)


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
