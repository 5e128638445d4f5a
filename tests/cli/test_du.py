"""``h5vc du`` against a brute-force count over every version's chunk maps."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from group_kinds import rebuild_groups

import h5vc
from h5vc.cli._stats import disk_usage


@pytest.fixture
def tangled(tmp_path: Path) -> Path:
    """Branches, a merge, deleted versions and datasets, hard-linked datasets and
    groups, chunks stored once and used twice, fill chunks, and a dataset created
    again with another dtype (a second store for one path)."""
    path = tmp_path / "tangled.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(100), chunks=(10,))
            group = g.create_group("g")
            group.create_dataset("y", data=np.ones((4, 6)), chunks=(2, 3))  # one chunk, 4x
            group.create_dataset("z", data=np.arange(30.0), chunks=(7,))
            g.create_dataset("same", data=np.full(50, 3), chunks=(10,))
            g.create_dataset("sparse", data=np.zeros(40), chunks=(10,))
            g.create_group("deep").create_group("h").create_dataset("k", data=np.arange(9))
            g.create_group("empty")
        vf.create_branch("main")
        vf.create_branch("dev")
        vf.switch_branch("main")
        with vf.stage_version("v2", branch="main") as g:
            g["x"][15] = -1
        with vf.stage_version("v3", branch="main") as g:
            g["x"][40:60] = 5
            g["sparse"][12] = 1.5
            del g["g"]["z"]
        with vf.stage_version("d1", branch="dev", make_current=False) as g:
            g["x"][95] = 7
            g["g"]["y"][0, 0] = 2
            g.create_dataset("w", data=np.arange(12), chunks=(4,))
        vf.merge("dev", into="main", name="m")
        with vf.stage_version("v4", branch="main") as g:
            del g["x"]
        with vf.stage_version("v5", branch="main") as g:
            g.create_dataset("x", data=np.linspace(0, 1, 30), chunks=(6,))
            g["same"][0] = 9  # a chunk no other version uses
        h5vc.delete_versions(vf, ["v2"])
    return path


def _datasets(group: h5py.Group, prefix: str = "") -> list[tuple[str, h5py.Dataset]]:
    found = []
    for name in sorted(group):
        obj = group[name]
        if isinstance(obj, h5py.Group):
            found += _datasets(obj, f"{prefix}{name}/")
        else:
            found.append((f"{prefix}{name}", obj))
    return found


def brute_force(vf: Any) -> dict[str, Any]:
    """Every version's every dataset, its chunk map read on its own. A slot is a slot of
    one chunk store: a dataset created again with another dtype or chunks has a store of
    its own, whose slots are not the first store's (and have their own size)."""
    state = vf.file_state
    with state.reading():
        versions: dict[str, dict[str, int]] = {}
        datasets: dict[str, dict[str, int]] = {}
        used: dict[tuple[str, str], set[tuple[str, int]]] = {}
        users: Counter[tuple[str, str, int]] = Counter()  # path, store key, slot
        for version in state.log.names():
            row = versions[version] = dict(logical_bytes=0, stored_bytes=0, shared_bytes=0)
            for path, dataset in _datasets(state.versions[version]):
                slots = state.chunk_maps.get(version, path, dataset).slots
                key = state.stores.key(version, path, dataset)
                used[version, path] = {(key, int(s)) for s in slots.ravel() if s >= 0}
                users.update((path, key, s) for key, s in used[version, path])
                logical = int(np.prod(dataset.shape)) * dataset.dtype.itemsize
                row["logical_bytes"] += logical
                entry = datasets.setdefault(path, dict(kind="dataset", versions=0, logical_bytes=0))
                entry["versions"] += 1
                entry["logical_bytes"] += logical

        def slot_bytes(key: str) -> float:
            store = state.stores.get(key)
            return store.raw_data.id.get_storage_size() / store.n_slots

        for (version, path), slots in used.items():
            for key in {key for key, _ in slots}:
                mine = [s for k, s in slots if k == key]
                size = slot_bytes(key)
                versions[version]["stored_bytes"] += round(len(mine) * size)
                shared = sum(users[path, key, s] > 1 for s in mine)
                versions[version]["shared_bytes"] += round(shared * size)
        for path, entry in datasets.items():
            entry["stored_bytes"] = entry["shared_bytes"] = 0
            for key in {k for p, k, _ in users if p == path}:
                mine = [n for (p, k, _), n in users.items() if (p, k) == (path, key)]
                entry["stored_bytes"] += round(len(mine) * slot_bytes(key))
                entry["shared_bytes"] += round(sum(n > 1 for n in mine) * slot_bytes(key))
    return {"versions": versions, "datasets": datasets}


def _as_brute(vf: Any) -> dict[str, Any]:
    return _as_brute_usage(disk_usage(vf))


@pytest.mark.parametrize("mode", ["r", "r+"])
def test_du_matches_a_count_over_every_chunk_map(tangled, mode):
    with h5vc.open(str(tangled), mode) as vf:
        got = _as_brute(vf)
        expected = brute_force(vf)
    assert got == expected
    # Datasets listed in the order they first appear: by version, then path.
    assert (
        list(got["datasets"])
        == list(expected["datasets"])
        == [
            "deep/h/k",
            "g/y",
            "g/z",
            "same",
            "sparse",
            "x",
            "w",
        ]
    )
    # What the fixture is for: chunks used twice in one version, unshared chunks.
    assert got["datasets"]["g/y"]["stored_bytes"] < got["datasets"]["g/y"]["logical_bytes"]
    assert got["versions"]["v4"]["logical_bytes"] < got["versions"]["m"]["logical_bytes"]
    assert got["datasets"]["same"]["stored_bytes"] > got["datasets"]["same"]["shared_bytes"]
    assert got["versions"]["v5"]["stored_bytes"] > got["versions"]["v5"]["shared_bytes"]


def test_du_command_prints_the_same_counts(tangled, run):
    usage = json.loads(run("du", tangled, "--json").output)
    with h5vc.open(str(tangled)) as vf:
        expected = brute_force(vf)
    assert {row.pop("version"): row for row in usage["versions"]} == expected["versions"]
    assert {entry.pop("path").lstrip("/"): entry for entry in usage["datasets"]} == expected[
        "datasets"
    ]


def test_du_of_a_file_changed_by_a_writer_since_the_reader_opened_it(tangled):
    """A read-only handle opened before a commit counts the versions committed since."""
    with h5vc.open(str(tangled)) as reader:
        before = _as_brute(reader)
        with (
            h5vc.open(str(tangled), "r+") as writer,
            writer.stage_version("v6", branch="main") as g,
        ):
            g["same"][0] = 9
        after = _as_brute(reader)
        expected = brute_force(reader)
    assert "v6" not in before["versions"]
    assert after == expected and "v6" in after["versions"]


def test_du_counts_a_dataset_created_again_with_another_dtype_in_its_own_store(tmp_path):
    """``x`` created again as float32 in smaller chunks gets a store of its own: its five
    slots are not the first store's slots 0 to 4 (shared with nobody) and hold 24
    bytes each, not 80."""
    path = tmp_path / "again.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(100), chunks=(10,))
        with vf.stage_version("v2") as g:
            del g["x"]
        with vf.stage_version("v3") as g:
            g.create_dataset("x", data=np.linspace(0, 1, 30, dtype="f4"), chunks=(6,))
    with h5vc.open(str(path)) as vf:
        assert len(vf.file_state.stores.of("x")) == 2
        usage = disk_usage(vf)
        expected = brute_force(vf)
    x = usage.datasets["x"]
    assert (x.stored_bytes, x.shared_bytes) == (10 * 80 + 5 * 24, 0)
    assert usage.versions["v1"] == dict(logical_bytes=800, stored_bytes=800, shared_bytes=0)
    assert usage.versions["v3"] == dict(logical_bytes=120, stored_bytes=120, shared_bytes=0)
    assert _as_brute_usage(usage) == expected


def _as_brute_usage(usage: Any) -> dict[str, Any]:
    return {
        "versions": usage.versions,
        "datasets": {
            path: {k: v for k, v in entry.as_dict().items() if k != "path"}
            for path, entry in usage.datasets.items()
        },
    }


def test_du_of_a_read_only_file_reads_the_tree_from_its_bytes(tangled, monkeypatch):
    """Opened read-only, the groups' links and every dataset object's shape, dtype size
    and mappings are read from the file's bytes: HDF5 opens nothing, and only the
    datasets using one stored chunk in two places are read through the general
    header reader."""
    from h5vc.cli import _stats

    opened: list[str] = []
    general: list[str] = []
    through_hdf5 = _stats._through_hdf5
    from_header = _stats._from_header

    def spy_hdf5(state: Any, stores: Any, obj: Any) -> Any:
        opened.append(obj.path)
        return through_hdf5(state, stores, obj)

    def spy_header(state: Any, stores: Any, address: int, obj: Any) -> Any:
        general.append(obj.path)
        return from_header(state, stores, address, obj)

    monkeypatch.setattr(_stats, "_through_hdf5", spy_hdf5)
    monkeypatch.setattr(_stats, "_from_header", spy_header)
    with h5vc.open(str(tangled)) as vf:
        got = _as_brute(vf)
        expected = brute_force(vf)
        state = vf.file_state
        twice = set()
        for version in state.log.names():
            for path, dataset in _datasets(state.versions[version]):
                slots = state.chunk_maps.get(version, path, dataset).slots
                used = slots[slots >= 0]
                if len(np.unique(used)) < len(used):
                    twice.add(path)
    assert got == expected
    assert opened == []
    assert twice == {"g/y", "same", "x"}  # what the fixture is for
    assert set(general) == twice


@pytest.mark.parametrize(
    "reader", ["many_links", "many_compact_links", "many_datasets", "many_mappings"]
)
def test_du_reads_the_same_counts_one_object_at_a_time(tangled, monkeypatch, reader):
    """The groups (of either kind), headers and mapping lists read many at once and
    those read one by one (rows of a shape the bulk readers leave out) give the same
    counts."""
    from h5vc.cli import _stats

    if reader == "many_links":  # groups of the old kind (a symbol table)
        with h5py.File(tangled, "r+") as f:
            rebuild_groups(f["_version_data/versions"], 0)
    with h5vc.open(str(tangled)) as vf:
        at_once = _as_brute(vf)
        expected = brute_force(vf)
    real = getattr(_stats, reader)
    left_out = []

    def read(*args: Any) -> Any:
        found = real(*args)
        if isinstance(found, list):
            left_out.extend(row for row in found if row is not None)
            return [None] * len(found)
        left_out.extend(np.flatnonzero(found.ok))
        found.ok[:] = False
        return found

    monkeypatch.setattr(_stats, reader, read)
    with h5vc.open(str(tangled)) as vf:
        one_by_one = _as_brute(vf)
    assert at_once == one_by_one == expected
    assert left_out  # rows the bulk reader had read: the comparison is not empty


def test_du_of_a_file_with_version_2_headers(tmp_path):
    """Version-2 object headers are left to HDF5: du counts the same."""
    path = tmp_path / "latest.h5"
    with h5vc.open(str(path), "w", libver="latest") as vf:
        for number in range(4):
            with vf.stage_version(f"v{number}") as g:
                if number == 0:
                    g.create_dataset("x", data=np.arange(60.0), chunks=(10,))
                    g.create_group("g").create_dataset("y", data=np.arange(8), chunks=(4,))
                else:
                    g["x"][number * 10] = -number
    with h5vc.open(str(path)) as vf:
        got = _as_brute(vf)
        expected = brute_force(vf)
    assert got == expected
    assert got["datasets"]["x"]["versions"] == 4


def test_du_of_groups_of_many_members(tmp_path):
    """Groups whose links fill several symbol nodes (a B-tree of more than one level:
    the versions group, a version of 40 datasets) are read one by one."""
    path = tmp_path / "wide.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v00") as g:
            for number in range(40):
                g.create_dataset(f"d{number:02d}", data=np.arange(6.0) + number, chunks=(3,))
        for number in range(1, 36):
            with vf.stage_version(f"v{number:02d}") as g:
                g[f"d{number:02d}"][0] = -1.0
    with h5vc.open(str(path)) as vf:
        got = _as_brute(vf)
        expected = brute_force(vf)
    assert got == expected
    assert len(got["versions"]) == 36 and len(got["datasets"]) == 40


def test_du_of_a_damaged_mapping_list_raises_corrupt_data(tangled, tmp_path):
    """A mapping list whose count disagrees with its bytes is damage, not a dataset
    of other counts: du reports it as CorruptDataError."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "safety"))
    from flipscan import flipped, mappings_address

    from h5vc.errors import CorruptDataError

    address = mappings_address(str(tangled), "_version_data/versions/v5/x")
    damaged = tmp_path / "damaged.h5"
    damaged.write_bytes(flipped(tangled.read_bytes(), address, 1))  # the mapping count
    with h5vc.open(str(damaged)) as vf, pytest.raises(CorruptDataError, match="mappings"):
        disk_usage(vf)


def test_du_of_a_file_with_a_user_block(tmp_path, monkeypatch):
    """Addresses count from the end of a user block: the byte readers read the tree
    (nothing left to HDF5) and count what a walk over every chunk map counts."""
    from h5vc.cli import _stats

    path = tmp_path / "userblock.h5"
    with h5py.File(path, "w", userblock_size=512) as f:
        vf = h5vc.VersionedHDF5File(f)
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=np.arange(60.0), chunks=(10,))
            g.create_group("g").create_dataset("y", data=np.arange(8), chunks=(4,))
        with vf.stage_version("v1") as g:
            g["x"][5] = 1.0

    def refuse(*args: Any) -> Any:
        raise AssertionError("walked through HDF5")

    monkeypatch.setattr(_stats, "_objects", refuse)
    monkeypatch.setattr(_stats, "_from_header", refuse)
    with h5vc.open(str(path)) as vf:
        got = _as_brute(vf)
        expected = brute_force(vf)
    assert got == expected
    assert got["datasets"]["x"]["versions"] == 2


@pytest.fixture(params=[1, 2])
def new_style(tangled: Path, request: Any) -> Path:
    """``tangled`` with every group below the versions group made a group of links
    kept in its object header, of version 1 or 2."""
    with h5py.File(tangled, "r+") as f:
        rebuild_groups(f["_version_data/versions"], request.param)
    return tangled


def test_du_of_groups_keeping_links_in_their_headers(new_style, monkeypatch):
    """Groups keeping their links as link messages in version-1 or version-2 object
    headers are read from the file's bytes: nothing is walked through HDF5, and du
    counts what a walk over every chunk map counts."""
    from h5vc.cli import _stats

    with h5py.File(new_style, "r") as f:
        group = f["_version_data/versions/v1"]
        assert group.id.get_create_plist().get_link_creation_order()  # new-style

    def refuse(*args: Any) -> Any:
        raise AssertionError("walked through HDF5")

    with h5vc.open(str(new_style)) as vf:
        expected = brute_force(vf)
    monkeypatch.setattr(_stats, "_objects", refuse)
    with h5vc.open(str(new_style)) as vf:
        got = _as_brute(vf)
    assert got == expected
    assert len(got["versions"]) == 6 and len(got["datasets"]) == 7


def test_du_of_groups_keeping_links_in_dense_storage(tmp_path):
    """A group of more links than its header keeps (a fractal heap) is left to HDF5:
    du counts the same."""
    path = tmp_path / "dense.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v0") as g:
            for number in range(12):
                g.create_dataset(f"d{number:02d}", data=np.arange(6.0) + number, chunks=(3,))
        with vf.stage_version("v1") as g:
            g["d03"][0] = -1.0
    with h5py.File(path, "r+") as f:
        rebuild_groups(f["_version_data/versions"], 2)
    with h5py.File(path, "r") as f:
        from h5vc.hdf5.filebytes import FileBytes, Unreadable

        address = h5py.h5o.get_info(f["_version_data/versions/v1"].id).addr
        file_bytes = FileBytes.of(f)
        assert file_bytes is not None
        with file_bytes, pytest.raises(Unreadable, match="dense"):
            file_bytes.links(file_bytes.header(address))  # 12 links: more than 8
    with h5vc.open(str(path)) as vf:
        got = _as_brute(vf)
        expected = brute_force(vf)
    assert got == expected
    assert got["datasets"]["d03"]["versions"] == 2


@pytest.mark.parametrize("header", [1, 2])
def test_du_of_a_damaged_link_message_raises_corrupt_data(tangled, tmp_path, header):
    """A link message whose name runs past its message (in a header of either version:
    a version-2 header's checksum then disagrees too) is damage: CorruptDataError."""
    from h5vc.errors import CorruptDataError

    with h5py.File(tangled, "r+") as f:
        rebuild_groups(f["_version_data/versions"], header)
    with h5py.File(tangled, "r") as f:
        address = h5py.h5o.get_info(f["_version_data/versions/v5"].id).addr
    data = bytearray(tangled.read_bytes())
    at = data.index(b"sparse", address)  # the name of a link of v5
    assert data[at - 1] == len(b"sparse")  # its one-byte length
    data[at - 1] = 0xF0
    damaged = tmp_path / "damaged.h5"
    damaged.write_bytes(bytes(data))
    with h5vc.open(str(damaged)) as vf, pytest.raises(CorruptDataError):
        disk_usage(vf)


def test_du_reads_groups_of_link_messages_at_once_and_one_by_one(tangled, monkeypatch):
    """Groups keeping link messages in version-1 headers are read many at once; read
    one by one instead, du counts the same."""
    from h5vc.cli import _stats

    with h5py.File(tangled, "r+") as f:
        rebuild_groups(f["_version_data/versions"], 1)
    with h5vc.open(str(tangled)) as vf:
        expected = brute_force(vf)
    real = _stats.many_compact_links
    read_at_once: list[Any] = []

    def spy(*args: Any) -> Any:
        found = real(*args)
        read_at_once.extend(row for row in found if row is not None)
        return found

    monkeypatch.setattr(_stats, "many_compact_links", spy)
    with h5vc.open(str(tangled)) as vf:
        at_once = _as_brute(vf)
    assert len(read_at_once) >= 6  # the version groups at least
    monkeypatch.setattr(_stats, "many_compact_links", lambda f, rows: [None] * len(rows))
    with h5vc.open(str(tangled)) as vf:
        one_by_one = _as_brute(vf)
    assert at_once == one_by_one == expected


@pytest.mark.parametrize("mode", ["r", "r+"])
def test_du_sums_per_version_in_python_integers_where_int64_could_overflow(
    tangled, monkeypatch, mode
):
    """The per-version sums are taken in int64 below a bound, in Python integers above
    it: the same counts, as Python integers either way."""
    from h5vc.cli import _stats

    with h5vc.open(str(tangled), mode) as vf:
        in_int64 = _as_brute(vf)
        expected = brute_force(vf)
        monkeypatch.setattr(_stats, "_INT64_SUMS_BELOW", 0)
        exact = _as_brute(vf)
    assert in_int64 == exact == expected
    for got in (in_int64, exact):
        assert all(type(n) is int for row in got["versions"].values() for n in row.values())


@pytest.mark.parametrize("enabled", [True, False])
def test_du_leaves_the_cycle_collector_as_it_found_it(tangled, enabled):
    import gc

    was = gc.isenabled()
    try:
        if not enabled:
            gc.disable()
        with h5vc.open(str(tangled)) as vf:
            disk_usage(vf)
        assert gc.isenabled() == enabled
    finally:
        if was:
            gc.enable()


@pytest.fixture
def strided(tmp_path: Path) -> Path:
    """Versions of one dataset of 40 chunks, one chunk rewritten a version: mapping
    lists whose selections are hyperslabs of several blocks."""
    path = tmp_path / "strided.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=np.arange(160.0), chunks=(4,))
            g.create_dataset("y", data=np.arange(30), chunks=(10,))
        for n in range(1, 12):
            with vf.stage_version(f"v{n}") as g:
                g["x"][4 * (3 * n % 40)] = -n
    return path


@pytest.mark.parametrize("at_once", [64, 1])
def test_du_reads_mapping_lists_of_blocks_at_once(strided, monkeypatch, at_once):
    """Mapping lists whose selections have several blocks are walked at once (up to
    filebytes._MANY_ENTRIES mappings a list; the others read one by one): the same
    counts."""
    from h5vc.hdf5 import filebytes

    with h5py.File(strided, "r") as f:
        versions = f["_version_data/versions"]
        blocks = [
            mapping.src_space.get_select_hyper_nblocks()
            for name in versions
            if name.startswith("v")
            for mapping in versions[name]["x"].virtual_sources()
        ]
    assert max(blocks) > 1  # what the fixture is for

    monkeypatch.setattr(filebytes, "_MANY_ENTRIES", at_once)
    walked: list[int] = []
    walk = filebytes._walk_mappings

    def spy(*args: Any) -> Any:
        found = walk(*args)
        walked.append(len(found[0]))
        return found

    monkeypatch.setattr(filebytes, "_walk_mappings", spy)
    with h5vc.open(str(strided)) as vf:
        got = _as_brute(vf)
        expected = brute_force(vf)
    assert got == expected
    assert (sum(walked) > 0) == (at_once == 64)


def test_logical_bytes_of_many_shapes_are_exact():
    """_stats._logical_bytes: each row's product in Python integers (past int64 too)."""
    import math

    from h5vc.cli._stats import _logical_bytes

    rank = np.array([1, 2, 0, 4, 1, 2], dtype=np.int64)
    dims = np.array(
        [
            [5, 9, 9, 9],
            [3, 4, 0, 0],
            [0, 0, 0, 0],
            [2**40, 2**40, 3, 1],
            [5, 1, 1, 1],
            [3, 4, 7, 7],
        ],
        dtype=np.uint64,
    )
    size = np.array([8, 2, 4, 8, 8, 2], dtype=np.uint64)
    expected = [
        math.prod(d[:r]) * s for d, r, s in zip(dims.tolist(), rank.tolist(), size.tolist())
    ]
    assert _logical_bytes(rank, dims, size) == expected
    assert expected[3] > 2**63
    assert _logical_bytes(rank[:0], dims[:0], size[:0]) == []


def test_walk_links_lists_each_object_once_with_its_versions():
    """_stats._walk_links on links as read from a file's bytes: paths by name, depth
    first; a group linked into many versions (or twice in one) walked once."""
    from h5vc.cli._stats import _walk_links

    links_of = {
        1: [("a", 10), ("g", 5), ("x", 11)],  # version v1
        2: [("a", 10), ("g", 5), ("h", 5), ("x", 12)],  # version v2
        5: [("b", 20), ("d", 6)],  # a group
        6: [("c", 21)],  # a group in it
    }
    objects = _walk_links(["v1", "v2"], {"v1": 1, "v2": 2}, links_of)
    got = [(obj.path, obj.name, obj.versions, obj.address, obj.ranks) for obj in objects]
    assert got == [
        ("a", b"v1/a", ["v1", "v2"], 10, [0, 1]),
        ("g/b", b"v1/g/b", ["v1", "v2", "v2"], 20, [0, 1, 1]),
        ("g/d/c", b"v1/g/d/c", ["v1", "v2", "v2"], 21, [0, 1, 1]),
        ("x", b"v1/x", ["v1"], 11, [0]),
        ("x", b"v2/x", ["v2"], 12, [1]),
    ]


@pytest.mark.parametrize(
    "links_of",
    [
        {1: [("a", 10), ("self", 1)]},  # a version's group holding itself
        {1: [("g", 5)], 5: [("back", 1)]},  # ... through a group
        {1: [("g", 5)], 5: [("h", 6)], 6: [("g", 5)]},  # two groups holding each other
    ],
)
def test_walk_links_of_a_group_holding_itself_is_unreadable(links_of):
    from h5vc.cli._stats import _walk_links
    from h5vc.hdf5.filebytes import Unreadable

    with pytest.raises(Unreadable):
        _walk_links(["v1"], {"v1": 1}, links_of)
