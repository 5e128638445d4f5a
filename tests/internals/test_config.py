"""h5vc.config: every tunable in one module, set from H5VC_* environment variables."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

import h5vc
from h5vc import config
from h5vc.errors import ConfigError

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "config.md"

#: Prints the codec pool's thread count and the names of the threads that ran 8 tasks.
POOL_PROBE = """
import json, threading, time
from h5vc.hdf5 import codecs

def task(_):
    time.sleep(0.01)
    return threading.current_thread().name

names = sorted(set(codecs.parallel_map(task, range(8))))
print(json.dumps([codecs.workers(), names]))
"""


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by this interpreter in a fresh process, with ``env`` added to the
    environment (and no H5VC_* variable of this one)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(config.ENV_PREFIX)}
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("threads", [1, 3])
def test_h5vc_threads_sets_the_threads_of_the_pools(threads: int) -> None:
    done = run_python(POOL_PROBE, H5VC_THREADS=str(threads))
    assert done.returncode == 0, done.stderr
    workers, names = json.loads(done.stdout)
    assert workers == threads
    if threads == 1:  # no pool at all: every task in the calling thread
        assert names == ["MainThread"]
    else:
        assert names and all(name.startswith("h5vc-codec") for name in names)
        assert len(names) <= threads


@pytest.mark.parametrize(
    ("variable", "value"),
    [("H5VC_THREADS", "lots"), ("H5VC_THREADS", "-1"), ("H5VC_PIECE_BYTES", "0")],
)
def test_a_bad_value_stops_the_import_with_a_config_error(variable: str, value: str) -> None:
    done = run_python("import h5vc", **{variable: value})
    assert done.returncode != 0
    assert "h5vc.errors.ConfigError" in done.stderr
    assert variable in done.stderr and repr(value) in done.stderr


def test_values_take_binary_suffixes_and_refuse_anything_else() -> None:
    assert config.parse("H5VC_X", "4M", 1) == 4 << 20
    assert config.parse("H5VC_X", "64KiB", 1) == 64 << 10
    assert config.parse("H5VC_X", " 1_000 ", 1) == 1000
    assert config.parse("H5VC_X", "0", 0) == 0
    for bad in ("", "1.5", "4T", "0x10", "M", "-3"):
        with pytest.raises(ConfigError, match="H5VC_X"):
            config.parse("H5VC_X", bad, 0)
    with pytest.raises(ConfigError, match="at least 1"):
        config.parse("H5VC_X", "0", 1)
    assert issubclass(ConfigError, ValueError) and h5vc.ConfigError is ConfigError


def test_an_override_reaches_the_module_that_uses_it() -> None:
    code = "from h5vc.store import planner; print(planner.PIECE_BYTES)"
    done = run_python(code, H5VC_PIECE_BYTES="4M")
    assert done.returncode == 0, done.stderr
    default = {t.name: t.default for t in config.tunables()}["PIECE_BYTES"]
    assert int(done.stdout) == 4 << 20 != default


def test_every_tunable_is_documented() -> None:
    names = [tunable.name for tunable in config.tunables()]
    assert len(names) == len(set(names)) >= 30
    docs = DOCS.read_text()
    assert config.__doc__ is not None
    for tunable in config.tunables():
        assert f"``{tunable.name}``" in config.__doc__, tunable.name
        assert f"`{tunable.variable}`" in docs, tunable.variable
        assert tunable.value == getattr(config, tunable.name)
