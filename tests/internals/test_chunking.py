"""Automatic chunk shapes and chunk-cache settings."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from h5vc.chunking import MAX_CHUNK_BYTES, chunk_cache, guess_chunks, next_prime


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 10**7), min_size=1, max_size=4),
    st.sampled_from(["u1", "i4", "f8", "c16", "S10"]),
)
def test_guessed_chunks_fit_the_data_and_the_byte_budget(shape: list[int], dtype: str) -> None:
    chunks = guess_chunks(tuple(shape), np.dtype(dtype))
    assert len(chunks) == len(shape)
    assert all(c >= 1 for c in chunks)
    assert all(c <= max(n, 1024) for c, n in zip(chunks, shape))
    nbytes = math.prod(chunks) * np.dtype(dtype).itemsize
    assert nbytes <= MAX_CHUNK_BYTES or max(chunks) == 1


def test_small_data_is_one_chunk_and_large_data_is_split() -> None:
    assert guess_chunks((100, 20), np.dtype("f8")) == (100, 20)
    chunks = guess_chunks((4000, 4000), np.dtype("f8"))
    assert 64 * 1024 <= math.prod(chunks) * 8 <= MAX_CHUNK_BYTES
    assert guess_chunks((0,), np.dtype("f8"), maxshape=(None,)) == (1024,)


@pytest.mark.parametrize("n", [0, 1, 2, 10, 97, 100, 7919, 12800])
def test_next_prime(n: int) -> None:
    p = next_prime(n)
    assert p >= n and all(p % d for d in range(2, math.isqrt(p) + 1)) and p >= 2
    assert all(any(k % d == 0 for d in range(2, math.isqrt(k) + 1)) for k in range(max(n, 2), p))


def test_chunk_cache_follows_the_hdf5_guidance() -> None:
    cache = chunk_cache(8192, n_chunks=10**6, cached_chunks=128)
    assert cache.nbytes == 8192 * 128
    assert cache.nslots == next_prime(100 * 128) and cache.w0 == 0.0
    small = chunk_cache(8192, n_chunks=50, cached_chunks=128)
    assert small.nslots == next_prime(50)  # never more slots than chunks
    assert chunk_cache(0, 10).nbytes == 0  # cache off
    assert chunk_cache(8192, 10, reread=False).w0 == 1.0
    assert set(cache.as_h5py_kwargs()) == {"rdcc_nbytes", "rdcc_nslots", "rdcc_w0"}
