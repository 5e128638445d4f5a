"""The history of a version: its ancestors in topological order, and a printable log."""

from __future__ import annotations

from typing import Any

import numpy as np

from h5vc.errors import VersionNotFoundError
from h5vc.lifecycle.branching import resolve_ref
from h5vc.store import layout
from h5vc.versions import VersionInfo, resolve_state

__all__ = ["format_log", "log", "log_blocks"]


def log(f: Any, version: str | None = None, *, first_parent: bool = False) -> list[VersionInfo]:
    """``version`` (a version, tag or branch; default: the current version) and every
    ancestor once, each before its parents (git's ``--topo-order``; of the versions
    ready at a time the newest first).  ``first_parent=True`` follows first parents
    only, through merges along the line they were made on.

    Each entry has the name, parent (``prev_version``, None for a root), the parents
    of a merge, timestamp, message and author.  An empty file has an empty log.
    """
    state = resolve_state(f)
    if version is None:
        start = state.current_version
        if start == layout.FIRST_VERSION:
            return []
    else:
        if not isinstance(version, str):
            raise TypeError(f"Expected a version, tag or branch name. Got {version!r}.")
        if version == layout.FIRST_VERSION:
            raise VersionNotFoundError(
                f"Expected a committed version to start the log at. Got {version!r}, the "
                f"empty root of the history."
            )
        start = resolve_ref(state, version)
    return [
        state.log.info(name) for name in state.log.topological(start, first_parent=first_parent)
    ]


def log_blocks(entries: list[VersionInfo]) -> list[list[str]]:
    """The lines of each version's block in the log, like ``git log``: name, parent(s)
    (none for a first version), author, date, message."""
    if not entries:
        return []
    stamps = np.datetime_as_string(
        np.array([info.timestamp for info in entries], dtype="datetime64[us]"), unit="us"
    )
    blocks = []
    for info, stamp in zip(entries, stamps.tolist()):
        lines = [f"version {info.name}"]
        if info.merge_parents:
            lines.append(f"Merge:  {' '.join(info.parents)}")
        elif info.prev_version is not None:  # a first version has no parent line
            lines.append(f"Parent: {info.prev_version}")
        lines.append(f"Date:   {stamp.replace('T', ' ')}+0000")
        if info.author:
            lines.insert(len(lines) - 1, f"Author: {info.author}")
        if info.message:
            lines.append("")
            lines.extend(f"    {line}" for line in info.message.splitlines())
        blocks.append(lines)
    return blocks


def format_log(entries: list[VersionInfo]) -> str:
    """The log as text: one block per version, like ``git log``."""
    return "\n\n".join("\n".join(lines) for lines in log_blocks(entries))
