"""Compressible 8-bit test images shared by the sample-store tests."""

from __future__ import annotations

import numpy as np

SHAPE = (128, 136)  # more than 16 KiB: backend 00 keeps one sample a chunk


def smooth(count: int, seed: int) -> list[np.ndarray]:
    """Compressible samples: gradients with a little noise."""
    rng = np.random.default_rng(seed)
    rows, cols = np.indices(SHAPE)
    out = []
    for _ in range(count):
        image = rng.integers(0, 100) + rows * rng.integers(0, 3) + cols // rng.integers(1, 4)
        noise = rng.random(SHAPE) < 0.05
        image = np.where(noise, image + rng.integers(0, 20, SHAPE), image)
        out.append(np.ascontiguousarray(np.clip(image, 0, 255).astype(np.uint8)))
    return out
