"""Imports point down only: the layers of docs/architecture.md, checked on the source.

Every module of ``src/h5vc`` is parsed with ``ast``; every import (module level,
inside functions, under ``if TYPE_CHECKING:``) is resolved to the h5vc module it
names.  A module may import modules of a lower layer, and modules of its own
package; never a higher layer, never another package of its own layer.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import h5vc

SRC = Path(h5vc.__file__).resolve().parent

#: Layers from the top down, as in docs/architecture.md; a package's name is its key.
LAYERS: list[set[str]] = [
    {"h5vc.cli"},
    {"h5vc.xarray"},
    {"h5vc.dask"},
    {"h5vc"},  # the package's public names
    {"h5vc.readers"},
    {"h5vc.api"},
    {"h5vc.lifecycle"},
    {"h5vc.wrappers"},
    {"h5vc.columns"},
    {"h5vc.versions"},
    {"h5vc.store", "h5vc.samples", "h5vc.filecache", "h5vc.durable"},
    {"h5vc.hdf5", "h5vc.staging"},
    {
        "h5vc.hashing",
        "h5vc.chunking",
        "h5vc.remote",
        "h5vc.blockwrite",
        "h5vc.cores",
        "h5vc.deflate",
        "h5vc.lazy",
    },
    {"h5vc.config"},  # the tunables, read by every layer above
    {"h5vc.errors"},
]


def module_names() -> dict[str, Path]:
    """``{dotted module name: file}`` for every module of the package."""
    modules = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


MODULES = module_names()


def unit(module: str) -> str:
    """The layer unit a module belongs to: its top-level package below ``h5vc``."""
    parts = module.split(".")
    return ".".join(parts[:2])


def rank(module: str) -> int:
    name = unit(module)
    for number, layer in enumerate(LAYERS):
        if name in layer:
            return number
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS and docs/architecture.md")


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def resolve(module: str, node: ast.ImportFrom | ast.Import, is_package: bool) -> list[str]:
    """The h5vc modules an import statement names."""
    targets: list[str] = []
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
        return [name for name in names if name == "h5vc" or name.startswith("h5vc.")]
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join([*package, base] if base else package)
    if base != "h5vc" and not base.startswith("h5vc."):
        return []
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        targets.append(submodule if submodule in MODULES else base)
    return targets


def imports(module: str) -> list[tuple[str, int, bool]]:
    """``(imported module, line, only for type checking)`` of every import in ``module``."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[str, int, bool]] = []
    is_package = path.name == "__init__.py"

    def visit(node: ast.AST, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                for target in resolve(module, child, is_package):
                    found.append((target, child.lineno, typing_only))
            visit(child, typing_only or (isinstance(child, ast.If) and is_type_checking(child)))

    visit(tree, False)
    return found


def test_every_module_has_a_layer() -> None:
    assert "h5vc.staging.transfer" in MODULES and "h5vc.versions.commit" in MODULES
    for module in MODULES:
        rank(module)


def test_imports_point_down() -> None:
    upward = []
    for module in MODULES:
        for target, line, _ in imports(module):
            if unit(target) == unit(module):
                continue
            if rank(target) <= rank(module):
                upward.append(f"{module}:{line} imports {target}")
    assert not upward, "imports that do not point down:\n" + "\n".join(upward)


def test_no_import_cycles() -> None:
    """No cycle between modules (imports under ``if TYPE_CHECKING:`` never run)."""
    graph = {
        module: sorted({t for t, _, typing_only in imports(module) if not typing_only} - {module})
        for module in MODULES
    }
    cycles = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in graph.get(module, []):
            if state.get(target) == 1:
                cycles.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in state:
                walk(target)
        path.pop()
        state[module] = 2

    for module in graph:
        if module not in state:
            walk(module)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_hdf5_floor_knows_nothing_above_it() -> None:
    """``h5vc.hdf5`` holds HDF5's bytes: it never imports the store, the sample
    stores or anything built on them, and the store and samples share it."""
    above = {unit(m) for m in MODULES if rank(m) < rank("h5vc.hdf5.header")}
    assert {"h5vc.store", "h5vc.samples", "h5vc.versions", "h5vc.api"} <= above
    offenders = [
        f"{module}:{line} imports {target}"
        for module in MODULES
        if unit(module) == "h5vc.hdf5"
        for target, line, _ in imports(module)
        if unit(target) in above
    ]
    assert not offenders, offenders
    # The store and the sample stores both run chunks through the floor's one filter
    # pipeline and look them up in its one chunk table.
    for user in ("h5vc.store", "h5vc.samples"):
        used = {t for m in MODULES if unit(m) == user for t, _, _ in imports(m)}
        assert {"h5vc.hdf5.codecs", "h5vc.hdf5.chunktable"} <= used, user
    # HDF5's plugin filter ids (Blosc 32001, Zstandard 32015) are spelled on the floor only.
    spelled = [
        module
        for module, path in MODULES.items()
        if unit(module) != "h5vc.hdf5"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and node.value in (32001, 32015)
    ]
    assert not spelled, spelled


def test_staging_never_imports_h5py() -> None:
    offenders = [
        f"{module}:{node.lineno}"
        for module, path in MODULES.items()
        if unit(module) == "h5vc.staging"
        for node in ast.walk(ast.parse(path.read_text()))
        if (
            isinstance(node, ast.Import) and any(a.name.split(".")[0] == "h5py" for a in node.names)
        )
        or (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "h5py")
    ]
    assert not offenders, f"h5vc.staging imports h5py at {offenders}"


def test_importing_staging_does_not_load_h5py() -> None:
    code = "import sys, h5vc.staging; print('h5py' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from h5vc.api import VersionedHDF5File", ["h5vc.api"]),
        ("from h5vc.store import tree", ["h5vc.store.tree"]),
        ("import h5vc.wrappers.group", ["h5vc.wrappers.group"]),
        ("from . import log", ["h5vc.versions.log"]),
        ("from ..store import layout", ["h5vc.store.layout"]),
    ],
)
def test_imports_are_resolved(source: str, expected: list[str]) -> None:
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.Import | ast.ImportFrom)
    assert resolve("h5vc.versions.state", node, is_package=False) == expected
