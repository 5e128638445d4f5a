"""Fixed costs of opening, reading and committing: work done once, not per call."""

from __future__ import annotations

import numpy as np
import pytest

from h5vc import hashing


@pytest.mark.parametrize(
    ("dtype", "fill"),
    [("f8", 0.0), ("f8", np.nan), ("f8", -0.0), ("i4", 7), ("S3", b"ab"), ("i2,f8", (1, 2.5))],
)
def test_the_hash_of_a_fill_chunk_is_that_of_the_chunk_and_computed_once(
    dtype: str, fill: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hashing, "_FILL_HASHES", {})
    dt = np.dtype(dtype)
    real = hashing.chunk_hash
    calls: list[tuple[int, ...]] = []

    def counted(chunk: np.ndarray) -> bytes:
        calls.append(chunk.shape)
        return real(chunk)

    for shape in [(4,), (2, 3)]:
        chunk = np.empty(shape, dtype=dt)
        chunk[...] = fill
        expected = real(chunk)
        calls.clear()
        monkeypatch.setattr(hashing, "chunk_hash", counted)
        assert hashing.fill_chunk_hash(shape, dt, fill) == expected
        assert hashing.fill_chunk_hash(shape, dt, fill) == expected
        assert calls == [shape]  # hashed once, then remembered
        monkeypatch.setattr(hashing, "chunk_hash", real)


def test_fill_hashes_of_other_fill_values_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hashing, "_FILL_HASHES", {})
    dt = np.dtype("f8")
    zero = hashing.fill_chunk_hash((8,), dt, 0.0)
    assert hashing.fill_chunk_hash((8,), dt, -0.0) != zero
    assert hashing.fill_chunk_hash((8,), dt, 1.0) != zero
    assert hashing.fill_chunk_hash((8,), dt, 0.0) == zero
