"""Hand-written differential scenarios: each is a list of steps run on both libraries.

One scenario per documented idiom of versioned-hdf5 (quickstart, staging, version
lookups, delete_versions, modify_metadata) and one per behaviour h5vc must share
with it.  Steps are plain functions of a :class:`differential.Context`.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import hdf5plugin
import numpy as np
from differential import Context, Step

UTC = datetime.timezone.utc


def T(day: int, second: int = 0) -> datetime.datetime:
    return datetime.datetime(2024, 1, day, 0, 0, second, tzinfo=UTC)


def stage(name: str, body: Callable[[Any], Any] | None = None, *, keywords=(), **kw) -> Step:
    """Stage version ``name`` running ``body(group)`` inside the block."""

    def step(ctx: Context) -> Any:
        with ctx.vf.stage_version(name, **kw) as g:
            result = body(g) if body is not None else None
        return result

    step.__name__ = f"stage {name}"
    return Step(step, keywords=tuple(keywords))


def read(func: Callable[[Context], Any], *, keywords=(), mode: str = "r+") -> Step:
    return Step(func, mode=mode, keywords=tuple(keywords))


def modify(dataset: str, *, keywords=(), **kw) -> Step:
    def step(ctx: Context) -> None:
        ctx.lib.modify_metadata(ctx.f, dataset, **kw)

    step.__name__ = f"modify_metadata({dataset}, {kw})"
    return Step(step, keywords=tuple(keywords))


def delete(versions: Any, *, keywords=()) -> Step:
    def step(ctx: Context) -> None:
        ctx.lib.delete_versions(ctx.f, versions)

    step.__name__ = f"delete_versions({versions!r})"
    return Step(step, keywords=tuple(keywords))


def setter(path: str, index: Any, value: Any) -> Callable[[Any], None]:
    def body(g: Any) -> None:
        g[path][index] = value

    return body


def create(path: str, data: Any = None, **kw: Any) -> Callable[[Any], Any]:
    def body(g: Any) -> None:
        g.create_dataset(path, data=data, **kw)

    return body


def seq(*bodies: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def body(g: Any) -> Any:
        result = None
        for b in bodies:
            result = b(g)
        return result

    return body


def base(**kw: Any) -> list[Step]:
    """v1 with an int dataset ``x`` of 20 values in chunks of 4 and a group ``g``."""
    options = {"chunks": (4,), "fillvalue": 0, **kw}
    return [
        stage(
            "v1",
            seq(
                create("x", np.arange(20, dtype=kw.get("dtype", "i8")), **options),
                lambda g: (
                    g.create_group("grp")
                    .create_dataset("y", data=np.ones((3, 5)), chunks=(2, 5))
                    .attrs.__setitem__("kind", "ones")
                ),
            ),
            timestamp=T(1),
        ),
        stage("v2", setter("x", slice(0, 3), 7), timestamp=T(2)),
    ]


def _version_attrs(ctx: Context) -> Any:
    v1, v2 = ctx.vf["v1"], ctx.vf["v2"]
    return [v1.attrs["prev_version"], v2.attrs["prev_version"], v2.attrs["timestamp"]]


def _replace(g: Any) -> Any:
    g["x"] = np.arange(30, dtype="i8")
    return g["x"].shape


def _replace_dtype(g: Any) -> None:
    g["x"] = np.arange(30.0)


def _ignored_kw(name: str = "z", **kw: Any) -> Callable[[Any], None]:
    def body(g: Any) -> None:
        g.create_dataset(name, data=np.arange(6), chunks=(3,), **kw)

    return body


def _resize(size: Any, axis: Any = None) -> Callable[[Any], Any]:
    def body(g: Any) -> Any:
        d = g["grp/y"]
        if axis is None:
            d.resize(size)
        else:
            d.resize(size, axis=axis)
        return d.shape

    return body


def _membership(ctx: Context) -> Any:
    v = ctx.vf["v1"]
    return [
        "/_version_data/versions/v1/x" in v,
        "/_version_data/versions/v1/grp/y" in v,
        "/_version_data/versions/v1/grp/y" in v["grp"],
        "/_version_data/versions/v2/x" in v,
        "grp/y" in v,
        "y" in v["grp"],
        "nope" in v,
    ]


def _datasets(g: Any) -> Any:
    g.create_dataset("new", data=np.arange(3), chunks=(3,))
    return sorted(g.datasets()) if hasattr(g, "datasets") else "missing"


def _write_committed_dataset(ctx: Context) -> None:
    ctx.vf["v1"]["x"][0] = 5


def _create_in_committed(ctx: Context) -> None:
    ctx.vf["v1"].create_dataset("q", data=np.arange(3))


def _scalar(g: Any) -> None:
    g.create_dataset("s", data=np.float64(3.5))


def _lookup(key: Any) -> Callable[[Context], Any]:
    def func(ctx: Context) -> Any:
        return ctx.vf[key]["x"][()]

    func.__name__ = f"vf[{key!r}]"
    return func


def _by_timestamp(ts: Any, exact: bool) -> Callable[[Context], Any]:
    def func(ctx: Context) -> Any:
        return ctx.vf.get_version_by_timestamp(ts, exact=exact)["x"][()]

    func.__name__ = f"get_version_by_timestamp({ts}, exact={exact})"
    return func


def _set_current(name: str) -> Step:
    def step(ctx: Context) -> None:
        ctx.vf.current_version = name

    step.__name__ = f"current_version = {name}"
    return Step(step)


def _fancy(g: Any) -> Any:
    d = g["grp/y"]
    d[1, ::2] = [9.0, 8.0, 7.0]
    d[:, 4] = [5.0, 6.0, 7.0]
    return d[[0, 2], 1:4]


def _attrs_edit(g: Any) -> None:
    g.attrs["note"] = "root"
    g["x"].attrs["unit"] = "m"
    g["grp"].attrs["n"] = np.arange(3)
    del g["grp/y"]


def _strings(g: Any) -> None:
    import h5py

    text = np.array([b"a", b"bb", b"ccc"], dtype=object)
    g.create_dataset("s", data=text, dtype=h5py.string_dtype(), chunks=(2,))
    g.create_dataset("fixed", data=np.array([b"abc", b"d", b""], dtype="S3"), chunks=(2,))


def _big(g: Any) -> None:
    g.create_dataset("big", data=np.arange(600_000, dtype="f8"), chunks=(50_000,))


def _getitem_missing(g: Any) -> None:
    g["does/not/exist"]


def _fill_without_dtype(g: Any) -> Any:
    """Datasets made from a shape and a fill value only: float64, whatever the fill's
    type (h5py would make float32), so 0.1 written later keeps its precision."""
    for name, fill in (("f", 0.1), ("i", 3), ("b", True), ("n", np.int16(2)), ("z", None)):
        g.create_dataset(name, shape=(6,), fillvalue=fill, chunks=(4,))
    g["f"][1] = 0.1
    g["i"][2] = 1 / 3
    return [(g[name].dtype.str, g[name][:3]) for name in ("f", "i", "b", "n", "z")]


def _complex_fill(g: Any) -> None:
    g.create_dataset("c", shape=(4,), fillvalue=1 + 2j, chunks=(2,))


def _read_while_staged(ctx: Context) -> Any:
    with ctx.vf.stage_version("v3", timestamp=T(3)) as g:
        g["x"][0] = 1
        return ctx.vf["v3"]


def _read_by_name_while_staged(ctx: Context) -> Any:
    with ctx.vf.stage_version("v3", timestamp=T(3)) as g:
        g["x"][0] = 1
        return ctx.vf.get_version_by_name("v3")


def _absolute(action: str) -> Callable[[Any], Any]:
    def body(g: Any) -> None:
        if action == "dataset":
            g.create_dataset("/abs", data=np.arange(3), chunks=(2,))
        elif action == "group":
            g.create_group("/abs")
        elif action == "nested":
            g["grp"].create_group("/abs")
        elif action == "setitem":
            g["/abs"] = np.arange(3)
        elif action == "require_group":
            g.require_group("/abs")
        elif action == "require_dataset":
            g.require_dataset("/abs", shape=(3,), dtype="i8", chunks=(2,))

    return body


def _chunks_of_other_rank(g: Any) -> None:
    g.create_dataset("bad", data=np.arange(5), chunks=(2, 2))


def _int_chunks_for_2d(g: Any) -> None:
    g.create_dataset("bad", data=np.ones((4, 5)), chunks=3)


def _rebuild_string_tables(ctx: Context) -> None:
    """What it returns differs (versioned-hdf5: None; h5vc: what it rewrote)."""
    ctx.vf.rebuild_object_dtype_hashtables()


#: Scenarios run on files versioned-hdf5 created (data_version 4) for both libraries,
#: where h5vc keeps versioned-hdf5's rules: a dataset created again with other chunks
#: is refused there (h5vc's own layout allows it: a deliberate difference, see
#: test_deliberate_differences.py).
INIT = {"3_recreate_deleted_dataset": "vhdf5", "18_rebuild_string_hash_tables": "vhdf5"}

#: Scenarios where the library chooses chunks (see differential.GUESSED_CHUNKS).
ALLOW = {
    "quickstart": ("guessed_chunks",),
    "4_modify_metadata_rechunk_true": ("guessed_chunks",),
}

SCENARIOS: dict[str, list[Any]] = {
    # -- versioned-hdf5's documentation -----------------------------------------------
    "quickstart": [
        stage("version1", lambda g: g.__setitem__("mydataset", np.ones(10000)), timestamp=T(1)),
        stage(
            "version2",
            seq(
                setter("mydataset", 0, -1.0),
                lambda g: g["mydataset"].resize((12000,)),
                create("dataset2", np.arange(5)),
            ),
            timestamp=T(2),
        ),
        read(lambda ctx: ctx.vf["version1"]["mydataset"][:5]),
        read(lambda ctx: ctx.vf[0]["mydataset"][-3:]),
        read(lambda ctx: ctx.vf[-1]["mydataset"].shape),
        read(lambda ctx: ctx.vf.current_version),
    ],
    "staging_prev_version_and_make_current": [
        *base(),
        stage("side", setter("x", 5, -5), prev_version="v1", make_current=False, timestamp=T(3)),
        read(lambda ctx: [ctx.vf.current_version, ctx.vf["side"]["x"][:8]]),
        _set_current("side"),
        stage("after", setter("x", 6, -6), timestamp=T(4)),
        read(lambda ctx: ctx.vf["after"].attrs["prev_version"]),
        stage("empty", create("fresh", np.arange(2), chunks=(2,)), prev_version="", timestamp=T(5)),
    ],
    "lookups_by_index_and_timestamp": [
        *base(),
        read(_lookup(0)),
        read(_lookup(-1)),
        read(_lookup(-2)),
        read(_lookup(None)),
        read(_lookup(T(1, 30))),
        read(_lookup(np.datetime64("2024-01-02T00:00:00"))),
        read(_by_timestamp(T(2), True)),
        read(_by_timestamp(T(1, 30), True)),
        read(_by_timestamp(T(1, 30), False)),
        read(_lookup(datetime.datetime(2023, 1, 1, tzinfo=UTC))),
        read(_lookup("nope")),
    ],
    "delete_versions": [
        *base(),
        stage("v3", setter("x", 19, 19), timestamp=T(3)),
        delete("v2"),
        read(lambda ctx: ctx.vf["v3"].attrs["prev_version"]),
        delete(["v1"]),
        delete("missing"),
        delete(["v3"]),
    ],
    "delete_current_version": [*base(), delete(["v2"]), delete("v1")],
    "modify_metadata_doc": [
        *base(),
        modify("x", chunks=(8,), compression="gzip", compression_opts=4, fillvalue=-1),
        read(lambda ctx: ctx.vf["v1"]["x"][:]),
        stage("v3", lambda g: g["x"].resize((25,)), timestamp=T(3)),
    ],
    "fancy_indexing_and_attrs": [
        *base(),
        stage("v3", _fancy, timestamp=T(3)),
        stage("v4", _attrs_edit, timestamp=T(4)),
    ],
    "strings": [stage("v1", _strings, timestamp=T(1))],
    "large_dataset_written_through": [stage("v1", _big, timestamp=T(1))],
    "missing_member": [*base(), stage("v3", _getitem_missing)],
    "abandoned_stage_commits_nothing": [
        *base(),
        stage("v3", lambda g: (g["x"].__setitem__(0, 1), 1 / 0)),
        read(lambda ctx: ctx.vf.versions),
    ],
    "duplicate_version_name": [*base(), stage("v1", setter("x", 0, 1))],
    # -- behaviours h5vc must share -------------------------------------------------
    "1_version_attributes": [*base(), read(_version_attrs)],
    "2_replace_existing_dataset": [
        *base(),
        stage("v3", _replace, timestamp=T(3)),
        stage("v4", _replace_dtype, timestamp=T(4), keywords=("dtype",)),
    ],
    "3_recreate_deleted_dataset": [
        *base(),
        stage("v3", lambda g: g.__delitem__("x"), timestamp=T(3)),
        stage("v4", create("x", np.linspace(0, 1, 9), chunks=(3,)), timestamp=T(4)),
        read(lambda ctx: [ctx.vf["v1"]["x"][:], ctx.vf["v4"]["x"][:]]),
    ],
    "5_ignored_create_dataset_keywords": [
        stage("v1", _ignored_kw(track_order=True), timestamp=T(1)),
        stage("v2", _ignored_kw(track_order=None, name="w"), timestamp=T(2)),
        stage("v3", _ignored_kw(maxshape=(None,), name="u"), timestamp=T(3)),
        stage("v4", _ignored_kw(maxshape=(100,), name="t"), timestamp=T(4)),
    ],
    "6_resize_negative_axis_and_0d_size": [
        *base(),
        stage("v3", _resize(7, axis=-1), timestamp=T(3)),
        stage("v4", _resize(np.array(5), axis=0), timestamp=T(4)),
        stage("v5", _resize((np.int64(2), np.array(3))), timestamp=T(5)),
    ],
    "7_absolute_paths_and_datasets": [
        *base(),
        read(_membership),
        stage("v3", _datasets, timestamp=T(3)),
    ],
    "8_writes_to_committed_versions": [
        *base(),
        read(_write_committed_dataset, mode="r+", keywords=("committed",)),
        read(_create_in_committed, mode="r+", keywords=("committed",)),
    ],
    "11_scalar_datasets": [*base(), stage("v3", _scalar)],
    "12_fill_value_without_dtype": [
        stage("v1", _fill_without_dtype, timestamp=T(1)),
        stage("v2", _complex_fill, timestamp=T(2)),
    ],
    "13_resize_to_float_sizes": [
        *base(),
        stage("v3", _resize(9.0, axis=0), timestamp=T(3)),
        stage("v4", _resize((2.0, np.float64(4.0))), timestamp=T(4)),
        stage("v5", lambda g: g["x"].resize(np.float32(25.0)) or g["x"].shape, timestamp=T(5)),
    ],
    "14_lookups_that_are_no_version": [
        *base(),
        read(lambda ctx: ctx.vf["/_version_data"]),
        read(lambda ctx: ctx.vf["/_version_data/versions/v1"]),
        read(lambda ctx: ctx.vf["_version_data"]),
        read(_read_while_staged),
        read(_read_by_name_while_staged),
        read(lambda ctx: ctx.vf.versions),
    ],
    "15_timestamps_of_other_types": [
        *base(),
        stage("v3", setter("x", 0, 1), timestamp="2024-01-05"),
        stage("v4", setter("x", 0, 1), timestamp=1704412800),
        read(lambda ctx: ctx.vf.get_version_by_timestamp("2024-01-02")),
        read(lambda ctx: ctx.vf.get_version_by_timestamp(1704412800, exact=True)),
        read(lambda ctx: ctx.vf.versions),
    ],
    "16_absolute_paths_of_new_objects": [
        *base(),
        *(
            stage(f"v{3 + i}", _absolute(action), timestamp=T(3 + i), keywords=("root level",))
            for i, action in enumerate(
                ("dataset", "group", "nested", "setitem", "require_group", "require_dataset")
            )
        ),
        read(lambda ctx: ctx.vf.versions),
    ],
    "17_chunks_of_another_rank": [
        *base(),
        stage("v3", _chunks_of_other_rank, timestamp=T(3)),
        stage("v4", _int_chunks_for_2d, timestamp=T(4)),
        stage("v5", create("one", np.arange(5), chunks=3), timestamp=T(5)),
    ],
    "18_rebuild_string_hash_tables": [
        *base(),
        stage("v3", _strings, timestamp=T(3)),
        _rebuild_string_tables,
        stage("v4", setter("s", 0, b"z"), timestamp=T(4)),
        stage("v5", setter("s", 0, b"a"), timestamp=T(5)),
        read(lambda ctx: ctx.f["_version_data/s/raw_data"].shape),
    ],
}


def _modify_scenarios() -> dict[str, list[Any]]:
    blosc = hdf5plugin.Blosc(cname="lz4", clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE)
    cases: dict[str, list[Any]] = {
        "gzip_and_back": [modify("x", compression="gzip"), modify("x", compression=None)],
        "gzip_opts": [modify("x", compression="gzip", compression_opts=9)],
        "compression_opts_only": [modify("x", compression_opts=2)],
        "lzf": [modify("x", compression="lzf"), modify("x", compression=None)],
        "blosc": [modify("x", **dict(blosc)), modify("x", compression=None)],
        "rechunk": [modify("x", chunks=(5,))],
        "rechunk_true": [modify("x", chunks=True)],
        "rechunk_invalid_rank": [modify("x", chunks=(2, 2))],
        "rechunk_zero": [modify("x", chunks=(0,))],
        "rechunk_int": [modify("x", chunks=8)],
        "rechunk_list": [modify("x", chunks=[5])],
        "rechunk_int_2d": [modify("grp/y", chunks=1000)],
        "rechunk_list_wrong_rank": [modify("grp/y", chunks=[10])],
        "dtype_float": [modify("x", dtype="f4")],
        "dtype_and_fill": [modify("x", dtype="f8", fillvalue=0.5)],
        "fill_value_rule": [modify("x", fillvalue=7)],
        "shuffle": [modify("x", shuffle=True), modify("x", shuffle=False)],
        "fletcher32": [modify("x", fletcher32=True)],
        "scaleoffset": [modify("x", scaleoffset=0)],
        "missing_dataset": [modify("nope", chunks=(2,))],
        "nested_dataset": [modify("grp/y", chunks=(1, 5), compression="gzip")],
    }
    return {
        f"4_modify_metadata_{name}": [
            *base(),
            *steps,
            stage("after", setter("x", slice(10, 12), 1), timestamp=T(9)),
        ]
        for name, steps in cases.items()
    }


SCENARIOS.update(_modify_scenarios())


def as_steps(items: list[Any]) -> list[Step]:
    """The scenario's items as :class:`Step` objects."""
    return [item if isinstance(item, Step) else Step(item) for item in items]
