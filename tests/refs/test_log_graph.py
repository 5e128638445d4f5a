"""The full history walk: every ancestor once, each before its parents."""

from __future__ import annotations

import numpy as np
import pytest

from h5vc.errors import RefNotFoundError, VersionNotFoundError


def _ancestors(vf, name):
    seen, todo = {name}, [name]
    while todo:
        for parent in vf.version_info(todo.pop()).parents:
            if parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return seen


def test_log_walks_every_ancestor_once_in_topological_order(vf):
    rng = np.random.default_rng(5)
    people = ("alice", "bob", "main")
    for person in people:
        vf.create_branch(person)
    for step in range(30):
        person = people[rng.integers(3)]
        if step % 4 == 3:
            other = people[rng.integers(3)]
            if other != person:
                vf.merge(
                    other, into=person, name=f"m{step}", on_conflict="ours", fast_forward=False
                )
                continue
        with vf.stage_version(f"c{step}", branch=person, make_current=False) as g:
            g["x"][int(rng.integers(100))] = step
    assert any(vf.version_info(n).merge_parents for n in vf.versions)
    for person in people:
        names = [info.name for info in vf.log(person)]
        assert names[0] == vf.branches[person]
        assert len(names) == len(set(names)) and set(names) == _ancestors(vf, names[0])
        position = {name: i for i, name in enumerate(names)}
        for name in names:
            assert all(position[p] > position[name] for p in vf.version_info(name).parents)
        first = [info.name for info in vf.log(person, first_parent=True)]
        expected = [names[0]]
        while vf.version_info(expected[-1]).prev_version is not None:
            expected.append(vf.version_info(expected[-1]).prev_version)
        assert first == expected


def test_log_of_a_merge_shows_both_lines_newest_first(vf):
    vf.create_branch("main")
    vf.create_branch("side")
    vf.create_tag("start", "v1")
    for name, branch in (("s1", "side"), ("m1", "main"), ("s2", "side"), ("m2", "main")):
        with vf.stage_version(name, branch=branch, make_current=False) as g:
            g["x"][0] = len(name)
    vf.merge("side", into="main", name="merged")
    assert [i.name for i in vf.log("main")] == ["merged", "m2", "s2", "m1", "s1", "v1"]
    assert [i.name for i in vf.log("main", first_parent=True)] == ["merged", "m2", "m1", "v1"]
    assert [i.name for i in vf.log("start")] == ["v1"]
    with pytest.raises(RefNotFoundError):
        vf.log("nope")
    with pytest.raises(VersionNotFoundError):
        vf.log("__first_version__")
