"""What a merge, cherry-pick or revert did: plain data, importable without the merge
machinery (a fast-forward needs nothing else).

:class:`MergeResult` is defined in the package :mod:`h5vc.lifecycle` itself, which
every file loads (with :mod:`h5vc.lifecycle.branching`), so that a fast-forward
imports no module."""

from __future__ import annotations

from h5vc.lifecycle import MergeResult

__all__ = ["MergeResult"]
