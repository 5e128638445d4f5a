"""Sample columns across versions: diff, merge by key, delete and reclaim, verify."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

import h5vc
from h5vc.errors import MergeConflictError


def sample(value: int) -> np.ndarray:
    return np.full((3, 3), value, np.uint8)


def values(col) -> dict:
    return {key: int(col[key][0, 0]) for key in col}


@pytest.fixture
def vf(tmp_path: Path):
    with h5vc.open(tmp_path / "history.h5", "a") as vf:
        with vf.stage_version("base") as g:
            g.create_column("c", shape=(3, 3), dtype="uint8").update(
                {f"k{i}": sample(i) for i in range(10)}
            )
        vf.create_branch("main", "base")
        vf.create_branch("dev", "base")
        yield vf


def test_diff_lists_added_removed_and_changed_keys(vf) -> None:
    with vf.stage_version("v2", branch="main") as g:
        col = g["c"]
        col["new"] = sample(50)
        del col["k2"]
        col["k3"] = sample(33)
        col["k4"] = sample(4)  # the same sample again: no change
    change = vf.diff("base", "v2").columns["c"]
    assert (change.added, change.removed, change.changed) == (["new"], ["k2"], ["k3"])
    assert vf.diff("base", "v2").datasets_changed == ()  # the column's own datasets
    back = vf.diff("v2", "base").columns["c"]
    assert (back.added, back.removed, back.changed) == (["k2"], ["new"], ["k3"])
    assert "c" not in vf.diff("base", "base").columns
    assert "~ column /c: 1 key(s) added, 1 removed, 1 changed" in vf.diff("base", "v2").describe()


def test_diff_of_an_added_column_lists_every_key(vf) -> None:
    with vf.stage_version("v2", branch="main") as g:
        g.create_column("labels", shape=(), dtype="int64").set_many([1, 2], np.array([5, 6]))
    change = vf.diff("base", "v2")
    assert change.columns["labels"].added == [1, 2]
    assert change.groups_added == ("labels",)


def edit_both_sides(vf) -> None:
    with vf.stage_version("ours", branch="main") as g:
        col = g["c"]
        col["k1"] = sample(101)
        del col["k2"]
        col["only_ours"] = sample(50)
        col["k5"] = sample(55)  # conflict
        col["k6"] = sample(66)  # the same change on both sides
        col["k7"] = sample(77)  # conflict: changed here, deleted there
    with vf.stage_version("theirs", branch="dev") as g:
        col = g["c"]
        col["k3"] = sample(103)
        del col["k4"]
        col["only_theirs"] = sample(60)
        col["k5"] = sample(56)
        col["k6"] = sample(66)
        del col["k7"]


MERGED_WITHOUT_CONFLICTS = {
    "k0": 0, "k1": 101, "k3": 103, "k6": 66, "k8": 8, "k9": 9, "only_ours": 50, "only_theirs": 60,
}  # fmt: skip


def test_merge_fails_on_keys_changed_differently_and_writes_nothing(vf) -> None:
    edit_both_sides(vf)
    names = set(vf.f["_version_data/versions"])
    with pytest.raises(MergeConflictError) as raised:
        vf.merge("dev", into="main", name="m")
    conflicts = raised.value.conflicts
    assert sorted((c.path, c.kind, c.key) for c in conflicts) == [
        ("c", "key", "k5"),
        ("c", "key", "k7"),
    ]
    assert "/c key 'k5'" in str(raised.value)
    assert set(vf.f["_version_data/versions"]) == names


@pytest.mark.parametrize(
    ("on_conflict", "expected"),
    [("ours", {"k5": 55, "k7": 77}), ("theirs", {"k5": 56})],
)
def test_merge_takes_one_sided_changes_and_resolves_conflicts(vf, on_conflict, expected) -> None:
    edit_both_sides(vf)
    result = vf.merge("dev", into="main", name="m", on_conflict=on_conflict)
    assert sorted(c.key for c in result.conflicts) == ["k5", "k7"]
    assert values(vf["m"]["c"]) == {**MERGED_WITHOUT_CONFLICTS, **expected}


def test_merge_resolver_returns_the_merged_sample_or_none(vf) -> None:
    edit_both_sides(vf)
    seen = {}

    def resolve(conflict, base, ours, theirs):
        seen[conflict.key] = tuple(
            None if s is None else int(s[0, 0]) for s in (base, ours, theirs)
        )
        return None if conflict.key == "k7" else ours // 2 + theirs // 2 + 1

    vf.merge("dev", into="main", name="m", on_conflict=resolve)
    assert seen == {"k5": (5, 55, 56), "k7": (7, 77, None)}
    assert values(vf["m"]["c"]) == {**MERGED_WITHOUT_CONFLICTS, "k5": 56}
    assert vf.diff("ours", "m").columns["c"].removed == ["k4", "k7"]


def test_merge_of_columns_with_other_samples_is_a_type_conflict(vf) -> None:
    with vf.stage_version("ours", branch="main") as g:
        del g["c"]
        g.create_column("c", shape=(4,), dtype="uint8")["x"] = np.zeros(4, np.uint8)
    with vf.stage_version("theirs", branch="dev") as g:
        g["c"]["k0"] = sample(200)
    with pytest.raises(MergeConflictError) as raised:
        vf.merge("dev", into="main", name="m")
    assert [(c.path, c.kind) for c in raised.value.conflicts] == [("c", "type")]


def store_of(vf) -> h5py.Group:
    (store,) = vf.f["_h5vc_samples"].values()
    return store


def free_slots(vf) -> int:
    store = store_of(vf)
    return int((~store["digests"][: int(store.attrs["count"])].any(axis=1)).sum())


def test_deleting_versions_frees_samples_only_they_used_and_commits_reuse_them(vf) -> None:
    with vf.stage_version("v2", branch="main") as g:
        g["c"].update({f"k{i}": sample(100 + i) for i in range(4)})
    assert (int(store_of(vf).attrs["count"]), free_slots(vf)) == (14, 0)
    h5vc.delete_versions(vf, ["base"], force=True)
    assert free_slots(vf) == 4  # k0..k3 of base; k4..k9 are still in v2
    assert values(vf["v2"]["c"]) == {**{f"k{i}": 100 + i for i in range(4)},
                                     **{f"k{i}": i for i in range(4, 10)}}  # fmt: skip
    with vf.stage_version("v3", branch="main") as g:
        g["c"].update({"a": sample(200), "b": sample(201)})
    assert (int(store_of(vf).attrs["count"]), free_slots(vf)) == (14, 2)
    assert values(vf["v3"]["c"])["a"] == 200 and h5vc.verify(vf).ok


def test_verify_reports_a_damaged_sample(vf, tmp_path: Path) -> None:
    assert h5vc.verify(vf).ok
    row = int(vf["base"]["c"].records()["index"][4])
    dataset = store_of(vf)["0"]
    mask, data = dataset.id.read_direct_chunk((row, 0, 0))
    damaged = bytearray(data)
    damaged[-1] ^= 0xFF
    dataset.id.write_direct_chunk((row, 0, 0), bytes(damaged), mask)
    report = h5vc.verify(vf)
    assert [(p.kind, p.versions) for p in report.problems] == [("sample", ("base",))]
    assert "key 'k4'" in str(report)
    with pytest.raises(h5vc.CorruptDataError, match="xxhash64"):
        vf["base"]["c"]["k4"]


def test_cherry_pick_and_revert_carry_column_changes(vf) -> None:
    with vf.stage_version("fix", branch="dev") as g:
        g["c"]["k1"] = sample(111)
        del g["c"]["k9"]
    with vf.stage_version("other", branch="main") as g:
        g["c"]["k2"] = sample(222)
    vf.cherry_pick("fix", into="main", name="picked")
    assert values(vf["picked"]["c"]) == {
        **{f"k{i}": i for i in range(9)}, "k1": 111, "k2": 222,
    }  # fmt: skip
    vf.revert("other", into="main", name="reverted")
    assert values(vf["reverted"]["c"]) == {**{f"k{i}": i for i in range(9)}, "k1": 111}


def test_squash_keeps_the_last_column_and_frees_what_only_the_run_held(vf) -> None:
    with vf.stage_version("s1", branch="main") as g:
        g["c"]["k0"] = sample(100)  # replaced again in s2: held by s1 alone
    with vf.stage_version("s2", branch="main") as g:
        g["c"]["k0"] = sample(200)
    vf.squash("s1", "s2", name="squashed")
    assert values(vf["squashed"]["c"]) == {**{f"k{i}": i for i in range(10)}, "k0": 200}
    assert free_slots(vf) == 1 and h5vc.verify(vf).ok
