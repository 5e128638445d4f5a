"""How many cores this process may run on: the one count every thread pool sizes by."""

from __future__ import annotations

import os

__all__ = ["usable"]


def usable() -> int:
    """Cores this process may run on (its CPU affinity where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1
