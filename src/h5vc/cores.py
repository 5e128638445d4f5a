"""How many threads every pool starts: one per core this process may run on, or
``H5VC_THREADS`` (:data:`h5vc.config.THREADS`) where that is set."""

from __future__ import annotations

import os

import h5vc.config as config

__all__ = ["usable"]


def usable() -> int:
    """Cores this process may run on (its CPU affinity where the OS has one), or the
    thread count :data:`h5vc.config.THREADS` where it is set."""
    if config.THREADS:
        return config.THREADS
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1
