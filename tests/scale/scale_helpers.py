"""Data shared by the scale tests (imported by name: keep this module name unique)."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np

#: Timestamps of the versions of the ``versioned`` fixture.
TIMES = {
    "v1": datetime(2024, 1, 1, tzinfo=timezone.utc),
    "v2": datetime(2024, 2, 1, tzinfo=timezone.utc),
    "v3": datetime(2024, 3, 1, tzinfo=timezone.utc),
}


def expected_x(version: str) -> np.ndarray:
    """Contents of dataset ``grid/x`` in each version of the ``versioned`` fixture."""
    x = np.arange(300 * 40, dtype=np.float64).reshape(300, 40)
    if version in ("v2", "v3"):
        x[5:15, 3:7] = -2
    if version == "v3":
        x[250:, :] = -3
    return x
