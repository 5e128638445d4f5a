"""Content hashes of chunks.

A chunk's hash is SHA-256 over its bytes in C order followed by ``str(shape)``
encoded as ASCII (e.g. ``b"(1000,)"``), so chunks of equal bytes but different
shapes (edge chunks) never collide.  This is the rule of the versioned file
format, so chunks written by h5vc and by other writers of the format deduplicate
against each other.

Variable-length strings are hashed over a length-prefixed encoding of each
element (see :func:`_object_bytes`).

A large chunk edited in a few places need not be hashed again whole. SHA-256 reads
its input front to back, so the state it reaches after the bytes a new chunk shares
with an old one is the old chunk's state there. :func:`chunk_hash` keeps, for chunks
of at least :data:`MIN_RESUMED_BYTES`, the hash state every :data:`RESUME_STEP`
bytes and a 128-bit xxh3 of each step's bytes, by digest (the last
:data:`KEPT_STATES` states in all); :func:`chunk_hash_from` is given the new chunk,
the old chunk's bytes as read now and its digest, and hashes on from the last step
where the new bytes equal the old ones byte for byte, and the old ones still have the
xxh3 they had when hashed (a stored chunk altered since is caught there). The digest
is the one :func:`chunk_hash` gives, only sooner: half a chunk's hashing on average
for an edit at a random place, nearly all of it for rows appended to a chunk.

The state at the end of a chunk's bytes is kept too (and the xxh3 of its bytes past
the last whole step), so a chunk that starts with all of the old chunk's bytes (rows
appended to it) is hashed over the new bytes only. Smaller chunks, down to
:data:`MIN_ENDED_BYTES`, keep that end state alone when they are hashed on from the
chunk they were staged from: the short last chunk of a table that grows by appends
is rewritten at every commit until it is full, each time hashed over its new rows.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

import h5vc.config as config

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

__all__ = [
    "chunk_hash",
    "chunk_hash_from",
    "forget_hash_states",
    "resumable",
    "extendable",
    "Base",
    "fill_chunk_hash",
    "hash_in_batches",
    "hash_soon",
    "bytes_to_hash",
    "PendingDigests",
    "fill_item",
    "may_be_fill",
    "prefetch",
    "run_ahead",
]

T = TypeVar("T")
R = TypeVar("R")

#: Bytes per batch of :func:`hash_in_batches`: smaller writes are hashed inline;
#: larger ones hash the next batches on background threads (hashlib releases the GIL
#: while hashing: SHA-256 runs at about 1.4 GB/s a core with the CPU's SHA
#: instructions, about 210 MB/s without) while the caller writes the current one.
HASH_BATCH_BYTES = config.HASH_BATCH_BYTES
_POOL: ThreadPoolExecutor | None = None


def _forget_pool() -> None:
    """In a forked child: the parent's pool has no threads there, and counting its
    idle ones it would never start one. The child makes its own (and a lock of its
    own for the hash states kept, which a thread of the parent may have held)."""
    global _POOL, _KEPT_LOCK
    _POOL = None
    _KEPT_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


def _object_bytes(chunk: np.ndarray) -> bytes:
    """Bytes of a chunk of variable-length strings: each element length-prefixed."""
    parts = []
    for item in chunk.ravel():
        data = item.encode("utf-8") if isinstance(item, str) else bytes(item)
        parts.append(len(data).to_bytes(8, "little"))
        parts.append(data)
    return b"".join(parts)


def chunk_hash(chunk: np.ndarray) -> bytes:
    """SHA-256 digest (32 bytes) identifying the content and shape of ``chunk``."""
    import hashlib  # loaded on the first hash (OpenSSL's library): reads need none

    if chunk.dtype.kind == "O":
        hasher = hashlib.sha256(_object_bytes(chunk))
        hasher.update(str(chunk.shape).encode("ascii"))
        return hasher.digest()
    data = np.ascontiguousarray(chunk).view(np.uint8).reshape(-1)
    if resumable(len(data)):
        return _hash_on(data, chunk.shape, RESUME_STEP, [hashlib.sha256()], [])
    hasher = hashlib.sha256(data.data)
    hasher.update(str(chunk.shape).encode("ascii"))
    return hasher.digest()


#: Chunks of at least this many bytes keep their hash states (see the module's
#: docstring) ...
MIN_RESUMED_BYTES = config.MIN_RESUMED_BYTES
#: ... every this many bytes (each step is one call into hashlib, which lets go of
#: the GIL and must take it back: at 64 KiB, hashing threads waited on the thread
#: writing a large commit often enough to slow it by a sixth) ...
RESUME_STEP = 256 << 10
#: ... and at most this many states are kept in all (those of the chunks hashed last).
KEPT_STATES = 16384
#: A smaller chunk (of at least this many bytes, and of :data:`MIN_RESUMED_BYTES` if
#: fewer) hashed on from the chunk it was staged from keeps only its state at the end
#: of its bytes: rows appended to it next are all that is hashed (the edge chunk of a
#: table that grows by appends is rewritten at every commit until it is full).
MIN_ENDED_BYTES = 32 << 10


def resumable(nbytes: int) -> bool:
    """Whether a chunk of ``nbytes`` keeps its hash states (see the module's docstring)."""
    return MIN_RESUMED_BYTES > 0 and nbytes >= MIN_RESUMED_BYTES


def extendable(nbytes: int) -> bool:
    """Whether a chunk of ``nbytes`` hashed on from the chunk it was staged from keeps
    at least its state at the end of its bytes (:data:`MIN_ENDED_BYTES`): a chunk
    made of it and rows appended is hashed over the new rows only."""
    return MIN_RESUMED_BYTES > 0 and nbytes >= min(MIN_RESUMED_BYTES, MIN_ENDED_BYTES)


class _Steps:
    """What :func:`chunk_hash` keeps of a chunk's hashing: ``states[k]`` has read its
    first ``k * step`` bytes (never updated: copied to go on), ``marks`` the xxh3-128
    of each whole step (none where ``step`` is 0: only the end is kept), ``end`` has
    read all ``nbytes`` bytes hashed, whose ``tail`` is the xxh3-128 of those past the
    last whole step."""

    __slots__ = ("end", "marks", "nbytes", "states", "step", "tail")

    def __init__(
        self, states: list[Any], marks: list[bytes], nbytes: int, step: int, end: Any, tail: bytes
    ):
        self.states = states
        self.marks = marks
        self.nbytes = nbytes
        self.step = step
        self.end = end
        self.tail = tail

    @property
    def count(self) -> int:
        """The hash states held (the end's among them)."""
        return len(self.states) + 1


_KEPT: collections.OrderedDict[bytes, _Steps] = collections.OrderedDict()
_KEPT_LOCK = threading.Lock()
_kept_states = 0


def _keep(digest: bytes, steps: _Steps) -> None:
    global _kept_states
    with _KEPT_LOCK:
        old = _KEPT.pop(digest, None)
        if old is not None:
            _kept_states -= old.count
        _KEPT[digest] = steps
        _kept_states += steps.count
        while _kept_states > KEPT_STATES and _KEPT:
            _, dropped = _KEPT.popitem(last=False)
            _kept_states -= dropped.count


def _kept(digest: bytes) -> _Steps | None:
    with _KEPT_LOCK:
        steps = _KEPT.get(digest)
        if steps is not None:
            _KEPT.move_to_end(digest)
        return steps


def forget_hash_states() -> None:
    """Drop every hash state kept (see the module's docstring)."""
    global _kept_states
    with _KEPT_LOCK:
        _KEPT.clear()
        _kept_states = 0


def _hash_on(
    data: np.ndarray,
    shape: tuple[int, ...],
    step: int,
    states: list[Any],
    marks: list[bytes],
    hasher: Any = None,
    position: int | None = None,
) -> bytes:
    """The digest of ``data`` (bytes of a chunk of ``shape``) hashed on from
    ``hasher``, which has read its first ``position`` bytes (by default a copy of
    ``states[-1]``, which has read ``len(states) - 1`` steps of ``step`` bytes);
    ``states`` and ``marks`` are those of the whole steps before ``position``. The
    states and marks of every whole step (none where ``step`` is 0), and the state at
    the end of ``data``, are kept under the digest."""
    import xxhash

    if hasher is None:
        hasher = states[-1].copy()
        position = (len(states) - 1) * step
    assert position is not None
    end = len(data)
    if step:
        boundary = (position // step + 1) * step
        while boundary <= end:
            hasher.update(data[position:boundary].data)
            marks.append(xxhash.xxh3_128_digest(data[boundary - step : boundary].data))
            states.append(hasher.copy())
            position = boundary
            boundary += step
    if position < end:
        hasher.update(data[position:].data)
    last = hasher.copy()
    tail = xxhash.xxh3_128_digest(data[len(marks) * step :].data)
    hasher.update(str(shape).encode("ascii"))
    digest: bytes = hasher.digest()
    _keep(digest, _Steps(states, marks, end, step, last, tail))
    return digest


def _hash_kept(chunk: np.ndarray) -> bytes:
    """:func:`chunk_hash` of ``chunk`` (not of strings), keeping its states where it is
    large enough (:func:`resumable`), else its end state where it keeps that
    (:func:`extendable`)."""
    import hashlib

    data = np.ascontiguousarray(chunk).view(np.uint8).reshape(-1)
    if resumable(len(data)):
        return _hash_on(data, chunk.shape, RESUME_STEP, [hashlib.sha256()], [])
    if extendable(len(data)):
        return _hash_on(data, chunk.shape, 0, [hashlib.sha256()], [])
    return chunk_hash(chunk)


def chunk_hash_from(
    chunk: np.ndarray, old: np.ndarray | Callable[[], np.ndarray], old_digest: bytes
) -> bytes:
    """:func:`chunk_hash` of ``chunk``, hashing on from the states kept of the chunk
    hashed as ``old_digest`` where ``chunk``'s bytes equal ``old``'s (the old chunk's
    bytes as read now, in C order, or a function reading them: called only if states
    are kept, and an ``OSError`` from it means no bytes) and ``old``'s still match
    what was hashed: from the end of the old bytes where ``chunk`` starts with all of
    them (rows appended), else from the last whole step they agree on. The states of
    ``chunk`` are kept (its end state at least, where :func:`extendable`)."""
    import xxhash

    if chunk.dtype.kind == "O" or not extendable(chunk.nbytes):
        return chunk_hash(chunk)
    steps = _kept(old_digest)
    if steps is None:
        return _hash_kept(chunk)
    if callable(old):
        try:
            old = old()
        except OSError:
            return _hash_kept(chunk)
    if old.dtype.kind == "O" or old.nbytes != steps.nbytes:
        return _hash_kept(chunk)
    data = np.ascontiguousarray(chunk).view(np.uint8).reshape(-1)
    before = np.ascontiguousarray(old).view(np.uint8).reshape(-1)
    step = steps.step
    whole = min(len(data), len(before)) // step if step else 0
    same = 0
    while same < whole:
        block = before[same * step : (same + 1) * step]
        if not np.array_equal(data[same * step : (same + 1) * step], block):
            break  # the new bytes differ from here
        if xxhash.xxh3_128_digest(block.data) != steps.marks[same]:
            break  # the old chunk is not the one hashed from here
        same += 1
    if same == len(steps.marks) and len(data) >= len(before):
        # Every whole step of the old bytes is the new chunk's: the rest of them too?
        rest = before[same * step :]
        if (
            np.array_equal(data[same * step : len(before)], rest)
            and xxhash.xxh3_128_digest(rest.data) == steps.tail
        ):
            marks, states = steps.marks[:same], steps.states[: same + 1]
            return _hash_on(data, chunk.shape, step, states, marks, steps.end.copy(), len(before))
    if same == 0:
        return _hash_kept(chunk)
    return _hash_on(data, chunk.shape, step, steps.states[: same + 1], steps.marks[:same])


#: The chunk a staged chunk was made from, to hash on from (:func:`chunk_hash_from`):
#: its bytes as read now (or a function reading them, called where the chunk is
#: hashed) and its digest; None where there is none.
Base = tuple[np.ndarray | Callable[[], np.ndarray], bytes] | None


def _hash_one(chunk: np.ndarray, base: Base) -> bytes:
    return chunk_hash(chunk) if base is None else chunk_hash_from(chunk, *base)


def _hash_all(chunks: Sequence[np.ndarray], bases: Sequence[Base] | None = None) -> list[bytes]:
    """Hashes of ``chunks`` on the calling thread (each hashed on from its base, if
    given)."""
    if bases is None:
        return [chunk_hash(chunk) for chunk in chunks]
    return [_hash_one(chunk, base) for chunk, base in zip(chunks, bases, strict=True)]


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        # Each caller keeps at most ``ahead`` items in flight (run_ahead: one thread per
        # core but one), so the default size of the pool (a few threads more than
        # cores, started as needed) never limits it; run_ahead's caller computes items
        # itself when no thread of the pool is free (a forked child makes its own:
        # see _forget_pool).
        _POOL = ThreadPoolExecutor(thread_name_prefix="h5vc-hash")
    return _POOL


def prefetch(func: Callable[[T], R], items: Iterable[T], ahead: int = 1) -> Iterator[R]:
    """``func(item)`` for every item, in order, up to ``ahead`` items ahead on background
    threads.

    While the caller works on one result (typically writing it to HDF5), the next ones
    are computed; hashing and numpy copies release the GIL, so they overlap. ``func``
    must not depend on the order in which the items are computed.
    """
    pending: collections.deque[Future[R]] = collections.deque()
    for item in items:
        pending.append(_pool().submit(func, item))
        if len(pending) > ahead:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def run_ahead(
    func: Callable[[T], R], items: Iterable[T], threads: int, limit: int
) -> Generator[R, None, None]:
    """``func(item)`` for every item, results in order, computed by ``threads`` threads
    of the pool and by the caller's thread while it waits.

    Each thread takes the next item as soon as it is done with one, whatever the
    caller is doing, so the cores stay busy while the caller works on a result (the
    GIL-holding HDF5 writes of a commit); the caller computes an item itself rather
    than wait for one, so ``threads`` is one less than the cores to keep busy (and 0
    computes everything on the calling thread, in order). At most ``limit`` items are
    taken and not yet handed to the caller, which bounds the memory held by results.

    ``items`` is iterated under a lock, by whichever thread takes the next item. An
    error from ``func`` (or from ``items``) is raised to the caller at the place of its
    item; no item past it is started. When the caller stops early (an error of its
    own, or the iterator closed), no new item is started and every item started is
    finished before control returns: ``func`` never runs after this iterator is done.
    """
    source = iter(items)
    limit = max(1, limit)
    cond = threading.Condition()
    results: dict[int, tuple[bool, Any]] = {}
    taken = 0  # items taken from ``source``
    handed = 0  # results handed to the caller
    exhausted = False  # ``source`` is done (or failed, or the caller stopped)

    def take() -> tuple[int, T] | None:
        """The next item and its place (None: no item may be taken now); called with
        ``cond`` held."""
        nonlocal taken, exhausted
        if exhausted or taken - handed >= limit:
            return None
        place = taken
        try:
            item = next(source)
        except StopIteration:
            exhausted = True
            return None
        except BaseException as error:
            exhausted = True
            taken += 1
            results[place] = (False, error)
            cond.notify_all()
            return None
        taken += 1
        return place, item

    def compute(place: int, item: T) -> None:
        nonlocal exhausted
        try:
            outcome: tuple[bool, Any] = (True, func(item))
        except BaseException as error:
            outcome = (False, error)
        with cond:
            results[place] = outcome
            if not outcome[0]:
                exhausted = True  # nothing past a failed item is started
            cond.notify_all()

    def work() -> None:
        while True:
            with cond:
                job = take()
                while job is None and not exhausted:
                    cond.wait()
                    job = take()
            if job is None:
                return
            compute(*job)

    from concurrent.futures import wait

    helpers = [_pool().submit(work) for _ in range(max(0, threads))]
    try:
        while True:
            with cond:
                while handed not in results:
                    job = take()
                    if job is not None:
                        break
                    if handed >= taken and exhausted:
                        return
                    if handed not in results:  # else: take() met an error of ``items``
                        cond.wait()
                else:
                    job = None
                    ok, value = results.pop(handed)
                    handed += 1
                    cond.notify_all()
            if job is not None:
                # The next result is not ready: compute an item rather than wait. An
                # error here (an interrupt, too) is raised at once.
                place, item = job
                computed = func(item)
                with cond:
                    results[place] = (True, computed)
                del computed, item
                continue
            if not ok:
                raise value
            yield value
            del value
    finally:
        with cond:
            exhausted = True
            cond.notify_all()
        wait(helpers)


def hash_in_batches(
    chunks: Sequence[np.ndarray],
    batch_bytes: int = HASH_BATCH_BYTES,
    ahead: int = 1,
    bases: Sequence[Base] | None = None,
) -> Iterator[tuple[Sequence[np.ndarray], list[bytes]]]:
    """Yield ``(batch, digests)``; the next ``ahead`` batches are hashed while the
    caller works (each chunk hashed on from its base, if given)."""
    if not chunks:
        return
    per_chunk = max(1, chunks[0].nbytes)
    size = max(1, batch_bytes // per_chunk)
    if len(chunks) <= size or chunks[0].dtype.kind == "O":
        yield chunks, _hash_all(chunks, bases)
        return
    starts = range(0, len(chunks), size)
    batches = [(start, chunks[start : start + size]) for start in starts]

    def hashed(item: tuple[int, Sequence[np.ndarray]]) -> tuple[Sequence[np.ndarray], list[bytes]]:
        start, batch = item
        return batch, _hash_all(batch, None if bases is None else bases[start : start + size])

    yield from prefetch(hashed, batches, ahead)


class PendingDigests:
    """Digests of chunks being hashed on background threads (:func:`hash_soon`)."""

    __slots__ = ("_futures",)

    def __init__(self, futures: list[Future[tuple[bytes, np.ndarray | None]]]):
        self._futures = futures

    def _results(self) -> list[tuple[bytes, np.ndarray | None]]:
        try:
            return [future.result() for future in self._futures]
        except BaseException:
            self.cancel()
            raise

    def result(self) -> list[bytes]:
        """The digests, in the order of the chunks, once all are computed."""
        return [digest for digest, _ in self._results()]

    def copies(self) -> list[np.ndarray] | None:
        """The C-contiguous copies of the chunks hashed (None unless asked for)."""
        copies = [copy for _, copy in self._results() if copy is not None]
        return copies if len(copies) == len(self._futures) else None

    def cancel(self) -> None:
        """Drop the hashes not started yet (those running finish unseen)."""
        for future in self._futures:
            future.cancel()


def hash_soon(
    chunks: Sequence[np.ndarray], *, copy: bool = False, bases: Sequence[Base] | None = None
) -> PendingDigests:
    """Start hashing ``chunks`` on background threads, one task per chunk, so that
    several chunks hash on several cores; with ``copy``, each is first copied (C order)
    there and its copy hashed; each hashed on from its base, if given (see
    :func:`chunk_hash_from`).  The chunks must not change until the digests are in.

    Lets a caller do the work that needs no digest while the chunks are hashed
    (hashlib and numpy's copies release the GIL)."""
    import time

    pool = _pool()
    futures = []
    events = []
    for i, chunk in enumerate(chunks):
        started = threading.Event()
        base = None if bases is None else bases[i]
        futures.append(pool.submit(_hash_started, chunk, started, copy, base))
        events.append(started)
    # A thread needs the GIL to start, and the caller holds it through HDF5's calls:
    # left alone, a hash would start only when the interpreter hands the GIL over (every
    # 5 ms).  Waiting for the hashes to start lets them go as soon as they are in
    # hashlib; not for long, though: with no idle core a thread starts late anyway.
    deadline = time.monotonic() + _START_WAIT_S
    for started in events:
        left = deadline - time.monotonic()
        if left <= 0 or not started.wait(left):
            break
    return PendingDigests(futures)


#: How long :func:`hash_soon` waits at most for its threads to start hashing.
_START_WAIT_S = 0.0005


def bytes_to_hash(chunks: Sequence[np.ndarray], bases: Sequence[Base] | None = None) -> int:
    """About how many bytes hashing ``chunks`` (each on from its base, if given) reads:
    those past the base's end where its end state is kept and the chunk is longer (rows
    appended to it: see :func:`chunk_hash_from`), all of a chunk's otherwise."""
    if bases is None:
        return sum(chunk.nbytes for chunk in chunks)
    total = 0
    for chunk, base in zip(chunks, bases, strict=True):
        total += chunk.nbytes
        if base is None or chunk.dtype.kind == "O" or not extendable(chunk.nbytes):
            continue
        with _KEPT_LOCK:
            steps = _KEPT.get(base[1])
        if steps is not None and chunk.nbytes > steps.nbytes:
            total -= steps.nbytes
    return total


def _hash_started(
    chunk: np.ndarray, started: Any, copy: bool, base: Base = None
) -> tuple[bytes, np.ndarray | None]:
    started.set()
    if copy:
        chunk = np.array(chunk, order="C")
        return _hash_one(chunk, base), chunk
    return _hash_one(chunk, base), None


#: Hashes of all-fill chunks by (shape, dtype, fill value's bytes): every commit asks
#: for those of the datasets it writes, and hashing a 1 MiB chunk costs 2-5 ms.
#: Emptied when it holds more than _FILL_HASHES_KEPT.
_FILL_HASHES: dict[tuple[Any, ...], bytes] = {}
_FILL_HASHES_KEPT = 256


def fill_chunk_hash(shape: tuple[int, ...], dtype: np.dtype, fillvalue: Any) -> bytes:
    """The hash of a chunk of ``shape`` holding only ``fillvalue``."""
    key = None
    if dtype.kind != "O":  # an object array's bytes are pointers
        scalar = np.empty((), dtype=dtype)
        scalar[...] = fillvalue
        key = (tuple(shape), dtype.str, str(dtype.descr), scalar.tobytes())
        found = _FILL_HASHES.get(key)
        if found is not None:
            return found
    chunk = np.empty(shape, dtype=dtype)
    chunk[...] = fillvalue
    digest = chunk_hash(chunk)
    if key is not None:
        if len(_FILL_HASHES) >= _FILL_HASHES_KEPT:
            _FILL_HASHES.clear()
        _FILL_HASHES[key] = digest
    return digest


def fill_item(dtype: np.dtype, fillvalue: Any) -> Any:
    """``fillvalue`` as a value of ``dtype``, as Python's number for
    :func:`may_be_fill` (None where it is not one)."""
    if np.dtype(dtype).kind not in "biuf":
        return None
    try:
        return np.asarray(fillvalue, dtype=dtype)[()].item()
    except (TypeError, ValueError, OverflowError):  # not a value of the dtype
        return None


def may_be_fill(chunk: np.ndarray, fill: Any) -> bool:
    """False when ``chunk`` cannot hold only the fill value ``fill`` (from
    :func:`fill_item`): its first element differs from it. Lets a writer skip hashing a
    chunk of fill values (:func:`fill_chunk_hash`, as costly as hashing any chunk of its
    size) for shapes no written chunk starts with the fill value in. True where unsure
    (strings, compound types, NaN, no fill item)."""
    if fill is None or chunk.dtype.kind not in "biuf" or not chunk.size:
        return True
    first = chunk.item(0)
    return bool(first == fill) or first != first
