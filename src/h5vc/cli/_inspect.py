"""Read-only commands: ``log``, ``show``, ``diff`` and ``du``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from h5vc.api import VersionedHDF5File
from h5vc.cli._app import (
    CliError,
    cli,
    emit_json,
    json_option,
    open_versioned,
    print_table,
    progress,
    stdout_console,
)
from h5vc.cli._graph import graph_rows
from h5vc.cli._stats import disk_usage, version_tree
from h5vc.errors import VersionNotFoundError
from h5vc.lifecycle import format_log
from h5vc.lifecycle.history import log_blocks
from h5vc.store import layout
from h5vc.versions import VersionInfo, format_timestamp

if TYPE_CHECKING:  # loaded by ``diff`` only: it loads the columns and the staging
    from h5vc.lifecycle.diff import VersionDiff

__all__ = ["diff", "du", "human_size", "log", "parents_of", "show"]

#: The kinds of key changes of a column, in the order ``h5vc diff`` prints them.
COLUMN_CHANGES = ("added", "removed", "changed")


def human_size(n: float) -> str:
    """``1.5 MB`` for 1_500_000 (decimal units, like ``ls -h --si``)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def parents_of(info: VersionInfo) -> list[str]:
    """The parents of a version, first parent first (none for a root)."""
    return list(info.parents)


def resolve(vf: VersionedHDF5File, name: str | None) -> str:
    """A committed version name from ``name`` (default: the current version)."""
    if name is None:
        current = vf.current_version
        if current == layout.FIRST_VERSION:
            raise VersionNotFoundError("the file has no versions yet")
        return current
    return vf[name].version_name


def info_dict(info: VersionInfo) -> dict[str, Any]:
    return {
        "version": info.name,
        "parents": parents_of(info),
        "timestamp": format_timestamp(info.timestamp),
        "message": info.message,
        "author": info.author,
    }


def history(
    vf: VersionedHDF5File, start: str | None, everything: bool, first_parent: bool = False
) -> list[VersionInfo]:
    """The versions reachable from ``start`` through every parent (or its first parents
    only), children before parents (:meth:`VersionedHDF5File.log`); or every version,
    newest first."""
    if not everything:
        return vf.log(resolve(vf, start), first_parent=first_parent)
    state = vf.file_state
    return [state.log.info(name) for name in reversed(state.log.names())]


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("start", required=False)
@click.option("-n", "--max-count", type=click.IntRange(min=0), help="Show at most N versions.")
@click.option("-b", "--branch", metavar="BRANCH", help="Start at the head of BRANCH.")
@click.option("--graph", is_flag=True, help="Draw the version graph beside the log.")
@click.option("--all", "everything", is_flag=True, help="Every version, not only START's history.")
@click.option(
    "--first-parent", is_flag=True, help="Follow only the first parent of merge versions."
)
@json_option
def log(
    file: str,
    start: str | None,
    max_count: int | None,
    branch: str | None,
    graph: bool,
    everything: bool,
    first_parent: bool,
    as_json: bool,
) -> None:
    """List START (a version, tag or branch; default: the current version) and every
    ancestor once, each before its parents (newest first among those ready)."""
    with open_versioned(file) as vf:
        if branch is not None:
            if start is not None:
                raise CliError("give either START or --branch, not both")
            start = vf.branches.get(branch)
            if start is None:
                raise CliError(f"no such branch: {branch}")
        if vf.current_version == layout.FIRST_VERSION and start is None:
            entries: list[VersionInfo] = []
        else:
            entries = history(vf, start, everything, first_parent)
        labels = ref_labels(vf)
    if as_json:
        emit_json(
            [{**info_dict(info), "refs": labels.get(info.name, [])} for info in entries[:max_count]]
        )
        return
    click.echo(render_log(entries, max_count, graph, labels))


def ref_labels(vf: VersionedHDF5File) -> dict[str, list[str]]:
    """``{version: ["branch main", "tag v1.0", ...]}`` for the log's decorations."""
    labels: dict[str, list[str]] = {}
    for kind, refs in (("branch", vf.branches), ("tag", vf.tags)):
        for name, version in refs.items():
            labels.setdefault(version, []).append(f"{kind} {name}")
    return labels


def _blocks(infos: list[VersionInfo], labels: dict[str, list[str]]) -> list[list[str]]:
    """Each version's lines from ``log_blocks``, its refs after its name."""
    blocks = log_blocks(infos)
    for info, lines in zip(infos, blocks):
        if labels.get(info.name):
            lines[0] += f" ({', '.join(labels[info.name])})"
    return blocks


def render_log(
    entries: list[VersionInfo],
    max_count: int | None,
    graph: bool,
    labels: dict[str, list[str]] | None = None,
) -> str:
    """The log text: one block per version (``log_blocks``), with the graph beside it."""
    shown = entries[:max_count]
    blocks = _blocks(shown, labels or {})
    if not graph:
        return "\n\n".join("\n".join(lines) for lines in blocks)
    drawn = {info.name for info in entries}
    parents = {info.name: [p for p in parents_of(info) if p in drawn] for info in entries}
    lines: list[str] = []
    rows = graph_rows([info.name for info in entries], parents.__getitem__)
    for block, (row, follow, connector) in zip(blocks, rows):
        width = max(len(row), len(follow)) + 1
        lines.append(row.ljust(width) + block[0])
        lines += [(follow.ljust(width) + line).rstrip() for line in [*block[1:], ""]]
        if connector:
            lines.append(connector)
    return "\n".join(lines).rstrip()


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("version", required=False)
@json_option
def show(file: str, version: str | None, as_json: bool) -> None:
    """Show VERSION (default: the current one): its groups and datasets with shape, dtype,
    chunk shape and the bytes first stored by this version; its sample columns with
    their number of keys, sample shape, dtype and backend."""
    with open_versioned(file) as vf:
        name = resolve(vf, version)
        info = vf.version_info(name)
        nodes = version_tree(vf, name, parents_of(info))
    if as_json:
        emit_json({**info_dict(info), "nodes": [node.as_dict() for node in nodes]})
        return
    console = stdout_console()
    console.print(format_log([info]), markup=False, highlight=False)
    total = sum(node.new_bytes or 0 for node in nodes)
    from rich.tree import Tree  # loaded by the first tree drawn

    tree = Tree(f"/  ({human_size(total)} first stored by {name})")
    branches = {"": tree}
    for node in nodes[1:]:
        parent = branches[node.path.rpartition("/")[0]]
        leaf = node.path.rpartition("/")[2]
        attrs = f"  attrs: {', '.join(node.attrs)}" if node.attrs else ""
        if node.kind == "group":
            branches[node.path] = parent.add(f"{leaf}/{attrs}")
        elif node.kind == "column":
            shape = f"at most {node.shape}" if node.variable_shape else str(node.shape)
            parent.add(
                f"{leaf}  column of {node.keys} samples {node.dtype} {shape} backend "
                f"{node.backend}  new {human_size(node.new_bytes or 0)}{attrs}"
            )
        else:
            parent.add(
                f"{leaf}  {node.dtype} {node.shape} chunks {node.chunks}  "
                f"new {human_size(node.new_bytes or 0)}{attrs}"
            )
    console.print(tree, markup=False, highlight=False)


def column_changes(result: VersionDiff) -> dict[str, Any]:
    """``{"/path": ColumnDiff}`` of the columns that differ, by path."""
    changes = getattr(result, "columns", None) or {}
    return {"/" + path.strip("/"): change for path, change in sorted(changes.items()) if change}


def describe_diff(result: VersionDiff) -> str:
    """``result.describe()`` with the first few keys of each kind of change below the
    line of each column."""
    changes = column_changes(result)
    lines: list[str] = []
    for line in result.describe().splitlines():
        lines.append(line)
        path = line.removeprefix("  ~ column ").partition(":")[0]
        if line.startswith("  ~ column ") and path in changes:
            lines += _key_lines(changes[path])
    return "\n".join(lines)


def _key_lines(change: Any) -> list[str]:
    from h5vc.cli._columns import format_keys

    return [
        f"      {kind}: {format_keys(list(getattr(change, kind)))}"
        for kind in COLUMN_CHANGES
        if len(getattr(change, kind))
    ]


def diff_dict(result: VersionDiff) -> dict[str, Any]:
    from h5vc.cli._columns import json_key

    out: dict[str, Any] = {"version1": result.version1, "version2": result.version2}
    out["columns"] = [
        {
            "path": path,
            **{f"{kind}_count": len(getattr(change, kind)) for kind in COLUMN_CHANGES},
            **{kind: [json_key(key) for key in getattr(change, kind)] for kind in COLUMN_CHANGES},
        }
        for path, change in column_changes(result).items()
    ]
    for name in type(result).__dataclass_fields__:
        if name in out:
            continue
        value = getattr(result, name)
        if name == "datasets_changed":
            value = [
                {
                    "path": change.path,
                    "shape1": list(change.shape1),
                    "shape2": list(change.shape2),
                    "regions": [
                        [[s.start, s.stop] for s in region.raw] for region in change.regions
                    ],
                }
                for change in value
            ]
        elif name.startswith("attrs"):
            value = [{"path": path, "attr": attr} for path, attr in value]
        out[name] = list(value)
    return out


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("version1")
@click.argument("version2")
@json_option
def diff(file: str, version1: str, version2: str, as_json: bool) -> None:
    """What changed from VERSION1 to VERSION2: groups, datasets, attributes and the
    chunk regions whose data differ (decided from chunk hashes; no data is read); per
    sample column, the keys added, removed and changed (the first few; --json: all)."""
    with open_versioned(file) as vf:
        result = vf.diff(resolve(vf, version1), resolve(vf, version2))
    if as_json:
        emit_json(diff_dict(result))
    else:
        click.echo(describe_diff(result))


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@json_option
def du(file: str, as_json: bool) -> None:
    """Storage per version and per dataset: logical size, stored bytes, and stored bytes
    shared with other versions. A sample column counts its table and its samples."""
    with open_versioned(file) as vf, progress("Reading chunk maps", quiet=as_json) as advance:
        usage = disk_usage(vf, advance)
    if as_json:
        emit_json(usage.as_dict())
        return
    sizes = ("logical_bytes", "stored_bytes", "shared_bytes")
    print_table(
        f"per version (file: {human_size(usage.file_bytes)})",
        ["version", "logical", "stored", "shared"],
        [[name, *(human_size(row[k]) for k in sizes)] for name, row in usage.versions.items()],
        right=("logical", "stored", "shared"),
    )
    print_table(
        "per dataset (a column: its table and samples)",
        ["dataset", "versions", "logical", "stored", "shared"],
        [
            [
                "/" + entry.path + (" (column)" if entry.kind == "column" else ""),
                str(entry.versions),
                *(human_size(getattr(entry, k)) for k in sizes),
            ]
            for entry in usage.datasets.values()
        ],
        right=("versions", "logical", "stored", "shared"),
    )
