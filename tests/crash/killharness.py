"""Kill a writer at random moments; check that nothing it reported committed is lost.

The writer (:func:`run_writer`) applies a seeded mix of operations to a versioned file:
commits of small edits, new datasets, resizes, large write-through arrays, attributes and
deleted datasets, plus ``delete_versions``, ``modify_metadata`` and ``repack``. Before an
operation starts it appends one JSON line to a side log, and another as soon as the
operation returns, each flushed and fsync'd; a commit's line carries the SHA-256 of what
the version holds according to the writer's own numpy model.

The checker (:func:`check_file`) opens the file after the kill and compares every version
the log reports committed with its checksum, then commits a new version on top.
:func:`run_kills` alternates the two, each in its own process forked from a server that
has already imported numpy, h5py and h5vc, so a kill costs little more than the work it
interrupts. A file stays in use for several kills, so recovery is tried on files that
have been recovered before.

``opener`` chooses how both open the file: ``"h5vc"`` with :func:`h5vc.open`, ``"h5py"``
as code written for versioned-hdf5 does, ``h5py.File`` then ``VersionedHDF5File``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import random
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np

import h5vc

LARGE_ELEMENTS = 600_000  # 4.8 MB of float64: stored at once (write-through)
MAX_VERSIONS = 24  # older versions are deleted beyond this, keeping files small
OPENERS = ("h5vc", "h5py")


def open_versioned(stack: contextlib.ExitStack, path: str, mode: str, opener: str) -> Any:
    """The versioned file at ``path``, opened as ``opener`` says; closed with ``stack``."""
    if opener == "h5vc":
        return stack.enter_context(h5vc.open(path, mode))
    return h5vc.VersionedHDF5File(stack.enter_context(h5py.File(path, mode)))


# --------------------------------------------------------------------------- the side log


def append_log(log_path: Path, entry: dict[str, Any]) -> None:
    """Append one JSON line and make it durable before returning."""
    with open(log_path, "a") as log:
        log.write(json.dumps(entry) + "\n")
        log.flush()
        os.fsync(log.fileno())


@dataclass
class LogState:
    """What the side log says: committed versions and the operation in flight."""

    committed: dict[str, str] = field(default_factory=dict)
    pending: dict[str, Any] | None = None
    errors: list[str] = field(default_factory=list)


def read_log(log_path: Path) -> LogState:
    state = LogState()
    if not log_path.exists():
        return state
    for line in log_path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by the kill: its operation had not started
        if "error" in entry:
            state.errors.append(entry["error"])
        elif "settle" in entry:  # the checker found how the operation in flight ended
            state.committed.update(entry["settle"]["add"])
            for name in entry["settle"]["remove"]:
                state.committed.pop(name, None)
            state.pending = None
        elif "begin" in entry:
            state.pending = entry
        elif "end" in entry:
            begun = state.pending or {}
            if begun.get("begin") == "commit":
                state.committed[begun["version"]] = begun["sum"]
            elif begun.get("begin") == "delete":
                for name in begun["versions"]:
                    state.committed.pop(name, None)
            state.pending = None
    return state


# --------------------------------------------------------------------------- checksums


def _canonical_attr(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    return value


def tree_checksum(datasets: dict[str, np.ndarray], attrs: dict[str, dict[str, Any]]) -> str:
    """SHA-256 of a version's content, independent of dtype width and storage settings."""
    digest = hashlib.sha256()
    for path in sorted(datasets):
        data = np.asarray(datasets[path])
        canonical = data.astype(np.int64 if data.dtype.kind in "iu" else np.float64)
        digest.update(f"{path}|{data.shape}|{data.dtype.kind}|".encode())
        digest.update(np.ascontiguousarray(canonical).tobytes())
    for path in sorted(attrs):
        items = {k: _canonical_attr(v) for k, v in attrs[path].items()}
        if items:
            digest.update(f"@{path}|{json.dumps(items, sort_keys=True)}".encode())
    return digest.hexdigest()


def read_tree(group: Any) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
    """Every dataset and the attributes of every object below a committed version."""
    datasets: dict[str, np.ndarray] = {}
    attrs: dict[str, dict[str, Any]] = {}

    def visit(name: str, obj: Any) -> None:
        if hasattr(obj, "get_many"):  # a sample column: its keys and samples
            keys = sorted(obj)
            datasets[name] = column_rows(keys, obj.get_many(keys))
            return
        attrs[name] = {key: obj.attrs[key] for key in obj.attrs}
        if hasattr(obj, "shape"):
            datasets[name] = obj[()]

    group.visititems(visit)
    return datasets, attrs


def column_rows(keys: list[int], samples: np.ndarray) -> np.ndarray:
    """A sample column as one array: a row per key (sorted), the key then the sample."""
    flat = np.asarray(samples, np.int64).reshape(len(keys), -1)
    return np.column_stack([np.asarray(keys, np.int64).reshape(-1, 1), flat])


#: The path of the sample column the writer edits.
COLUMN = "samples"


# --------------------------------------------------------------------------- the writer


class Writer:
    """Applies seeded operations to a versioned file, logging each one."""

    def __init__(self, path: Path, log_path: Path, seed: int, run: int, opener: str = "h5vc"):
        self.path = path
        self.opener = opener
        self.log_path = log_path
        self.rng = np.random.default_rng(seed)
        self.run = run
        self.counter = 0
        self.files = contextlib.ExitStack()
        self.vf: h5vc.VersionedHDF5File = self._open()
        self.datasets: dict[str, np.ndarray] = {}
        self.attrs: dict[str, dict[str, Any]] = {}
        if self.vf.current_version in self.vf:
            self.datasets, self.attrs = read_tree(self.vf[None])

    def _open(self) -> h5vc.VersionedHDF5File:
        return open_versioned(self.files, str(self.path), "a", self.opener)

    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.run}_{self.counter}"

    def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.72 or len(self.vf.versions) < 3:
            self.commit()
        elif roll < 0.84:
            self.delete()
        elif roll < 0.96:
            self.modify()
        else:
            self.repack()

    # -- commits --------------------------------------------------------------------

    def commit(self) -> None:
        changes = [self._pick_change() for _ in range(int(self.rng.integers(1, 4)))]
        datasets = {k: v.copy() for k, v in self.datasets.items()}
        attrs = {k: dict(v) for k, v in self.attrs.items()}
        name = self.name("v")
        # The model is updated first so the checksum can be logged before the commit.
        planned = [change(datasets, attrs) for change in changes]
        checksum = tree_checksum(datasets, attrs)
        append_log(self.log_path, {"begin": "commit", "version": name, "sum": checksum})
        with self.vf.stage_version(name) as group:
            for apply in planned:
                apply(group)
        append_log(self.log_path, {"end": "commit", "version": name})
        self.datasets, self.attrs = datasets, attrs

    def _pick_change(self) -> Any:
        small = [p for p, a in self.datasets.items() if a.size < LARGE_ELEMENTS]
        roll = self.rng.random()
        if not small or roll < 0.12:
            return self._new_dataset
        if roll < 0.22:
            return self._large
        if roll < 0.34:
            return self._resize
        if roll < 0.46:
            return self._attrs
        if roll < 0.50:
            return self._drop
        if roll < 0.56:
            return self._column
        return self._edit

    def _choose(self, datasets: dict[str, np.ndarray], large: bool = False) -> str | None:
        paths = sorted(
            p for p, a in datasets.items() if (large or a.size < LARGE_ELEMENTS) and p != COLUMN
        )
        return paths[int(self.rng.integers(len(paths)))] if paths else None

    def _new_dataset(self, datasets: dict, attrs: dict) -> Any:
        path = ("grp/" if self.rng.random() < 0.3 else "") + self.name("d")
        dtype = [np.int32, np.int64, np.float64][int(self.rng.integers(3))]
        shape: tuple[int, ...] = (int(self.rng.integers(0, 5000)),)
        if self.rng.random() < 0.3:
            shape = (int(self.rng.integers(0, 800)), int(self.rng.integers(1, 12)))
        data = (self.rng.random(shape) * 1000).astype(dtype)
        chunks = (int(self.rng.choice([64, 256, 1024])), *shape[1:])
        datasets[path] = data
        attrs[path] = {}
        if "/" in path:
            attrs.setdefault("grp", {})
        return lambda g: g.create_dataset(path, data=data, chunks=chunks)

    def _column(self, datasets: dict, attrs: dict) -> Any:
        """Set some keys of the sample column (created if missing) and delete others."""
        old = datasets.get(COLUMN)
        model = {} if old is None else {int(r[0]): r[1:].copy() for r in old}
        keys = sorted({int(k) for k in self.rng.integers(0, 100, int(self.rng.integers(1, 20)))})
        samples = self.rng.integers(0, 256, (len(keys), 4, 4), dtype=np.uint8)
        present = sorted(set(model) - set(keys))
        dropped = [present[int(i)] for i in self.rng.permutation(len(present))[:2]]
        model.update({k: s.reshape(-1).astype(np.int64) for k, s in zip(keys, samples)})
        for key in dropped:
            del model[key]
        ordered = sorted(model)
        datasets[COLUMN] = column_rows(
            ordered, np.array([model[k] for k in ordered]).reshape(-1, 16)
        )

        def apply(g: Any) -> None:
            if COLUMN in g:
                column = g[COLUMN]
            else:
                column = g.create_column(COLUMN, shape=(4, 4), dtype="uint8")
            column.set_many(keys, samples)
            for key in dropped:
                del column[key]

        return apply

    def _large(self, datasets: dict, attrs: dict) -> Any:
        path = self.name("big")
        data = self.rng.random(LARGE_ELEMENTS + int(self.rng.integers(0, 100_000)))
        datasets[path] = data
        attrs[path] = {}
        bigs = sorted(p for p, a in datasets.items() if a.size >= LARGE_ELEMENTS and p != path)
        dropped = bigs[0] if len(bigs) >= 2 else None
        if dropped is not None:
            del datasets[dropped], attrs[dropped]

        def apply(g: Any) -> None:
            if dropped is not None:
                del g[dropped]
            g.create_dataset(path, data=data, chunks=(32768,))

        return apply

    def _edit(self, datasets: dict, attrs: dict) -> Any:
        path = self._choose(datasets)
        if path is None or datasets[path].shape[0] == 0:
            return lambda g: None
        data = datasets[path]
        start = int(self.rng.integers(data.shape[0]))
        stop = min(data.shape[0], start + int(self.rng.integers(1, 300)))
        values = (self.rng.random((stop - start, *data.shape[1:])) * 1000).astype(data.dtype)
        data[start:stop] = values

        def apply(g: Any) -> None:
            g[path][start:stop] = values

        return apply

    def _resize(self, datasets: dict, attrs: dict) -> Any:
        path = self._choose(datasets)
        if path is None:  # an earlier change of this commit dropped the last one
            return lambda g: None
        old = datasets[path]
        length = int(self.rng.integers(0, 6000 if old.ndim == 1 else 900))
        new = np.zeros((length, *old.shape[1:]), old.dtype)
        keep = min(length, old.shape[0])
        new[:keep] = old[:keep]
        datasets[path] = new
        return lambda g: g[path].resize((length, *old.shape[1:]))

    def _attrs(self, datasets: dict, attrs: dict) -> Any:
        targets = sorted(attrs)
        if not targets:
            return lambda g: None
        target = targets[int(self.rng.integers(len(targets)))]
        key = f"a{int(self.rng.integers(4))}"
        value = int(self.rng.integers(1 << 40)) if self.rng.random() < 0.5 else self.name("s")
        attrs[target][key] = value

        def apply(g: Any) -> None:
            g[target].attrs[key] = value

        return apply

    def _drop(self, datasets: dict, attrs: dict) -> Any:
        path = self._choose(datasets)
        if path is None:
            return lambda g: None
        del datasets[path], attrs[path]

        def apply(g: Any) -> None:
            del g[path]

        return apply

    # -- lifecycle --------------------------------------------------------------------

    def delete(self) -> None:
        current = self.vf.current_version
        candidates = [v for v in self.vf.versions if v != current]
        count = 1 if self.rng.random() < 0.7 else 2
        if len(candidates) > MAX_VERSIONS:
            count = len(candidates) - MAX_VERSIONS + 1
        order = self.rng.permutation(len(candidates))[:count]
        doomed = sorted(candidates[i] for i in order)
        append_log(self.log_path, {"begin": "delete", "versions": doomed})
        h5vc.delete_versions(self.vf, doomed)
        append_log(self.log_path, {"end": "delete"})

    def modify(self) -> None:
        path = self._choose(self.datasets, large=self.rng.random() < 0.2)
        if path is None:
            return
        data = self.datasets[path]
        chunks = self.vf[None][path].chunks
        options: dict[str, Any] = {}
        if data.dtype == np.int32:
            options["dtype"] = np.int64
        elif self.rng.random() < 0.5:
            options["compression"] = "gzip"
        else:
            options["chunks"] = (max(16, chunks[0] // 2) if chunks[0] > 64 else 256, *chunks[1:])
        append_log(self.log_path, {"begin": "modify", "path": path})
        h5vc.modify_metadata(self.vf, path, **options)
        append_log(self.log_path, {"end": "modify"})
        if "dtype" in options:
            self.datasets[path] = data.astype(options["dtype"])

    def repack(self) -> None:
        """Compact into a new file, then swap it in with an atomic rename."""
        append_log(self.log_path, {"begin": "repack"})
        self.files.close()
        packed = self.path.with_name(self.path.name + ".packed")
        packed.unlink(missing_ok=True)
        h5vc.repack(self.path, packed)
        with open(packed, "rb+") as new:
            os.fsync(new.fileno())
        os.replace(packed, self.path)
        directory = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        self.vf = self._open()
        append_log(self.log_path, {"end": "repack"})


def run_writer(
    path: str, log_path: str, seed: int, run: int, opener: str = "h5vc", max_steps: int = 10**9
) -> None:
    """Process entry point: apply operations until killed (or ``max_steps``)."""
    try:
        writer = Writer(Path(path), Path(log_path), seed, run, opener)
        for _ in range(max_steps):
            writer.step()
        writer.files.close()
    except BaseException:
        append_log(Path(log_path), {"error": traceback.format_exc()})
        os._exit(3)


# --------------------------------------------------------------------------- the checker


@dataclass
class CheckResult:
    opened: bool = False
    checked: int = 0
    lost: list[str] = field(default_factory=list)  # reported committed, missing or wrong
    wrong_pending: list[str] = field(default_factory=list)  # in flight, present but wrong
    phantom: list[str] = field(default_factory=list)  # present, never begun
    next_commit_ok: bool = False
    error: str = ""


def _version_matches(vf: h5vc.VersionedHDF5File, name: str, checksum: str) -> bool:
    try:
        return tree_checksum(*read_tree(vf[name])) == checksum
    except Exception:
        return False


def _commit_on_top(vf: h5vc.VersionedHDF5File, log_path: Path, trial: int) -> None:
    """Commit, delete and commit again on top of the current version, checking each."""
    base = vf.current_version
    base_sum = tree_checksum(*read_tree(vf[base])) if base in vf else tree_checksum({}, {})
    for attempt in ("a", "b"):
        name = f"chk{trial}{attempt}"
        with vf.stage_version(name) as group:
            group.create_dataset(f"chk{trial}", data=np.arange(trial, trial + 10))
        datasets, attrs = read_tree(vf[name])
        extra = datasets.pop(f"chk{trial}")
        attrs.pop(f"chk{trial}")
        if not np.array_equal(extra, np.arange(trial, trial + 10)):
            raise AssertionError(f"{name}: the new dataset reads {extra!r}")
        if tree_checksum(datasets, attrs) != base_sum:
            raise AssertionError(f"{name}: the rest of the version differs from {base!r}")
        if attempt == "a":
            h5vc.delete_versions(vf, [name])
            if vf.current_version != base:
                raise AssertionError(f"after deleting {name}: current {vf.current_version!r}")
    append_log(
        log_path, {"begin": "commit", "version": name, "sum": tree_checksum(*read_tree(vf[name]))}
    )
    append_log(log_path, {"end": "commit", "version": name})


def check_file(
    path: str, log_path: str, trial: int, result_path: str, opener: str = "h5vc"
) -> None:
    """Process entry point: check the file after a kill; the result goes to a JSON file."""
    result = CheckResult()
    log = read_log(Path(log_path))
    # A file whose first commit never finished is empty after recovery.
    mode = "r+" if log.committed else "a"
    try:
        with contextlib.ExitStack() as stack:
            vf = open_versioned(stack, path, mode, opener)
            result.opened = True
            present = set(vf.versions)
            in_flight = log.pending or {}
            maybe_gone = set(in_flight.get("versions", ()))
            for name, checksum in log.committed.items():
                result.checked += 1
                if name not in present and name in maybe_gone:
                    continue
                if name not in present or not _version_matches(vf, name, checksum):
                    result.lost.append(name)
            pending_name = in_flight.get("version")
            if pending_name in present and not _version_matches(vf, pending_name, in_flight["sum"]):
                result.wrong_pending.append(pending_name)
            result.phantom = sorted(present - set(log.committed) - {pending_name})
            settle = {
                "add": {pending_name: in_flight["sum"]}
                if pending_name in present and not result.wrong_pending
                else {},
                "remove": sorted(maybe_gone - present),
            }
            append_log(Path(log_path), {"settle": settle})
            _commit_on_top(vf, Path(log_path), trial)
            result.next_commit_ok = True
    except Exception:
        result.error = traceback.format_exc(limit=4)
    Path(result_path).write_text(json.dumps(result.__dict__))


# --------------------------------------------------------------------------- the driver


@dataclass
class Tally:
    kills: int = 0
    finished_before_kill: int = 0
    checked: int = 0
    lost: int = 0
    wrong_pending: int = 0
    phantom: int = 0
    unopenable: int = 0
    next_commit_failed: int = 0
    writer_errors: int = 0
    checker_crashed: int = 0
    examples: list[str] = field(default_factory=list)

    def ok(self) -> bool:
        bad = (self.lost, self.wrong_pending, self.phantom, self.unopenable)
        return not any(bad) and not (self.next_commit_failed or self.writer_errors)

    def summary(self) -> str:
        fields = {k: v for k, v in self.__dict__.items() if k != "examples"}
        return " ".join(f"{k}={v}" for k, v in fields.items())


@contextlib.contextmanager
def _context() -> Iterator[Any]:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["killharness", "h5vc", "h5py", "numpy"])
    yield ctx


def _record(tally: Tally, result: dict[str, Any], log: LogState, trial: int) -> bool:
    """Add one check's result; True if nothing was wrong, so the file can be used on
    (a damaged file is replaced, so that one loss is not counted again at every kill)."""
    tally.checked += result["checked"]
    tally.lost += len(result["lost"])
    tally.wrong_pending += len(result["wrong_pending"])
    tally.phantom += len(result["phantom"])
    problems = []
    if not result["opened"]:
        tally.unopenable += 1
        problems.append("unopenable")
    elif not result["next_commit_ok"]:
        tally.next_commit_failed += 1
        problems.append("next commit failed")
    for key in ("lost", "wrong_pending", "phantom"):
        if result[key]:
            problems.append(f"{key}={result[key]}")
    if problems:
        pending = (log.pending or {}).get("begin")
        tally.examples.append(
            f"kill {trial} during {pending}: {', '.join(problems)}\n{result['error']}"
        )
    return not problems


def run_kills(
    directory: Path,
    kills: int,
    *,
    seed: int = 0,
    max_delay: float = 1.2,
    kills_per_file: int = 8,
    opener: str = "h5vc",
    progress: Any = None,
) -> Tally:
    """Run ``kills`` writer processes, each killed with SIGKILL after a random delay."""
    tally = Tally()
    picker = random.Random(seed)
    path = log_path = Path()
    with _context() as ctx:
        uses = kills_per_file
        for trial in range(kills):
            if uses >= kills_per_file:
                for old in (path, log_path):
                    if old != Path():
                        old.unlink(missing_ok=True)
                path = directory / f"file{trial}.h5"
                log_path = directory / f"file{trial}.log"
                uses = 0
            uses += 1
            writer = ctx.Process(
                target=run_writer,
                args=(str(path), str(log_path), seed * 100_003 + trial, trial, opener),
            )
            writer.start()
            writer.join(picker.uniform(0.0, max_delay))
            if writer.exitcode is None:
                writer.kill()
            else:
                tally.finished_before_kill += 1
            writer.join()
            tally.kills += 1
            log = read_log(log_path)
            if log.errors:
                tally.writer_errors += 1
                tally.examples.append(f"kill {trial}: writer error\n{log.errors[-1]}")
                uses = kills_per_file
                continue
            result_path = directory / f"check{trial}.json"
            checker = ctx.Process(
                target=check_file,
                args=(str(path), str(log_path), trial, str(result_path), opener),
            )
            checker.start()
            checker.join(300)
            if not result_path.exists():
                tally.checker_crashed += 1
                tally.unopenable += 1
                tally.examples.append(f"kill {trial}: checker died ({checker.exitcode})")
                uses = kills_per_file
                continue
            result = json.loads(result_path.read_text())
            if not _record(tally, result, log, trial):
                uses = kills_per_file
            if progress is not None:
                progress(trial, tally)
    return tally
