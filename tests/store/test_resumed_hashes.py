"""Large chunks hashed on from the chunk they were staged from.

SHA-256 reads its input front to back, so an edited copy of a large chunk is hashed
from the first step where its bytes differ from the old chunk's, on the hash states
kept when the old chunk was hashed (:func:`h5vc.hashing.chunk_hash_from`). The digest
must always be the one of hashing the whole chunk: whatever was edited, appended or
cut, whatever became of the old chunk's bytes since, and however the file was
opened. The steps are made small here so that small arrays have many of them.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import h5vc
import h5vc.hashing as hashing
from h5vc import VersionedHDF5File

STEP = 1024  # bytes per kept hash state in these tests


@pytest.fixture(autouse=True)
def small_steps(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(hashing, "RESUME_STEP", STEP)
    monkeypatch.setattr(hashing, "MIN_RESUMED_BYTES", 2 * STEP)
    hashing.forget_hash_states()
    yield
    hashing.forget_hash_states()


def sha256_of(chunk: np.ndarray) -> bytes:
    """The rule of the format, written out: bytes in C order, then ``str(shape)``."""
    hasher = hashlib.sha256(np.ascontiguousarray(chunk).tobytes())
    hasher.update(str(chunk.shape).encode("ascii"))
    return hasher.digest()


@pytest.fixture
def resumed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of whole steps each hash went on from (0: hashed from the start)."""
    return counting_resumes(monkeypatch, STEP)


@pytest.fixture
def resumed_at(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The byte each hash went on from (0: hashed from the start)."""
    return counting_resumes(monkeypatch, 1)


def counting_resumes(monkeypatch: pytest.MonkeyPatch, unit: int) -> list[int]:
    """Where each hash that keeps states went on from, in ``unit`` bytes."""
    positions: list[int] = []
    real = hashing._hash_on

    def counting(data, shape, step, states, marks, hasher=None, position=None):  # type: ignore[no-untyped-def]
        positions.append(((len(states) - 1) * step if position is None else position) // unit)
        return real(data, shape, step, states, marks, hasher, position)

    monkeypatch.setattr(hashing, "_hash_on", counting)
    return positions


def test_an_edit_is_hashed_from_the_step_it_falls_in(resumed: list[int]) -> None:
    old = np.arange(4096, dtype=np.float64)  # 32 KiB: 32 steps
    digest = hashing.chunk_hash(old)
    assert digest == sha256_of(old)
    new = old.copy()
    new[1000] = -1.0  # byte 8000: step 7
    assert hashing.chunk_hash_from(new, old, digest) == sha256_of(new)
    assert resumed == [0, 7]


def test_rows_appended_to_a_chunk_are_all_that_is_hashed(resumed: list[int]) -> None:
    old = np.arange(3000, dtype=np.int64).reshape(1000, 3)  # 24,000 bytes: 23 steps
    digest = hashing.chunk_hash(old)
    grown = np.concatenate([old, np.full((500, 3), 7, dtype=np.int64)])
    assert hashing.chunk_hash_from(grown, old, digest) == sha256_of(grown)
    assert resumed[-1] == 23


def test_old_bytes_altered_since_they_were_hashed_stop_the_resume(resumed: list[int]) -> None:
    """The old chunk's bytes as read now differ from those hashed (a chunk altered on
    disk), and the new chunk was made from them: it is hashed from before the
    alteration, never on from states of bytes it does not hold."""
    old = np.arange(4096, dtype=np.float64)
    digest = hashing.chunk_hash(old)
    altered = old.copy()
    altered[200] = 1e300  # byte 1600: step 1
    new = altered.copy()
    new[3000] = 5.0  # byte 24000: step 23
    assert hashing.chunk_hash_from(new, altered, digest) == sha256_of(new)
    assert resumed[-1] == 1


def test_old_bytes_that_cannot_be_read_mean_a_whole_hash(resumed: list[int]) -> None:
    old = np.arange(4096, dtype=np.float64)
    digest = hashing.chunk_hash(old)
    new = old.copy()
    new[-1] = 0.5

    def unreadable() -> np.ndarray:
        raise OSError("the file is gone")

    assert hashing.chunk_hash_from(new, unreadable, digest) == sha256_of(new)
    assert hashing.chunk_hash_from(new, old, b"\0" * 32) == sha256_of(new)  # no states
    assert resumed[-2:] == [0, 0]


def test_states_are_forgotten_beyond_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hashing, "KEPT_STATES", 40)
    chunks = [np.full(2048, i, dtype=np.float64) for i in range(4)]  # 17 states each
    digests = [hashing.chunk_hash(chunk) for chunk in chunks]
    assert hashing._kept(digests[0]) is None and hashing._kept(digests[1]) is None
    assert hashing._kept(digests[2]) is not None and hashing._kept(digests[3]) is not None
    assert hashing._kept_states <= 40


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_edit_gives_the_whole_chunks_digest(data: st.DataObject) -> None:
    ndim = data.draw(st.integers(1, 2))
    shape = tuple(data.draw(st.integers(1, 40)) for _ in range(ndim))
    dtype = data.draw(st.sampled_from(["f8", "i4", "u1", "c16"]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    old = (rng.random(shape) * 100).astype(dtype)
    digest = hashing.chunk_hash(old)
    new = old.copy()
    for _ in range(data.draw(st.integers(0, 3))):
        where = tuple(
            slice(a, a + data.draw(st.integers(1, 5)))
            for a in (data.draw(st.integers(0, n - 1)) for n in shape)
        )
        new[where] = data.draw(st.integers(0, 9))
    change = data.draw(st.sampled_from(["none", "grow", "shrink", "altered"]))
    if change == "grow":
        new = np.concatenate([new, new[:3]])
    elif change == "shrink" and len(new) > 1:
        new = new[: len(new) // 2]
    read_now = old.copy()
    if change == "altered":
        read_now.reshape(-1)[data.draw(st.integers(0, read_now.size - 1))] += 1
        new = read_now.copy()
    assert hashing.chunk_hash_from(new, read_now, digest) == sha256_of(new)
    assert hashing.chunk_hash(new) == sha256_of(new)


# -- commits -----------------------------------------------------------------------------


@contextlib.contextmanager
def opened(path: Path, how: str) -> Iterator[VersionedHDF5File]:
    if how == "open":
        with h5vc.open(str(path), "a") as vf:
            yield vf
    else:
        with h5py.File(path, "a") as f:
            vf = VersionedHDF5File(f)
            try:
                yield vf
            finally:
                vf.close()


def assert_digests_true(path: Path) -> None:
    """Every hash-table row holds the SHA-256 of the chunk it names: as
    :func:`h5vc.verify` recomputes them (it knows the shape each was hashed at), and
    for one-dimensional chunks written out here."""
    with h5py.File(path, "r") as f:
        report = h5vc.verify(f)
        assert report.ok, report
        if f["_version_data/x/raw_data"].ndim != 1:
            return
        store = f["_version_data/x"]
        raw, table = store["raw_data"], store["hash_table"]
        rows = table[: table.attrs["largest_index"]]
        assert len(rows)
        for row in rows:
            start, stop = row["shape"]
            assert row["hash"].tobytes() == sha256_of(raw[start:stop])


@pytest.fixture
def file_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The old chunks read from the file's descriptor (not kept from the last commit)."""
    from h5vc.store.rawdata import RawDataStore

    reads: list[int] = []
    real = RawDataStore._stored_chunk

    def counting(self, slot, shape, fd):  # type: ignore[no-untyped-def]
        found = real(self, slot, shape, fd)
        if not callable(found):
            return found

        def read() -> np.ndarray:
            reads.append(slot)
            return found()

        return read

    monkeypatch.setattr(RawDataStore, "_stored_chunk", counting)
    return reads


@pytest.mark.parametrize("how", ["open", "h5py"])
def test_edited_commits_store_true_digests_and_resume(
    tmp_path: Path, how: str, resumed: list[int], file_reads: list[int]
) -> None:
    path = tmp_path / "edits.h5"
    rng = np.random.default_rng(7)
    data = rng.random(6000)
    with opened(path, how) as vf:
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=data, chunks=(1024,), maxshape=(None,))
        resumed.clear()
        for number in range(1, 13):
            start = int(rng.integers(0, len(data) - 20))
            data[start : start + 20] = rng.random(20)
            if number % 4 == 0:  # and rows appended
                data = np.concatenate([data, rng.random(300)])
            with vf.stage_version(f"v{number}") as g:
                if len(data) > g["x"].shape[0]:
                    g["x"].resize((len(data),))
                g["x"][:] = data if number % 4 == 0 else g["x"][:]
                g["x"][start : start + 20] = data[start : start + 20]
    with opened(path, how) as vf:
        np.testing.assert_array_equal(vf["v12"]["x"][:], data)
    assert_digests_true(path)
    assert max(resumed) > 0  # some chunk was hashed on from kept states
    assert file_reads  # some old chunk was read from the file, however it was opened


@pytest.mark.parametrize("how", ["open", "h5py"])
def test_two_d_edits_and_edge_chunks(tmp_path: Path, how: str, resumed: list[int]) -> None:
    path = tmp_path / "grid.h5"
    rng = np.random.default_rng(11)
    data = rng.random((100, 70))
    with opened(path, how) as vf:
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=data, chunks=(40, 32))  # edge chunks on both axes
        resumed.clear()
        for number in range(1, 9):
            i, j = int(rng.integers(0, 95)), int(rng.integers(0, 65))
            data[i : i + 5, j : j + 5] = number
            with vf.stage_version(f"v{number}") as g:
                g["x"][i : i + 5, j : j + 5] = number
    with opened(path, how) as vf:
        np.testing.assert_array_equal(vf["v8"]["x"][:], data)
        for number in range(1, 9):
            assert vf[f"v{number}"]["x"].shape == (100, 70)
    assert_digests_true(path)
    assert max(resumed) > 0


def test_without_kept_states_commits_are_the_same(tmp_path: Path, monkeypatch) -> None:
    """The same commits with the states kept and with none make the same files'
    chunk stores: the same slots, rows and digests."""
    tables = []
    for keep in (True, False):
        monkeypatch.setattr(hashing, "MIN_RESUMED_BYTES", 2 * STEP if keep else 0)
        hashing.forget_hash_states()
        path = tmp_path / f"same-{keep}.h5"
        rng = np.random.default_rng(3)
        data = rng.random(5000)
        with h5vc.open(str(path), "w") as vf:
            with vf.stage_version("v0") as g:
                g.create_dataset("x", data=data, chunks=(1000,))
            for number in range(1, 8):
                start = int(rng.integers(0, 4990))
                with vf.stage_version(f"v{number}") as g:
                    g["x"][start : start + 10] = number
        with h5py.File(path, "r") as f:
            table = f["_version_data/x/hash_table"]
            tables.append(table[: table.attrs["largest_index"]])
    np.testing.assert_array_equal(tables[0], tables[1])


def test_a_chunk_altered_on_disk_is_not_hashed_on_from(tmp_path: Path, resumed: list[int]) -> None:
    """A stored chunk altered on disk after it was hashed, then edited in a new version:
    the new chunk (the altered bytes and the edit) gets its own true digest."""
    path = tmp_path / "altered.h5"
    data = np.arange(4096, dtype=np.float64)
    with h5vc.open(str(path), "w") as vf, vf.stage_version("v0") as g:
        g.create_dataset("x", data=data, chunks=(2048,))
    with h5py.File(path, "r+") as f:  # bit rot in the first chunk, step 0
        f["_version_data/x/raw_data"][3] = -3.0
    with h5vc.open(str(path), "a") as vf:
        resumed.clear()
        with vf.stage_version("v1") as g:
            g["x"][1500] = 9.0  # byte 12000 of the chunk: step 11
        got = vf["v1"]["x"][:2048]
    expected = data[:2048].copy()
    expected[3], expected[1500] = -3.0, 9.0
    np.testing.assert_array_equal(got, expected)
    with h5py.File(path, "r") as f:
        table = f["_version_data/x/hash_table"]
        row = table[table.attrs["largest_index"] - 1]
        start, stop = row["shape"]
        assert row["hash"].tobytes() == sha256_of(f["_version_data/x/raw_data"][start:stop])
    assert resumed == [0]  # the marks of step 0 no longer match: hashed from the start


# -- the state at the end of a chunk: rows appended ----------------------------------------


def test_rows_appended_are_hashed_from_the_end_of_the_old_bytes(resumed_at: list[int]) -> None:
    old = np.arange(3000, dtype=np.int64).reshape(1000, 3)  # 24,000 bytes
    digest = hashing.chunk_hash(old)
    grown = np.concatenate([old, np.full((500, 3), 7, dtype=np.int64)])
    assert hashing.chunk_hash_from(grown, old, digest) == sha256_of(grown)
    assert resumed_at[-1] == 24000
    again = np.concatenate([grown, np.full((9, 3), 1, dtype=np.int64)])
    assert hashing.chunk_hash_from(again, grown, sha256_of(grown)) == sha256_of(again)
    assert resumed_at[-1] == 36000
    same = grown.reshape(-1)  # the same bytes, another shape
    assert hashing.chunk_hash_from(same, grown, sha256_of(grown)) == sha256_of(same)
    assert resumed_at[-1] == 36000


@pytest.fixture
def ended_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of these tests too small to keep states every step: only their end."""
    monkeypatch.setattr(hashing, "MIN_RESUMED_BYTES", 1 << 20)
    monkeypatch.setattr(hashing, "MIN_ENDED_BYTES", 2 * STEP)


@pytest.mark.usefixtures("ended_only")
def test_a_small_chunk_hashed_from_its_base_keeps_its_end(resumed_at: list[int]) -> None:
    rng = np.random.default_rng(5)
    old = rng.random((300, 2))  # 4,800 bytes
    digest = hashing.chunk_hash(old)
    assert hashing._kept(digest) is None  # hashed alone: nothing kept
    grown = np.concatenate([old, rng.random((100, 2))])
    assert hashing.chunk_hash_from(grown, old, digest) == sha256_of(grown)
    assert resumed_at == [0]  # no state of the old chunk: hashed whole, its end kept
    kept = hashing._kept(sha256_of(grown))
    assert kept is not None and kept.step == 0 and kept.marks == [] and kept.nbytes == 6400
    more = np.concatenate([grown, rng.random((3, 2))])
    assert hashing.chunk_hash_from(more, grown, sha256_of(grown)) == sha256_of(more)
    assert resumed_at == [0, 6400]
    small = old[:10]  # below MIN_ENDED_BYTES: nothing kept
    assert hashing.chunk_hash_from(small, old[:5], sha256_of(old[:5])) == sha256_of(small)
    assert hashing._kept(sha256_of(small)) is None and resumed_at == [0, 6400]


@pytest.mark.usefixtures("ended_only")
@pytest.mark.parametrize("where", ["edit", "altered", "shorter"])
def test_a_small_chunk_not_grown_is_hashed_whole(where: str, resumed_at: list[int]) -> None:
    """Only a chunk holding all of the old bytes, as hashed, goes on from their end."""
    rng = np.random.default_rng(6)
    old = rng.random((300, 2))
    grown = np.concatenate([old, rng.random((100, 2))])
    digest = hashing.chunk_hash_from(grown, old, hashing.chunk_hash(old))
    read_now = grown.copy()
    new = np.concatenate([grown, rng.random((50, 2))])
    if where == "edit":
        new[123, 1] = -1.0
    elif where == "altered":  # the old chunk altered since it was hashed, the new made of it
        read_now[7, 0] = 99.0
        new[7, 0] = 99.0
    else:
        new = grown[:350].copy()
    assert hashing.chunk_hash_from(new, read_now, digest) == sha256_of(new)
    assert resumed_at[-1] == 0


@pytest.mark.parametrize("where", ["tail", "step"])
def test_an_altered_tail_stops_the_resume_from_the_end(where: str, resumed_at: list[int]) -> None:
    old = np.arange(1100, dtype=np.float64)  # 8,800 bytes: 8 whole steps and a tail
    digest = hashing.chunk_hash(old)
    read_now = old.copy()
    read_now[1090 if where == "tail" else 300] = -5.0  # byte 8720 (tail) or 2400 (step 2)
    new = np.concatenate([read_now, np.ones(40)])
    assert hashing.chunk_hash_from(new, read_now, digest) == sha256_of(new)
    assert resumed_at[-1] == (8 * STEP if where == "tail" else 2 * STEP)


@pytest.mark.usefixtures("ended_only")
@pytest.mark.parametrize("how", ["open", "h5py"])
def test_appended_rows_commit_true_digests(
    tmp_path: Path, how: str, resumed_at: list[int], file_reads: list[int]
) -> None:
    """A table growing by appends: each commit rewrites its short last chunk, hashed on
    from the end of the one before (kept from the last commit, or read from the file
    when it was opened anew)."""
    path = tmp_path / "appends.h5"
    rng = np.random.default_rng(8)
    table = rng.random((40, 3))
    with opened(path, how) as vf, vf.stage_version("v0") as g:
        g.create_dataset("x", data=table, chunks=(256, 3))
    positions = []
    for number in range(1, 16):
        rows = rng.random((int(rng.integers(1, 60)), 3))
        with opened(path, how) as vf:
            for again in range(2):  # twice in one opening, then the file is closed
                before = len(table)
                table = np.concatenate([table, rows])
                with vf.stage_version(f"v{number}-{again}") as g:
                    g["x"].resize((len(table), 3))
                    g["x"][before:] = rows
                positions.append((before % 256) * 24 if before % 256 else 0)
    with opened(path, how) as vf:
        np.testing.assert_array_equal(vf["v15-1"]["x"][:], table)
        np.testing.assert_array_equal(vf["v7-0"]["x"][:], table[: vf["v7-0"]["x"].shape[0]])
    assert_digests_true(path)
    # Where the old last chunk was large enough (2 KiB) and not full, the new one was
    # hashed from its end, the old bytes kept from the last commit or read from the file.
    assert sum(1 for at in resumed_at if at > 0) >= 10
    assert set(resumed_at) - {0} <= set(positions)
    assert file_reads
