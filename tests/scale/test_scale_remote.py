"""Read-only access through file-like objects and URLs (a local HTTP server)."""

from __future__ import annotations

import hashlib
import io
import pathlib
import sys
from collections.abc import Iterator

import numpy as np
import pytest
import xarray as xr
from _http import Traffic, serve

import h5vc
import h5vc.dask as hd

N = 10_000_000


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A directory with big.h5: 4 versions of a 10M-element float64 array."""
    directory = tmp_path_factory.mktemp("site")
    with h5vc.open(directory / "big.h5", "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(N, dtype=np.float64), chunks=(1024,))
        for number in (2, 3, 4):
            with vf.stage_version(f"v{number}") as g:
                g["x"][number * 1000 : number * 1000 + 100] = -number
    return directory


@pytest.fixture
def server(site: pathlib.Path) -> Iterator[tuple[str, Traffic]]:
    with serve(site, lifetime=120) as running:
        yield running


def open_and_close(target: object, mode: str = "r") -> None:
    with h5vc.open(target, mode):
        pass


def digest(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_file_like_object_reads_every_version(versioned: pathlib.Path) -> None:
    with open(versioned, "rb") as stream, h5vc.open(stream) as vf:
        assert vf.versions == ["v1", "v2", "v3"]
        np.testing.assert_array_equal(vf["v1"]["y"][:5], np.arange(5))
    with h5vc.open(io.BytesIO(versioned.read_bytes())) as vf:
        assert vf[-1]["grid/x"][5, 3] == -2


def test_file_like_object_is_read_only(versioned: pathlib.Path) -> None:
    before = digest(versioned)
    with open(versioned, "rb") as stream:
        with pytest.raises(h5vc.ReadOnlyError, match=r"read-only.*mode 'r'"):
            open_and_close(stream, "r+")
        with (
            h5vc.open(stream) as vf,
            pytest.raises(h5vc.ReadOnlyError, match="read-only"),
            vf.stage_version("v4") as g,
        ):
            g["y"][0] = 5
    assert digest(versioned) == before


def test_url_reads_fetch_only_what_they_touch(
    site: pathlib.Path, server: tuple[str, Traffic]
) -> None:
    url, traffic = server
    with h5vc.open(f"{url}/big.h5") as vf:
        assert vf.versions == ["v1", "v2", "v3", "v4"]
        values = vf["v2"]["x"][5_000_000:5_000_100]  # an old version
        np.testing.assert_array_equal(values, np.arange(5_000_000, 5_000_100, dtype=float))
        np.testing.assert_array_equal(vf["v3"]["x"][3000:3002], [-3, -3])
    size = (site / "big.h5").stat().st_size
    assert traffic.requests >= 1
    assert traffic.body_bytes < size / 100  # metadata and the touched chunks: not 80 MB


def test_url_with_dask_and_xarray(server: tuple[str, Traffic], h5vc_engine: str) -> None:
    url, traffic = server
    x = hd.from_version(f"{url}/big.h5", "v3", "x")
    part = x[2990:3110].compute(scheduler="threads")
    expected = np.arange(2990, 3110, dtype=float)
    expected[10:110] = -3
    np.testing.assert_array_equal(part, expected)
    ds = xr.open_dataset(f"{url}/big.h5", engine=h5vc_engine, version="v4")
    assert ds["x"].dims == ("phony_dim_0",)
    np.testing.assert_array_equal(ds["x"][4000:4003].values, [-4, -4, -4])
    assert traffic.body_bytes < 2_000_000


def test_url_cannot_be_written(site: pathlib.Path, server: tuple[str, Traffic]) -> None:
    url, traffic = server
    before = digest(site / "big.h5")
    for mode in ("r+", "a", "w"):
        with pytest.raises(h5vc.ReadOnlyError, match=r"read-only.*nothing was written"):
            open_and_close(f"{url}/big.h5", mode)
    assert traffic.requests == 0  # refused before anything was fetched
    with (
        h5vc.open(f"{url}/big.h5") as vf,
        pytest.raises(h5vc.ReadOnlyError),
        vf.stage_version("v5"),
    ):
        pass
    assert digest(site / "big.h5") == before


def test_url_without_fsspec_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fsspec", None)  # import fsspec raises ImportError
    with pytest.raises(h5vc.MissingDependencyError, match="pip install fsspec"):
        open_and_close("https://example.invalid/data.h5")
    with pytest.raises(ImportError):  # also an ImportError
        hd.from_version("s3://bucket/data.h5", "v1", "x")


def test_missing_url_is_a_clear_error(server: tuple[str, Traffic]) -> None:
    url, _ = server
    with pytest.raises(FileNotFoundError), h5vc.open(f"{url}/nope.h5"):
        pass


def test_wrong_target_type() -> None:
    with pytest.raises(TypeError, match="path, a URL or a file-like object"), h5vc.open(42):
        pass


def test_url_reads_pause_garbage_collection_until_the_last_fetch_ends() -> None:
    """A collection on fsspec's I/O thread that frees an h5py object waits for h5py's
    global lock, held by the thread whose read waits for that I/O thread: reads of a
    URL stream run with collection off, and it comes back on after the last one."""
    import gc
    import threading

    from h5vc.remote import _NamedStream

    inside = threading.Event()
    release = threading.Event()
    seen: list[bool] = []

    class Slow:
        def read(self, size: int = -1) -> bytes:
            seen.append(gc.isenabled())
            if threading.current_thread().name == "first":
                inside.set()
                release.wait(10)
            return b"x" * max(size, 0)

        def readinto(self, buffer: bytearray) -> int:
            seen.append(gc.isenabled())
            return 0

    stream = _NamedStream(Slow(), "http://example.invalid/f.h5")
    assert gc.isenabled()
    first = threading.Thread(target=stream.read, args=(4,), name="first")
    first.start()
    assert inside.wait(10)
    assert stream.read(2) == b"xx"  # a second fetch ends while the first goes on
    assert not gc.isenabled()
    release.set()
    first.join(10)
    assert stream.readinto(bytearray(1)) == 0
    assert seen == [False, False, False]
    assert gc.isenabled()
