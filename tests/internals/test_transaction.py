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
PROTOCOL = {"roll_back", "undo_writes", "forget", "upgrade_layout", "_reopened"}
#: Steps of an :class:`~h5vc.versions.state.Operation`, taken by ``FileState.operation``.
OPERATION_STEPS = {"begin", "commit", "abort", "end"}
#: Where the transaction lives (and the owner whose undo list it runs).
TRANSACTION_CODE = ("versions/state.py", "versions/stores.py")


def _modules() -> list[tuple[str, ast.AST]]:
    found = []
    for module in sorted(SRC.rglob("*.py")):
        relative = module.relative_to(SRC).as_posix()
        if relative in TRANSACTION_CODE or relative.startswith("durable/"):
            continue
        found.append((relative, ast.parse(module.read_text())))
    return found


def _receiver(node: ast.Attribute) -> str:
    receiver = node.value
    if isinstance(receiver, ast.Attribute):
        return receiver.attr
    return receiver.id if isinstance(receiver, ast.Name) else ""


def test_only_the_transaction_takes_the_protocol_steps() -> None:
    callers = []
    for relative, tree in _modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            name = _receiver(node)
            if node.attr in PROTOCOL and "state" in name.lower():
                callers.append(f"{relative}:{node.lineno} {name}.{node.attr}")  # a FileState
            if node.attr == "undo_writes" or (  # the undo list of any owner
                node.attr in OPERATION_STEPS and name in ("op", "operation", "_operation")
            ):
                callers.append(f"{relative}:{node.lineno} {name}.{node.attr}")
            if node.attr == "Operation":  # made by FileState.operation() only
                callers.append(f"{relative}:{node.lineno} {name}.Operation")
            if node.attr == "generation" and isinstance(getattr(node, "ctx", None), ast.Store):
                callers.append(f"{relative}:{node.lineno} sets {name}.generation")
        for node in ast.walk(tree):  # caches are dropped by the state alone
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "clear"
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr in ("stores", "chunk_maps")
            ):
                callers.append(f"{relative}:{node.lineno} {node.func.value.attr}.clear()")
            if isinstance(node, ast.ImportFrom) and any(
                alias.name == "Operation" for alias in node.names
            ):
                callers.append(f"{relative}:{node.lineno} imports Operation")
    assert not callers, callers


def test_the_protocol_check_finds_a_caller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above is not blind: a module taking a step is reported."""
    fake = tmp_path / "h5vc"
    (fake / "lifecycle").mkdir(parents=True)
    (fake / "lifecycle" / "bad.py").write_text(
        "def f(state, op):\n"
        "    state.stores.undo_writes()\n"
        "    op.commit()\n"
        "    state.generation += 1\n"
        "    state.chunk_maps.clear()\n"
    )
    monkeypatch.setattr(f"{__name__}.SRC", fake)
    with pytest.raises(AssertionError) as failed:
        test_only_the_transaction_takes_the_protocol_steps()
    for expected in ("stores.undo_writes", "op.commit", "sets state.generation", "chunk_maps"):
        assert expected in str(failed.value)


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


@pytest.mark.parametrize(
    ("opener", "outcome"),
    [("h5vc", "rolled back"), ("h5py", "rolled back"), ("h5py-core", "undone")],
)
def test_a_failed_operation_says_how_it_ended(tmp_path: Path, opener: str, outcome: str) -> None:
    """A journaled file (opened by h5vc, or a caller's h5py file h5vc took over) is
    rolled back to its commit point; a file without a journal (held in memory) gets
    its chunks taken back. Either way the caches are dropped (a new generation)
    and the chunks written are gone."""
    path = tmp_path / "data.h5"
    with h5vc.open(str(path), "w") as vf, vf.stage_version("v1") as g:
        g.create_dataset("x", data=np.arange(10), chunks=(5,))

    def run(vf: h5vc.VersionedHDF5File) -> None:
        state = resolve_state(vf)
        rows = state.stores.require("x", "v1").raw_data.shape[0]
        generation = state.generation
        with pytest.raises(RuntimeError, match="fails"), state.operation() as op:
            assert op.outcome == "open" and op.outer is None
            with state.operation() as inner:
                assert inner.outer is op
            store = state.stores.writable(
                "x", dtype=np.dtype(int), chunks=(5,), fillvalue=0, filters={}
            )
            store.store_array(np.arange(100, 110))
            raise RuntimeError("fails")
        assert op.outcome == outcome
        assert inner.outcome == "open"  # the outer operation's outcome is its own
        state = resolve_state(vf)
        assert state.generation > generation
        assert state.stores.require("x", "v1").raw_data.shape[0] == rows
        with state.operation() as op:
            state.set_current_version("v1")
        assert op.outcome == "committed"

    if opener == "h5vc":
        with h5vc.open(str(path), "r+") as vf:
            run(vf)
    else:
        driver = "core" if opener == "h5py-core" else None
        with h5py.File(path, "r+", driver=driver) as f:
            run(h5vc.VersionedHDF5File(f))
    with h5vc.open(str(path)) as vf:
        assert vf["v1"]["x"][:].tolist() == list(range(10))
        assert h5vc.verify(vf).ok
