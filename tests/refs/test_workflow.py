"""A three-person workflow (branches alice, bob and main) through the history tools:
cherry-pick, revert, blame checked against a model, bisect and squash."""

from __future__ import annotations

import h5py
import numpy as np

import h5vc

SHAPE, CHUNKS = (40, 30), (10, 10)


def _chunk_regions():
    for i in range(0, SHAPE[0], CHUNKS[0]):
        for j in range(0, SHAPE[1], CHUNKS[1]):
            yield (slice(i, i + CHUNKS[0]), slice(j, j + CHUNKS[1]))


class Model:
    """Each version's data and, per chunk region, the version that last changed it
    (a chunk equal to a parent's, first parent first, keeps that parent's answer)."""

    def __init__(self):
        self.data: dict[str, np.ndarray] = {}
        self.owner: dict[str, dict[tuple, str]] = {}

    def commit(self, name, data, parents):
        self.data[name] = data.copy()
        owners = {}
        for region in _chunk_regions():
            key = tuple((s.start, s.stop) for s in region)
            owners[key] = next(
                (
                    self.owner[p][key]
                    for p in parents
                    if np.array_equal(self.data[p][region], data[region])
                ),
                name,
            )
        self.owner[name] = owners


def _edit(rng, data):
    data = data.copy()
    i, j = rng.integers(0, SHAPE[0]), rng.integers(0, SHAPE[1])
    h, w = rng.integers(1, 6, size=2)
    data[i : i + h, j : j + w] = rng.integers(-100, 100)
    return data


def test_three_people(tmp_path):
    path = tmp_path / "team.h5"
    rng = np.random.default_rng(7)
    model = Model()
    with h5vc.open(str(path), "w") as vf:
        start = np.zeros(SHAPE, dtype=np.int64)
        with vf.stage_version("init") as g:
            g.create_dataset("grid", data=start, chunks=CHUNKS)
        model.commit("init", start, [])
        for person in ("alice", "bob", "main"):
            vf.create_branch(person)
        vf.switch_branch("main")
        commits = 0
        for step in range(17):
            person = ("alice", "bob", "main")[step % 3]
            head = vf.branches[person]
            data = _edit(rng, model.data[head])
            name = f"{person}{step}"
            with vf.stage_version(name, branch=person, make_current=False) as g:
                g["grid"][...] = data
            model.commit(name, data, [head])
            commits += 1
            if step == 8:  # main takes alice's work
                main = vf.branches["main"]
                result = vf.merge("alice", into="main", name="merge-alice", on_conflict="ours")
                assert result.kind == "merge"
                model.commit("merge-alice", vf["merge-alice"]["grid"][:], [main, "alice6"])
                commits += 1
        # main cherry-picks one of bob's versions ...
        main = vf.branches["main"]
        picked = vf.cherry_pick("bob13", into="main", name="pick", on_conflict="theirs")
        assert picked.base == "bob10" and picked.theirs == "bob13"
        expected = model.data[main].copy()
        changed = model.data["bob13"] != model.data["bob10"]
        expected[changed] = model.data["bob13"][changed]
        assert np.array_equal(vf["pick"]["grid"][:], expected)
        model.commit("pick", expected, [main])
        # ... and reverts it
        vf.revert("pick", into="main", name="unpick")
        assert np.array_equal(vf["unpick"]["grid"][:], model.data[main])
        model.commit("unpick", model.data[main], ["pick"])
        commits += 2
        assert commits == 20
        _check_blame(vf, model)
        # a selection: only the chunks it touches
        touched = vf.blame("grid", np.s_[12:25, 3], ref="main").regions
        assert [r.region for r in touched] == [
            (slice(10, 20), slice(0, 10)),
            (slice(20, 30), slice(0, 10)),
        ]
    with h5vc.open(str(path)) as vf:  # read-only: chunk maps read from the file's bytes
        _check_blame(vf, model)


def _check_blame(vf, model):
    for ref in ("alice", "bob", "main", "merge-alice", "pick"):
        version = vf.resolve(ref)
        assert np.array_equal(vf[version]["grid"][:], model.data[version])
        regions = vf.blame("grid", ref=ref).regions
        assert len(regions) == 12
        for item in regions:
            key = tuple((s.start, s.stop) for s in item.region)
            assert item.version == model.owner[version][key], (ref, key)


def test_bisect_over_1000_versions_opens_at_most_12(tmp_path):
    path = tmp_path / "long.h5"
    with h5py.File(path, "w") as f:  # without the journal: 1000 quick commits
        vf = h5vc.VersionedHDF5File(f)
        with vf.stage_version("v0") as g:
            g.create_dataset("level", data=np.zeros(4, dtype=np.int64))
        for i in range(1, 1000):
            with vf.stage_version(f"v{i}") as g:
                g["level"][i % 4] = i
    with h5vc.open(str(path)) as vf:
        opened = []
        get = vf.get_version_by_name

        def counting(name):
            opened.append(name)
            return get(name)

        vf.get_version_by_name = counting
        for first_bad in (1, 2, 500, 637, 998, 999):
            opened.clear()
            result = vf.bisect(lambda g, n=first_bad: g["level"][:].max() >= n, "v0", "v999")
            assert result.version == f"v{first_bad}"
            assert len(opened) <= 12 and len(result.path) == 999
            assert [name for name, _ in result.tested] == opened


def test_squash_of_100_versions_frees_their_space(tmp_path):
    rng = np.random.default_rng(3)
    path = tmp_path / "many.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=rng.random(1_000_000), chunks=(1000,))  # 8 MB
        vf.create_branch("main")
        vf.switch_branch("main")
        for i in range(1, 101):  # each rewrites 20 whole chunks: 16 MB in all
            with vf.stage_version(f"v{i}", branch="main") as g:
                for chunk in rng.choice(1000, 20, replace=False):
                    g["x"][chunk * 1000 : (chunk + 1) * 1000] = rng.random(1000)
        expected = vf["v100"]["x"][:]
        full = h5vc.stats(vf)
        name = vf.squash("v1", "main", name="squashed")
        assert vf.versions == ["v0", "squashed"] and vf.branches == {"main": "squashed"}
        assert vf.current_version == "squashed"
        assert np.array_equal(vf["squashed"]["x"][:], expected)
        space = h5vc.stats(vf)
        # Freed chunks stay in their store as free slots that later commits fill.
        used = space.file_bytes - space.free_bytes - space.free_chunk_bytes
    one = tmp_path / "one.h5"
    with h5vc.open(str(one), "w") as vf:  # the same data: v0, and the last one as one version
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=vf_data(path, "v0"), chunks=(1000,))
        with vf.stage_version("squashed") as g:
            g["x"][:] = expected
    before = full.file_bytes - full.free_bytes - full.free_chunk_bytes
    assert before > 1.5 * one.stat().st_size
    assert name == "squashed" and used <= 1.05 * one.stat().st_size


def vf_data(path, version):
    with h5vc.open(str(path)) as vf:
        return vf[version]["x"][:]
