"""Commands that write: ``delete``, ``repack`` and ``export``."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import h5py
import numpy as np

import h5vc
import h5vc.config as config
from h5vc.api import VersionedHDF5File
from h5vc.cli._app import CliError, check_file, cli, open_versioned, progress
from h5vc.cli._inspect import human_size, resolve
from h5vc.errors import RefInUseError
from h5vc.store import layout
from h5vc.store.tree import copy_attrs
from h5vc.wrappers import CommittedGroup
from h5vc.wrappers.dataset import CommittedDataset

__all__ = ["delete", "export", "export_version", "repack"]

#: ``export`` copies a dataset in slabs of whole chunk rows of about this many bytes.
EXPORT_SLAB_BYTES = config.EXPORT_SLAB_BYTES
#: ``export`` writes the new file under this name next to OUT until it is complete.
EXPORT_PARTIAL_SUFFIX = ".h5vc-export"


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("versions", nargs=-1, required=True)
@click.option(
    "--force", is_flag=True, help="Also delete branch heads and tagged versions (moving refs)."
)
def delete(file: str, versions: tuple[str, ...], force: bool) -> None:
    """Delete VERSIONS and free the chunks no other version uses.

    Children of a deleted version are re-parented to its nearest surviving ancestor.
    A branch head or tagged version is refused unless --force: its branches then move
    to the nearest surviving ancestor and its tags are deleted.
    """
    with open_versioned(file) as vf:  # checked read-only: a refused call writes nothing
        missing = [name for name in versions if name not in vf]
    if missing:
        raise CliError(f"no such version(s): {', '.join(missing)}; nothing deleted")
    with open_versioned(file, "r+") as vf:
        with progress(f"Deleting {len(versions)} version(s)"):
            try:
                h5vc.delete_versions(vf, list(versions), force=force)
            except RefInUseError as err:  # the library's advice, in the command's terms
                raise CliError(str(err).replace("pass force=True", "pass --force")) from err
        left = len(vf)
    click.echo(f"deleted {len(versions)} version(s): {' '.join(versions)}; {left} left")


@cli.command()
@click.argument("src", type=click.Path(dir_okay=False))
@click.argument("dst", type=click.Path(dir_okay=False))
def repack(src: str, dst: str) -> None:
    """Write a compact copy of the versioned file SRC to the new file DST
    (space freed by deleting versions is given back)."""
    with open_versioned(src):
        pass  # a one-line error for a missing, non-HDF5 or unversioned file
    with progress(f"Repacking {src}"):
        h5vc.repack(src, dst)
    before, after = Path(src).stat().st_size, Path(dst).stat().st_size
    click.echo(f"{src} ({human_size(before)}) -> {dst} ({human_size(after)})")


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("version")
@click.argument("out", type=click.Path(dir_okay=False))
def export(file: str, version: str, out: str) -> None:
    """Write VERSION of FILE to the new HDF5 file OUT as plain groups and datasets
    (no virtual datasets), for tools that cannot read virtual datasets."""
    if os.path.exists(out):
        raise CliError(f"{out}: already exists; expected a path for a new file")
    check_file(file)
    with open_versioned(file) as vf:
        name = resolve(vf, version)
        total = _version_bytes(vf[name])
        with progress(f"Exporting {name}", total=total) as advance:
            export_version(vf, name, out, advance)
    click.echo(
        f"exported version {name} of {file} to {out} ({human_size(Path(out).stat().st_size)})"
    )


def _datasets(group: CommittedGroup) -> Iterator[CommittedDataset]:
    for item in group.values():
        if isinstance(item, CommittedGroup):
            yield from _datasets(item)
        else:
            yield item


def _version_bytes(group: CommittedGroup) -> int:
    return sum(item.nbytes for item in _datasets(group))


def export_version(
    vf: VersionedHDF5File,
    version: str,
    out: str | os.PathLike[str],
    advance: Callable[[float], None] = lambda n: None,
) -> None:
    """Copy ``version`` to the new file ``out``: its groups, datasets (with their chunk
    shape, fill value and compression) and user attributes.  ``advance(n)`` is called
    with the bytes of each slab copied.  The copy is written to ``<out>.h5vc-export``,
    synced, and linked to ``out`` once complete: ``out`` never exists half written, even
    after a crash (a later export overwrites the leftover partial copy)."""
    source = vf[version]
    target_path = os.fspath(out)
    partial = target_path + EXPORT_PARTIAL_SUFFIX
    try:
        with h5py.File(partial, "w") as target:
            _copy_user_attrs(vf.file_state.versions[version], target, layout.VERSION_ATTRS)
            _copy_group(source, target, advance)
        with open(partial, "rb") as written:
            os.fsync(written.fileno())
        os.link(partial, target_path)  # never replaces a file that appeared meanwhile
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(partial)


def _copy_user_attrs(source: h5py.HLObject, target: h5py.HLObject, hidden: frozenset[str]) -> None:
    copy_attrs(source.attrs, target.attrs)
    for name in hidden & set(target.attrs):
        del target.attrs[name]


def _copy_group(
    source: CommittedGroup, target: h5py.Group, advance: Callable[[float], None]
) -> None:
    for name, item in source.items():
        if isinstance(item, CommittedGroup):
            child = target.create_group(name)
            _copy_user_attrs(item.group, child, frozenset())
            _copy_group(item, child, advance)
        else:
            _copy_dataset(item, target, name, advance)


def _copy_dataset(
    source: CommittedDataset, target: h5py.Group, name: str, advance: Callable[[float], None]
) -> None:
    options: dict[str, Any] = {}
    if source.compression in ("gzip", "lzf", "szip"):
        options.update(compression=source.compression, compression_opts=source.compression_opts)
    if source.shape and all(source.shape):
        options.update(chunks=source.chunks, shuffle=source.shuffle, fletcher32=source.fletcher32)
    dataset = target.create_dataset(
        name,
        shape=source.shape,
        dtype=source.dataset.dtype,
        fillvalue=source.dataset.fillvalue,
        maxshape=(None,) * len(source.shape) if "chunks" in options else None,
        **options,
    )
    _copy_user_attrs(source.dataset, dataset, layout.DATASET_ATTRS)
    if not source.shape:
        dataset[()] = source[()]
        return
    row_bytes = max(1, source.nbytes // max(1, source.shape[0]))
    c0 = source.chunks[0] if source.chunks else 1
    step = max(c0, EXPORT_SLAB_BYTES // row_bytes // c0 * c0)
    for start in range(0, source.shape[0], step):
        stop = min(start + step, source.shape[0])
        dataset[start:stop] = np.asarray(source[start:stop])
        advance((stop - start) * row_bytes)
