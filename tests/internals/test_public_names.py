"""The public face of ``h5vc``: one table of names gives ``h5vc.<name>``, ``__all__``
and ``dir(h5vc)``; every error and warning type of ``h5vc.errors`` is among them."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import h5vc
from h5vc import errors


def defined_in_errors() -> set[str]:
    """Every exception and warning class that ``h5vc/errors.py`` defines."""
    return {
        name
        for name, value in inspect.getmembers(errors, inspect.isclass)
        if issubclass(value, BaseException) and value.__module__ == errors.__name__
    }


def test_errors_all_lists_every_error_and_warning_class() -> None:
    defined = defined_in_errors()
    assert {"H5vcError", "ClosedError", "UnjournaledFileWarning"} <= defined
    assert len(errors.__all__) == len(set(errors.__all__)), "errors.__all__ has duplicates"
    assert set(errors.__all__) == defined


@pytest.mark.parametrize("name", sorted(defined_in_errors()))
def test_every_error_is_a_public_name(name: str) -> None:
    assert name in h5vc.__all__
    assert getattr(h5vc, name) is getattr(errors, name)


def test_all_has_no_duplicates_and_every_name_resolves() -> None:
    assert len(h5vc.__all__) == len(set(h5vc.__all__))
    for name in h5vc.__all__:
        assert getattr(h5vc, name) is not None, name
    assert h5vc.VersionedHDF5File.__module__ == "h5vc.api"
    assert isinstance(h5vc.__version__, str)


def test_dir_covers_all_and_the_lazy_submodules() -> None:
    listed = dir(h5vc)
    assert set(h5vc.__all__) <= set(listed)
    assert {"api", "lifecycle", "errors"} <= set(listed)
    assert listed == sorted(listed)


def test_a_missing_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'NoSuchError'"):
        h5vc.NoSuchError  # noqa: B018
    assert not hasattr(h5vc, "cli_does_not_exist")


def test_type_checkers_see_the_lazy_names_of_the_table() -> None:
    """The ``if TYPE_CHECKING:`` imports of ``h5vc/__init__.py`` re-export exactly the
    names the table imports on first use, from the same modules."""
    tree = ast.parse(Path(h5vc.__file__).read_text())
    seen: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom)
                for alias in statement.names:
                    assert alias.asname == alias.name, f"{alias.name} is not re-exported"
                    seen[alias.name] = str(statement.module)
    lazy = {name: module for name, module in h5vc._PUBLIC.items() if module != "h5vc.errors"}
    assert seen == lazy


def test_import_h5vc_loads_only_the_errors_and_the_tunables() -> None:
    code = (
        "import sys, h5vc; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('h5vc', 'h5py', 'numpy')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "['h5vc', 'h5vc.config', 'h5vc.errors']"


def test_a_first_read_loads_no_lifecycle_tool(tmp_path: Path) -> None:
    """Opening a file and reading a version imports only what reads need: of the
    lifecycle package only the name resolver (branching); the tools (delete, merge,
    diff, verify, ...) load when first used, and neither the sample columns nor the
    sample stores load for a file without columns."""
    path = tmp_path / "data.h5"
    with h5vc.open(str(path), "w") as vf, vf.stage_version("v1") as group:
        group.create_dataset("x", data=[1, 2, 3])
    code = (
        "import sys, h5vc\n"
        f"with h5vc.open({str(path)!r}, 'r') as vf:\n"
        "    assert list(vf['v1']['x'][:]) == [1, 2, 3]\n"
        "print(sorted(m for m in sys.modules if m.startswith('h5vc.lifecycle.')))\n"
        "print(sorted(m for m in sys.modules if m.startswith(('h5vc.columns', 'h5vc.samples'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    lifecycle, columns = result.stdout.strip().splitlines()
    assert lifecycle == "['h5vc.lifecycle.branching']"
    assert columns == "[]"  # sample columns load when a file has one or makes one


@pytest.mark.parametrize("name", h5vc.lifecycle.__all__)
def test_every_lifecycle_name_resolves_on_first_use(name: str) -> None:
    assert getattr(h5vc.lifecycle, name) is not None
    assert name in dir(h5vc.lifecycle)


@pytest.mark.parametrize("name", ["diff", "repack", "stats", "verify"])
def test_a_lifecycle_function_named_like_its_module_stays_the_function(name: str) -> None:
    """Importing the module ``h5vc.lifecycle.<name>`` (as other modules do) leaves
    ``h5vc.lifecycle.<name>`` the function, not the module."""
    code = (
        f"import importlib, h5vc.lifecycle as lc; importlib.import_module('h5vc.lifecycle.{name}'); "
        f"print(callable(lc.{name}), callable(getattr(__import__('h5vc'), {name!r})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "True True"
