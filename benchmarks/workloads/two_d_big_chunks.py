"""Workload: the 2-d dataset of ``two_d`` in 1000x1000 chunks.

The same 4000x4000 float64 array as ``two_d``, stored in 1000x1000 chunks (8 MB each,
16 chunks) instead of 100x100; 10 commits each overwrite a 10x10 block at a random
position. Measures what ``two_d`` measures, with the same code: the initial commit,
every commit, the file size, full reads of the newest and an old version (the file
opened anew for each) and 50 reads of unaligned 100x100 blocks of an old version. The
plain h5py reference writes the same array with the same chunks and edits it in place.
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _common import Metrics, main, require_library
from two_d import Sizes, run_sized

NAME = "two_d_big_chunks"
LIBRARIES = ("h5vc", "versioned_hdf5", "h5py", "icechunk")
H5PY_BASELINE = {"initial_commit_s": "write_s"}

FULL = Sizes(
    side=4000, chunk=1000, commits=10, edit_side=10, window=3, block_reads=50, read_side=100
)
QUICK = Sizes(
    side=1000, chunk=500, commits=4, edit_side=10, window=2, block_reads=10, read_side=100
)


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    return run_sized(lib, workdir, NAME, QUICK if quick else FULL)


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
