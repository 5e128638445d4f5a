"""``h5vc verify``."""

from __future__ import annotations

import json

import h5py
import numpy as np


def test_a_sound_file_verifies(run, history):
    result = run("verify", history)
    assert result.exit_code == 0, result.output
    assert ": ok;" in result.output
    report = json.loads(run("verify", history, "--json").output)
    assert report["ok"] is True and report["problems"] == [] and report["chunks"] > 0


def test_an_altered_chunk_is_reported_and_exits_1(run, history):
    with h5py.File(history, "r+") as f:
        raw = f["_version_data/x/raw_data"]
        raw[0:10] = np.full(10, 12345, dtype=raw.dtype)  # bytes no longer match their digest
    result = run("verify", history, "--json")
    assert result.exit_code == 1
    problems = json.loads(result.output)["problems"]
    assert problems and problems[0]["kind"] == "chunk-digest"
    assert "v1" in problems[0]["versions"]
    text = run("verify", history)
    assert text.exit_code == 1 and "chunk-digest" in text.output


def test_a_missing_file_is_a_one_line_error(run, tmp_path):
    result = run("verify", tmp_path / "nope.h5")
    assert result.exit_code == 1
    assert result.stderr.strip().startswith("h5vc verify: error:")
