"""Three-way merges: structure, data from chunk maps, shapes, conflicts, fast-forward."""

from __future__ import annotations

import subprocess
import sys

import h5py
import numpy as np
import pytest
from refs_helpers import contents, file_bytes

import h5vc
from h5vc.errors import (
    InvalidOptionError,
    MergeConflictError,
    NothingToMergeError,
    UnrelatedHistoriesError,
)


def _branches(vf):
    """main and dev both at v1, current branch main."""
    vf.create_branch("main")
    vf.create_branch("dev")
    vf.switch_branch("main")


def test_merge_takes_chunks_changed_on_either_side(vf):
    _branches(vf)
    with vf.stage_version("m1", branch="main") as g:
        g["x"][5] = -5
    with vf.stage_version("d1", branch="dev", make_current=False) as g:
        g["x"][55] = -55
    result = vf.merge("dev", name="merged", message="bring dev in")
    assert result.kind == "merge" and result.version == "merged" and result.base == "v1"
    assert result.chunks_taken == 1 and result.chunks_merged == 0
    x = vf["merged"]["x"][:]
    expected = np.arange(100)
    expected[5], expected[55] = -5, -55
    assert np.array_equal(x, expected)
    info = vf.version_info("merged")
    assert info.prev_version == "m1" and info.merge_parents == ("d1",)
    assert vf.branches["main"] == "merged" and vf.branches["dev"] == "d1"
    assert vf.current_version == "merged"
    assert [i.name for i in vf.log()][:1] == ["merged"]
    assert vf.merge_base("merged", "d1") == "d1"


def test_merge_of_both_sides_in_one_chunk_is_element_wise(vf):
    _branches(vf)
    with vf.stage_version("m1", branch="main") as g:
        g["x"][11] = -11
    with vf.stage_version("d1", branch="dev", make_current=False) as g:
        g["x"][12] = -12
    result = vf.merge("dev", name="merged")
    assert result.chunks_merged == 1 and result.chunks_taken == 0
    assert list(vf["merged"]["x"][10:14]) == [10, -11, -12, 13]


def _count_raw_reads(monkeypatch, reads):
    """Record the raw_data slot of every read of chunk data, whichever path it takes:
    the engine's hyperslab reader, its fallback through ``__getitem__``, h5py slicing
    or read_direct."""
    from h5vc.store.reading import RawDataSlab

    def first_row(index):
        first = index[0] if isinstance(index, tuple) else index
        return first.start if isinstance(first, slice) else int(first)

    hyperslabs = RawDataSlab.read_hyperslabs
    getitem, read_direct = h5py.Dataset.__getitem__, h5py.Dataset.read_direct

    def counting_hyperslabs(self, destination, src_starts, *args, **kwargs):
        done = hyperslabs(self, destination, src_starts, *args, **kwargs)
        if done:
            reads.extend(int(row[0]) // 10 for row in src_starts)
        return done

    def counting_slab_getitem(self, index):
        reads.append(first_row(index) // 10)
        return getitem(self.dataset, index)

    def counting_getitem(self, index, *args, **kwargs):
        if str(self.name).endswith("raw_data"):
            reads.append(first_row(index) // 10)
        return getitem(self, index, *args, **kwargs)

    def counting_read_direct(self, dest, source_sel=None, dest_sel=None):
        if str(self.name).endswith("raw_data"):
            reads.append(first_row(source_sel) // 10)
        return read_direct(self, dest, source_sel, dest_sel)

    monkeypatch.setattr(RawDataSlab, "read_hyperslabs", counting_hyperslabs)
    monkeypatch.setattr(RawDataSlab, "__getitem__", counting_slab_getitem)
    monkeypatch.setattr(h5py.Dataset, "__getitem__", counting_getitem)
    monkeypatch.setattr(h5py.Dataset, "read_direct", counting_read_direct)


def test_merge_reads_only_chunks_changed_on_both_sides(vf, monkeypatch):
    _branches(vf)
    with vf.stage_version("m1", branch="main") as g:
        g["x"][0:50] = -1  # five chunks on ours
        g["x"][95] = 0
    with vf.stage_version("d1", branch="dev", make_current=False) as g:
        g["x"][50:90] = -2  # four chunks on theirs
        g["x"][96] = 0
    from h5vc.lifecycle.merge import chunk_slots

    both = {chunk_slots(vf, version, "x")[9] for version in ("v1", "m1", "d1")}
    assert len(both) == 3
    reads = []
    _count_raw_reads(monkeypatch, reads)
    result = vf.merge("dev", name="merged")
    monkeypatch.undo()
    assert result.chunks_taken == 4 and result.chunks_merged == 1
    # only the chunk both sides changed is read, in its three versions
    assert sorted(set(reads)) == sorted(both) and len(reads) == 3
    x = vf["merged"]["x"][:]
    assert (x[:50] == -1).all() and (x[50:90] == -2).all()
    assert list(x[90:]) == [90, 91, 92, 93, 94, 0, 0, 97, 98, 99]


def test_structure_and_attributes_merge(vf):
    _branches(vf)
    with vf.stage_version("m1", branch="main") as g:
        g.create_group("ours_only").create_dataset("a", data=np.arange(3))
        g["x"].attrs["unit"] = "km"
        del g["g"]["y"]
    with vf.stage_version("d1", branch="dev", make_current=False) as g:
        g.create_dataset("theirs_only", data=np.arange(4.0))
        g["x"].attrs["source"] = "sensor"
        g.attrs["note"] = "dev"
    vf.merge("dev", name="merged")
    merged = vf["merged"]
    assert set(merged) == {"g", "ours_only", "theirs_only", "x"}
    assert list(merged["g"]) == []
    assert dict(merged["x"].attrs) == {"unit": "km", "source": "sensor"}
    assert merged.attrs["note"] == "dev"
    assert list(merged["theirs_only"][:]) == [0, 1, 2, 3]


def test_one_sided_resize_merges(vf):
    _branches(vf)
    with vf.stage_version("m1", branch="main") as g:
        g["x"].resize((125,))
        g["x"][100:] = 7
    with vf.stage_version("d1", branch="dev", make_current=False) as g:
        g["x"][3] = -3
    vf.merge("dev", name="merged")
    x = vf["merged"]["x"][:]
    assert x.shape == (125,) and x[3] == -3 and (x[100:] == 7).all()


def test_fast_forward_moves_the_branch_without_a_version(vf):
    _branches(vf)
    with vf.stage_version("d1", branch="dev", make_current=False) as g:
        g["x"][0] = 1
    n = len(vf)
    result = vf.merge("dev")
    assert result.kind == "fast-forward" and result.version == "d1"
    assert len(vf) == n and vf.branches["main"] == "d1" and vf.current_version == "d1"


def test_fast_forward_through_a_merge_parent_loads_no_merge_machinery(tmp_path):
    """A branch whose head is reached from theirs only through a merge's second parent
    is fast-forwarded too; a fast-forward moves refs only, so the three-way merge
    (and what it imports) is not loaded."""
    path = tmp_path / "ff.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(100), chunks=(10,))
        _branches(vf)
        vf.create_branch("side")
        with vf.stage_version("s1", branch="side", make_current=False) as g:
            g["x"][1] = -1
        with vf.stage_version("d1", branch="dev", make_current=False) as g:
            g["x"][50] = -50
        vf.merge("side", into="dev", name="d2")  # d2's second parent: s1
    code = (
        "import sys, h5vc\n"
        f"with h5vc.open({str(path)!r}, 'r+') as vf:\n"
        "    result = vf.merge('dev', into='side')\n"
        "    print(result.kind, result.version, result.base, vf.branches['side'])\n"
        "print('h5vc.lifecycle.merge' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.split() == ["fast-forward", "d2", "s1", "d2", "False"]
    with h5vc.open(str(path)) as again:
        assert again.branches["side"] == "d2" and len(again) == 4
        assert again["d2"]["x"][1] == -1 and again["d2"]["x"][50] == -50


def test_fast_forward_checks_a_long_history_read_anew(tmp_path):
    """Whether a merge is a fast-forward is found through more versions than are
    walked one by one (then the whole log is read) in a handle that read none of them
    before: a branch behind by 40 versions fast-forwards, a diverged one merges."""
    path = tmp_path / "long.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=np.arange(100), chunks=(10,))
        for branch in ("main", "dev", "other"):
            vf.create_branch(branch)
        for number in range(1, 41):
            with vf.stage_version(f"d{number}", branch="dev", make_current=False) as g:
                g["x"][number] = -number
        with vf.stage_version("o1", branch="other", make_current=False) as g:
            g["x"][99] = -99
    with h5vc.open(str(path), "r+") as vf:
        result = vf.merge("dev", into="main")
        assert (result.kind, result.version, result.base) == ("fast-forward", "d40", "v0")
        merged = vf.merge("dev", into="other", name="m")
    assert merged.kind == "merge" and merged.base == "v0"
    with h5vc.open(str(path)) as vf:
        assert vf.branches["main"] == "d40" and vf.branches["other"] == "m"
        expected = np.arange(100)
        expected[1:41] = -np.arange(1, 41)
        expected[99] = -99
        assert np.array_equal(vf["m"]["x"][:], expected)


def test_merge_results_compare_by_value_and_name_their_fields(vf):
    from h5vc.lifecycle.results import MergeResult

    _branches(vf)
    with vf.stage_version("d1", branch="dev", make_current=False) as g:
        g["x"][0] = 1
    base = vf.current_version
    result = vf.merge("dev")
    assert result == MergeResult("fast-forward", "d1", base, base, "d1")
    assert result != MergeResult("fast-forward", "d1", base, base, "d1", chunks_taken=1)
    assert result != ("fast-forward", "d1")
    assert repr(result) == (
        f"MergeResult(kind='fast-forward', version='d1', base={base!r}, ours={base!r}, "
        "theirs='d1', conflicts=[], chunks_taken=0, chunks_merged=0)"
    )
    with pytest.raises(TypeError):
        hash(result)


def test_no_fast_forward_when_asked(vf):
    _branches(vf)
    with vf.stage_version("d1", branch="dev", make_current=False) as g:
        g["x"][0] = 1
    result = vf.merge("dev", name="m", fast_forward=False)
    assert result.kind == "merge" and vf.version_info("m").merge_parents == ("d1",)
    assert vf["m"]["x"][0] == 1


def _conflicting(vf):
    _branches(vf)
    with vf.stage_version("m1", branch="main") as g:
        g["x"][15] = -1
        g["x"][16] = 100
        g["x"].attrs["unit"] = "km"
    with vf.stage_version("d1", branch="dev", make_current=False) as g:
        g["x"][15] = -2
        g["x"][17] = 200
        g["x"].attrs["unit"] = "cm"


def test_conflicts_fail_with_a_report_and_write_nothing(path, vf):
    _conflicting(vf)
    vf.f.file.flush()
    before, before_bytes = contents(path), file_bytes(path)
    with pytest.raises(MergeConflictError) as caught:
        vf.merge("dev", name="merged")
    kinds = {(c.path, c.kind) for c in caught.value.conflicts}
    assert kinds == {("x", "data"), ("x", "attribute")}
    data = next(c for c in caught.value.conflicts if c.kind == "data")
    assert data.region == (slice(10, 20),) and data.elements == 1
    vf.f.file.flush()
    assert contents(path) == before and file_bytes(path) == before_bytes
    assert "merged" not in vf and vf.branches["main"] == "m1"


@pytest.mark.parametrize("side, value, unit", [("ours", -1, "km"), ("theirs", -2, "cm")])
def test_conflicts_resolved_by_side(vf, side, value, unit):
    _conflicting(vf)
    result = vf.merge("dev", name="merged", on_conflict=side)
    assert len(result.conflicts) == 2
    x = vf["merged"]["x"]
    assert list(x[15:18]) == [value, 100, 200] and x.attrs["unit"] == unit


def test_conflicts_resolved_by_a_callable(vf):
    _conflicting(vf)
    seen = []

    def resolve(conflict, base, ours, theirs):
        seen.append((conflict.path, conflict.region, base[5], ours[5], theirs[5]))
        both = (ours != base) & (theirs != base)
        return np.where(both, base, np.where(ours != base, ours, theirs))

    with pytest.raises(MergeConflictError):  # the attribute conflict has no data to resolve
        vf.merge("dev", name="merged", on_conflict=resolve)
    with vf.stage_version("d2", branch="dev", make_current=False) as g:
        g["x"].attrs["unit"] = "km"
    vf.merge("dev", name="merged", on_conflict=resolve)
    assert seen[-1] == ("x", (slice(10, 20),), 15, -1, -2)
    assert list(vf["merged"]["x"][15:18]) == [15, 100, 200]


def test_bad_merges_change_nothing(path, vf):
    _branches(vf)
    with vf.stage_version("d1", branch="dev", make_current=False) as g:
        g["x"][0] = 1
    with vf.stage_version("lone", prev_version="", make_current=False) as g:
        g.create_dataset("x", data=np.arange(100), chunks=(10,))
    vf.f.file.flush()
    before = contents(path)
    with pytest.raises(NothingToMergeError, match="itself"):
        vf.merge("main")
    with pytest.raises(NothingToMergeError, match="ancestor"):
        vf.merge("v1", into="dev")
    with pytest.raises(UnrelatedHistoriesError):
        vf.merge("lone")
    with pytest.raises(InvalidOptionError):
        vf.merge("dev", on_conflict="mine")
    vf.f.file.flush()
    assert contents(path) == before


def test_unrelated_histories_merge_when_allowed(vf):
    with vf.stage_version("lone", prev_version="", make_current=False) as g:
        g.create_dataset("z", data=np.arange(5))
    result = vf.merge("lone", name="both", allow_unrelated=True)
    assert result.base is None and set(vf["both"]) == {"g", "x", "z"}


def test_diff_between_siblings(vf):
    _branches(vf)
    with vf.stage_version("m1", branch="main") as g:
        g["x"][5] = -5
    with vf.stage_version("d1", branch="dev", make_current=False) as g:
        g["x"][55] = -55
    change = vf.diff("m1", "d1").dataset("x")
    assert [(r.raw[0].start, r.raw[0].stop) for r in change.regions] == [(0, 10), (50, 60)]


def test_structural_conflicts(vf):
    _branches(vf)
    with vf.stage_version("m1", branch="main") as g:
        g["x"][0] = 1  # changed here ...
        g["x"].resize((120,))
        g.create_group("both").attrs["side"] = "ours"
        g["g"]["y"].resize((4, 4))
    with vf.stage_version("d1", branch="dev", make_current=False) as g:
        del g["x"]  # ... deleted there
        g.create_dataset("both", data=np.arange(3))  # a group here, a dataset there
        g["g"]["y"].resize((8, 4))
        g["g"]["y"][0, 0] = 1
    with pytest.raises(MergeConflictError) as caught:
        vf.merge("dev", name="m")
    kinds = sorted((c.path, c.kind) for c in caught.value.conflicts)
    assert kinds == [("both", "type"), ("g/y", "shape"), ("x", "deleted")]
    result = vf.merge("dev", name="m", on_conflict="theirs")
    merged = vf["m"]
    assert "x" not in merged and merged["both"].shape == (3,)
    assert merged["g"]["y"].shape == (8, 4)
    assert len(result.conflicts) == 3


def test_datasets_added_on_both_sides_merge_over_fill(vf):
    _branches(vf)
    with vf.stage_version("m1", branch="main") as g:
        g.create_dataset("z", data=np.array([1, 0, 0, 0]), chunks=(2,))
    with vf.stage_version("d1", branch="dev", make_current=False) as g:
        g.create_dataset("z", data=np.array([0, 0, 0, 4]), chunks=(2,))
    vf.merge("dev", name="m")
    assert list(vf["m"]["z"][:]) == [1, 0, 0, 4]


def test_element_wise_merge_in_two_dimensions_at_the_edge(vf):
    _branches(vf)
    with vf.stage_version("m1", branch="main") as g:
        g.create_dataset("z", data=np.zeros((5, 8)), chunks=(2, 3))
    vf.create_branch("side", at="m1")
    with vf.stage_version("m2", branch="main") as g:
        g["z"][4, 6] = 1.0  # the corner chunk, partial on both axes
        g["z"][0, 0] = 2.0
    with vf.stage_version("s1", branch="side", make_current=False) as g:
        g["z"][4, 7] = 3.0
        g["z"][1, 1] = 4.0
    result = vf.merge("side", name="m")
    assert result.chunks_merged == 2
    expected = np.zeros((5, 8))
    expected[4, 6], expected[0, 0], expected[4, 7], expected[1, 1] = 1, 2, 3, 4
    assert np.array_equal(vf["m"]["z"][:], expected)
