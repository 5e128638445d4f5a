"""Run the benchmark workloads on h5vc and its peers, in one run, on one machine.

    python benchmarks/run.py [--quick] [--libs h5vc,h5py] [workload ...]

Every (workload, library) pair runs in its own subprocess: h5vc and plain h5py with this
interpreter, each peer with the interpreter of its own virtual environment, created on
first use under $H5VC_BENCH_VENVS (default ~/.cache/h5vc-bench); Icechunk's is made by
hand (see ``PEERS`` and docs/benchmarks.md) and reported missing without it. Prints a
table of medians and ratios, writes the results as JSON and draws commit time against
version number. Exits non-zero when any run failed (a failed equality check included).
"""

from __future__ import annotations

import argparse
import ast
import atexit
import datetime
import importlib.util
import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

BENCH_DIR = pathlib.Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
WORKLOAD_DIR = BENCH_DIR / "workloads"
RESULTS_DIR = BENCH_DIR / "results"
ALL_LIBRARIES = ("h5vc", "versioned_hdf5", "hangar", "icechunk", "h5py")
PEER_LIBRARIES = ("versioned_hdf5", "hangar", "icechunk")
README_START = "<!-- benchmarks:start -->"
README_END = "<!-- benchmarks:end -->"


# --------------------------------------------------------------------------- peers


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerSpec:
    """How to build the virtual environment of one peer library."""

    venv_name: str
    module: str
    requirements: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    #: Set for a peer that is never installed on first use: its environment is made by
    #: hand (this says how) and the peer is reported missing, not installed, without it.
    setup: str = ""


PEERS = {
    "versioned_hdf5": PeerSpec(
        venv_name="versioned-hdf5",
        module="versioned_hdf5",
        requirements=("versioned-hdf5==2.6.0",),
    ),
    "hangar": PeerSpec(
        venv_name="hangar",
        module="hangar",
        requirements=("hangar==0.5.2", "numpy<1.24"),
        env={"PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python"},
    ),
    # Icechunk needs Python 3.11 or later (the project's own interpreter may be older);
    # h5py only because the workload modules import it.
    "icechunk": PeerSpec(
        venv_name="icechunk",
        module="icechunk",
        requirements=("icechunk==2.3.0", "zarr==3.4.2", "numpy", "h5py"),
        setup=(
            "python3.12 -m venv $H5VC_BENCH_VENVS/icechunk && $H5VC_BENCH_VENVS/icechunk/bin/pip"
            " install icechunk==2.3.0 zarr==3.4.2 numpy h5py"
        ),
    ),
}


@dataclass(slots=True, kw_only=True)
class Interpreter:
    """A Python able to run one library's workloads, or the reason there is none."""

    python: str | None
    env: dict[str, str]
    version: str = ""
    missing: str = ""


def venv_root() -> pathlib.Path:
    configured = os.environ.get("H5VC_BENCH_VENVS")
    return pathlib.Path(configured) if configured else pathlib.Path.home() / ".cache/h5vc-bench"


def _probe(python: str, module: str, env: dict[str, str]) -> tuple[bool, str]:
    """Import ``module`` with ``python``; return (success, version or last error line)."""
    code = (
        "import importlib, importlib.metadata as metadata\n"
        f"module = importlib.import_module({module!r})\n"
        "try:\n"
        f"    print(metadata.version({module!r}))\n"
        "except metadata.PackageNotFoundError:\n"
        "    print(getattr(module, '__version__', 'unknown'))"
    )
    try:
        done = subprocess.run(
            [python, "-c", code], env=env, capture_output=True, text=True, timeout=300
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, str(err)
    if done.returncode == 0:
        return True, done.stdout.strip()
    return False, _last_line(done.stderr) or f"exit code {done.returncode}"


def _peer_interpreter(lib: str, log: bool) -> Interpreter:
    spec = PEERS[lib]
    venv = venv_root() / spec.venv_name
    python = venv / "bin" / "python"
    env = {**os.environ, **spec.env}
    env.pop("PYTHONPATH", None)
    if python.exists():
        ok, detail = _probe(str(python), spec.module, env)
        if ok:
            return Interpreter(python=str(python), env=env, version=detail)
        if spec.setup:
            return Interpreter(
                python=None, env=env, missing=f"{python} cannot import {spec.module}: {detail}"
            )
    if spec.setup:
        return Interpreter(
            python=None, env=env, missing=f"no environment at {venv} (set up with: {spec.setup})"
        )
    if log:
        print(f"[setup] installing {lib} into {venv} (first use) ...", flush=True)
    install_log = venv.parent / f"{spec.venv_name}-install.log"
    try:
        venv.parent.mkdir(parents=True, exist_ok=True)
        with install_log.open("w") as out:
            if not python.exists():
                subprocess.run(
                    [sys.executable, "-m", "venv", str(venv)], check=True, stdout=out, stderr=out
                )
            subprocess.run(
                [str(python), "-m", "pip", "install", *spec.requirements],
                check=True,
                stdout=out,
                stderr=out,
                env=env,
                timeout=3600,
            )
    except (OSError, subprocess.SubprocessError) as err:
        reason = _last_line(install_log.read_text()) if install_log.exists() else str(err)
        return Interpreter(python=None, env=env, missing=f"install failed: {reason}")
    ok, detail = _probe(str(python), spec.module, env)
    if not ok:
        return Interpreter(python=None, env=env, missing=f"import failed: {detail}")
    return Interpreter(python=str(python), env=env, version=detail)


def _local_interpreter(lib: str) -> Interpreter:
    env = dict(os.environ)
    if lib == "h5vc" and importlib.util.find_spec("h5vc") is None:
        src = str(REPO_DIR / "src")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    if lib == "h5vc":
        _compiled_bytecode(env)
    module = "h5py" if lib == "h5py" else "h5vc"
    ok, detail = _probe(sys.executable, module, env)
    if not ok and lib == "h5vc":
        # An h5vc that fails to import is reported per run as an error, not as missing.
        detail = f"unknown ({detail})"
    return Interpreter(python=sys.executable, env=env, version=detail)


def _compiled_bytecode(env: dict[str, str]) -> None:
    """Let h5vc's runs read compiled bytecode, as the peers' do: ``pip install`` compiles
    a wheel's modules, while h5vc may run from a source tree where
    ``PYTHONDONTWRITEBYTECODE`` is set, and would then compile every module it imports
    lazily (a first merge, a first commit) inside the timed code. Its modules are
    compiled once, into a directory of this run (``PYTHONPYCACHEPREFIX``), before any
    run starts."""
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    prefix = tempfile.mkdtemp(prefix="h5vc-bench-bytecode-")
    atexit.register(shutil.rmtree, prefix, ignore_errors=True)
    env["PYTHONPYCACHEPREFIX"] = prefix
    code = (
        "import compileall, os, h5vc; "
        "compileall.compile_dir(os.path.dirname(h5vc.__file__), quiet=1)"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=False, timeout=300)


def interpreter_for(lib: str, cache: dict[str, Interpreter], log: bool) -> Interpreter:
    if lib not in cache:
        cache[lib] = _peer_interpreter(lib, log) if lib in PEERS else _local_interpreter(lib)
    return cache[lib]


# --------------------------------------------------------------------------- workloads


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    name: str
    path: pathlib.Path
    libraries: tuple[str, ...]
    h5py_baseline: dict[str, str]


def _literal_assignments(path: pathlib.Path) -> dict[str, object]:
    """Top-level ``NAME = <literal>`` assignments of a module, read without importing it."""
    found: dict[str, object] = {}
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        for target in targets:
            if isinstance(target, ast.Name):
                try:
                    found[target.id] = ast.literal_eval(value)
                except ValueError:
                    continue
    return found


def discover_workloads() -> list[Workload]:
    workloads = []
    for path in sorted(WORKLOAD_DIR.glob("*.py")):
        if path.name.startswith("_"):
            continue
        values = _literal_assignments(path)
        name = values.get("NAME", path.stem)
        libraries = values.get("LIBRARIES", ())
        baseline = values.get("H5PY_BASELINE", {})
        if not isinstance(libraries, (tuple, list)) or not isinstance(baseline, dict):
            print(f"skipping {path.name}: LIBRARIES or H5PY_BASELINE is not a literal")
            continue
        workloads.append(
            Workload(
                name=str(name),
                path=path,
                libraries=tuple(str(lib) for lib in libraries),
                h5py_baseline={str(key): str(value) for key, value in baseline.items()},
            )
        )
    return workloads


# --------------------------------------------------------------------------- running


@dataclass(slots=True, kw_only=True)
class RunResult:
    status: str  # "ok", "error", "missing"
    message: str = ""
    wall_s: float = 0.0
    metrics: list[dict[str, float | list[float]]] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "status": self.status,
            "message": self.message,
            "wall_s": self.wall_s,
            "metrics": median_metrics(self.metrics),
            "repeats": self.metrics,
        }


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def run_one(
    workload: Workload,
    lib: str,
    interpreter: Interpreter,
    *,
    quick: bool,
    repeat: int,
    timeout: float,
    scratch: pathlib.Path,
) -> RunResult:
    if interpreter.python is None:
        return RunResult(status="missing", message=interpreter.missing)
    result = RunResult(status="ok")
    start = time.perf_counter()
    for _ in range(repeat):
        workdir = pathlib.Path(tempfile.mkdtemp(prefix=f"{workload.name}-{lib}-", dir=scratch))
        command = [interpreter.python, str(workload.path), "--lib", lib, "--workdir", str(workdir)]
        if quick:
            command.append("--quick")
        try:
            done = subprocess.run(
                command, env=interpreter.env, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            result.status, result.message = "error", f"timed out after {timeout:g} s"
            break
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        if done.returncode != 0:
            result.status = "error"
            result.message = _last_line(done.stderr) or f"exit code {done.returncode}"
            break
        try:
            metrics = json.loads(_last_line(done.stdout))
        except json.JSONDecodeError:
            result.status = "error"
            result.message = f"no JSON on the last line of stdout: {_last_line(done.stdout)!r}"
            break
        result.metrics.append(metrics)
    result.wall_s = time.perf_counter() - start
    return result


def median_metrics(repeats: list[dict[str, float | list[float]]]) -> dict[str, object]:
    """Median over repeats of every scalar metric; lists (per-step series) of the middle repeat."""
    if not repeats:
        return {}
    merged: dict[str, object] = {}
    for key in repeats[0]:
        values = [run[key] for run in repeats if key in run]
        scalars = [float(value) for value in values if isinstance(value, (int, float))]
        if len(scalars) == len(values):
            merged[key] = statistics.median(scalars)
        else:
            merged[key] = values[len(values) // 2]
    return merged


# --------------------------------------------------------------------------- reporting


def _format_value(metric: str, value: object) -> str:
    if isinstance(value, list):
        if not value:
            return "[]"
        return f"{_format_value(metric, statistics.median(value))} (med of {len(value)})"
    if not isinstance(value, (int, float)):
        return str(value)
    if metric.endswith("_bytes"):
        return f"{value / 1e6:.1f} MB"
    if metric.endswith("_s"):
        if value >= 1:
            return f"{value:.2f} s"
        if value >= 1e-3:
            return f"{value * 1e3:.2f} ms"
        return f"{value * 1e6:.0f} us"
    return f"{value:.3g}"


def _scalar(value: object) -> float | None:
    if isinstance(value, list):
        return float(statistics.median(value)) if value else None
    if isinstance(value, (int, float)):
        return float(value)
    return None


def _ratio(ours: object, theirs: object) -> str:
    mine, other = _scalar(ours), _scalar(theirs)
    if mine is None or other is None or other == 0:
        return ""
    return f"{mine / other:.3g}x"


def build_table(
    workload: Workload, results: dict[str, RunResult], libs: list[str]
) -> list[list[str]]:
    """Rows of [metric, value per library..., ratios h5vc/peer...]."""
    shown = [lib for lib in libs if lib in workload.libraries]
    peers = [lib for lib in shown if lib != "h5vc"]
    header = ["metric", *shown, *(f"h5vc/{peer}" for peer in peers if "h5vc" in shown)]
    rows = [header]
    status_row = ["status"]
    for lib in shown:
        run = results.get(lib)
        status_row.append("not run" if run is None else _status_text(run))
    rows.append(status_row + [""] * (len(header) - len(status_row)))
    metrics: dict[str, dict[str, object]] = {}
    for lib in shown:
        run = results.get(lib)
        if run is None or run.status != "ok":
            continue
        for key, value in median_metrics(run.metrics).items():
            metrics.setdefault(key, {})[lib] = value
    ours = metrics_of(results.get("h5vc"))
    for key, by_lib in _ordered(metrics, workload.h5py_baseline):
        if any(isinstance(value, list) for value in by_lib.values()):
            continue  # per-step series: in the JSON and the chart
        row = [key, *(_format_value(key, by_lib[lib]) if lib in by_lib else "" for lib in shown)]
        if "h5vc" in shown and key.endswith(("_s", "_bytes")):
            for peer in peers:
                theirs = metrics_of(results.get(peer))
                peer_key = workload.h5py_baseline.get(key, key) if peer == "h5py" else key
                row.append(_ratio(ours.get(key), theirs.get(peer_key)))
        rows.append(row + [""] * (len(header) - len(row)))
    return rows


def _ordered(
    metrics: dict[str, dict[str, object]], baseline: dict[str, str]
) -> list[tuple[str, dict[str, object]]]:
    """Metrics in first-seen order, each plain-h5py baseline metric right below its match."""
    placed = {partner for key, partner in baseline.items() if key in metrics and partner in metrics}
    ordered = []
    for key, by_lib in metrics.items():
        if key in placed:
            continue
        ordered.append((key, by_lib))
        partner = baseline.get(key)
        if partner in placed:
            ordered.append((partner, metrics[partner]))
    return ordered


def metrics_of(run: RunResult | None) -> dict[str, object]:
    if run is None or run.status != "ok":
        return {}
    return median_metrics(run.metrics)


def _status_text(run: RunResult) -> str:
    if run.status == "ok":
        return f"ok ({run.wall_s:.1f} s)"
    return f"{run.status}: {run.message}"


def render_text(rows: list[list[str]]) -> str:
    widths = [max(len(row[col]) for row in rows) for col in range(len(rows[0]))]
    widths = [min(width, 60) for width in widths]
    lines = []
    for index, row in enumerate(rows):
        cells = [cell if len(cell) <= 60 else cell[:57] + "..." for cell in row]
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)


def render_markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows[1:]]
    return "\n".join(lines)


def update_readme(readme: pathlib.Path, markdown: str) -> bool:
    """Replace the text between the benchmark markers of the README; False if no markers."""
    if not readme.exists():
        return False
    text = readme.read_text()
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        return False
    new_text = text[: start + len(README_START)] + "\n" + markdown + "\n" + text[end:]
    readme.write_text(new_text)
    return True


def draw_chart(results: dict[str, dict[str, RunResult]], path: pathlib.Path, quick: bool) -> str:
    """Commit time against version number (workload small_edits); returns a status line."""
    runs = results.get("small_edits", {})
    candidates = {
        lib: metrics_of(run).get("commit_times_s")
        for lib, run in runs.items()
        if lib in ("h5vc", "versioned_hdf5", "h5py")
    }
    series = {lib: times for lib, times in candidates.items() if isinstance(times, list) and times}
    if not series:
        return "chart skipped: no per-commit times from small_edits"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        return "chart skipped: matplotlib is not installed"
    labels = {
        "h5vc": "h5vc",
        "versioned_hdf5": "versioned-hdf5",
        "h5py": "h5py (in place, no versions)",
    }
    figure, axes = plt.subplots(figsize=(8, 4.5))
    for lib, times in series.items():
        versions = range(1, len(times) + 1)
        axes.plot(versions, [t * 1e3 for t in times], label=labels[lib], linewidth=1.2)
    axes.set_yscale("log")
    axes.set_xlabel("version number")
    axes.set_ylabel("commit time (ms, log scale)")
    size = "1M" if quick else "10M"
    axes.set_title(f"small_edits: commits editing 100 of {size} float64 elements")
    axes.grid(True, which="both", alpha=0.3)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=len(series), frameon=False)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return f"chart written to {path}"


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="workloads to run (default: all)")
    parser.add_argument("--quick", action="store_true", help="reduced sizes, for CI")
    parser.add_argument(
        "--libs",
        default=",".join(ALL_LIBRARIES),
        help=f"comma-separated libraries (default: {','.join(ALL_LIBRARIES)})",
    )
    parser.add_argument(
        "--no-peers", action="store_true", help=f"skip the peers ({', '.join(PEER_LIBRARIES)})"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per pair; medians reported")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS_DIR / "latest.json")
    parser.add_argument("--chart", type=pathlib.Path, default=RESULTS_DIR / "commit_times.png")
    parser.add_argument("--markdown", type=pathlib.Path, help="also write the tables as Markdown")
    parser.add_argument(
        "--update-readme",
        action="store_true",
        help=f"replace the README text between {README_START} and {README_END}",
    )
    parser.add_argument("--scratch", type=pathlib.Path, help="directory for the data files")
    parser.add_argument("--list", action="store_true", help="list the workloads and exit")
    args = parser.parse_args(argv)
    args.libs = [lib.strip() for lib in args.libs.split(",") if lib.strip()]
    unknown = sorted(set(args.libs) - set(ALL_LIBRARIES))
    if unknown:
        parser.error(f"expected libraries from {ALL_LIBRARIES}. Got {unknown} instead.")
    if args.no_peers:
        args.libs = [lib for lib in args.libs if lib not in PEER_LIBRARIES]
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def machine_info(interpreters: dict[str, Interpreter]) -> dict[str, object]:
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "library_versions": {
            lib: (interp.version if interp.python else f"missing ({interp.missing})")
            for lib, interp in interpreters.items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workloads = discover_workloads()
    if args.list:
        for workload in workloads:
            print(f"{workload.name:16} {', '.join(workload.libraries)}")
        return 0
    if args.names:
        known = {workload.name for workload in workloads}
        unknown = sorted(set(args.names) - known)
        if unknown:
            print(f"unknown workloads {unknown}; known: {sorted(known)}", file=sys.stderr)
            return 2
        workloads = [workload for workload in workloads if workload.name in args.names]

    interpreters: dict[str, Interpreter] = {}
    results: dict[str, dict[str, RunResult]] = {}
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="h5vc-bench-", dir=args.scratch))
    tables: list[tuple[str, list[list[str]]]] = []
    try:
        for workload in workloads:
            results[workload.name] = {}
            for lib in args.libs:
                if lib not in workload.libraries:
                    continue
                interpreter = interpreter_for(lib, interpreters, log=True)
                print(f"[run] {workload.name} / {lib} ...", end=" ", flush=True)
                run = run_one(
                    workload,
                    lib,
                    interpreter,
                    quick=args.quick,
                    repeat=args.repeat,
                    timeout=args.timeout,
                    scratch=scratch,
                )
                results[workload.name][lib] = run
                print(_status_text(run), flush=True)
            rows = build_table(workload, results[workload.name], args.libs)
            tables.append((workload.name, rows))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    for name, rows in tables:
        print(f"\n== {name}{' (quick)' if args.quick else ''}")
        print(render_text(rows))

    document = {
        "quick": args.quick,
        "repeat": args.repeat,
        "machine": machine_info(interpreters),
        "results": {
            name: {lib: run.to_dict() for lib, run in runs.items()}
            for name, runs in results.items()
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(f"\nresults written to {args.out}")
    print(draw_chart(results, args.chart, args.quick))

    markdown = "\n\n".join(
        f"**{name}**{' (quick)' if args.quick else ''}\n\n{render_markdown(rows)}"
        for name, rows in tables
    )
    if args.markdown:
        args.markdown.write_text(markdown + "\n")
        print(f"markdown tables written to {args.markdown}")
    if args.update_readme:
        readme = REPO_DIR / "README.md"
        updated = update_readme(readme, markdown)
        print(f"README {'updated' if updated else 'not updated: markers missing'} ({readme})")

    failed = [
        f"{name}/{lib}"
        for name, runs in results.items()
        for lib, run in runs.items()
        if run.status == "error"
    ]
    if failed:
        print(f"\nFAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
