"""Cherry-pick and revert: a version's change (or its inverse) applied on a branch."""

from __future__ import annotations

import numpy as np
import pytest
from refs_helpers import contents, file_bytes

from h5vc.errors import (
    EmptyChangeError,
    InvalidOptionError,
    InvalidVersionNameError,
    MergeConflictError,
    MergeParentError,
    RefNotFoundError,
)


def _bob(vf):
    """main at m1 (x[0] = 100), bob at b2 (b1: x[5] = -5, b2: x[55] = -55, y[0, 0] = 1)."""
    vf.create_branch("main")
    vf.create_branch("bob")
    vf.switch_branch("main")
    with vf.stage_version("b1", branch="bob", make_current=False) as g:
        g["x"][5] = -5
    with vf.stage_version("b2", branch="bob", make_current=False, message="fix") as g:
        g["x"][55] = -55
        g["g"]["y"][0, 0] = 1
    with vf.stage_version("m1", branch="main") as g:
        g["x"][0] = 100


def _expected_x(**changes):
    x = np.arange(100)
    for index, value in changes.items():
        x[int(index[1:])] = value
    return x


def test_cherry_pick_applies_only_that_versions_change(vf):
    _bob(vf)
    result = vf.cherry_pick("b2")
    assert result.kind == "cherry-pick" and result.base == "b1" and result.theirs == "b2"
    assert result.ours == "m1" and result.chunks_taken == 1 and result.chunks_merged == 0
    new = result.version
    assert vf.branches == {"main": new, "bob": "b2"} and vf.current_version == new
    info = vf.version_info(new)
    assert info.prev_version == "m1" and info.merge_parents == ()
    assert "b2" in info.message and "fix" in info.message
    # b1's change (x[5]) is not brought along: only what b2 changed against b1
    assert np.array_equal(vf[new]["x"][:], _expected_x(i0=100, i55=-55))
    assert vf[new]["g"]["y"][0, 0] == 1


def test_cherry_pick_into_another_branch_keeps_current(vf):
    _bob(vf)
    vf.create_branch("alice", at="v1")
    result = vf.cherry_pick("b1", into="alice", name="a-pick", message="take b1")
    assert vf.branches["alice"] == "a-pick" and vf.current_version == "m1"
    assert vf.version_info("a-pick").message == "take b1"
    assert np.array_equal(vf["alice"]["x"][:], _expected_x(i5=-5))
    assert result.ours == "v1"


def test_revert_undoes_a_change_and_keeps_later_ones(vf):
    _bob(vf)
    vf.switch_branch("bob")
    with vf.stage_version("b3", branch="bob") as g:
        g["x"][56] = 56_000  # same chunk as b2's x[55]
    result = vf.revert("b2", name="undo-b2")
    assert result.kind == "revert" and result.base == "b2" and result.theirs == "b1"
    assert result.chunks_merged == 1  # x's chunk 50:60 changed by b3 and by the revert
    x = vf["bob"]["x"][:]
    assert np.array_equal(x, _expected_x(i5=-5, i56=56_000))
    assert vf["undo-b2"]["g"]["y"][0, 0] == 0
    assert vf.version_info("undo-b2").prev_version == "b3"


def test_revert_of_a_cherry_pick_restores_the_target(vf):
    _bob(vf)
    picked = vf.cherry_pick("b2").version
    reverted = vf.revert(picked).version
    assert vf.diff("m1", reverted).datasets_changed == ()
    assert np.array_equal(vf["main"]["x"][:], vf["m1"]["x"][:])


def test_revert_of_a_root_removes_what_it_added(vf):
    with vf.stage_version("v2") as g:
        g.create_dataset("z", data=np.arange(3))
    vf.revert("v1", name="empty")
    assert set(vf["empty"]) == {"z"}


def _conflicting(vf):
    _bob(vf)
    with vf.stage_version("m2", branch="main") as g:
        g["x"][55] = 7  # where b2 wrote -55


def test_conflicting_cherry_pick_raises_and_writes_nothing(path, vf):
    _conflicting(vf)
    vf.f.file.flush()
    before, before_bytes = contents(path), file_bytes(path)
    with pytest.raises(MergeConflictError) as caught:
        vf.cherry_pick("b2", name="pick")
    [conflict] = caught.value.conflicts
    assert (conflict.path, conflict.region, conflict.elements) == ("x", (slice(50, 60),), 1)
    assert "Cherry-picking 'b2'" in str(caught.value)
    vf.f.file.flush()
    assert contents(path) == before and file_bytes(path) == before_bytes
    assert "pick" not in vf and vf.branches["main"] == "m2"


@pytest.mark.parametrize("side, value", [("ours", 7), ("theirs", -55)])
def test_conflicting_cherry_pick_resolved_by_side(vf, side, value):
    _conflicting(vf)
    result = vf.cherry_pick("b2", on_conflict=side)
    assert len(result.conflicts) == 1 and vf["main"]["x"][55] == value


def test_conflicting_revert_resolved_by_a_callable(vf):
    _bob(vf)
    vf.switch_branch("bob")
    with vf.stage_version("b3", branch="bob") as g:
        g["x"][55] = 9  # overwrites what b2 wrote: reverting b2 conflicts here
    seen = []

    def resolve(conflict, base, ours, theirs):
        seen.append((base[5], ours[5], theirs[5]))
        return np.where(ours != base, ours, theirs) * 0 + 1

    vf.revert("b2", name="r", on_conflict=resolve)
    assert seen == [(-55, 9, 55)]
    assert (vf["r"]["x"][50:60] == 1).all()


def _merged(vf):
    _bob(vf)
    vf.merge("bob", name="merged")  # parents m1 (main), b2 (bob)


def test_merge_versions_need_a_parent(path, vf):
    _merged(vf)
    vf.f.file.flush()
    before, before_bytes = contents(path), file_bytes(path)
    for call in (
        lambda: vf.revert("merged"),
        lambda: vf.cherry_pick("merged", into="bob"),
        lambda: vf.revert("merged", parent=3),
        lambda: vf.revert("merged", parent="v1"),
        lambda: vf.revert("b2", parent=2),
    ):
        with pytest.raises(MergeParentError):
            call()
    vf.f.file.flush()
    assert contents(path) == before and file_bytes(path) == before_bytes


def test_revert_of_a_merge_against_its_first_parent(vf):
    _merged(vf)
    vf.revert("merged", parent=1, name="unmerge")  # undo what bob brought in
    assert np.array_equal(vf["unmerge"]["x"][:], _expected_x(i0=100))
    vf.revert("unmerge", name="again")
    assert np.array_equal(vf["again"]["x"][:], _expected_x(i0=100, i5=-5, i55=-55))


def test_cherry_pick_of_a_merge_against_a_parent_by_name(vf):
    _merged(vf)
    vf.create_branch("alice", at="v1")
    vf.cherry_pick("merged", into="alice", parent="b2", name="a1")  # main's side: x[0]
    assert np.array_equal(vf["a1"]["x"][:], _expected_x(i0=100))


def test_bad_inputs_raise_their_own_errors_and_write_nothing(path, vf):
    _bob(vf)
    vf.create_tag("release", "b1")
    vf.f.file.flush()
    before, before_bytes = contents(path), file_bytes(path)
    with pytest.raises(RefNotFoundError):
        vf.cherry_pick("nope")
    with pytest.raises(RefNotFoundError):
        vf.revert("b2", into="nobranch")
    with pytest.raises(EmptyChangeError):
        vf.cherry_pick("v1")  # an ancestor of main
    with pytest.raises(EmptyChangeError):
        vf.cherry_pick("bob", into="bob")
    with pytest.raises(InvalidVersionNameError, match="already a tag"):
        vf.cherry_pick("b2", name="release")
    with pytest.raises(InvalidVersionNameError, match="already a branch"):
        vf.revert("b2", name="bob")
    with pytest.raises(InvalidOptionError):
        vf.cherry_pick("b2", on_conflict="mine")
    vf.f.file.flush()
    assert contents(path) == before and file_bytes(path) == before_bytes
