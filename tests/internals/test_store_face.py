"""``h5vc.store`` has one face, and only the store makes or removes layout objects.

The layers above the store (``versions/`` and ``lifecycle/``) import it through its
package (``from h5vc.store import name`` with names of ``h5vc.store.__all__``), and
never create, copy or delete HDF5 objects or write attributes themselves: they call the
store's functions.  Checked on the source with ``ast``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import h5vc.store

SRC = Path(h5vc.store.__file__).resolve().parents[1]
#: The packages held to the face.
ABOVE = ("versions", "lifecycle")
#: Methods of h5py objects that create, copy, move or delete HDF5 objects.
MAKERS = {
    "create_group",
    "create_dataset",
    "create_dataset_like",
    "create_virtual_dataset",
    "require_group",
    "require_dataset",
    "__delitem__",
    "__setitem__",
    "move",
}
#: Functions of h5py's low-level API that create objects or links.
LOW_LEVEL = {"h5d", "h5g", "h5l", "h5o", "h5a"}
#: ``del x[k]`` on these Python mappings is no HDF5 deletion (an LRU cache's dict, the
#: dicts of refs read once).
PYTHON_MAPPINGS = {"_data", "refs"}


def _leaf(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def offences(src: Path, face: set[str]) -> list[str]:
    """Where modules of ``src/{versions,lifecycle}`` step around the store's face."""
    found = []
    for package in ABOVE:
        for module in sorted((src / package).rglob("*.py")):
            where = module.relative_to(src).as_posix()
            for node in ast.walk(ast.parse(module.read_text())):
                found += [f"{where}:{node.lineno} {what}" for what in _check(node, face)]
    return found


def _check(node: ast.AST, face: set[str]) -> list[str]:
    problems = []
    if isinstance(node, ast.Import):
        problems += [
            f"import {alias.name}" for alias in node.names if alias.name.startswith("h5vc.store")
        ]
    elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("h5vc.store"):
        if node.module != "h5vc.store":
            problems.append(f"from {node.module} import (a submodule, not the face)")
        else:
            problems += [
                f"h5vc.store.{a.name} is not in the face" for a in node.names if a.name not in face
            ]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        method, receiver = node.func.attr, node.func.value
        if method in MAKERS:
            problems.append(f".{method}()")
        if method == "copy" and any(k.arg == "name" for k in node.keywords):
            problems.append(".copy(..., name=...) (HDF5's object copy)")
        if _leaf(receiver) == "attrs" and method in ("create", "modify", "update"):
            problems.append(f".attrs.{method}()")
        if _leaf(receiver) in LOW_LEVEL and method.startswith(("create", "link", "move")):
            problems.append(f"{_leaf(receiver)}.{method}()")
    elif isinstance(node, ast.Delete):
        for target in node.targets:
            if isinstance(target, ast.Subscript):
                held = target.value
                if not (isinstance(held, ast.Subscript) or _leaf(held) in PYTHON_MAPPINGS):
                    problems.append(f"del {ast.unparse(target)}")
    elif isinstance(node, ast.Assign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Subscript) and _leaf(target.value) == "attrs":
                problems.append(f"{ast.unparse(target)} = ...")
    return problems


def test_versions_and_lifecycle_use_the_store_through_its_face() -> None:
    assert not offences(SRC, set(h5vc.store.__all__)), offences(SRC, set(h5vc.store.__all__))


def test_the_face_names_what_the_package_has() -> None:
    missing = [name for name in h5vc.store.__all__ if not hasattr(h5vc.store, name)]
    assert not missing
    assert len(set(h5vc.store.__all__)) == len(h5vc.store.__all__)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("from h5vc.store.rawdata import RawDataStore", "a submodule"),
        ("import h5vc.store.tree", "import h5vc.store.tree"),
        ("from h5vc.store import _private", "not in the face"),
        ("group.create_group('g')", ".create_group()"),
        ("state.versions.create_dataset('x', data=[1])", ".create_dataset()"),
        ("parent.require_group('g')", ".require_group()"),
        ("del state.versions[name]", "del state.versions[name]"),
        ("del group['raw_data']", "del group['raw_data']"),
        ("group.__delitem__('x')", ".__delitem__()"),
        ("source.copy(obj, target, name='x')", "HDF5's object copy"),
        ("dataset.attrs['note'] = 1", "dataset.attrs['note'] = ..."),
        ("dataset.attrs.create('note', 1)", ".attrs.create()"),
        ("h5py.h5d.create(group.id, b'x', tid, space)", "h5d.create()"),
    ],
)
def test_the_check_finds_each_kind_of_offence(tmp_path: Path, line: str, expected: str) -> None:
    """The check is not blind: one offending line in lifecycle/ is reported."""
    for package in ABOVE:
        (tmp_path / package).mkdir()
    (tmp_path / "lifecycle" / "bad.py").write_text(f"def f(state, group, name):\n    {line}\n")
    found = offences(tmp_path, set(h5vc.store.__all__))
    assert len(found) == 1 and expected in found[0], found


def test_python_mappings_may_be_deleted_from(tmp_path: Path) -> None:
    for package in ABOVE:
        (tmp_path / package).mkdir()
    (tmp_path / "versions" / "fine.py").write_text(
        "def f(self, refs, kind, name):\n"
        "    del self._data[name]\n"
        "    del refs[name]\n"
        "    del self._load()[kind][name]\n"
        "    copy = values.copy()\n"
    )
    assert offences(tmp_path, set(h5vc.store.__all__)) == []
