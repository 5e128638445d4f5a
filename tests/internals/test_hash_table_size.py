"""Small datasets do not pay for large hash-table chunks."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

import h5vc


def test_a_hundred_tiny_datasets_make_a_small_file(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    with h5vc.open(str(path), "w") as vf, vf.stage_version("v1") as g:
        for i in range(100):
            g.create_dataset(f"d{i}", data=np.arange(3, dtype=np.int64))
    # versioned-hdf5 writes 4.2 MB for this; 4096-row hash-table chunks made 20.4 MB.
    assert os.path.getsize(path) < 4_200_000
    with h5vc.open(str(path)) as vf:
        assert vf["v1"]["d99"][()].tolist() == [0, 1, 2]
