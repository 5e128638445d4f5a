"""``h5vc branch``, ``tag`` and ``merge``, and refs in ``log``."""

from __future__ import annotations

import json

import numpy as np
from cli_helpers import file_digest

import h5vc


def test_branch_create_list_reset_switch_delete(run, history):
    assert run("branch", "create", history, "main").output == "branch main -> v3\n"
    assert run("branch", "create", history, "old", "--at", "v1").exit_code == 0
    assert run("branch", "create", history, "older", "v1").output == "branch older -> v1\n"
    assert run("branch", "create", history, "x", "v1", "--at", "v2").exit_code == 1
    assert run("branch", "delete", history, "older").exit_code == 0
    listed = json.loads(run("branch", "list", history, "--json").output)
    assert listed == [
        {"branch": "main", "version": "v3", "current": False},
        {"branch": "old", "version": "v1", "current": False},
    ]
    assert run("branch", "reset", history, "old", "b1").output == "branch old -> b1\n"
    assert run("branch", "switch", history, "old").output == "on branch old at b1\n"
    text = run("branch", "list", history).output
    assert "old" in text and "*" in text
    result = run("branch", "delete", history, "old")
    assert result.exit_code == 1 and "current branch" in result.stderr
    run("branch", "switch", history, "main")
    assert run("branch", "delete", history, "old").exit_code == 0
    with h5vc.open(str(history)) as vf:
        assert vf.branches == {"main": "v3"} and vf.current_version == "v3"


def test_tags(run, history):
    assert run("tag", "create", history, "release", "v2").output == "tag release -> v2\n"
    assert json.loads(run("tag", "list", history, "--json").output) == [
        {"tag": "release", "version": "v2"}
    ]
    before = file_digest(history)
    moved = run("tag", "create", history, "release", "v3")
    assert moved.exit_code == 1 and "never move" in moved.stderr
    assert file_digest(history) == before
    assert run("tag", "delete", history, "release").exit_code == 0
    assert json.loads(run("tag", "list", history, "--json").output) == []


def test_bad_ref_names_are_one_line_errors(run, history):
    before = file_digest(history)
    for args in (["branch", "create", history, "a..b"], ["branch", "create", history, "v1"]):
        result = run(*args)
        assert result.exit_code == 1 and result.stderr.count("\n") == 1
        assert result.stderr.startswith("h5vc branch: error: ")
    assert run("branch", "delete", history, "nope").exit_code == 1
    assert run("tag", "delete", history, "nope").exit_code == 1
    assert file_digest(history) == before


def test_merge_and_log_graph(run, history):
    run("branch", "create", history, "main")
    run("branch", "switch", history, "main")
    result = run("merge", history, "b1", "--name", "m", "-m", "bring b1 in")
    assert result.exit_code == 0, result.stderr
    assert result.output.startswith("merged b1 into v3 (base v1) as m: 1 chunk(s) taken")
    with h5vc.open(str(history)) as vf:
        x = vf["m"]["x"][:]
        assert x[15] == -1 and x[95] == 7
        assert vf.branches["main"] == "m"
    entries = json.loads(run("log", history, "--json").output)
    assert entries[0]["version"] == "m" and entries[0]["parents"] == ["v3", "b1"]
    assert entries[0]["refs"] == ["branch main"]
    assert {e["version"] for e in entries} == {"m", "v3", "v2", "v1", "b1"}
    lines = run("log", history, "--graph").output.splitlines()
    assert lines[0] == "*   version m (branch main)" or lines[0].startswith("* version m")
    assert "|\\" in lines
    assert "\nMerge:  v3 b1\n" in run("log", history, "-n", "1").output


def test_merge_conflict_exits_1_and_changes_nothing(run, tmp_path):
    path = tmp_path / "c.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(10))
        vf.create_branch("dev")
        with vf.stage_version("v2") as g:
            g["x"][0] = 1
        with vf.stage_version("d1", branch="dev", make_current=False) as g:
            g["x"][0] = 2
    before = file_digest(path)
    result = run("merge", path, "dev")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert "conflict" in result.stderr and "/x[0:10]" in result.stderr
    assert file_digest(path) == before
    report = json.loads(run("merge", path, "dev", "--on-conflict", "theirs", "--json").output)
    assert report["kind"] == "merge" and len(report["conflicts_resolved"]) == 1
    with h5vc.open(str(path)) as vf:
        assert vf[report["version"]]["x"][0] == 2


def test_log_of_a_branch(run, history):
    run("branch", "create", history, "side", "--at", "b1")
    entries = json.loads(run("log", history, "--branch", "side", "--json").output)
    assert [e["version"] for e in entries] == ["b1", "v1"]
    assert run("log", history, "--branch", "nope").exit_code == 1


def test_nothing_to_merge_is_success(run, history):
    run("branch", "create", history, "main", "--at", "v3")
    run("branch", "switch", history, "main")
    before = file_digest(history)
    result = run("merge", history, "v2")
    assert result.exit_code == 0 and result.output.startswith("already up to date: ")
    assert json.loads(run("merge", history, "main", "--json").output)["kind"] == "up-to-date"
    assert file_digest(history) == before
