"""Reading a file read-only, every way there is, while another process writes it:
each read gives the data of the version it names or a clear error; readers never
starve the writer; a Reader leaves other opens of the file alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import h5py
import numpy as np
import pytest
import readerharness

import h5vc
from h5vc.durable.files import ReadLock
from h5vc.errors import VersionNotFoundError


def test_readers_of_every_kind_during_commits_and_deletes(tmp_path: Path) -> None:
    results, (commits, _) = readerharness.run(tmp_path, commits=40, reads=40, deletes=4, per_kind=1)
    assert commits == 40
    for kind, counts in results.items():
        for found in counts:
            bad = {key: found[key] for key in ("wrong", "torn", "corrupt", "errors")}
            assert bad == dict.fromkeys(bad, 0), (kind, found)
            assert found["reads"] >= 40
            assert found["seen"] > 3, f"{kind} readers follow the writer's new versions"


def test_readers_without_the_lock_between_commits_and_deletes(tmp_path: Path) -> None:
    """The writer pauses after each commit, long enough for the file's times to
    settle: the kept readers then read without the lock until a commit meets them."""
    results, (commits, _) = readerharness.run(
        tmp_path,
        commits=16,
        reads=30,
        deletes=4,
        per_kind=1,
        kinds=("open-persistent", "h5py-persistent"),
        gap=0.07,
    )
    assert commits == 16
    for kind, counts in results.items():
        for found in counts:
            bad = {key: found[key] for key in ("wrong", "torn", "corrupt", "errors")}
            assert bad == dict.fromkeys(bad, 0), (kind, found)
            assert found["seen"] > 3, f"{kind} readers follow the writer's new versions"


def _commits(path: Path, first: int, last: int) -> None:
    """Versions v<first>..v<last> of ``x`` (every element k), committed by h5vc."""
    with h5vc.open(path, "a") as vf:
        for k in range(first, last + 1):
            with vf.stage_version(f"v{k}") as g:
                if "x" in g:
                    g["x"][:] = k
                else:
                    g.create_dataset("x", data=np.full(5000, k), chunks=(100,))
                g["x"].attrs["k"] = k


def _in_another_process(code: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("opener", ["h5vc.open", "h5py.File"])
def test_a_kept_handle_follows_another_process_s_deletes_and_commits(
    tmp_path: Path, opener: str
) -> None:
    """A read-only handle kept open while another process deleted version v5 and
    committed more (reusing the freed space) read other versions' data for v5,
    zeros, or damage; now each read sees the file as committed then."""
    path = tmp_path / "data.h5"
    _commits(path, 1, 6)
    if opener == "h5vc.open":
        context = h5vc.open(path)
        vf = context.__enter__()
        file = None
    else:
        file = h5py.File(path, "r")
        vf = h5vc.VersionedHDF5File(file)
    try:
        kept = vf["v5"]["x"]
        assert kept[0] == 5
        _in_another_process(
            f"""
            import numpy as np, h5vc
            with h5vc.open({str(path)!r}, "a") as vf:
                h5vc.delete_versions(vf, ["v2", "v3", "v4", "v5"])
                for k in range(7, 12):
                    with vf.stage_version(f"v{{k}}") as g:
                        g["x"][:] = k
                        g["x"].attrs["k"] = k
            """
        )
        with pytest.raises(VersionNotFoundError, match="'v5' was deleted"):
            kept[:]
        with pytest.raises(VersionNotFoundError, match="'v5' was deleted"):
            kept.attrs["k"]
        assert vf.versions == ["v1", "v6", "v7", "v8", "v9", "v10", "v11"]
        assert vf.current_version == "v11"
        for k in (1, 6, 9, 11):
            data = vf[f"v{k}"]["x"]
            assert np.array_equal(data[:], np.full(5000, k)), k
            assert data.attrs["k"] == k
        assert "v5" not in vf
    finally:
        if file is None:
            context.__exit__(None, None, None)
        else:
            vf.close()
            file.close()


def test_a_waiting_writer_goes_before_readers_that_come_after_it(tmp_path: Path) -> None:
    """Readers one after the other, each starting while the one before still reads,
    kept a writer waiting for as long as they came; now a reader that comes while the
    writer waits queues behind it."""
    path = tmp_path / "data.h5"
    _commits(path, 1, 1)
    first = ReadLock(path)
    second = ReadLock(path)
    events: list[str] = []

    def write() -> None:
        _commits(path, 2, 2)
        events.append("committed")

    def read_second() -> None:
        with second, h5vc.open(path) as vf:
            events.append(f"second reads {vf.versions}")

    try:
        first.__enter__()
        writer = threading.Thread(target=write)
        writer.start()
        while not first.writer_waiting():  # the writer waits for the first reader
            assert writer.is_alive(), "the writer did not wait for the reader"
            writer.join(0.01)
        reader = threading.Thread(target=read_second)
        reader.start()
        reader.join(0.5)
        assert events == [], "the second reader went before the waiting writer"
        first.__exit__(None, None, None)
        writer.join(60)
        reader.join(60)
        assert "second reads ['v1', 'v2']" in events, events
    finally:
        first.close()
        second.close()
    with h5vc.open(path) as vf:
        assert vf.versions == ["v1", "v2"]


def test_a_reader_leaves_other_opens_of_the_file_in_its_process_alone(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    _commits(path, 1, 2)
    with h5vc.Reader(path) as reader:
        with reader.batch() as vf:
            assert vf["v2"]["x"][3] == 2
        with h5py.File(path, "r") as file:
            assert "_version_data" in file
        with h5vc.open(path) as vf:
            assert vf["v1"]["x"][0] == 1
        _commits(path, 3, 3)
        h5vc.repack(path, tmp_path / "copy.h5")
        with h5vc.open(tmp_path / "copy.h5") as vf:
            assert vf.versions == ["v1", "v2", "v3"]
        with reader.batch() as vf:
            assert vf.versions == ["v1", "v2", "v3"]
            assert np.array_equal(vf["v3"]["x"][:], np.full(5000, 3))


def test_a_write_inside_a_batch_of_the_same_thread_goes_ahead(tmp_path: Path) -> None:
    """A batch holds writers off until it ends, but a commit from inside it (same
    thread) waited for itself for ever; now the batch steps aside for it and reads
    the file anew after it."""
    path = tmp_path / "data.h5"
    _commits(path, 1, 1)
    with h5vc.Reader(path) as reader, h5vc.open(path, "a") as writer, reader.batch() as vf:
        kept = vf["v1"]["x"]
        assert kept[0] == 1
        with writer.stage_version("v2") as g:
            g["x"][0] = -1
        h5vc.delete_versions(writer, ["v1"])
        assert vf.versions == ["v2"]
        assert vf["v2"]["x"][0] == -1
        with pytest.raises(VersionNotFoundError, match="'v1' was deleted"):
            kept[0]
