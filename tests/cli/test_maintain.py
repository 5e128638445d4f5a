"""``h5vc delete``, ``repack``, ``export`` and ``demo``."""

from __future__ import annotations

import json

import h5py
import numpy as np
from cli_helpers import file_digest

import h5vc


def test_delete_removes_versions_and_keeps_the_rest_readable(run, history):
    result = run("delete", history, "v2", "b1")
    assert result.exit_code == 0, result.output
    assert "deleted 2 version(s)" in result.output
    with h5vc.open(str(history)) as vf:
        assert sorted(vf.versions) == ["v1", "v3"]
        assert vf["v3"]["x"][15] == -1
        assert vf.version_info("v3").prev_version == "v1"


def test_delete_of_an_unknown_version_changes_nothing(run, history):
    before = file_digest(history)
    result = run("delete", history, "v2", "nope")
    assert result.exit_code == 1
    assert result.stderr.strip() == "h5vc delete: error: no such version(s): nope; nothing deleted"
    assert file_digest(history) == before


def test_delete_refuses_a_branch_head_unless_forced(run, history):
    run("branch", "create", history, "side", "b1")
    before = file_digest(history)
    result = run("delete", history, "b1")
    assert result.exit_code == 1 and "branch 'side'" in result.stderr
    assert "pass --force" in result.stderr and "force=True" not in result.stderr
    assert file_digest(history) == before
    assert run("delete", history, "b1", "--force").exit_code == 0
    with h5vc.open(str(history)) as vf:
        assert vf.branches == {"side": "v1"}


def test_repack_writes_a_compact_copy(run, history, tmp_path):
    run("delete", history, "v2")
    target = tmp_path / "packed.h5"
    result = run("repack", history, target)
    assert result.exit_code == 0
    assert f"-> {target}" in result.output
    with h5vc.open(str(target)) as vf:
        assert sorted(vf.versions) == ["b1", "v1", "v3"]
        assert vf["b1"]["x"][95] == 7
    assert target.stat().st_size <= history.stat().st_size
    again = run("repack", history, target)
    assert again.exit_code == 1 and "already exists" in again.stderr


def test_export_writes_plain_datasets(run, history, tmp_path):
    out = tmp_path / "v3.h5"
    result = run("export", history, "v3", out)
    assert result.exit_code == 0, result.stderr
    with h5py.File(out, "r") as f:
        x, y = f["x"], f["g/y"]
        assert not x.is_virtual and not y.is_virtual
        expected = np.arange(100)
        expected[15] = -1
        assert np.array_equal(x[()], expected)
        assert np.array_equal(y[()], np.ones((4, 6)))
        assert x.chunks == (10,) and y.chunks == (2, 3)
        assert dict(x.attrs) == {"unit": "m"}
        assert set(f) == {"x", "g"} and not dict(f.attrs)


def test_export_refuses_an_existing_target_and_an_unknown_version(run, history, tmp_path):
    out = tmp_path / "out.h5"
    out.write_bytes(b"keep")
    result = run("export", history, "v3", out)
    assert result.exit_code == 1 and "already exists" in result.stderr
    assert out.read_bytes() == b"keep"
    other = tmp_path / "other.h5"
    result = run("export", history, "v9", other)
    assert result.exit_code == 1 and "v9" in result.stderr
    assert not other.exists()


def test_export_of_a_large_dataset_goes_in_slabs(run, tmp_path, monkeypatch):
    from h5vc.cli import _maintain

    monkeypatch.setattr(_maintain, "EXPORT_SLAB_BYTES", 4096)
    path = tmp_path / "big.h5"
    data = np.arange(50_000, dtype=np.float32).reshape(500, 100)
    with h5vc.open(str(path), "w") as vf, vf.stage_version("v1") as g:
        g.create_dataset("a", data=data, chunks=(7, 50), compression="gzip")
    out = tmp_path / "out.h5"
    assert run("export", path, "v1", out).exit_code == 0
    with h5py.File(out, "r") as f:
        assert np.array_equal(f["a"][()], data)
        assert f["a"].compression == "gzip"


def test_demo_writes_four_versions_and_prints_the_log(run, tmp_path):
    result = run("demo", tmp_path / "demo")
    assert result.exit_code == 0
    assert "4 versions, current 'v4'" in result.output
    assert "version v1" in result.output and "+ group /meta" in result.output
    entries = json.loads(run("log", tmp_path / "demo" / "demo.h5", "--json").output)
    assert [e["version"] for e in entries] == ["v4", "v3", "v2", "v1"]
