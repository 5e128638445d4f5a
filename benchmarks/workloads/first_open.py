"""Workload: import and first open, each in a fresh process.

A file holds 11 versions of a float64 dataset of 100,000 elements in 1024-element chunks
(v0, then ten commits each overwriting 100 elements). Five fresh processes
(``python -c``) each import the library, open the file and read 100 elements of the last
version: the process times the import (``import_s``) and the opening plus the read
(``first_open_read_s``) itself, and the workload times the whole process from outside
(``process_s``, interpreter start-up and exit included); medians of the five. The CPU
time of the import, the opening and the read (``import_open_read_cpu_s``, all threads)
varies less than wall time on a loaded machine. A bare ``python -c pass`` of the same
interpreter (``bare_python_s``) gives the start-up without any library. h5vc opens with ``h5vc.open(path)``, versioned-hdf5 with
``h5py.File`` and ``VersionedHDF5File``, plain h5py with ``h5py.File`` (its file holds
the last state only), Icechunk with ``Repository.open`` on local storage, a read-only
session on branch ``main`` and ``zarr.open_array``. Each library runs with the
interpreter of its own environment (their Python versions are in the run's JSON).

h5vc is also opened the other way its users open files, ``h5py.File(path, "r")`` and
``VersionedHDF5File(f)``: the same metrics prefixed ``h5py_file_``.

Every library is measured as installed, with its modules' bytecode cached: the processes
run with ``PYTHONPYCACHEPREFIX`` in the work directory (``PYTHONDONTWRITEBYTECODE``
unset), after one untimed process of the same code that fills the cache. Without it, a
library run from a source tree under ``PYTHONDONTWRITEBYTECODE=1`` (as h5vc is in
development) compiles all its modules in every process, which installed packages, the
peers included, never do.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _common import Metrics, check_equal, main, median, require_library, versioned_file

NAME = "first_open"
LIBRARIES = ("h5vc", "versioned_hdf5", "h5py", "icechunk")
LENGTH = 100_000
CHUNK = 1024
COMMITS = 10
EDIT = 100
READ = 100
PROCESSES = 5

#: Per library: the import, then the opening and the read of ``x[:READ]`` of the last
#: version into ``got``; ``{path}`` and ``{version}`` are filled in.
SCRIPTS = {
    "h5vc": (
        "import h5vc",
        "with h5vc.open({path!r}) as vf:\n    got = vf[{version!r}]['x'][:{read}]",
    ),
    "h5vc_h5py_file": (
        "import h5py, h5vc",
        "with h5py.File({path!r}, 'r') as f:\n"
        "    got = h5vc.VersionedHDF5File(f)[{version!r}]['x'][:{read}]",
    ),
    "versioned_hdf5": (
        "import h5py, versioned_hdf5",
        "with h5py.File({path!r}, 'r') as f:\n"
        "    got = versioned_hdf5.VersionedHDF5File(f)[{version!r}]['x'][:{read}]",
    ),
    "h5py": (
        "import h5py",
        "with h5py.File({path!r}, 'r') as f:\n    got = f['x'][:{read}]",
    ),
    "icechunk": (
        "import icechunk, zarr",
        "icechunk.set_logs_filter('error')\n"
        "repo = icechunk.Repository.open(icechunk.local_filesystem_storage({path!r}))\n"
        "store = repo.readonly_session(branch='main').store\n"
        "got = zarr.open_array(store, path='x', mode='r')[:{read}]",
    ),
}

TEMPLATE = """\
import json, time
start, cpu_start = time.perf_counter(), time.process_time()
{imports}
imported = time.perf_counter()
{open_read}
done, cpu_done = time.perf_counter(), time.process_time()
print(json.dumps({{"import_s": imported - start, "first_open_read_s": done - imported,
                  "cpu_s": cpu_done - cpu_start, "got": got.tolist()}}))
"""


def expected_state() -> tuple[np.ndarray, list[tuple[int, np.ndarray]]]:
    rng = np.random.default_rng(20240601)
    initial = rng.random(LENGTH)
    edits = [(int(rng.integers(0, LENGTH - EDIT)), rng.random(EDIT)) for _ in range(COMMITS)]
    return initial, edits


def final_state() -> np.ndarray:
    state, edits = expected_state()
    for start, values in edits:
        state[start : start + EDIT] = values
    return state


def build(lib: str, path: pathlib.Path) -> None:
    initial, edits = expected_state()
    if lib == "h5py":
        with h5py.File(path, "w") as f:
            dataset = f.create_dataset("x", data=initial, chunks=(CHUNK,))
            for start, values in edits:
                dataset[start : start + EDIT] = values
        return
    if lib == "icechunk":
        import _icechunk as ic

        repo = ic.create_repo(path)
        ic.commit(repo, lambda s: ic.create_array(s, "x", initial, (CHUNK,)), "v0")
        for number, (start, values) in enumerate(edits, 1):

            def edit(store: object, start: int = start, values: np.ndarray = values) -> None:
                ic.open_array(store, "x", writable=True)[start : start + EDIT] = values

            ic.commit(repo, edit, f"v{number}")
        return
    with versioned_file(lib, path, "w") as vf:
        with vf.stage_version("v0") as group:
            group.create_dataset("x", data=initial, chunks=(CHUNK,))
        for number, (start, values) in enumerate(edits, 1):
            with vf.stage_version(f"v{number}") as group:
                group["x"][start : start + EDIT] = values


def in_fresh_process(code: str, pycache: pathlib.Path) -> tuple[float, str]:
    """Wall seconds of ``python -c code`` and its last line of output; bytecode is
    read from and written to ``pycache``."""
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(pycache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"fresh process failed:\n{done.stderr}")
    lines = done.stdout.strip().splitlines()
    return seconds, lines[-1] if lines else ""


def run(lib: str, workdir: pathlib.Path, quick: bool) -> Metrics:
    require_library(lib, LIBRARIES, NAME)
    path = workdir / (f"{NAME}-{lib}.icechunk" if lib == "icechunk" else f"{NAME}-{lib}.h5")
    build(lib, path)
    ways = {"": lib, "h5py_file_": "h5vc_h5py_file"} if lib == "h5vc" else {"": lib}
    codes = {}
    for prefix, script in ways.items():
        imports, open_read = SCRIPTS[script]
        codes[prefix] = TEMPLATE.format(
            imports=imports,
            open_read=open_read.format(path=str(path), version=f"v{COMMITS}", read=READ),
        )
    expected = final_state()[:READ]
    pycache = workdir / "pycache"
    for code in [*codes.values(), "pass"]:  # untimed: fills the bytecode cache
        in_fresh_process(code, pycache)
    processes = 1 if quick else PROCESSES
    laps: dict[str, list[tuple[float, float, float, float]]] = {prefix: [] for prefix in codes}
    bare = []
    for _ in range(processes):  # the ways of opening take turns, under the same load
        for prefix, code in codes.items():
            seconds, line = in_fresh_process(code, pycache)
            result = json.loads(line)
            check_equal(np.asarray(result["got"]), expected, "first read in a fresh process")
            laps[prefix].append(
                (seconds, result["import_s"], result["first_open_read_s"], result["cpu_s"])
            )
        bare.append(in_fresh_process("pass", pycache)[0])
    metrics: Metrics = {"bare_python_s": median(bare)}
    for prefix, runs in laps.items():
        metrics[f"{prefix}import_s"] = median([run[1] for run in runs])
        metrics[f"{prefix}first_open_read_s"] = median([run[2] for run in runs])
        metrics[f"{prefix}import_open_read_s"] = median([run[1] + run[2] for run in runs])
        metrics[f"{prefix}import_open_read_cpu_s"] = median([run[3] for run in runs])
        metrics[f"{prefix}process_s"] = median([run[0] for run in runs])
    return metrics


if __name__ == "__main__":
    main(NAME, LIBRARIES, run)
