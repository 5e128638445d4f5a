"""h5vc against Icechunk (and versioned-hdf5, plain h5py): one table of the rows that matter.

    python benchmarks/against_icechunk.py [--repeat 3] [--quick] [--json PATH] [--libs ...]
    python benchmarks/against_icechunk.py --from-json PATH

Runs ``benchmarks/run.py`` on the workloads below for h5vc, versioned-hdf5, Icechunk and
plain h5py (each peer in its environment under ``$H5VC_BENCH_VENVS``; a missing one
leaves its column empty), sampling the machine's load average while it runs, then prints
one Markdown table: per row, what is measured and with which settings, the median of
the repeats for each library, and the ratios h5vc / Icechunk, h5vc / versioned-hdf5 and
h5vc / h5py (below 1: h5vc is faster or smaller). ``--from-json`` prints the table of an
earlier run's JSON instead.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass

BENCH_DIR = pathlib.Path(__file__).resolve().parent
LIBS = ("h5vc", "icechunk", "versioned_hdf5", "h5py")
PEERS = ("icechunk", "versioned_hdf5", "h5py")
HEADERS = {"h5vc": "h5vc", "icechunk": "Icechunk", "versioned_hdf5": "vh5", "h5py": "h5py"}


@dataclass(frozen=True, slots=True)
class Row:
    label: str
    settings: str
    workload: str
    metric: str
    #: Plain h5py's metric, where it has another name (it writes instead of committing).
    h5py_metric: str | None = None
    #: Libraries whose number would not mean the same thing (left empty).
    skip: tuple[str, ...] = ()


F64 = "10M float64 (80 MB)"
ROWS = (
    Row(
        "commit editing 100 elements",
        f"{F64}, 1 MiB chunks (131072), 100 commits, median",
        "big_chunk_edits",
        "commit_median_s",
        skip=("h5py",),
    ),
    Row(
        "commit editing 100 elements",
        f"{F64}, 8 KiB chunks (1024), 200 commits, median",
        "small_edits",
        "commit_median_s",
        skip=("h5py",),
    ),
    Row("initial commit", f"{F64}, 8 KiB chunks", "small_edits", "initial_commit_s", "write_s"),
    Row("full read of a version", f"{F64}, 8 KiB chunks, fresh open", "small_edits", "full_read_s"),
    Row(
        "full read of a version",
        f"{F64}, 1 MiB chunks, fresh open",
        "big_chunk_edits",
        "full_read_s",
    ),
    Row(
        "200 reads of 100 elements",
        f"{F64}, 8 KiB chunks, dataset opened once",
        "small_edits",
        "small_reads_open_once_s",
    ),
    Row(
        "200 reads of 100 elements",
        f"{F64}, 1 MiB chunks, dataset opened once",
        "big_chunk_edits",
        "small_reads_open_once_s",
    ),
    Row("file size", f"{F64}, 8 KiB chunks, 201 versions", "small_edits", "file_bytes"),
    Row(
        "initial commit",
        "4000x4000 float64, 1000x1000 chunks",
        "two_d_big_chunks",
        "initial_commit_s",
        "write_s",
    ),
    Row(
        "full read of a version",
        "4000x4000 float64, 1000x1000 chunks, fresh open",
        "two_d_big_chunks",
        "full_read_s",
    ),
    Row(
        "full read of a version",
        "4000x4000 float64, 100x100 chunks, fresh open",
        "two_d",
        "full_read_s",
    ),
    Row(
        "file size",
        "100 arrays of 3 int64, 51 versions (h5py: last state)",
        "tiny_arrays",
        "file_bytes",
    ),
    Row(
        "open + read all 100 arrays of a version",
        "100 arrays of 3 int64, median of 5 openings",
        "tiny_arrays",
        "open_read_all_s",
    ),
    Row(
        "gzip full read",
        f"{F64} random walk, 16384 chunks, gzip 4 (zarr GzipCodec 4)",
        "compressed",
        "gzip_full_read_s",
    ),
    Row(
        "zstd initial commit",
        f"{F64} random walk, 16384 chunks, zstd 5 (hdf5plugin.Zstd / zarr ZstdCodec)",
        "compressed",
        "zstd_plain_initial_commit_s",
        "zstd_plain_write_s",
        skip=("versioned_hdf5",),
    ),
    Row(
        "zstd full read",
        f"{F64} random walk, 16384 chunks, zstd 5 (hdf5plugin.Zstd / zarr ZstdCodec)",
        "compressed",
        "zstd_plain_full_read_s",
        skip=("versioned_hdf5",),
    ),
    Row(
        "Blosc-zstd full read",
        f"{F64} random walk, 16384 chunks, Blosc zstd 5 + shuffle (both sides)",
        "compressed",
        "zstd_full_read_s",
        skip=("versioned_hdf5",),
    ),
    Row(
        "import + first open + read 100 elements",
        "fresh `python -c` process, timed inside, median of 5",
        "first_open",
        "import_open_read_s",
    ),
    Row(
        "the same, drop-in way",
        "`h5py.File` + `VersionedHDF5File` in a fresh process (vh5, h5py: as above)",
        "first_open",
        "h5py_file_import_open_read_s",
        skip=("versioned_hdf5", "h5py", "icechunk"),
    ),
    Row(
        "open a committed dataset, read-only",
        '`vf[v]["x"]` right after `h5vc.open(path, "r")`, median of many (h5py: the VDS)',
        "fixed_costs",
        "open_dataset_r_s",
    ),
    Row(
        "the same, drop-in way",
        'after `h5py.File(path, "r")` + `VersionedHDF5File(f)`',
        "fixed_costs",
        "open_dataset_r_h5py_s",
        skip=("h5py",),
    ),
    Row(
        "open a committed dataset, writable",
        'the same after `h5vc.open(path, "r+")`',
        "fixed_costs",
        "open_dataset_rw_s",
    ),
    Row(
        "the same, drop-in way",
        'after `h5py.File(path, "r+")` + `VersionedHDF5File(f)`',
        "fixed_costs",
        "open_dataset_rw_h5py_s",
        skip=("h5py",),
    ),
    Row(
        "commit editing 1 element",
        '1 MiB chunks, `h5vc.open(path, "r+")`, median',
        "fixed_costs",
        "edit_commit_s",
        skip=("h5py",),
    ),
    Row(
        "the same, drop-in way",
        '`h5py.File(path, "r+")` + `VersionedHDF5File(f)`',
        "fixed_costs",
        "edit_commit_h5py_s",
        skip=("h5py",),
    ),
    Row(
        "the same, durable_writes=True",
        '`h5vc.open(path, "r+", durable_writes=True)`, timed alternately with the above',
        "fixed_costs",
        "edit_commit_durable_s",
        skip=("h5py", "versioned_hdf5"),
    ),
    Row(
        "read all 100 tiny arrays of a version, drop-in way",
        "100 arrays of 3 int64, `h5py.File` + `VersionedHDF5File`, median of 5",
        "fixed_costs",
        "tiny_read_version_h5py_s",
        skip=("h5py",),
    ),
    Row(
        "whole `python -c` process",
        "the same, timed outside (interpreter start and exit included)",
        "first_open",
        "process_s",
    ),
    Row(
        "append commit",
        "(n, 8) float64, 4096-row chunks, 300 commits of 1000 rows, median",
        "appends",
        "commit_median_s",
        skip=("h5py",),
    ),
    Row(
        "read of the last 1000 rows",
        "after 300 appends, fresh open, median of 5",
        "appends",
        "tail_read_fresh_s",
    ),
    Row("branch creation", f"{F64}, 8 KiB chunks, median of 20", "branches", "branch_create_s"),
    Row(
        "commit on a branch",
        f"{F64}, 8 KiB chunks, 100 elements, median of 10",
        "branches",
        "branch_commit_s",
    ),
    Row(
        "fast-forward a branch",
        "h5vc merge (fast-forward); Icechunk reset_branch",
        "branches",
        "fast_forward_s",
    ),
    Row(
        "merge of a diverged branch",
        "h5vc: 10 commits into a branch with 1 of its own (Icechunk: no branch merge)",
        "branches",
        "merge_s",
    ),
    Row(
        "commit rebased onto a moved branch",
        "Icechunk: Session.commit(rebase_with=ConflictDetector()); h5vc: merge above",
        "branches",
        "rebase_commit_s",
    ),
)


def workloads() -> list[str]:
    return sorted({row.workload for row in ROWS})


class LoadSampler:
    """The 1-minute load average every ``every`` seconds while a run lasts."""

    def __init__(self, every: float = 10.0) -> None:
        self.samples: list[float] = []
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self._every):
                return

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_benchmarks(
    json_path: pathlib.Path, repeat: int, quick: bool, libs: list[str]
) -> dict[str, object]:
    command = [
        sys.executable,
        str(BENCH_DIR / "run.py"),
        "--libs",
        ",".join(libs),
        "--repeat",
        str(repeat),
        "--out",
        str(json_path),
        "--chart",
        str(json_path.with_suffix(".png")),
        *(["--quick"] if quick else []),
        *workloads(),
    ]
    with LoadSampler() as load:
        done = subprocess.run(command, check=False)
    document = json.loads(json_path.read_text())
    document["load_average_1m"] = load.samples
    document["run_exit_code"] = done.returncode
    json_path.write_text(json.dumps(document, indent=1) + "\n")
    return document


def _value(document: dict[str, object], workload: str, lib: str, metric: str) -> float | None:
    results = document["results"]
    assert isinstance(results, dict)
    run = results.get(workload, {}).get(lib)
    if not run or run.get("status") != "ok":
        return None
    value = run["metrics"].get(metric)
    return float(value) if isinstance(value, (int, float)) else None


def _format(metric: str, value: float | None) -> str:
    if value is None:
        return ""
    if metric.endswith("_bytes"):
        return f"{value / 1e6:.2f} MB" if value < 1e7 else f"{value / 1e6:.1f} MB"
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.2f} ms"
    return f"{value * 1e6:.0f} us"


def table(document: dict[str, object]) -> str:
    header = ["measure", "settings", *(HEADERS[lib] for lib in LIBS)]
    header += [f"h5vc / {HEADERS[peer]}" for peer in PEERS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in ROWS:
        values: dict[str, float | None] = {}
        for lib in LIBS:
            metric = row.h5py_metric if lib == "h5py" and row.h5py_metric else row.metric
            values[lib] = None if lib in row.skip else _value(document, row.workload, lib, metric)
        ours = values["h5vc"]
        ratios = []
        for peer in PEERS:
            theirs = values[peer]
            ok = ours is not None and theirs is not None and theirs > 0
            ratios.append(f"{ours / theirs:.3g}x" if ok else "")  # type: ignore[operator]
        cells = [row.label, row.settings, *(_format(row.metric, values[lib]) for lib in LIBS)]
        lines.append("| " + " | ".join(cells + ratios) + " |")
    return "\n".join(lines)


def notes(document: dict[str, object]) -> str:
    machine = document.get("machine", {})
    assert isinstance(machine, dict)
    load = document.get("load_average_1m") or []
    assert isinstance(load, list)
    versions = machine.get("library_versions", {})
    parts = [
        f"{machine.get('date', '?')}, {machine.get('platform', '?')}, "
        f"{machine.get('cpu_count', '?')} cores",
        f"medians of {document.get('repeat', '?')} runs{' (quick sizes)' if document.get('quick') else ''}",
        "versions: " + ", ".join(f"{lib} {version}" for lib, version in versions.items()),
    ]
    if load:
        parts.append(
            f"load average (1 min) during the run: median {statistics.median(load):.1f}, "
            f"range {min(load):.1f}-{max(load):.1f}"
        )
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per pair (default 3)")
    parser.add_argument("--quick", action="store_true", help="reduced sizes")
    parser.add_argument("--json", type=pathlib.Path, help="where run.py writes its results")
    parser.add_argument("--from-json", type=pathlib.Path, help="tabulate an earlier run")
    parser.add_argument(
        "--libs", default=",".join(LIBS), help=f"a subset of {','.join(LIBS)} (default: all)"
    )
    args = parser.parse_args(argv)
    libs = [lib.strip() for lib in args.libs.split(",") if lib.strip()]
    unknown = sorted(set(libs) - set(LIBS))
    if unknown or "h5vc" not in libs:
        parser.error(f"expected h5vc and libraries from {LIBS}. Got {libs} instead.")
    if args.from_json:
        document = json.loads(args.from_json.read_text())
    else:
        json_path = args.json or pathlib.Path(tempfile.mkdtemp()) / "against_icechunk.json"
        document = run_benchmarks(json_path, args.repeat, args.quick, libs)
        print(f"\nresults written to {json_path}")
    print()
    print(notes(document))
    print()
    print(table(document))
    return int(document.get("run_exit_code", 0) or 0)


if __name__ == "__main__":
    sys.exit(main())
