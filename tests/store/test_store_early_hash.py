"""Commits whose staged chunks are hashed while the version is written.

A commit of a few large chunks hashes them on background threads and makes each
virtual dataset with the slots its new chunks would take as new chunks; when a chunk
turns out to be stored already, equal to another of the commit or all fill value, the
dataset is made again. Each scenario is committed twice, with and without that, in
both layouts and both ways of opening a file: the versions, chunk stores and virtual
mappings must be the same.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest
from forked import run_in_child

import h5vc
import h5vc.hashing as hashing
import h5vc.versions.commit as commit
from h5vc import VersionedHDF5File
from h5vc.store import RawDataStore

C0 = 64  # elements per chunk of the scenarios (float64: 512 bytes)
LENGTH = 10 * C0


@pytest.fixture
def early_hashes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the chunks hashed by :func:`h5vc.hashing.hash_soon`."""
    counted: list[int] = []
    soon = hashing.hash_soon

    def counting(chunks, **kwargs):  # type: ignore[no-untyped-def]
        counted.append(len(chunks))
        return soon(chunks, **kwargs)

    monkeypatch.setattr(commit, "hash_soon", counting)
    return counted


def _early(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    """Hash early whatever the size of the chunks (``on``), or never."""
    never = 1 << 62
    monkeypatch.setattr(commit, "EARLY_HASH_MIN_BYTES", 0 if on else never)
    monkeypatch.setattr(commit, "EARLY_HASH_MIN_CHUNK_BYTES", 0 if on else never)


@contextlib.contextmanager
def _opened(path: Path, how: str, data_version: int | None) -> Iterator[VersionedHDF5File]:
    kwargs = {} if data_version is None else {"data_version": data_version}
    if how == "open":
        with h5vc.open(str(path), "a", **kwargs) as vf:
            yield vf
    else:
        with h5py.File(path, "a") as f:
            yield VersionedHDF5File(f, **kwargs)


def _base(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"x": rng.random(LENGTH), "y": rng.random(LENGTH)}


def _scenario(vf: VersionedHDF5File, base: dict[str, np.ndarray]) -> None:
    """Commits covering every way a staged chunk can end up."""
    x, y = base["x"], base["y"]
    with vf.stage_version("v0") as g:
        g.create_dataset("x", data=x, chunks=(C0,), fillvalue=0.0)
        g.create_dataset("y", data=y, chunks=(C0,), fillvalue=0.0)
    rng = np.random.default_rng(7)
    with vf.stage_version("new") as g:  # one new chunk: as predicted
        g["x"][5:15] = rng.random(10)
    with vf.stage_version("two_new") as g:  # two chunks, straddling a boundary
        g["x"][C0 - 3 : C0 + 3] = rng.random(6)
    with vf.stage_version("revert") as g:  # back to v0's content: shared slot
        g["x"][: 2 * C0] = x[: 2 * C0]
    with vf.stage_version("revert_one") as g:  # the first stored, the second new
        g["x"][: C0 + 1] = x[: C0 + 1]
        g["x"][C0 + 1 : 2 * C0] = 5.0
    with vf.stage_version("twins") as g:  # two equal new chunks: one slot
        g["x"][2 * C0 : 3 * C0] = 3.0
        g["x"][4 * C0 : 5 * C0] = 3.0
    with vf.stage_version("fill") as g:  # all fill value: no slot
        g["x"][3 * C0 : 4 * C0] = 0.0
        g["x"][6 * C0 + 1] = 9.0
    with vf.stage_version("both") as g:  # several datasets
        g["x"][7 * C0] = 1.5
        g["y"][0:C0] = 0.0
        g["y"][8 * C0 : 9 * C0] = x[8 * C0 : 9 * C0]
        g["y"][9 * C0] = 4.0
    with vf.stage_version("same_in_two") as g:  # equal chunks of two datasets
        g["x"][C0 : 2 * C0] = 8.0
        g["y"][C0 : 2 * C0] = 8.0
    with vf.stage_version("new_dataset") as g:  # a store made in the commit
        g.create_dataset("z", data=np.full(3 * C0 + 5, 2.0), chunks=(C0,))
        g["x"][LENGTH - 1] = 6.0
    with vf.stage_version("older", prev_version="new") as g:  # another branch
        g["x"][: 2 * C0] = 3.0
        g["y"][0] = 1.0


def _contents(vf: VersionedHDF5File, f: h5py.File) -> dict[str, object]:
    """Versions with their data, chunk maps and virtual mappings; stores with their
    chunks and hash-table rows."""
    from h5vc.store.vds import read_chunk_map

    out: dict[str, object] = {}
    versions = f["_version_data/versions"]
    for name in sorted(versions):
        if name == "__first_version__":
            continue
        for member in sorted(versions[name]):
            dset = versions[name][member]
            chunks = tuple(int(c) for c in np.atleast_1d(dset.attrs["chunks"]))
            chunk_map = read_chunk_map(dset, chunks)
            dcpl = dset.id.get_create_plist()
            mappings = [
                (
                    dcpl.get_virtual_vspace(i).get_select_hyper_blocklist().tolist(),
                    dcpl.get_virtual_srcspace(i).get_select_hyper_blocklist().tolist(),
                    dcpl.get_virtual_dsetname(i),
                )
                for i in range(dcpl.get_virtual_count())
            ]
            attrs = {key: repr(dset.attrs[key]) for key in dset.attrs}
            out[f"{name}/{member}"] = (
                chunk_map.slots.tolist(),
                mappings,
                attrs,
                dset[()].tolist(),
                vf[name][member][()].tolist(),
            )
    data = f["_version_data"]
    for member in sorted(data):
        if member == "versions":
            continue
        store = RawDataStore(data[member])
        rows = store.rows()
        out[f"store {member}"] = (
            store.raw_data[()].tolist(),
            rows["hash"].tolist(),
            rows["shape"].tolist(),
        )
    return out


def _committed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    data_version: int | None,
    scenario: Callable[[VersionedHDF5File, dict[str, np.ndarray]], None],
) -> tuple[dict[str, object], dict[str, object]]:
    """The contents after ``scenario``: hashed early, and hashed as the chunks are
    stored."""
    results = []
    for on in (True, False):
        _early(monkeypatch, on)
        path = tmp_path / f"{how}-{on}.h5"
        with _opened(path, how, data_version) as vf:
            scenario(vf, _base(np.random.default_rng(3)))
        with h5py.File(path, "r") as f:
            results.append(_contents(h5vc.VersionedHDF5File(f), f))
    return results[0], results[1]


@pytest.mark.parametrize("how", ["open", "h5py"])
@pytest.mark.parametrize("data_version", [None, 4], ids=["h5vc", "vhdf5"])
def test_early_hashing_commits_the_same_versions(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    early_hashes: list[int],
    how: str,
    data_version: int | None,
) -> None:
    early, serial = _committed(tmp_path, monkeypatch, how, data_version, _scenario)
    assert early_hashes  # the early path ran ...
    assert early == serial  # ... and wrote what the serial one writes
    versions = {key.split("/")[0] for key in early if not key.startswith("store")}
    assert {"new", "revert", "twins", "fill", "both", "new_dataset", "older"} <= versions


def test_one_dataset_redone_keeps_the_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, early_hashes: list[int]
) -> None:
    """A dataset whose chunk is a duplicate is made again; its sibling, predicted
    right, is kept as made; reading both gives the data staged."""

    def scenario(vf: VersionedHDF5File, base: dict[str, np.ndarray]) -> None:
        with vf.stage_version("v0") as g:
            g.create_dataset("a", data=base["x"], chunks=(C0,))
            g.create_dataset("b", data=base["y"], chunks=(C0,))
        with vf.stage_version("v1") as g:
            g["a"][0] = base["x"][0]  # unchanged content: slot 0 again
            g["b"][0] = -1.0  # new

    early, serial = _committed(tmp_path, monkeypatch, "open", None, scenario)
    assert early == serial
    assert early_hashes[-2:] == [1, 1]  # v1 (v0 hashed its ten chunks each early too)
    slots_a = early["v1/a"][0]  # type: ignore[index]
    slots_b = early["v1/b"][0]  # type: ignore[index]
    assert slots_a == list(range(10))
    assert slots_b == [10, *range(1, 10)]


def test_large_chunks_are_hashed_early_by_default(tmp_path: Path, early_hashes: list[int]) -> None:
    """With the default sizes a commit of one 1 MiB chunk hashes it early, one of
    small chunks does not; both read back what was staged."""
    path = str(tmp_path / "big.h5")
    rng = np.random.default_rng(0)
    big = rng.random(4 * 131072)
    small = rng.random(4096)
    big0 = big.copy()
    with h5vc.open(path, "w") as vf:
        with vf.stage_version("v0") as g:
            g.create_dataset("big", data=big, chunks=(131072,))
            g.create_dataset("small", data=small, chunks=(1024,))
        with vf.stage_version("v1") as g:
            g["small"][5] = 1.0
        assert early_hashes == []
        with vf.stage_version("v2") as g:
            g["big"][131070:131075] = 2.0
        assert early_hashes == [2]
        big[131070:131075] = 2.0
        small[5] = 1.0
    with h5vc.open(path, "r") as vf:
        np.testing.assert_array_equal(vf["v2"]["big"][()], big)
        np.testing.assert_array_equal(vf["v1"]["small"][()], small)
        np.testing.assert_array_equal(vf["v0"]["big"][()], big0)


@pytest.mark.parametrize("how", ["open", "h5py"])
@pytest.mark.parametrize("where", ["hash", "place", "redo"])
def test_failed_early_commit_leaves_earlier_versions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, where: str
) -> None:
    """A commit failing while its chunks are hashed, placed or its dataset made again
    adds no version, keeps every earlier one, and the next commit works."""
    _early(monkeypatch, True)
    path = tmp_path / "fail.h5"
    rng = np.random.default_rng(5)
    x = rng.random(LENGTH)
    with _opened(path, how, None) as vf:
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=x, chunks=(C0,))
        with vf.stage_version("v1") as g:
            g["x"][0] = 1.0
    x1 = x.copy()
    x1[0] = 1.0

    class Boom(Exception):
        pass

    def boom(*args: object, **kwargs: object) -> None:
        raise Boom(where)

    if where == "hash":
        monkeypatch.setattr(hashing, "chunk_hash", boom)
    elif where == "place":
        monkeypatch.setattr(RawDataStore, "place_chunks", boom)
    else:
        create = commit._VersionWriter._create

        def create_once(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            if kwargs.get("remember", True):  # made again with the real slots
                raise Boom(where)
            return create(self, *args, **kwargs)

        monkeypatch.setattr(commit._VersionWriter, "_create", create_once)
    with _opened(path, how, None) as vf:
        with pytest.raises(Boom), vf.stage_version("bad") as g:
            g["x"][0] = x[0]  # back to v0's chunk: a shared slot, the dataset made again
            g["x"][C0] = 7.0
        assert "bad" not in vf
        np.testing.assert_array_equal(vf["v0"]["x"][()], x)
        np.testing.assert_array_equal(vf["v1"]["x"][()], x1)
    monkeypatch.undo()
    _early(monkeypatch, True)
    with _opened(path, how, None) as vf:
        assert "bad" not in vf
        np.testing.assert_array_equal(vf["v1"]["x"][()], x1)
        with vf.stage_version("v2") as g:
            g["x"][C0] = 7.0
        x2 = x1.copy()
        x2[C0] = 7.0
        np.testing.assert_array_equal(vf["v2"]["x"][()], x2)
    with h5py.File(path, "r") as f:
        store = RawDataStore(f["_version_data/x"])
        assert store.n_rows == len(store.index) == 12  # v0's ten, v1's and v2's one each


def test_early_commit_keeps_the_chunks_it_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, early_hashes: list[int]
) -> None:
    """The chunks a commit wrote stay in memory for the next one, the same ones either
    way (the early path keeps the copies it hashed); the next commit reads them."""
    from h5vc.versions.state import resolve_state

    kept = {}
    for on in (True, False):
        _early(monkeypatch, on)
        rng = np.random.default_rng(2)
        x = rng.random(LENGTH)
        with h5vc.open(str(tmp_path / f"recent-{on}.h5"), "w") as vf:
            with vf.stage_version("v0") as g:
                g.create_dataset("x", data=x, chunks=(C0,))
            with vf.stage_version("v1") as g:
                g["x"][:C0] = x[:C0]  # stored already: not written
                g["x"][3 * C0 : 5 * C0] = 2.0  # two equal chunks: one written
                g["x"][6 * C0] = -1.0
            store = resolve_state(vf).stores.get("x")
            assert store is not None
            kept[on] = {slot: chunk.tolist() for slot, chunk in store.recent.items()}
            with vf.stage_version("v2") as g:  # staged over the kept chunks
                g["x"][6 * C0 + 1] = -2.0
            x[3 * C0 : 5 * C0] = 2.0
            x[6 * C0 : 6 * C0 + 2] = [-1.0, -2.0]
            np.testing.assert_array_equal(vf["v2"]["x"][()], x)
    assert kept[True] == kept[False]
    assert sorted(kept[True]) == [10, 11]
    assert early_hashes


def test_many_changed_bytes_are_hashed_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, early_hashes: list[int]
) -> None:
    """A commit changing more than EARLY_HASH_MAX_BYTES goes the serial way (hashed in
    batches as the chunks are written); one within it is hashed early."""
    monkeypatch.setattr(commit, "EARLY_HASH_MAX_BYTES", 2 << 20)
    rng = np.random.default_rng(4)
    x = rng.random(4 * 131072)
    with h5vc.open(str(tmp_path / "many.h5"), "w") as vf:
        with vf.stage_version("v0") as g:
            g.create_dataset("x", data=x, chunks=(131072,))
        with vf.stage_version("v1") as g:
            g["x"][::1000] = 1.0  # every chunk: 4 MiB
        assert early_hashes == []
        with vf.stage_version("v2") as g:
            g["x"][131072 - 1 : 131072 + 1] = 2.0  # two chunks, 2 MiB
        assert early_hashes == [2]
        x[::1000] = 1.0
        x[131072 - 1 : 131072 + 1] = 2.0
        np.testing.assert_array_equal(vf["v2"]["x"][()], x)


def test_forked_child_hashes_early() -> None:
    """A child forked after the hashing threads started has a pool of its own: its
    early hashes run (the parent's pool, idle threads counted, would start none)."""
    assert hashing.hash_soon([np.zeros(8)]).result() == [hashing.chunk_hash(np.zeros(8))]
    ones = [hashing.chunk_hash(np.ones(8))]
    assert run_in_child(lambda: hashing.hash_soon([np.ones(8)]).result() == ones, 10) == "ok"


def test_rows_appended_are_too_few_to_hash_early(tmp_path: Path, early_hashes: list[int]) -> None:
    """A commit growing a table's last chunk to full and starting the next one stages
    more than EARLY_HASH_MIN_BYTES, but only the rows appended are left to hash (the old
    chunk's end state is kept): it goes the serial way. An edit of the full chunk is
    hashed early, as before."""
    path = tmp_path / "appends.h5"
    rng = np.random.default_rng(9)
    table = rng.random((5500, 8))  # chunks of (4096, 8): 256 KiB
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v0") as g:
            g.create_dataset("t", data=table[:2000], chunks=(4096, 8))
        for name, (start, stop) in {"v1": (2000, 3000), "v2": (3000, 4500)}.items():
            with vf.stage_version(name) as g:
                g["t"].resize((stop, 8))
                g["t"][start:stop] = table[start:stop]
        assert early_hashes == []  # v2: 288,000 bytes staged, 96,000 left to hash
        assert hashing.bytes_to_hash([table[:4096], table[4096:4500]]) == 288000
        with vf.stage_version("v3") as g:
            g["t"][7] = -1.0
        assert early_hashes == [1]
        table[7] = -1.0
    with h5py.File(path, "r") as f:
        assert h5vc.verify(f).ok
    with h5vc.open(str(path), "r") as vf:
        np.testing.assert_array_equal(vf["v3"]["t"][()], table[:4500])
        np.testing.assert_array_equal(vf["v2"]["t"][4000:], table[4000:4500])
