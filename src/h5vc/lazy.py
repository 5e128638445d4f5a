"""Names a package imports from its modules on first use (PEP 562).

A package lists ``{name: defining module}`` (and, optionally, submodules it exposes)
and takes its module-level ``__getattr__`` and ``__dir__`` from :func:`lazy_names`:
``from package import name`` then loads only the module that defines ``name``, and
keeps the value in the package for later lookups.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Collection, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, names: Mapping[str, str], submodules: Collection[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: each of ``names`` is imported from
    its module, each of ``submodules`` is the module ``package.<name>``."""

    def __getattr__(name: str) -> Any:
        if name in submodules:
            value = importlib.import_module(f"{package}.{name}")
        elif name in names:
            value = getattr(importlib.import_module(names[name]), name)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names, *submodules})

    return __getattr__, __dir__
