"""RawDataSlab.read_pieces: pieces of ``raw_data`` given as arrays land where numpy puts
them, whether positioned reads serve all of them, some (the rest read by HDF5) or none
(a result of another dtype: copied through h5py)."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from h5vc.store import fastread, planner
from h5vc.store.reading import RawDataSlab


@pytest.fixture(autouse=True)
def positioned_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planner, "FAST_READ_MIN_BYTES", 0)


PIECES = (
    np.array([[0, 0], [16, 2], [30, 5], [8, 0]], np.int64),  # src
    np.array([[0, 0], [0, 6], [5, 0], [10, 6]], np.int64),  # dst
    np.array([[5, 6], [10, 4], [5, 5], [2, 4]], np.int64),  # count
)


def expected(raw: np.ndarray, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    out = np.zeros(shape, dtype)
    for s, d, c in zip(*PIECES):
        out[d[0] : d[0] + c[0], d[1] : d[1] + c[1]] = raw[s[0] : s[0] + c[0], s[1] : s[1] + c[1]]
    return out


@pytest.mark.parametrize("served", ["all", "some", "none"])
@pytest.mark.parametrize("mode", ["r", "r+"])
def test_read_pieces_equal_numpy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: str, mode: str
) -> None:
    raw = np.arange(40 * 10, dtype=np.float64).reshape(40, 10)
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f.create_dataset("raw_data", data=raw, chunks=(8, 10), maxshape=(None, 10))
    real = fastread.FastReader.read
    asked: list[int] = []

    def read(self: fastread.FastReader, destination: np.ndarray, src, dst, count) -> list[int]:  # type: ignore[no-untyped-def]
        asked.append(len(count))
        src, dst, count = (np.asarray(a, np.int64) for a in (src, dst, count))
        if served == "some" and len(count) > 1:  # the odd pieces left for HDF5
            keep = np.arange(0, len(count), 2)
            real(self, destination, src[keep], dst[keep], count[keep])
            return list(range(1, len(count), 2))
        return real(self, destination, src, dst, count)

    monkeypatch.setattr(fastread.FastReader, "read", read)
    dtype = "<f4" if served == "none" else "<f8"
    with h5py.File(tmp_path / "f.h5", mode) as f:
        out = np.zeros((12, 10), dtype)
        RawDataSlab(f["raw_data"]).read_pieces(out, *PIECES)
    np.testing.assert_array_equal(out, expected(raw, (12, 10), dtype))
    assert bool(asked) == (served != "none")
