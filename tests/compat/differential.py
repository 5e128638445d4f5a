"""Run the same operations on versioned-hdf5 2.6.0 and on h5vc and compare the results.

Each library works on its own file.  A *step* is a callable ``step(ctx)`` where
``ctx.lib`` is the library module (``VersionedHDF5File``, ``delete_versions``,
``modify_metadata``), ``ctx.f`` the open ``h5py.File`` and ``ctx.vf`` its
``VersionedHDF5File``.  After each step the outcome (the value it returned, made
comparable by :func:`observe`, or the exception it raised) and a snapshot of
everything a user can read from the file are compared.
"""

from __future__ import annotations

import contextlib
import datetime
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import h5py
import numpy as np
import versioned_hdf5

import h5vc

LIBRARIES = {"versioned_hdf5": versioned_hdf5, "h5vc": h5vc}
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f%z"
#: Built-in exception families an error is classified by (most specific first).
FAMILIES: tuple[type[BaseException], ...] = (
    NotImplementedError,
    IndexError,
    KeyError,
    FileNotFoundError,
    OSError,
    TypeError,
    ValueError,
    AttributeError,
    RuntimeError,
)
#: Dataset properties compared (skipped when versioned-hdf5 lacks one).
DATASET_PROPERTIES = (
    "shape",
    "dtype",
    "chunks",
    "fillvalue",
    "compression",
    "compression_opts",
    "shuffle",
    "fletcher32",
    "scaleoffset",
    "ndim",
    "size",
)
MISSING = "<missing>"


@dataclass
class Context:
    lib: Any
    f: h5py.File
    vf: Any
    name: str


@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None
    warnings: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if self.error is not None:
            return f"raised {type(self.error).__name__}: {self.error}"
        return f"returned {self.value!r}"


def family(error: BaseException) -> type[BaseException]:
    for cls in FAMILIES:
        if isinstance(error, cls):
            return cls
    return Exception


def run_step(ctx: Context, step: Callable[[Context], Any]) -> Outcome:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = observe(step(ctx))
        except Exception as error:
            outcome = Outcome(error=error)
        else:
            outcome = Outcome(value=value)
    outcome.warnings = sorted(
        str(w.message)
        for w in caught
        if issubclass(w.category, UserWarning) and "ignored" in str(w.message)
    )
    return outcome


# -- making values comparable ---------------------------------------------------------


def text(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.str_):
        return str(value)
    return value


def observe(value: Any) -> Any:
    """A plain, comparable form of what a step returned."""
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return text(value)
    if isinstance(value, np.generic):
        return observe(value.item())
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "O":
            return ("array", value.shape, [text(v) for v in value.ravel().tolist()])
        return ("array", value.shape, value.dtype.str, value.tobytes())
    if isinstance(value, tuple | list):
        return [observe(v) for v in value]
    if isinstance(value, dict):
        return {k: observe(v) for k, v in value.items()}
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        return ("dataset", observe(value[()]))
    if hasattr(value, "keys"):
        return ("group", sorted(value.keys()))
    return type(value).__name__


def chunk_tuple(chunks: Any) -> Any:
    return None if chunks is None else tuple(int(c) for c in chunks)


def attrs_dict(attrs: Any) -> dict[str, Any]:
    return {key: observe(attrs[key]) for key in sorted(attrs)}


def fill_of(value: Any) -> Any:
    value = observe(value)
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


# -- snapshots ------------------------------------------------------------------------


#: Deliberate differences, each applied to both snapshots before they are compared.
#: Always applied: versioned-hdf5 shows its layout attributes ``raw_data`` and ``chunks``
#: on datasets of a reopened file (not on those it just committed); h5vc never does.
LAYOUT_DATASET_ATTRS = ("raw_data", "chunks")
#: Applied when a scenario lets the library choose chunks: h5vc guesses larger chunks
#: (fewer mappings, faster commits); its guess must still be valid for the shape.
GUESSED_CHUNKS = "guessed_chunks"


def valid_chunks(chunks: Any, shape: Any) -> Any:
    if chunks is None or len(chunks) != len(shape) or min(chunks, default=1) < 1:
        return ("invalid chunks", chunks, shape)
    return "valid chunks"


def dataset_snapshot(ds: Any, allow: frozenset[str] = frozenset()) -> dict[str, Any]:
    facts: dict[str, Any] = {"data": observe(np.asarray(ds[()]))}
    for prop in DATASET_PROPERTIES:
        try:
            value = getattr(ds, prop)
        except AttributeError:
            facts[prop] = MISSING
            continue
        if prop == "chunks":
            value = chunk_tuple(value)
        elif prop == "dtype":
            value = value.str if value.kind != "O" else "O"
        elif prop == "fillvalue":
            value = fill_of(value)
        elif prop in ("shuffle", "fletcher32"):
            value = bool(value)
        else:
            value = observe(value)
        facts[prop] = value
    if GUESSED_CHUNKS in allow:
        facts["chunks"] = valid_chunks(facts["chunks"], ds.shape)
    facts["attrs"] = {
        k: v for k, v in attrs_dict(ds.attrs).items() if k not in LAYOUT_DATASET_ATTRS
    }
    facts["len"] = len(ds) if ds.shape else None
    return facts


def version_attrs(attrs: Any) -> dict[str, Any]:
    out = attrs_dict(attrs)
    if "timestamp" in out:
        stamp = out["timestamp"]
        parsed = datetime.datetime.strptime(stamp, TIMESTAMP_FORMAT)
        out["timestamp"] = ("utc", parsed.utcoffset() == datetime.timedelta(0))
    return out


def tree(group: Any, allow: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Every member below ``group``: relative path -> snapshot."""
    found: dict[str, Any] = {}

    def visit(name: str, _obj: Any) -> None:
        obj = group[name]  # the library's own object (visititems may give h5py's)
        if hasattr(obj, "dtype"):
            found[name] = ("dataset", dataset_snapshot(obj, allow))
        else:
            found[name] = ("group", sorted(obj.keys()), attrs_dict(obj.attrs))

    group.visititems(visit)
    return found


def membership(version: Any, name: str, members: dict[str, Any]) -> dict[str, bool]:
    """``path in version`` for members, absolute paths and names that are absent."""
    prefix = f"/_version_data/versions/{name}/"
    probes = ["missing", "missing/deeper"]
    for path, (kind, *_rest) in members.items():
        probes += [path, prefix + path]
        if kind == "group":  # versioned-hdf5 fails on "dataset/name" (numpy truth value)
            probes.append(path + "/missing")
    return {probe: probe in version for probe in probes}


def iteration(group: Any) -> dict[str, Any]:
    result = {"keys": list(group.keys()), "iter": list(group), "len": len(group)}
    result["items"] = [k for k, _ in group.items()]
    return result


def _is_store_tree(group: h5py.Group) -> bool:
    """Only dataset stores (raw_data, hash_table) below ``group``."""
    found: list[bool] = []
    group.visititems(
        lambda name, obj: found.append(
            isinstance(obj, h5py.Group) or name.rsplit("/", 1)[-1] in ("raw_data", "hash_table")
        )
    )
    return all(found)


def version_data_members(
    version_data: h5py.Group, versions: Sequence[str], cache: dict[Any, Any] | None = None
) -> list[str]:
    """Members of ``_version_data``.

    Deliberate difference: delete_versions of h5vc removes the stores of datasets that
    no remaining version holds; versioned-hdf5 keeps them.  Such leftover stores are
    left out (anything else, such as an index of h5vc's own, is kept and compared).
    ``cache`` keeps the dataset paths of each version (see :func:`snapshot`).
    """
    used: set[str] = set()
    for name in versions:
        if cache is not None and ("datasets", name) in cache:
            used |= cache[("datasets", name)]
            continue
        found: set[str] = set()
        version = version_data["versions"][name]
        version.visititems(
            lambda path, obj, found=found: (
                found.add(path) if isinstance(obj, h5py.Dataset) else None
            )
        )
        used |= found
        if cache is not None:
            cache[("datasets", name)] = found
    return sorted(
        key
        for key in version_data
        if key == "versions"
        or not (isinstance(version_data[key], h5py.Group) and _is_store_tree(version_data[key]))
        or any(path == key or path.startswith(key + "/") for path in used)
    )


def snapshot(
    ctx: Context, allow: frozenset[str] = frozenset(), cache: dict[Any, Any] | None = None
) -> dict[str, Any]:
    """Everything a user can read from ``ctx``'s file.

    ``cache`` (version name -> that version's part) skips versions snapshotted
    before: committed versions do not change, except through ``delete_versions``
    and ``modify_metadata``, after which the caller clears it.
    """
    vf = ctx.vf
    versions = list(vf.versions) if hasattr(vf, "versions") else []
    snap: dict[str, Any] = {
        "current_version": vf.current_version,
        "versions": sorted(versions),
        "_version_data": version_data_members(ctx.f["_version_data"], versions, cache),
    }
    for name in sorted(versions):
        if cache is not None and name in cache:
            snap[name] = cache[name]
            continue
        version = vf[name]
        members = tree(version, allow)
        snap[name] = {
            "attrs": version_attrs(version.attrs),
            "tree": members,
            "iteration": iteration(version),
            "membership": membership(version, name, members),
            "h5py": {
                path: observe(ctx.f[f"_version_data/versions/{name}/{path}"][()])
                for path, (kind, *_rest) in members.items()
                if kind == "dataset"
            },
        }
        if cache is not None:
            cache[name] = snap[name]
    return snap


# -- running both ---------------------------------------------------------------------


@contextlib.contextmanager
def opened(lib_name: str, path: str, mode: str) -> Iterator[Context]:
    lib = LIBRARIES[lib_name]
    with h5py.File(path, mode) as f:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            vf = lib.VersionedHDF5File(f)
        try:
            yield Context(lib, f, vf, lib_name)
        finally:
            if lib_name == "h5vc":
                vf.close()


class Mismatch(AssertionError):
    pass


def compare_outcomes(step: Any, want: Outcome, got: Outcome, keywords: Sequence[str]) -> None:
    label = getattr(step, "__name__", repr(step))
    if (want.error is None) != (got.error is None):
        raise Mismatch(
            f"{label}: versioned-hdf5 {want.describe()}, h5vc {got.describe()}"
        ) from got.error
    if want.error is not None:
        assert got.error is not None
        expected = family(want.error)
        if not isinstance(got.error, expected):
            raise Mismatch(
                f"{label}: versioned-hdf5 raised {type(want.error).__name__}, h5vc "
                f"{type(got.error).__name__} (not a {expected.__name__}): {got.error}"
            ) from got.error
        for word in keywords:
            for side, error in (("versioned-hdf5", want.error), ("h5vc", got.error)):
                if word.lower() not in str(error).lower():
                    raise Mismatch(f"{label}: {side} error lacks {word!r}: {error}")
        return
    if want.value != got.value:
        raise Mismatch(f"{label}: versioned-hdf5 returned {want.value!r}, h5vc {got.value!r}")
    if want.warnings != got.warnings:
        raise Mismatch(f"{label}: warnings differ: {want.warnings} vs {got.warnings}")


def differences(want: Any, got: Any, where: str = "") -> Iterator[str]:
    """Leaf paths where two snapshots differ, with both values (shortened)."""
    if isinstance(want, dict) and isinstance(got, dict):
        for key in sorted(set(want) | set(got), key=str):
            yield from differences(want.get(key, MISSING), got.get(key, MISSING), f"{where}/{key}")
    elif isinstance(want, tuple) and isinstance(got, tuple) and len(want) == len(got):
        for i, (a, b) in enumerate(zip(want, got, strict=True)):
            yield from differences(a, b, f"{where}[{i}]")
    elif want != got:
        yield f"  {where}: versioned-hdf5 {repr(want)[:300]} | h5vc {repr(got)[:300]}"


def compare_snapshots(label: str, want: dict, got: dict) -> None:
    if want != got:
        raise Mismatch("\n".join([f"after {label}:", *differences(want, got)]))


@dataclass
class Step:
    """One operation: ``func(ctx)``, the file mode it needs, and message keywords."""

    func: Callable[[Context], Any]
    mode: str = "r+"
    keywords: tuple[str, ...] = ()
    #: operations that only versioned-hdf5 or only h5vc run (setup differences)
    only: str | None = None

    @property
    def __name__(self) -> str:
        return getattr(self.func, "__name__", repr(self.func))


def as_step(item: Any) -> Step:
    return item if isinstance(item, Step) else Step(item)


class Pair:
    """Two files, one per library, driven in lockstep."""

    def __init__(self, directory: Any, *, init: str = "own", allow: Sequence[str] = ()):
        self.allow = frozenset(allow)
        self.paths = {lib: str(directory / f"{lib}.h5") for lib in LIBRARIES}
        for lib, path in self.paths.items():
            # "own": each library creates its file; "vhdf5": versioned-hdf5 creates both
            creator = lib if init == "own" else "versioned_hdf5"
            with opened(creator, path, "w"):
                pass

    def run(self, item: Any) -> tuple[Outcome, Outcome]:
        step = as_step(item)
        outcomes: dict[str, Outcome] = {}
        snaps: dict[str, dict] = {}
        for lib, path in self.paths.items():
            if step.only not in (None, lib):
                continue
            with opened(lib, path, step.mode) as ctx:
                outcomes[lib] = run_step(ctx, step.func)
            with opened(lib, path, "r+") as ctx:  # versioned-hdf5 wraps objects only in r+
                snaps[lib] = snapshot(ctx, self.allow)
        if step.only is None:
            compare_outcomes(step, outcomes["versioned_hdf5"], outcomes["h5vc"], step.keywords)
            compare_snapshots(step.__name__, snaps["versioned_hdf5"], snaps["h5vc"])
        return outcomes.get("versioned_hdf5", Outcome()), outcomes.get("h5vc", Outcome())

    def run_all(self, steps: Sequence[Any], *, collect: list[str] | None = None) -> None:
        for step in steps:
            try:
                self.run(step)
            except Mismatch as error:
                if collect is None:
                    raise
                collect.append(str(error))
