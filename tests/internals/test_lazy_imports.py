"""A new process that opens a file and reads a version loads only what reading needs.

The writers (the commit writer, the staging engine, compaction, new-file options), the
positioned reader of large reads and the heavy modules of the standard library and of
third parties that only they use are imported on first use; the packages ``h5vc.store``,
``h5vc.versions`` and ``h5vc.staging`` import the names of their faces on first use too
(PEP 562), with the same names for type checkers.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import h5vc

#: h5vc modules a first open and read must not load (writers, large reads only).
WRITING_MODULES = {
    "h5vc.versions.commit",  # the commit writer
    "h5vc.staging.array",  # the staging engine ...
    "h5vc.staging.plans",
    "h5vc.staging.indexing",
    "h5vc.staging.mapper",
    "h5vc.store.fastread",  # positioned reads: reads above planner.FAST_READ_MIN_BYTES
    "h5vc.hdf5.scatter",
    "h5vc.hdf5.chunktable",
    "h5vc.store.compact",  # deletes and repacks
    "h5vc.store.copying",
    "h5vc.store.space",  # options of new files, sizes
    "h5vc.store.legacy",  # repairs of versioned-hdf5's old layouts: writable opens
    "h5vc.deflate",  # zlib-ng: deflated chunks only
    "h5vc.chunking",  # chunk shapes of new datasets
    "h5vc.blockwrite",
    "h5vc.filecache",
    "h5vc.readers",
}
#: Packages none of whose modules a first open and read loads.
WRITING_PACKAGES = ("h5vc.cli", "h5vc.columns", "h5vc.samples", "h5vc.xarray", "h5vc.dask")
#: Modules of the standard library and of third parties that reading does not use;
#: checked among those the process loads beyond what numpy and h5py load themselves.
HEAVY_MODULES = {
    "ndindex",  # the staging engine's indexing
    "hashlib",  # chunk hashes (OpenSSL's library)
    "concurrent.futures",  # hashing and codec thread pools
    "tempfile",
    "json",  # the log column of the time index
    "ctypes.util",  # the positioned reader's preadv
    "hdf5plugin",  # only for a filter HDF5 lacks
    "zlib_ng",
    "numcodecs",
    "fsspec",
    "xarray",
    "dask",
    "numpy.ma",  # np.unique's first call imports it: 20-40 ms
}

READ = """\
import json, sys
import h5py, numpy
before = set(sys.modules)
import h5vc
if {how!r} == "open":
    with h5vc.open({path!r}) as vf:
        got = vf["v2"]["x"][:100]
else:
    with h5py.File({path!r}, "r") as f:
        got = h5vc.VersionedHDF5File(f)["v2"]["x"][:100]
print(json.dumps({{"got": got.tolist(), "loaded": sorted(set(sys.modules) - before)}}))
"""


def loaded_by_first_read(path: Path, how: str) -> set[str]:
    """Modules a new process loads to import h5vc, open ``path`` and read from it,
    beyond those numpy and h5py load; the read is checked."""
    code = READ.format(path=str(path), how=how)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    expected = np.arange(100, dtype="f8")
    expected[10:20] = -1
    np.testing.assert_array_equal(report["got"], expected)
    return set(report["loaded"])


@pytest.fixture(scope="module")
def versioned_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lazy") / "data.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1") as group:
            group.create_dataset("x", data=np.arange(10_000, dtype="f8"), chunks=(1024,))
        with vf.stage_version("v2") as group:
            group["x"][10:20] = -1
    return path


@pytest.mark.parametrize("how", ["open", "h5py_file"])
def test_a_first_read_loads_no_writer(versioned_path: Path, how: str) -> None:
    """On both ways of opening: ``h5vc.open(path)`` and ``h5py.File`` +
    ``VersionedHDF5File``."""
    loaded = loaded_by_first_read(versioned_path, how)
    assert {"h5vc.api", "h5vc.store.reading", "h5vc.versions.state"} <= loaded  # it ran
    writers = sorted(WRITING_MODULES & loaded)
    writers += sorted(m for m in loaded if m.startswith(WRITING_PACKAGES))
    assert not writers, f"a first read loaded {writers}"
    lifecycle = sorted(m for m in loaded if m.startswith("h5vc.lifecycle."))
    assert lifecycle == ["h5vc.lifecycle.branching"]  # the name resolver only
    heavy = sorted(HEAVY_MODULES & loaded)
    assert not heavy, f"a first read loaded {heavy}"


def test_writing_loads_the_writers(tmp_path: Path) -> None:
    """The modules left out of a read are loaded when a write needs them."""
    code = (
        "import sys, h5vc\n"
        f"with h5vc.open({str(tmp_path / 'new.h5')!r}, 'w') as vf:\n"
        "    with vf.stage_version('v1') as group:\n"
        "        group.create_dataset('x', data=list(range(10)))\n"
        "print(' '.join(sorted(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = set(result.stdout.split())
    assert {"h5vc.versions.commit", "h5vc.staging.array", "h5vc.chunking", "hashlib"} <= loaded
    assert "h5vc.store.space" in loaded  # a new file's free-space options


#: The packages whose names load on first use.
LAZY_PACKAGES = ["h5vc.store", "h5vc.versions", "h5vc.staging"]


def type_checking_names(package: str) -> dict[str, str]:
    """``{name: module}`` of the ``if TYPE_CHECKING:`` re-exports of a package."""
    module = importlib.import_module(package)
    tree = ast.parse(Path(str(module.__file__)).read_text())
    seen: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom)
                for alias in statement.names:
                    assert alias.asname == alias.name, f"{alias.name} is not re-exported"
                    seen[alias.name] = str(statement.module)
    return seen


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_type_checkers_see_every_lazy_name(package: str) -> None:
    """The ``TYPE_CHECKING`` imports name exactly the names of the table, from the same
    modules (a submodule of the package is imported from the package)."""
    module = importlib.import_module(package)
    table = dict(module._NAMES)
    table.update(dict.fromkeys(getattr(module, "_SUBMODULES", ()), package))
    assert type_checking_names(package) == table
    assert module.__all__ == sorted(table)


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_lazy_name_resolves_to_its_definition(package: str) -> None:
    module = importlib.import_module(package)
    submodules = getattr(module, "_SUBMODULES", frozenset())
    for name in module.__all__:
        value = getattr(module, name)
        if name in submodules:
            assert value is importlib.import_module(f"{package}.{name}")
        else:
            assert value is getattr(importlib.import_module(module._NAMES[name]), name)
    assert set(module.__all__) <= set(dir(module))


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_a_missing_lazy_name_is_an_attribute_error(package: str) -> None:
    module = importlib.import_module(package)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'missing'"):
        module.missing  # noqa: B018
    with pytest.raises(ImportError, match="cannot import name 'missing'"):
        exec(f"from {package} import missing")


def test_a_first_read_of_an_edited_version_loads_no_masked_arrays(tmp_path: Path) -> None:
    """A version of merged runs (mappings of several blocks, paired up from the file's
    bytes) is read without numpy.ma, which ``np.unique``'s first call imports."""
    path = tmp_path / "edited.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1") as group:
            group.create_dataset("x", data=np.arange(10_000, dtype="f8"), chunks=(1024,))
        for number, chunk in enumerate((2, 4, 6, 8), 2):
            with vf.stage_version(f"v{number}") as group:
                group["x"][chunk * 1024 + 5] = -number
    code = (
        "import json, sys\n"
        "import h5py, numpy\n"
        "import h5vc\n"
        f"with h5vc.open({str(path)!r}) as vf:\n"
        "    got = vf['v5']['x'][2000:10000]\n"
        "print(json.dumps({'got': float(got.sum()), 'ma': 'numpy.ma' in sys.modules}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    expected = np.arange(10_000, dtype="f8")
    for number, chunk in enumerate((2, 4, 6, 8), 2):
        expected[chunk * 1024 + 5] = -number
    assert report["got"] == float(expected[2000:10000].sum())
    assert not report["ma"]


@pytest.mark.parametrize("how", ["open", "h5py_file"])
def test_a_first_large_read_runs_no_subprocess(tmp_path: Path, how: str) -> None:
    """The positioned reader of a large read (memory-mapped from a file open read-only,
    2-D chunks) finds the C library without ``ctypes.util`` (which runs ``ldconfig`` or
    a compiler as a subprocess, and imports :mod:`shutil`)."""
    path = tmp_path / "large.h5"
    data = np.arange(1000 * 600, dtype="f8").reshape(1000, 600)
    with h5vc.open(str(path), "w") as vf, vf.stage_version("v1") as group:
        group.create_dataset("x", data=data, chunks=(100, 100))
    opening = (
        f"with h5vc.open({str(path)!r}) as vf:\n    got = vf['v1']['x'][:]\n"
        if how == "open"
        else f"with h5py.File({str(path)!r}, 'r') as f:\n"
        "    got = h5vc.VersionedHDF5File(f)['v1']['x'][:]\n"
    )
    code = (
        "import json, subprocess, sys\n"
        "import h5py, numpy\n"
        "ran = []\n"
        "subprocess.Popen.__init__ = lambda self, *a, **k: ran.append(a)\n"
        "import h5vc\n"
        f"{opening}"
        "print(json.dumps({'sum': float(got.sum()), 'ran': [str(a) for a in ran],\n"
        "    'fast': 'h5vc.store.fastread' in sys.modules,\n"
        "    'loaded': sorted(m for m in ('ctypes.util', 'shutil') if m in sys.modules)}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["sum"] == float(data.sum())
    assert report["fast"]  # the positioned reader read it
    assert report["ran"] == []
    assert "ctypes.util" not in report["loaded"]
