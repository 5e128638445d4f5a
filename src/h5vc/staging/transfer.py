"""Transfers of n-dimensional hyperslabs between two array-likes.

A :class:`TransferPlan` is a list of *slice pairs*: for each, a source start, a
destination start, a shared count and a step per axis on either side (the
``start``/``stride``/``count`` of an HDF5 hyperslab). Pairs that continue one
another along axis 0 on both sides are merged when the plan is built, so chunks
lying in consecutive rows of a slab move in a single call: one hyperslab read of a
:class:`HyperslabReader` slab or one numpy copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

__all__ = ["HyperslabReader", "TransferPlan", "endpoint_name", "read_many_slices"]

#: Endpoint of a transfer that is not a slab: the ``__setitem__`` value or the
#: ``__getitem__`` result buffer.
VALUE = "value"
OUT = "out"

Endpoint = int | str

_REPR_MAX_LINES = 50


def endpoint_name(endpoint: Endpoint) -> str:
    return endpoint if isinstance(endpoint, str) else f"slabs[{endpoint}]"


def _format_selection(starts: list[int], counts: list[int], steps: tuple[int, ...]) -> str:
    parts = []
    for start, count, step in zip(starts, counts, steps):
        stop = start + (count - 1) * step + 1
        parts.append(f"{start}:{stop}" if step == 1 else f"{start}:{stop}:{step}")
    return ", ".join(parts)


def _merge_runs(
    src_start: np.ndarray,
    dst_start: np.ndarray,
    count: np.ndarray,
    src_step: tuple[int, ...],
    dst_step: tuple[int, ...],
    uniform_source: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort the pairs and merge those that continue each other along axis 0."""
    ndim = count.shape[1]
    leading = dst_start[:, 0] if uniform_source else src_start[:, 0]
    group_keys = [count[:, axis] for axis in range(1, ndim)]
    group_keys += [dst_start[:, axis] for axis in range(1, ndim)]
    if not uniform_source:
        group_keys += [src_start[:, axis] for axis in range(1, ndim)]
    order = np.lexsort([leading, *group_keys[::-1]])
    src_start, dst_start, count = src_start[order], dst_start[order], count[order]
    continues = dst_start[1:, 0] == dst_start[:-1, 0] + count[:-1, 0] * dst_step[0]
    if not uniform_source:
        continues &= src_start[1:, 0] == src_start[:-1, 0] + count[:-1, 0] * src_step[0]
    for key in group_keys:
        continues &= key[order][1:] == key[order][:-1]
    run_starts = np.flatnonzero(np.concatenate(([True], ~continues)))
    if len(run_starts) == len(order):
        return src_start, dst_start, count
    merged_count = count[run_starts]
    merged_count[:, 0] = np.add.reduceat(count[:, 0], run_starts)
    return src_start[run_starts], dst_start[run_starts], merged_count


@dataclass(frozen=True, slots=True, repr=False)
class TransferPlan:
    """Slice pairs from one source to one destination, merged into runs.

    ``src_start``, ``dst_start`` and ``count`` have shape ``(n_pairs, ndim)``.
    A *uniform* source (the fill-value slab, a scalar value) holds the same
    value everywhere, so only the destination positions matter.
    """

    src: Endpoint
    dst: Endpoint
    src_start: np.ndarray
    dst_start: np.ndarray
    count: np.ndarray
    src_step: tuple[int, ...]
    dst_step: tuple[int, ...]
    uniform_source: bool = False

    @classmethod
    def build(
        cls,
        src: Endpoint,
        dst: Endpoint,
        src_start: np.ndarray,
        dst_start: np.ndarray,
        count: np.ndarray,
        src_step: tuple[int, ...],
        dst_step: tuple[int, ...],
        uniform_source: bool = False,
    ) -> TransferPlan:
        """Plan the pairs, merging consecutive runs along axis 0."""
        if len(count) > 1:
            src_start, dst_start, count = _merge_runs(
                src_start, dst_start, count, src_step, dst_step, uniform_source
            )
        return cls(src, dst, src_start, dst_start, count, src_step, dst_step, uniform_source)

    def __len__(self) -> int:
        return len(self.count)

    @property
    def source_slab(self) -> int:
        assert isinstance(self.src, int)
        return self.src

    @property
    def destination_slab(self) -> int:
        assert isinstance(self.dst, int)
        return self.dst

    def lines(self) -> list[str]:
        """The transfers as Python statements, one per slice pair."""
        src, dst = endpoint_name(self.src), endpoint_name(self.dst)
        plural = "" if len(self) == 1 else "s"
        lines = [f"# {len(self)} transfer{plural} from {src} to {dst}"]
        rows = zip(self.src_start.tolist(), self.dst_start.tolist(), self.count.tolist())
        for i, (src_start, dst_start, count) in enumerate(rows):
            if i == _REPR_MAX_LINES:
                lines.append(f"# ... {len(self) - i} more")
                break
            dst_sel = _format_selection(dst_start, count, self.dst_step)
            if self.uniform_source:
                corner = ", ".join("0" * len(count))
                lines.append(f"{dst}[{dst_sel}] = {src}[{corner}]")
                continue
            src_sel = _format_selection(src_start, count, self.src_step)
            lines.append(f"{dst}[{dst_sel}] = {src}[{src_sel}]")
        return lines

    def __repr__(self) -> str:
        return "\n".join(self.lines())

    def execute(self, source: Any, destination: np.ndarray) -> None:
        """Copy every slice pair from ``source`` into ``destination``."""
        read_many_slices(
            source,
            destination,
            self.src_start,
            self.dst_start,
            self.count,
            self.src_step,
            self.dst_step,
            self.uniform_source,
        )


def _slices(starts: list[int], counts: list[int], steps: tuple[int, ...]) -> tuple[slice, ...]:
    return tuple(
        slice(start, start + (count - 1) * step + 1, step)
        for start, count, step in zip(starts, counts, steps)
    )


class HyperslabReader(Protocol):
    """A base slab that fills a numpy array in place, one hyperslab per slice pair
    (``h5vc.store.reading.RawDataSlab`` for ``raw_data``)."""

    def read_hyperslabs(
        self,
        destination: np.ndarray,
        src_starts: list[list[int]],
        dst_starts: list[list[int]],
        counts: list[list[int]],
        src_step: tuple[int, ...],
        dst_step: tuple[int, ...],
    ) -> bool:
        """Copy every slice pair; False (nothing copied) if ``destination`` does not suit."""
        ...


def read_many_slices(
    source: Any,
    destination: np.ndarray,
    src_start: np.ndarray,
    dst_start: np.ndarray,
    count: np.ndarray,
    src_step: tuple[int, ...],
    dst_step: tuple[int, ...],
    uniform_source: bool = False,
) -> None:
    """``destination[dst slice] = source[src slice]`` for every slice pair.

    ``source`` may be any numpy-like array; a :class:`HyperslabReader` fills
    ``destination`` in place.
    """
    counts = count.tolist()
    dst_starts = dst_start.tolist()
    if uniform_source:
        fill = source[(0,) * len(src_step)]
        for starts, counts_row in zip(dst_starts, counts):
            destination[_slices(starts, counts_row, dst_step)] = fill
        return
    src_starts = src_start.tolist()
    reader = getattr(source, "read_hyperslabs", None)
    if reader is not None and reader(
        destination, src_starts, dst_starts, counts, src_step, dst_step
    ):
        return
    for src_row, dst_row, counts_row in zip(src_starts, dst_starts, counts):
        destination[_slices(dst_row, counts_row, dst_step)] = source[
            _slices(src_row, counts_row, src_step)
        ]
