"""``h5vc cherry-pick``, ``revert``, ``blame``, ``bisect`` and ``squash``."""

from __future__ import annotations

import json
import sys

import numpy as np
from cli_helpers import file_digest

import h5vc


def test_cherry_pick_and_revert(run, history):
    run("branch", "create", history, "main")
    run("branch", "switch", history, "main")
    result = run("cherry-pick", history, "b1", "--name", "p")
    assert result.exit_code == 0, result.stderr
    assert result.output.startswith("picked b1 onto v3 (branch main) as p: 1 chunk(s) taken")
    report = json.loads(run("revert", history, "v2", "--json").output)
    assert report["kind"] == "revert" and report["onto"] == "p" and report["branch"] == "main"
    assert report["change_from"] == "v2" and report["change_to"] == "v1"
    with h5vc.open(str(history)) as vf:
        x = vf["main"]["x"][:]
        assert x[95] == 7 and x[15] == 15 and vf.version_info(report["version"]).prev_version == "p"


def test_cherry_pick_into_a_branch(run, history):
    run("branch", "create", history, "side", "--at", "v1")
    assert run("cherry-pick", history, "v2", "--into", "side", "--name", "s").exit_code == 0
    with h5vc.open(str(history)) as vf:
        assert vf.branches["side"] == "s" and vf.current_version == "v3"
        assert vf["s"]["x"][15] == -1


def test_bad_cherry_picks_exit_1_and_change_nothing(run, history):
    with h5vc.open(str(history), "r+") as vf:
        vf.create_branch("main", at="v3")
        vf.switch_branch("main")
        vf.merge("b1", name="m")
    before = file_digest(history)
    for args, words in (
        (["cherry-pick", history, "nope"], "nope"),
        (["cherry-pick", history, "v2"], "already part of the history"),
        (["revert", history, "m"], "parent"),
        (["revert", history, "m", "--parent", "5"], "between 1 and 2"),
        (["cherry-pick", history, "b1", "--into", "nobranch"], "nobranch"),
    ):
        result = run(*args)
        assert result.exit_code == 1 and result.stderr.count("\n") == 1, args
        assert words in result.stderr, result.stderr
    assert file_digest(history) == before
    assert run("revert", history, "m", "--parent", "1", "--name", "r").exit_code == 0
    with h5vc.open(str(history)) as vf:
        assert vf["r"]["x"][95] == 95


def test_blame(run, history):
    text = run("blame", history, "x").output.splitlines()
    assert text == [
        "/x in v3:",
        "region    version",
        "[0:10]    v1",
        "[10:20]   v2",
        "[20:100]  v1",
    ]
    report = json.loads(run("blame", history, "/x", "b1", "--json").output)
    assert report["version"] == "b1" and report["shape"] == [100]
    assert report["regions"] == [
        {"region": [[0, 90]], "version": "v1"},
        {"region": [[90, 100]], "version": "b1"},
    ]
    for args in (["blame", history, "nope"], ["blame", history, "x", "nope"]):
        result = run(*args)
        assert result.exit_code == 1 and "nope" in result.stderr


def _line(path, n):
    with h5vc.open(str(path), "w") as vf:
        for i in range(n):
            with vf.stage_version(f"v{i}") as g:
                if i == 0:
                    g.create_dataset("x", data=np.zeros(n, dtype=np.int64))
                else:
                    g["x"][i] = i


def test_bisect_with_an_expression_and_a_command(run, tmp_path):
    path = tmp_path / "line.h5"
    _line(path, 40)
    result = run("bisect", path, "v0", "v39", "--expr", "g['x'][:].sum() > 100")
    assert result.exit_code == 0, result.stderr
    assert result.output.splitlines()[-1].startswith("first bad version: v14 (")
    script = tmp_path / "test.py"
    script.write_text("import os, sys\nsys.exit(int(os.environ['H5VC_VERSION'][1:]) >= 23)\n")
    report = json.loads(
        run("bisect", path, "v0", "v39", "--cmd", f"{sys.executable} {script}", "--json").output
    )
    assert report["first_bad"] == "v23" and report["versions_between"] == 39
    assert len(report["tested"]) <= 6


def test_bisect_bad_input(run, tmp_path):
    path = tmp_path / "line.h5"
    _line(path, 5)
    before = file_digest(path)
    for args, words in (
        (["v0", "v4"], "one of --expr or --cmd"),
        (["v0", "v4", "--expr", "g[", "--cmd", "true"], "one of --expr or --cmd"),
        (["v0", "v4", "--expr", "g["], "not a Python expression"),
        (["v4", "v0", "--expr", "True"], "ancestor"),
        (["v0", "nope", "--expr", "True"], "nope"),
        (["v0", "v4", "--cmd", "exit 125"], "status 125"),
    ):
        result = run("bisect", path, *args)
        assert result.exit_code == 1 and words in result.stderr, (args, result.stderr)
    assert file_digest(path) == before


def test_squash(run, tmp_path):
    path = tmp_path / "line.h5"
    _line(path, 6)
    result = run("squash", path, "v1", "v4", "--name", "s", "-m", "four edits")
    assert result.output == "squashed 4 version(s) v1..v4 into s\n"
    with h5vc.open(str(path)) as vf:
        assert vf.versions == ["v0", "s", "v5"] and vf.version_info("s").message == "four edits"
        assert list(vf["v5"]["x"][:]) == [0, 1, 2, 3, 4, 5]
    before = file_digest(path)
    result = run("squash", path, "v5", "s")
    assert result.exit_code == 1 and "ancestor" in result.stderr
    assert file_digest(path) == before


def test_log_walks_both_lines_of_a_merge(run, history):
    with h5vc.open(str(history), "r+") as vf:
        vf.create_branch("main", at="v3")
        vf.merge("b1", into="main", name="m")
    every = json.loads(run("log", history, "main", "--json").output)
    assert [e["version"] for e in every] == ["m", "b1", "v3", "v2", "v1"]
    first = json.loads(run("log", history, "main", "--first-parent", "--json").output)
    assert [e["version"] for e in first] == ["m", "v3", "v2", "v1"]
    graph = run("log", history, "main", "--graph").output.splitlines()
    assert graph[0].startswith("* version m") and "|\\" in graph


def test_log_hides_the_root_of_the_history(run, history):
    text = run("log", history).output
    assert "__first_version__" not in text and "version v1\nDate:   " in text
    assert "version v2\nParent: v1\nDate:   " in text


def test_json_commands_report_errors_as_json(run, history):
    for args in (
        ["blame", history, "nope", "--json"],
        ["merge", history, "nope", "--json"],
        ["log", history, "nope", "--json"],
    ):
        result = run(*args)
        assert result.exit_code == 1 and result.stderr.count("\n") == 1
        report = json.loads(result.stdout)
        assert "nope" in report["error"] and report["command"] == f"h5vc {args[0]}"
    assert run("blame", history, "nope").stdout == ""
