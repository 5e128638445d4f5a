"""``h5vc show``, ``diff`` and ``du`` on files holding sample columns."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import h5vc
from h5vc.cli._stats import disk_usage
from h5vc.columns import SampleSlots, column_schema
from h5vc.columns.storage import slots_of


def sample(i: int) -> np.ndarray:
    return np.full((8, 8), i, np.uint8) + np.eye(8, dtype=np.uint8)


@pytest.fixture
def columned(tmp_path: Path) -> Path:
    """v1: column images (30 int keys, 25 distinct samples), column labels (scalars)
    and dataset x; v2 on main: images[3] and images[40] new, images[7] deleted; v3 on
    main: only x changes; d1 on dev (from v1): images[10] takes a sample stored
    already; v4 on main: labels deleted."""
    path = tmp_path / "columns.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1") as g:
            images = g.create_column("images", shape=(8, 8), dtype="uint8")
            images.set_many(list(range(30)), [sample(i % 25) for i in range(30)])
            labels = g.create_column("labels", shape=(), dtype="int64")
            labels.set_many(list(range(30)), np.arange(30) % 10)
            g.create_dataset("x", data=np.arange(100), chunks=(10,))
        vf.create_branch("main")
        vf.create_branch("dev")
        vf.switch_branch("main")
        with vf.stage_version("v2", branch="main") as g:
            g["images"][3] = sample(100)
            g["images"][40] = sample(101)
            del g["images"][7]
        with vf.stage_version("v3", branch="main") as g:
            g["x"][5] = -1
        with vf.stage_version("d1", branch="dev", make_current=False) as g:
            g["images"][10] = sample(11)
        with vf.stage_version("v4", branch="main") as g:
            del g["labels"]
    return path


def test_show_lists_each_column_with_its_keys_shape_dtype_and_backend(run, columned):
    shown = json.loads(run("show", columned, "v2", "--json").output)
    nodes = {node["path"]: node for node in shown["nodes"]}
    assert set(nodes) == {"/", "/images", "/labels", "/x"}  # no table datasets
    images, labels = nodes["/images"], nodes["/labels"]
    assert images["kind"] == labels["kind"] == "column"
    assert (images["keys"], images["shape"], images["dtype"]) == (30, [8, 8], "uint8")
    assert (images["backend"], images["variable_shape"]) == ("01", False)
    assert (labels["keys"], labels["shape"], labels["dtype"]) == (30, [], "int64")
    assert labels["new_bytes"] == 0  # unchanged since v1
    assert images["new_bytes"] > 0

    text = run("show", columned, "v2").output
    assert "images  column of 30 samples uint8 (8, 8) backend 01  new " in text
    assert "labels  column of 30 samples int64 () backend 01  new 0 B" in text
    assert "keys" not in text and "records" not in text


def test_show_counts_the_samples_a_version_stores_first(run, tmp_path):
    """Three versions from one base edit the same table rows: one stores one new
    sample, one two, one none (its sample is stored already): the bytes first stored
    differ by the samples alone."""
    path = tmp_path / "new.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("base") as g:
            g.create_column("images", shape=(8, 8), dtype="uint8").set_many(
                list(range(20)), [sample(i) for i in range(20)]
            )
        for name, values in (("none", [5, 6]), ("one", [50, 6]), ("two", [50, 60])):
            with vf.stage_version(name, prev_version="base", make_current=False) as g:
                g["images"][0] = sample(values[0])
                g["images"][1] = sample(values[1])
        with vf.stage_version("same", prev_version="base", make_current=False) as g:
            g.create_dataset("x", data=np.arange(3))

    def new_bytes(version: str) -> int:
        shown = json.loads(run("show", path, version, "--json").output)
        return next(n["new_bytes"] for n in shown["nodes"] if n["path"] == "/images")

    none, one, two = new_bytes("none"), new_bytes("one"), new_bytes("two")
    assert none > 0  # the table's edited chunk
    assert one > none and two - none == 2 * (one - none)
    assert new_bytes("same") == 0


def _walk(group: h5py.Group, prefix: str = "") -> list[tuple[str, h5py.HLObject]]:
    """Datasets and column groups below ``group``, by path."""
    found: list[tuple[str, h5py.HLObject]] = []
    for name in sorted(group):
        obj = group[name]
        if isinstance(obj, h5py.Group) and "h5vc_column" not in obj.attrs:
            found += _walk(obj, f"{prefix}{name}/")
        else:
            found.append((f"{prefix}{name}", obj))
    return found


def brute_force(vf: Any) -> dict[str, Any]:
    """Every version's every dataset and column, counted on its own: a column is its
    table's chunks plus the samples its records point at."""
    state = vf.file_state
    with state.reading():
        versions: dict[str, dict[str, int]] = {}
        entries: dict[str, dict[str, Any]] = {}
        used: dict[tuple[str, str], tuple[tuple[str, str], set[int], float]] = {}
        users: Counter[tuple[tuple[str, str], int]] = Counter()

        def chunk_bytes(path: str) -> float:
            store = state.stores.get(path)
            return store.raw_data.id.get_storage_size() / store.n_slots

        def sample_bytes(schema: Any) -> float:
            store = SampleSlots.open(state.root, schema)
            datasets = [d for n, d in store.group.items() if n.isdigit()]
            return sum(d.id.get_storage_size() for d in datasets) / store.count

        for version in state.log.names():
            row = versions[version] = dict(logical_bytes=0, stored_bytes=0, shared_bytes=0)
            for path, obj in _walk(state.versions[version]):
                kind = "dataset" if isinstance(obj, h5py.Dataset) else "column"
                entry = entries.setdefault(path, dict(kind=kind, versions=0, logical_bytes=0))
                entry["versions"] += 1
                parts = [(path, obj)] if kind == "dataset" else [
                    (f"{path}/{name}", obj[name]) for name in ("keys", "records")
                ]  # fmt: skip
                for part, dataset in parts:
                    slots = state.chunk_maps.get(version, part, dataset).slots
                    chosen = {int(s) for s in slots.ravel() if s >= 0}
                    used[version, part] = (("chunks", part), chosen, chunk_bytes(part))
                    users.update((("chunks", part), s) for s in chosen)
                    logical = int(np.prod(dataset.shape)) * dataset.dtype.itemsize
                    row["logical_bytes"] += logical
                    entry["logical_bytes"] += logical
                if kind == "column":
                    schema = column_schema(obj.attrs, path)
                    records = obj["records"][()]
                    chosen = {int(s) for s in slots_of(records)}
                    store = ("samples", schema.uid)
                    used[version, f"{path}/samples"] = (store, chosen, sample_bytes(schema))
                    users.update((store, s) for s in chosen)
                    logical = len(records) * int(np.prod(schema.shape)) * schema.dtype.itemsize
                    row["logical_bytes"] += logical
                    entry["logical_bytes"] += logical

        def owner(part: str) -> str:
            head = part.rpartition("/")[0]
            return head if entries.get(head, {}).get("kind") == "column" else part

        for entry in entries.values():
            entry.update(stored_bytes=0, shared_bytes=0)
        distinct: dict[str, dict[tuple[str, str], set[int]]] = {}
        sizes: dict[tuple[str, str], float] = {}
        for (version, part), (store, slots, size) in used.items():
            sizes[store] = size
            shared = sum(users[store, s] > 1 for s in slots)
            versions[version]["stored_bytes"] += round(len(slots) * size)
            versions[version]["shared_bytes"] += round(shared * size)
            distinct.setdefault(owner(part), {}).setdefault(store, set()).update(slots)
        for path, stores in distinct.items():
            for store, slots in stores.items():
                entries[path]["stored_bytes"] += round(len(slots) * sizes[store])
                shared = sum(users[store, s] > 1 for s in slots)
                entries[path]["shared_bytes"] += round(shared * sizes[store])
    return {"versions": versions, "datasets": entries}


def test_du_counts_a_column_as_its_table_and_its_samples(run, columned):
    usage = json.loads(run("du", columned, "--json").output)
    with h5vc.open(str(columned)) as vf:
        expected = brute_force(vf)
        direct = disk_usage(vf)
    got_versions = {row.pop("version"): row for row in usage["versions"]}
    got = {entry.pop("path").lstrip("/"): entry for entry in usage["datasets"]}
    assert got == expected["datasets"]
    assert got_versions == expected["versions"]
    assert set(got) == {"images", "labels", "x"}
    assert got["images"]["kind"] == "column" and got["x"]["kind"] == "dataset"
    assert got["images"]["versions"] == 5 and got["labels"]["versions"] == 4
    # 25 distinct samples in v1: storage below the logical size; d1 stores nothing new.
    assert got["images"]["shared_bytes"] < got["images"]["stored_bytes"]
    assert direct.datasets["images"].kind == "column"

    text = run("du", columned).output
    assert "/images (column)" in text and "/images/keys" not in text


def test_diff_prints_key_changes_per_column(run, columned):
    changes = json.loads(run("diff", columned, "v1", "v2", "--json").output)["columns"]
    assert changes == [
        {
            "path": "/images",
            "added_count": 1,
            "removed_count": 1,
            "changed_count": 1,
            "added": [40],
            "removed": [7],
            "changed": [3],
        }
    ]
    assert json.loads(run("diff", columned, "v2", "v3", "--json").output)["columns"] == []

    text = run("diff", columned, "v1", "v4").output.splitlines()
    images = text.index("  ~ column /images: 1 key(s) added, 1 removed, 1 changed")
    assert text[images + 1 : images + 4] == [
        "      added: 40",
        "      removed: 7",
        "      changed: 3",
    ]
    labels = text.index("  ~ column /labels: 0 key(s) added, 30 removed, 0 changed")
    assert text[labels + 1 :] == ["      removed: 0, 1, 2, 3, 4, ... (30)"]
    assert sum(line.startswith("  ~ column") for line in text) == 2
    # a key given a sample stored already under another key still changed
    changes = json.loads(run("diff", columned, "v1", "d1", "--json").output)["columns"]
    assert [(c["path"], c["changed"]) for c in changes] == [("/images", [10])]
