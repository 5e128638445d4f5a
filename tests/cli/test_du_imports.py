"""``h5vc du`` loads no module it does not need."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import h5vc

DU = """\
import json, sys
from h5vc.cli._app import open_versioned
from h5vc.cli._stats import disk_usage
with open_versioned({path!r}) as vf:
    usage = disk_usage(vf)
print(json.dumps({{"versions": len(usage.versions), "ma": "numpy.ma" in sys.modules}}))
"""


def test_du_does_not_import_numpy_ma(tmp_path: Path) -> None:
    """np.unique's first call imports numpy.ma (20-40 ms): du counts without it."""
    path = tmp_path / "f.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(100), chunks=(10,))
            g.create_group("g").create_dataset("y", data=np.ones(20), chunks=(5,))
        for n in range(2, 5):
            with vf.stage_version(f"v{n}") as g:
                g["x"][10 * n] = -n
    done = subprocess.run(
        [sys.executable, "-c", DU.format(path=str(path))],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout) == {"versions": 4, "ma": False}
