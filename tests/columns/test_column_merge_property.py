"""Merging columns by key, against a three-way merge of dicts."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import h5vc

contents = st.dictionaries(st.integers(0, 15), st.integers(0, 4), max_size=12)
#: A side's edit of the base: new values for some keys, and keys to delete.
edits = st.tuples(contents, st.sets(st.integers(0, 15), max_size=5))

MISSING = object()


def apply(base: dict, edit: tuple[dict, set]) -> dict:
    changed, deleted = edit
    return {k: v for k, v in (base | changed).items() if k not in deleted}


def three_way(base: dict, ours: dict, theirs: dict, winner: str) -> dict:
    merged = {}
    for key in set(base) | set(ours) | set(theirs):
        b, o, t = (side.get(key, MISSING) for side in (base, ours, theirs))
        if o == t or t == b:
            value = o
        elif o == b:
            value = t
        else:
            value = o if winner == "ours" else t
        if value is not MISSING:
            merged[key] = value
    return merged


def write(column, old: dict, new: dict) -> None:
    for key in set(old) - set(new):
        del column[key]
    changed = [k for k in new if old.get(k) != new[k]]
    column.set_many(changed, [np.full(3, new[k], np.int8) for k in changed])


@settings(max_examples=25, deadline=None)
@given(
    base=contents, ours_edit=edits, theirs_edit=edits, winner=st.sampled_from(["ours", "theirs"])
)
def test_merge_by_key_is_the_three_way_merge_of_the_dicts(base, ours_edit, theirs_edit, winner):
    ours, theirs = apply(base, ours_edit), apply(base, theirs_edit)
    with (
        tempfile.TemporaryDirectory() as directory,
        h5vc.open(Path(directory) / "merge.h5", "a") as vf,
    ):
        with vf.stage_version("base") as g:
            write(g.create_column("c", shape=(3,), dtype="int8"), {}, base)
        vf.create_branch("main", "base")
        vf.create_branch("dev", "base")
        for branch, content in (("main", ours), ("dev", theirs)):
            with vf.stage_version(f"{branch}-1", branch=branch) as g:
                write(g["c"], base, content)
        result = vf.merge("dev", into="main", name="merged", on_conflict=winner)
        column = vf["merged"]["c"]
        got = {key: int(column[key][0]) for key in column}
        assert got == three_way(base, ours, theirs, winner)
        expected_conflicts = sorted(
            k for k in set(base) | set(ours) | set(theirs)
            if len({repr(s.get(k, MISSING)) if k in s else "-" for s in (base, ours, theirs)}) == 3
        )  # fmt: skip
        assert sorted(c.key for c in result.conflicts) == expected_conflicts
