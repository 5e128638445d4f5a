"""A writer committing and deleting versions while readers of every read-only kind
read them.

Version ``v<k>`` holds ``x``, an array whose every element is ``k``, with the
attribute ``k``. Each read reads the newest committed version, then reads again a
version seen earlier (through the object kept from then, where the kind keeps
objects): it must give that version's data or raise ``VersionNotFoundError`` (it was
deleted meanwhile, counted as ``gone``). Anything else is counted: ``wrong`` (another
version's data), ``torn`` (not one version's data: mixed values, zeros, an attribute
that disagrees), ``corrupt`` (``CorruptDataError`` on this healthy file) or
``errors`` (any other exception).

With a ``gap``, the writer waits that many seconds after each commit: the file's
times then settle, and readers of a file unchanged since their last read read
without the lock (checking its stamp afterwards) until the next commit meets them.

Run as a script: ``python readerharness.py writer PATH COMMITS DELETES READERS [GAP]``
or ``python readerharness.py reader KIND PATH READS LAST [PAUSE]``. A reader prints
its counts as ``key=value`` words, the writer its commits and seconds. The writer
starts once ``READERS`` readers made their first read (each leaves a file
``PATH.ready-<pid>``); a reader goes on past ``READS`` reads until it has seen
version ``v<LAST>`` or the writer is done (it leaves ``PATH.done``). Each wait ends
after :data:`DEADLINE` seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

import h5vc

LENGTH = 30_000

#: Seconds the writer waits at most for its readers, and a reader for the last version.
DEADLINE = 600.0

#: The read-only ways into a file the harness exercises.
KINDS = (
    "open-per-read",  # h5vc.open(path) for each read
    "open-persistent",  # one h5vc.open(path) for every read
    "h5py-persistent",  # one VersionedHDF5File(h5py.File(path, "r"))
    "reader",  # h5vc.Reader, one batch per read
    "dask",  # h5vc.dask.from_version(...).compute()
    "xarray",  # xr.open_dataset(path, engine="h5vc")
    "cli",  # h5vc log and h5vc export
)

#: A read reads again the version that was the newest this many reads before.
AGAIN_AFTER = 20

COUNTS = ("reads", "wrong", "torn", "corrupt", "errors", "gone", "seen")


def _ready_files(path: str) -> list[Path]:
    target = Path(path)
    return list(target.parent.glob(target.name + ".ready-*"))


def write(
    path: str, commits: int, deletes: int = 0, readers: int = 0, gap: float = 0.0
) -> tuple[int, float]:
    """Commit ``commits`` versions, deleting older ones ``deletes`` times evenly
    between them, ``gap`` seconds after each; the commits made and the seconds they
    took."""
    deadline = time.monotonic() + DEADLINE
    while len(_ready_files(path)) < readers and time.monotonic() < deadline:
        time.sleep(0.01)
    every = commits // deletes if deletes else 0
    with h5vc.open(path, "a") as vf:
        if "v0" not in vf:
            with vf.stage_version("v0") as g:
                g.create_dataset("x", data=np.zeros(LENGTH, np.int64), chunks=(1000,))
                g["x"].attrs["k"] = 0
        start = int(vf.current_version[1:]) + 1
        began = time.perf_counter()
        for k in range(start, start + commits):
            with vf.stage_version(f"v{k}") as g:
                g["x"][:] = k
                g["x"].attrs["k"] = k
            if every and (k - start + 1) % every == 0:
                # Deletes move chunks and free space that later commits reuse.
                old = [name for name in vf.versions if int(name[1:]) < k - 2]
                h5vc.delete_versions(vf, old)
            if gap:
                time.sleep(gap)
        return commits, time.perf_counter() - began


def _write_then_mark(
    path: str, commits: int, deletes: int, readers: int, gap: float = 0.0
) -> tuple[int, float]:
    """:func:`write`, then leave ``PATH.done``: readers that never see the last
    version (a handle that does not follow the file) stop then."""
    try:
        return write(path, commits, deletes, readers, gap)
    finally:
        Path(path + ".done").touch()


class _Kind:
    """One read-only way into the file: the newest version, and a version by name."""

    def __init__(self, path: str):
        self.path = path

    def newest(self) -> tuple[int, Any, Any]:
        """The newest version's number, its ``x`` and its attribute ``k``."""
        raise NotImplementedError

    def again(self, k: int) -> tuple[Any, Any]:
        """``x`` and attribute ``k`` of version ``v<k>``, read earlier."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class _Versioned(_Kind):
    """Kinds with a ``VersionedHDF5File``: the views read earlier are kept."""

    def __init__(self, path: str):
        super().__init__(path)
        self.kept: dict[int, Any] = {}

    def versioned(self) -> Any:
        raise NotImplementedError

    def newest(self) -> tuple[int, Any, Any]:
        vf = self.versioned()
        name = vf.current_version
        data = vf[name]["x"]
        k = int(name[1:])
        self.kept[k] = data  # kept, to be read again later
        while len(self.kept) > 2 * AGAIN_AFTER:
            del self.kept[min(self.kept)]
        return k, data[:], data.attrs["k"]

    def again(self, k: int) -> tuple[Any, Any]:
        data = self.kept[k]
        return data[:], data.attrs["k"]


class _OpenPersistent(_Versioned):
    def __init__(self, path: str):
        super().__init__(path)
        self._context = h5vc.open(path)
        self.vf = self._context.__enter__()

    def versioned(self) -> Any:
        return self.vf

    def close(self) -> None:
        self._context.__exit__(None, None, None)


class _H5pyPersistent(_Versioned):
    def __init__(self, path: str):
        import h5py

        super().__init__(path)
        self.file = h5py.File(path, "r")
        self.vf = h5vc.VersionedHDF5File(self.file)

    def versioned(self) -> Any:
        return self.vf

    def close(self) -> None:
        self.vf.close()
        self.file.close()


class _OpenPerRead(_Kind):
    def newest(self) -> tuple[int, Any, Any]:
        with h5vc.open(self.path) as vf:
            name = vf.current_version
            data = vf[name]["x"]
            return int(name[1:]), data[:], data.attrs["k"]

    def again(self, k: int) -> tuple[Any, Any]:
        with h5vc.open(self.path) as vf:
            data = vf[f"v{k}"]["x"]
            return data[:], data.attrs["k"]


class _Reader(_Kind):
    def __init__(self, path: str):
        super().__init__(path)
        self.reader = h5vc.Reader(path)

    def newest(self) -> tuple[int, Any, Any]:
        with self.reader.batch() as vf:
            name = vf.current_version
            data = vf[name]["x"]
            return int(name[1:]), data[:], data.attrs["k"]

    def again(self, k: int) -> tuple[Any, Any]:
        with self.reader.batch() as vf:
            data = vf[f"v{k}"]["x"]
            return data[:], data.attrs["k"]

    def close(self) -> None:
        self.reader.close()


class _Dask(_Kind):
    """Each read a Dask array of the newest version (and of an earlier one), computed
    by the synchronous scheduler; the attribute is not part of the array."""

    def newest(self) -> tuple[int, Any, Any]:
        import h5vc.dask as hd

        # The newest version's name as from_version resolves it (the same cached file).
        name = hd.resolve_version(hd.versioned(hd.open_file(self.path)), None)
        k = int(name[1:])
        array = hd.from_version(self.path, name, "x")
        return k, array.compute(scheduler="synchronous"), k

    def again(self, k: int) -> tuple[Any, Any]:
        import h5vc.dask as hd

        array = hd.from_version(self.path, f"v{k}", "x")
        return array.compute(scheduler="synchronous"), k


class _Xarray(_Kind):
    def newest(self) -> tuple[int, Any, Any]:
        import xarray as xr

        with xr.open_dataset(self.path, engine="h5vc") as dataset:
            variable = dataset["x"]
            k = int(variable.attrs["k"])
            return k, variable.values, k

    def again(self, k: int) -> tuple[Any, Any]:
        import xarray as xr

        with xr.open_dataset(self.path, engine="h5vc", version=f"v{k}") as dataset:
            variable = dataset["x"]
            return variable.values, variable.attrs["k"]


class _Cli(_Kind):
    """The command line's read commands, run in this process: ``h5vc log`` for the
    newest version, ``h5vc export`` of a version to a plain HDF5 file to read it."""

    def _run(self, *args: str) -> str:
        """What the command printed; a version it did not find raises
        ``VersionNotFoundError``, any other failure :class:`_CliFailed`."""
        import contextlib
        import io

        from h5vc.cli import main
        from h5vc.errors import VersionNotFoundError

        printed, complained = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(complained):
            status = main(list(args))
        if status != 0:
            message = complained.getvalue().strip()
            if "not found" in message or "is no version" in message:
                raise VersionNotFoundError(message)
            raise _CliFailed(f"h5vc {args[0]}: {message}")
        return printed.getvalue()

    def _export(self, name: str) -> tuple[Any, Any]:
        import h5py

        out = f"{self.path}.export-{os.getpid()}.h5"
        if os.path.exists(out):
            os.remove(out)
        self._run("export", self.path, name, out)
        with h5py.File(out, "r") as file:
            return file["x"][:], file["x"].attrs["k"]

    def newest(self) -> tuple[int, Any, Any]:
        import json

        name = json.loads(self._run("log", self.path, "-n", "1", "--json"))[0]["version"]
        return int(name[1:]), *self._export(name)

    def again(self, k: int) -> tuple[Any, Any]:
        return self._export(f"v{k}")


class _CliFailed(Exception):
    """A command exited with an error (it printed it on stderr)."""


class _PlainH5py(_Kind):
    """A control, not a safe way to read: plain h5py opening the file per read, no
    lock (benchmarks compare the writer's rate beside it and beside safe readers)."""

    def _read(self, name: str | None) -> tuple[int, Any, Any]:
        import h5py

        with h5py.File(self.path, "r", locking=False) as file:
            versions = file["_version_data/versions"]
            if name is None:
                name = versions.attrs["current_version"]
                name = name.decode() if isinstance(name, bytes) else str(name)
            data = versions[name]["x"]
            return int(name[1:]), data[:], data.attrs["k"]

    def newest(self) -> tuple[int, Any, Any]:
        return self._read(None)

    def again(self, k: int) -> tuple[Any, Any]:
        return self._read(f"v{k}")[1:]


_KINDS = {
    "h5py-plain": _PlainH5py,
    "open-per-read": _OpenPerRead,
    "open-persistent": _OpenPersistent,
    "h5py-persistent": _H5pyPersistent,
    "reader": _Reader,
    "dask": _Dask,
    "xarray": _Xarray,
    "cli": _Cli,
}


def _judge(k: int, values: Any, attr: Any, counts: dict[str, int]) -> None:
    """Count a read of version ``v<k>`` that gave ``values`` and attribute ``attr``."""
    values = np.asarray(values)
    uniform = values.shape == (LENGTH,) and bool(np.all(values == values[0]))
    if uniform and int(values[0]) == k and int(attr) == k:
        return
    if uniform and values[0] not in (0, k) and int(attr) == int(values[0]):
        counts["wrong"] += 1  # a whole other version
        kind = "wrong"
    else:
        counts["torn"] += 1
        kind = "torn"
    shown = np.unique(values)[:5] if values.size else values
    print(f"{kind}: v{k} read values {shown} attribute {attr}", file=sys.stderr)


def read(kind: str, path: str, reads: int, last: int | None = None, pause: float = 0.002) -> dict:
    """Read ``reads`` times (and on until ``v<last>`` was seen); the counts."""
    from h5vc.errors import CorruptDataError, VersionNotFoundError

    counts = dict.fromkeys(COUNTS, 0)
    seen: set[int] = set()
    newest: list[int] = []  # the newest version at each read, the last AGAIN_AFTER
    earlier: int | None = None
    deadline = time.monotonic() + DEADLINE
    reader = _KINDS[kind](path)
    try:
        while counts["reads"] < reads or (
            last is not None
            and last not in seen
            and not os.path.exists(path + ".done")
            and time.monotonic() < deadline
        ):
            for step in ("newest", "again"):
                if step == "again" and earlier is None:
                    continue
                try:
                    if step == "newest":
                        k, values, attr = reader.newest()
                        seen.add(k)
                    else:
                        assert earlier is not None
                        k = earlier
                        values, attr = reader.again(k)
                    _judge(k, values, attr, counts)
                    if step == "newest":
                        newest.append(k)
                        earlier = newest.pop(0) if len(newest) > AGAIN_AFTER else newest[0]
                except VersionNotFoundError:
                    counts["gone"] += 1
                except CorruptDataError as err:
                    counts["corrupt"] += 1
                    print(f"corrupt: {err}", file=sys.stderr)
                except Exception as err:  # every error is counted, and shown
                    counts["errors"] += 1
                    print(f"error: {type(err).__name__}: {err}", file=sys.stderr)
            if counts["reads"] == 0:
                Path(f"{path}.ready-{os.getpid()}").touch()  # the writer may start
            counts["reads"] += 1
            if pause:
                time.sleep(pause)
    finally:
        reader.close()
    counts["seen"] = len(seen)
    return counts


def run(
    directory: Path,
    commits: int,
    reads: int,
    *,
    kinds: Iterable[str] = KINDS,
    per_kind: int = 2,
    deletes: int = 0,
    pause: float = 0.002,
    gap: float = 0.0,
) -> tuple[dict[str, list[dict[str, int]]], tuple[int, float]]:
    """Start a writer, then ``per_kind`` readers of each kind while it commits;
    the readers' counts by kind, and the writer's commits and seconds."""
    path = str(directory / "shared.h5")
    write(path, 0)  # v0, so that readers find a versioned file
    kinds = list(kinds)
    script = str(Path(__file__).resolve())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writer = subprocess.Popen(
        [
            sys.executable,
            script,
            "writer",
            path,
            str(commits),
            str(deletes),
            str(per_kind * len(kinds)),
            str(gap),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    procs = [
        (
            kind,
            subprocess.Popen(
                [
                    sys.executable,
                    script,
                    "reader",
                    kind,
                    path,
                    str(reads),
                    str(commits),
                    str(pause),
                ],
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            ),
        )
        for kind in kinds
        for _ in range(per_kind)
    ]
    results: dict[str, list[dict[str, int]]] = {kind: [] for kind in kinds}
    for kind, proc in procs:
        out, _ = proc.communicate(timeout=DEADLINE + 300)
        if proc.returncode != 0:
            raise RuntimeError(f"a {kind} reader failed ({proc.returncode})")
        results[kind].append(_parse(out))
    out, _ = writer.communicate(timeout=DEADLINE + 300)
    if writer.returncode != 0:
        raise RuntimeError(f"the writer failed ({writer.returncode})")
    made, seconds = out.split()
    return results, (int(made), float(seconds))


def _parse(out: str) -> dict[str, int]:
    words = out.split()
    return {key: int(value) for key, value in (word.split("=") for word in words)}


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "writer":
        target, commits, deletes, readers = sys.argv[2], *map(int, sys.argv[3:6])
        gap = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
        made, seconds = _write_then_mark(target, commits, deletes, readers, gap)
        print(made, seconds)
    else:
        kind, target, count, last = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
        pause = float(sys.argv[6]) if len(sys.argv) > 6 else 0.002
        found = read(kind, target, count, last, pause)
        print(" ".join(f"{key}={value}" for key, value in found.items()))
