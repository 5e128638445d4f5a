"""``h5vc log``, ``show``, ``diff`` and ``du``."""

from __future__ import annotations

import json
import subprocess
import sys

import h5py
import numpy as np
import pytest

import h5vc
from h5vc.cli import main


def test_log_lists_the_current_history_newest_first(run, history):
    result = run("log", history)
    assert result.exit_code == 0
    names = [line.split()[1] for line in result.output.splitlines() if line.startswith("version")]
    assert names == ["v3", "v2", "v1"]
    assert "edit one chunk" in result.output


def test_log_json_limit_and_start(run, history):
    entries = json.loads(run("log", history, "--json", "-n", "2").output)
    assert [e["version"] for e in entries] == ["v3", "v2"]
    assert entries[1]["parents"] == ["v1"] and entries[1]["message"] == "edit one chunk"
    entries = json.loads(run("log", history, "b1", "--json").output)
    assert [e["version"] for e in entries] == ["b1", "v1"]
    entries = json.loads(run("log", history, "--all", "--json").output)
    assert [e["version"] for e in entries] == ["b1", "v3", "v2", "v1"]


def test_json_is_one_line_piped_and_indented_on_a_terminal(run, history, monkeypatch):
    piped = run("log", history, "--json").output
    assert piped.count("\n") == 1 and json.loads(piped)[0]["version"] == "v3"
    from h5vc.cli import _app

    printed: list[str] = []
    monkeypatch.setattr(_app.click, "echo", lambda text: printed.append(text))

    class Terminal:
        @staticmethod
        def isatty() -> bool:
            return True

    monkeypatch.setattr(_app.sys, "stdout", Terminal())
    _app.emit_json([{"version": "v3"}])
    assert printed == ['[\n  {\n    "version": "v3"\n  }\n]']


def test_log_graph_draws_a_side_line_joining_its_parent(run, history):
    lines = run("log", history, "--all", "--graph").output.splitlines()
    rows = [line for line in lines if "version " in line]
    assert rows == ["* version b1", "| * version v3", "| * version v2", "* version v1"]
    # b1's line ends where v2's line joins it, just above v1
    assert lines[lines.index("* version v1") - 1] == "|/"
    before_root = lines[: lines.index("* version v1")]
    assert all(line.startswith(("|", "*")) for line in before_root if line)


def test_log_of_an_empty_file_is_empty(run, tmp_path):
    path = tmp_path / "empty.h5"
    with h5py.File(path, "w") as f:
        h5vc.VersionedHDF5File(f)
    result = run("log", path, "--json")
    assert result.exit_code == 0 and json.loads(result.output) == []


def test_show_lists_the_tree_with_new_bytes(run, history):
    shown = json.loads(run("show", history, "v3", "--json").output)
    assert shown["version"] == "v3" and shown["parents"] == ["v2"]
    nodes = {node["path"]: node for node in shown["nodes"]}
    assert set(nodes) == {"/", "/x", "/g", "/g/y"}
    y = nodes["/g/y"]
    assert (y["shape"], y["dtype"], y["chunks"]) == ([4, 6], "float64", [2, 3])
    assert y["new_bytes"] == 8 * 6  # four equal all-ones chunks: one stored
    assert nodes["/x"]["new_bytes"] == 0  # unchanged since v2
    assert nodes["/x"]["attrs"] == ["unit"]
    v2 = {
        node["path"]: node
        for node in json.loads(run("show", history, "v2", "--json").output)["nodes"]
    }
    assert v2["/x"]["new_bytes"] == 10 * 8  # one chunk of ten int64 stored again


def test_show_text_defaults_to_the_current_version(run, history):
    result = run("show", history)
    assert result.exit_code == 0
    assert result.output.startswith("version v3")
    assert "y  float64 (4, 6) chunks (2, 3)" in result.output


def test_diff_text_and_json(run, history):
    text = run("diff", history, "v1", "v2").output
    assert "~ dataset /x" in text and "[10:20]" in text
    report = json.loads(run("diff", history, "v2", "b1", "--json").output)
    change = report["datasets_changed"][0]
    assert change["path"] == "x"
    assert change["regions"] == [[[10, 20]], [[90, 100]]]


def test_du_counts_logical_stored_and_shared_bytes(run, history):
    usage = json.loads(run("du", history, "--json").output)
    rows = {row["version"]: row for row in usage["versions"]}
    assert rows["v1"]["logical_bytes"] == 800
    assert rows["v1"]["stored_bytes"] == 800  # ten distinct chunks, uncompressed
    assert rows["v1"]["shared_bytes"] == 800  # each chunk is also used by v2 or b1
    assert rows["b1"]["shared_bytes"] == 720  # all but its edited chunk
    datasets = {row["path"]: row for row in usage["datasets"]}
    assert datasets["/x"]["versions"] == 4
    assert datasets["/x"]["stored_bytes"] == 12 * 80  # ten chunks + two edited ones
    assert datasets["/x"]["shared_bytes"] == 11 * 80  # all but b1's edited chunk
    assert datasets["/g/y"]["versions"] == 1 and datasets["/g/y"]["shared_bytes"] == 0
    assert usage["file_bytes"] == history.stat().st_size
    text = run("du", history).output
    assert "per version" in text and "/g/y" in text


def test_du_of_a_file_without_columns_loads_no_sample_store(history):
    """``h5vc du`` loads the columns' and sample stores' modules (and hdf5plugin, and
    the diff) only for a file that has a column: a tenth of the command's time."""
    code = (
        "import sys\n"
        "from h5vc.cli import main\n"
        f"code = main(['du', {str(history)!r}, '--json'])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('h5vc.', 'hdf5plugin'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    usage = json.loads(out.stdout.split("\n[")[0])
    assert {row["version"] for row in usage["versions"]} == {"v1", "v2", "v3", "b1"}
    loaded = out.stdout.strip().splitlines()[-1]
    assert "h5vc.cli._stats" in loaded
    for heavy in ("h5vc.samples", "h5vc.columns.column", "hdf5plugin", "h5vc.lifecycle.diff"):
        assert f"'{heavy}'" not in loaded


@pytest.mark.parametrize("verb", ["log", "show", "du"])
def test_main_returns_the_exit_code(history, verb, capsys):
    assert main([verb, str(history)]) == 0
    assert main([verb, str(history.with_suffix(".missing"))]) == 1
    assert "no such file" in capsys.readouterr().err


def test_values_are_unchanged_by_reading(history):
    with h5py.File(history, "r") as f:
        assert np.array_equal(
            f["_version_data/versions/v2/x"][10:20], [10, 11, 12, 13, 14, -1, 16, 17, 18, 19]
        )
