"""verify reports a version's subgroup HDF5 cannot read instead of failing on it."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

import h5vc


def _file_with_subgroup(path: Path) -> int:
    """A file whose version v1 holds ``a`` and ``sub/b``; the address of ``sub``."""
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("a", data=np.arange(10.0))
            g.create_group("sub").create_dataset("b", data=np.arange(20.0))
        with vf.stage_version("v2") as g:
            g["a"][0] = -1
    with h5py.File(path, "r") as f:
        return int(h5py.h5o.get_info(f["_version_data/versions/v1/sub"].id).addr)


@pytest.mark.parametrize("mode", ["r", "r+"])
def test_a_damaged_subgroup_is_a_problem_of_its_version(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "data.h5"
    address = _file_with_subgroup(path)
    clean = path.read_bytes()
    reported = 0
    for offset in range(0, 64, 4):
        damaged = bytearray(clean)
        for k in range(4):
            damaged[address + offset + k] ^= 0xFF
        copy = tmp_path / f"damaged-{offset}.h5"
        copy.write_bytes(bytes(damaged))
        with h5vc.open(str(copy), mode) as vf:
            report = h5vc.verify(vf)  # never raises for a damaged member
            if report.ok:
                continue  # bytes nothing reads (reserved or padding)
            reported += 1
            kinds = {problem.kind for problem in report.problems}
            assert "mapping" in kinds, report.problems
            named = [p for p in report.problems if p.kind == "mapping"]
            assert any("v1" in p.versions and "sub" in p.object for p in named), named
            # the datasets outside the damaged group are still read
            assert vf["v2"]["a"][0] == -1
    assert reported >= 4, "the damage was reported for several of the flipped words"
