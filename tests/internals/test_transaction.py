"""Every write goes through one transaction, ``FileState.operation()``."""

from __future__ import annotations

import ast
from pathlib import Path

import h5py
import numpy as np
import pytest

import h5vc
from h5vc.versions import resolve_state

SRC = Path(__file__).resolve().parents[2] / "src" / "h5vc"
#: The steps of the transaction protocol: only the transaction object takes them.
PROTOCOL = {"roll_back", "undo_writes", "forget", "upgrade_layout"}


def test_only_the_transaction_takes_the_protocol_steps() -> None:
    callers = []
    for module in sorted(SRC.rglob("*.py")):
        relative = module.relative_to(SRC).as_posix()
        if relative in ("versions/state.py",) or relative.startswith("durable/"):
            continue
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in PROTOCOL:
                receiver = node.value
                name = receiver.attr if isinstance(receiver, ast.Attribute) else ""
                name = receiver.id if isinstance(receiver, ast.Name) else name
                if "state" in name.lower():  # a FileState (other objects have forget())
                    callers.append(f"{relative}:{node.lineno} {name}.{node.attr}")
    assert not callers, callers


@pytest.mark.parametrize("opener", ["h5vc", "h5py"])
def test_the_callers_own_writes_survive_a_failed_operation(tmp_path: Path, opener: str) -> None:
    """What the caller wrote through h5py before an operation is committed first: an
    operation that fails rolls back only itself."""
    path = tmp_path / "data.h5"
    with h5vc.open(str(path), "w") as vf, vf.stage_version("v1") as g:
        g.create_dataset("x", data=np.arange(10))

    def run(vf: h5vc.VersionedHDF5File) -> None:
        vf.f.attrs["note"] = "mine"
        with pytest.raises(RuntimeError, match="abandoned"), vf.stage_version("v2") as g:
            g["x"][0] = 5
            raise RuntimeError("abandoned")
        assert vf.f.attrs["note"] == "mine"

    if opener == "h5vc":
        with h5vc.open(str(path), "r+") as vf:
            run(vf)
    else:
        with h5py.File(path, "r+") as f:
            run(h5vc.VersionedHDF5File(f))
    with h5py.File(path, "r") as f:
        assert f.attrs["note"] == "mine"
        assert list(f["_version_data/versions"]) == ["__first_version__", "v1"]


def test_an_operation_inside_another_is_part_of_it(tmp_path: Path) -> None:
    """The inner operation makes no commit point of its own: when the outer one fails
    after it, both are rolled back."""
    path = tmp_path / "data.h5"
    with h5vc.open(str(path), "w") as vf:
        for number in range(3):
            with vf.stage_version(f"v{number}") as g:
                if number == 0:
                    g.create_dataset("x", data=np.arange(10))
                else:
                    g["x"][number] = -number
        state = resolve_state(vf)
        with pytest.raises(RuntimeError, match="after the inner"), state.operation():
            h5vc.delete_versions(vf, ["v1"])  # an operation of its own
            assert vf.versions == ["v0", "v2"]
            raise RuntimeError("after the inner operation")
        assert vf.versions == ["v0", "v1", "v2"]
        assert vf["v1"]["x"][1] == -1
    with h5vc.open(str(path)) as vf:
        assert vf.versions == ["v0", "v1", "v2"]
        assert vf["v1"]["x"][:3].tolist() == [0, -1, 2]
        assert h5vc.verify(vf).ok
