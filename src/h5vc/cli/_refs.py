"""Commands for refs and merges: ``branch``, ``tag`` and ``merge``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import click

from h5vc.cli._app import (
    CONTEXT_SETTINGS,
    CliError,
    cli,
    emit_json,
    json_option,
    open_versioned,
    print_table,
    progress,
)
from h5vc.cli._inspect import resolve
from h5vc.errors import NothingToMergeError

__all__ = ["branch", "cherry_pick", "merge", "revert", "tag"]

FILE = click.argument("file", type=click.Path(dir_okay=False))


def _print_refs(title: str, refs: dict[str, str], current: str | None = None) -> None:
    rows = [["*" if name == current else "", name, version] for name, version in refs.items()]
    print_table(title, ["", "name", "version"], rows)


@cli.group(context_settings=CONTEXT_SETTINGS)
def branch() -> None:
    """List, create, delete, reset or switch branches (movable names for versions)."""


@branch.command("list")
@FILE
@json_option
def branch_list(file: str, as_json: bool) -> None:
    """List the branches and their head versions (* marks the current branch)."""
    with open_versioned(file) as vf:
        branches, current = vf.branches, vf.current_branch
    if as_json:
        emit_json(
            [{"branch": n, "version": v, "current": n == current} for n, v in branches.items()]
        )
    else:
        _print_refs("branches", branches, current)


@branch.command("create")
@FILE
@click.argument("name")
@click.argument("ref", required=False)
@click.option("--at", "at", metavar="REF", help="The same as REF.")
def branch_create(file: str, name: str, ref: str | None, at: str | None) -> None:
    """Create branch NAME at REF, a version, tag or branch (default: the current
    version), as ``tag create`` takes it."""
    if ref is not None and at is not None:
        raise CliError("give REF or --at, not both")
    at = ref if ref is not None else at
    with open_versioned(file, "r+") as vf:
        head = vf.create_branch(name, at=at)
    click.echo(f"branch {name} -> {head}")


@branch.command("delete")
@FILE
@click.argument("names", nargs=-1, required=True)
def branch_delete(file: str, names: tuple[str, ...]) -> None:
    """Delete branches NAMES (their versions stay)."""
    _delete_refs(file, names, "branch(es)", lambda vf: (vf.branches, vf.delete_branch))


@branch.command("reset")
@FILE
@click.argument("name")
@click.argument("to", metavar="REF")
def branch_reset(file: str, name: str, to: str) -> None:
    """Point branch NAME at REF."""
    with open_versioned(file, "r+") as vf:
        vf.reset_branch(name, to)
        head = vf.branches[name]
    click.echo(f"branch {name} -> {head}")


@branch.command("switch")
@FILE
@click.argument("name")
def branch_switch(file: str, name: str) -> None:
    """Make NAME the current branch and its head the current version."""
    with open_versioned(file, "r+") as vf:
        vf.switch_branch(name)
        head = vf.current_version
    click.echo(f"on branch {name} at {head}")


@cli.group(context_settings=CONTEXT_SETTINGS)
def tag() -> None:
    """List, create or delete tags (names for versions that never move)."""


@tag.command("list")
@FILE
@json_option
def tag_list(file: str, as_json: bool) -> None:
    """List the tags and their versions."""
    with open_versioned(file) as vf:
        tags = vf.tags
    if as_json:
        emit_json([{"tag": n, "version": v} for n, v in tags.items()])
    else:
        _print_refs("tags", tags)


@tag.command("create")
@FILE
@click.argument("name")
@click.argument("ref", required=False)
def tag_create(file: str, name: str, ref: str | None) -> None:
    """Tag REF (default: the current version) as NAME."""
    with open_versioned(file, "r+") as vf:
        version = vf.create_tag(name, ref)
    click.echo(f"tag {name} -> {version}")


@tag.command("delete")
@FILE
@click.argument("names", nargs=-1, required=True)
def tag_delete(file: str, names: tuple[str, ...]) -> None:
    """Delete tags NAMES."""
    _delete_refs(file, names, "tag(s)", lambda vf: (vf.tags, vf.delete_tag))


def _delete_refs(
    file: str,
    names: tuple[str, ...],
    kind: str,
    refs: Callable[[Any], tuple[Mapping[str, str], Callable[[str], None]]],
) -> None:
    """Delete the refs ``names`` of one kind (``refs(vf)``: those there are and the
    deleting method), none unless every one exists."""
    with open_versioned(file, "r+") as vf:
        existing, delete = refs(vf)
        missing = [name for name in names if name not in existing]
        if missing:
            raise CliError(f"no such {kind}: {', '.join(missing)}")
        for name in names:
            delete(name)
    click.echo(f"deleted {kind} {' '.join(names)}")


@cli.command()
@FILE
@click.argument("theirs", metavar="THEIRS")
@click.option("--into", metavar="BRANCH", help="Branch to merge into (default: the current one).")
@click.option("--name", help="Name of the merge version (default: generated).")
@click.option("-m", "--message", help="Message of the merge version.")
@click.option(
    "--on-conflict",
    type=click.Choice(["fail", "ours", "theirs"]),
    default="fail",
    show_default=True,
    help="What to do where both sides changed the same thing differently.",
)
@click.option("--no-ff", is_flag=True, help="Commit a merge version even for a fast-forward.")
@click.option("--allow-unrelated", is_flag=True, help="Merge histories with no common ancestor.")
@json_option
def merge(
    file: str,
    theirs: str,
    into: str | None,
    name: str | None,
    message: str | None,
    on_conflict: str,
    no_ff: bool,
    allow_unrelated: bool,
    as_json: bool,
) -> None:
    """Three-way merge of THEIRS (a version, tag or branch) into the current branch.

    Chunks changed on one side only are taken without reading data; chunks both sides
    changed are merged element by element.  Conflicts fail the merge (nothing is
    written) unless --on-conflict picks a side.
    """
    with open_versioned(file, "r+") as vf:
        resolve(vf, theirs)
        try:
            with progress(f"Merging {theirs}", quiet=as_json):
                result = vf.merge(
                    theirs,
                    into=into,
                    name=name,
                    message=message,
                    on_conflict=on_conflict,
                    fast_forward=not no_ff,
                    allow_unrelated=allow_unrelated,
                )
        except NothingToMergeError as done:  # as git: up to date is success
            if as_json:
                emit_json({"kind": "up-to-date", "message": str(done)})
            else:
                click.echo(f"already up to date: {done}")
            return
    report: dict[str, Any] = {
        "kind": result.kind,
        "version": result.version,
        "base": result.base,
        "ours": result.ours,
        "theirs": result.theirs,
        "chunks_taken": result.chunks_taken,
        "chunks_merged": result.chunks_merged,
        "conflicts_resolved": [c.describe() for c in result.conflicts],
    }
    if as_json:
        emit_json(report)
        return
    if result.kind == "fast-forward":
        click.echo(f"fast-forward {result.ours} -> {result.version}")
        return
    click.echo(
        f"merged {result.theirs} into {result.ours} (base {result.base}) as {result.version}: "
        f"{result.chunks_taken} chunk(s) taken, {result.chunks_merged} merged element-wise, "
        f"{len(result.conflicts)} conflict(s) resolved ({on_conflict})"
    )


def _change_options(func: Any) -> Any:
    for option in reversed(
        [
            click.option(
                "--into", metavar="BRANCH", help="Branch to commit on (default: the current one)."
            ),
            click.option("--name", help="Name of the new version (default: generated)."),
            click.option("-m", "--message", help="Message of the new version."),
            click.option(
                "--parent",
                "-p",
                metavar="N|REF",
                help="For a merge version: the parent (1-based, or its name) whose change "
                "is taken.",
            ),
            click.option(
                "--on-conflict",
                type=click.Choice(["fail", "ours", "theirs"]),
                default="fail",
                show_default=True,
                help="What to do where the target changed the same elements differently.",
            ),
            json_option,
        ]
    ):
        func = option(func)
    return func


def _apply_change(
    kind: str,
    file: str,
    version: str,
    into: str | None,
    name: str | None,
    message: str | None,
    parent: str | None,
    on_conflict: str,
    as_json: bool,
) -> None:
    chosen: Any = int(parent) if parent is not None and parent.isdigit() else parent
    with open_versioned(file, "r+") as vf:
        apply = vf.cherry_pick if kind == "cherry-pick" else vf.revert
        with progress(f"{kind} {version}", quiet=as_json):
            result = apply(
                version,
                into=into,
                name=name,
                on_conflict=on_conflict,
                parent=chosen,
                message=message,
            )
        branch = into if into is not None else vf.current_branch
    if as_json:
        emit_json(
            {
                "kind": result.kind,
                "version": result.version,
                "onto": result.ours,
                "branch": branch,
                "change_from": result.base,
                "change_to": result.theirs,
                "chunks_taken": result.chunks_taken,
                "chunks_merged": result.chunks_merged,
                "conflicts_resolved": [c.describe() for c in result.conflicts],
            }
        )
        return
    what = "picked" if kind == "cherry-pick" else "reverted"
    on = f" (branch {branch})" if branch else ""
    click.echo(
        f"{what} {version} onto {result.ours}{on} as {result.version}: "
        f"{result.chunks_taken} chunk(s) taken, {result.chunks_merged} merged element-wise, "
        f"{len(result.conflicts)} conflict(s) resolved ({on_conflict})"
    )


@cli.command("cherry-pick")
@FILE
@click.argument("version", metavar="VERSION")
@_change_options
def cherry_pick(
    file: str,
    version: str,
    into: str | None,
    name: str | None,
    message: str | None,
    parent: str | None,
    on_conflict: str,
    as_json: bool,
) -> None:
    """Apply the change VERSION (a version, tag or branch) made to its parent onto the
    current branch (or --into BRANCH), as a new version.

    Three-way and chunk by chunk, like merge: conflicts fail (nothing is written)
    unless --on-conflict picks a side.
    """
    _apply_change("cherry-pick", file, version, into, name, message, parent, on_conflict, as_json)


@cli.command()
@FILE
@click.argument("version", metavar="VERSION")
@_change_options
def revert(
    file: str,
    version: str,
    into: str | None,
    name: str | None,
    message: str | None,
    parent: str | None,
    on_conflict: str,
    as_json: bool,
) -> None:
    """Undo the change VERSION made to its parent, as a new version on the current
    branch (or --into BRANCH); later changes stay."""
    _apply_change("revert", file, version, into, name, message, parent, on_conflict, as_json)
