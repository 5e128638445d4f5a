"""The sample stores are an extra: the versioned store works without their dependency
(xxhash), and ``h5vc.samples`` says what is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

WITHOUT_XXHASH = """
import sys
sys.modules["xxhash"] = None  # as if it were not installed: importing it raises
import numpy as np
import h5vc

path = sys.argv[1]
with h5vc.open(path, "w") as vf, vf.stage_version("v1") as g:
    g.create_dataset("x", data=np.arange(5), chunks=(2,))
with h5vc.open(path, "r+") as vf:
    with vf.stage_version("v2") as g:
        g["x"][0] = 7
    vf.create_branch("b")
    h5vc.delete_versions(vf, ["v1"])
with h5vc.open(path) as vf:
    assert vf["v2"]["x"][:].tolist() == [7, 1, 2, 3, 4]
    assert h5vc.verify(vf).ok
assert "h5vc.samples" not in sys.modules
try:
    import h5vc.samples
except h5vc.MissingDependencyError as err:
    print("missing:", err)
"""


def test_the_versioned_store_needs_no_xxhash(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", WITHOUT_XXHASH, str(tmp_path / "data.h5")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "missing: h5vc.samples needs xxhash" in run.stdout
    assert "h5vc[samples]" in run.stdout
