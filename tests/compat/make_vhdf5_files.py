"""Reference files written by versioned-hdf5, with their expected contents.

``make_files(directory)`` writes a fixed set of small versioned files through the
public API of versioned-hdf5 (2.6.0) and returns what every version of every file is
expected to contain. The interoperability tests open these files with h5vc, compare
the contents, commit new versions on top, and hand the result back to versioned-hdf5.

Shape of the returned mapping::

    {
        filename: {
            "@file": {"current_version": str, "versions": [names, oldest first]},
            version_name: {
                dataset_path: numpy array,          # e.g. "x", "grp/sub/y"
                ...,
                "@attrs": {object_path: {attr: value}},   # "" is the version group
                "@meta": {"prev_version": str, "timestamp": str | None},
            },
            ...
        },
        ...
    }

Keys starting with ``@`` are never dataset paths; use :func:`versions_of` and
:func:`datasets_of` to skip them. ``timestamp`` is the exact attribute string
("%Y-%m-%d %H:%M:%S.%f+0000") when the version was committed with an explicit
timestamp, else None (wall clock). Variable-length string datasets are described
as object arrays of ``str``; h5py hands them back as ``bytes`` unless read through
``.asstr()``. ``@attrs`` lists user attributes only (versioned-hdf5's own
``chunks``/``raw_data`` dataset attributes and ``prev_version``/``committed``/
``timestamp`` group attributes are left out).

Everything is deterministic; the whole set is written in well under a second.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import os
from typing import Any

import numpy as np

try:  # pragma: no cover - depends on the test environment
    import h5py
    import versioned_hdf5
    from versioned_hdf5 import VersionedHDF5File, delete_versions, modify_metadata

    HAVE_VERSIONED_HDF5 = True
except ImportError:  # pragma: no cover
    HAVE_VERSIONED_HDF5 = False

UTC = datetime.timezone.utc
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f%z"


def _ts(day: int, second: int = 0, micro: int = 0) -> datetime.datetime:
    return datetime.datetime(2024, 3, day, 12, 0, second, micro, tzinfo=UTC)


def versions_of(file_expected: dict) -> list[str]:
    """Version names of one file's expectation, oldest first."""
    return list(file_expected["@file"]["versions"])


def datasets_of(version_expected: dict) -> dict[str, np.ndarray]:
    """Only the dataset entries of one version's expectation."""
    return {k: v for k, v in version_expected.items() if not k.startswith("@")}


class _Recorder:
    """Tracks the expected state of one file while it is being written."""

    def __init__(self) -> None:
        self.versions: dict[str, dict] = {}
        self.order: list[str] = []
        self.current = "__first_version__"

    def state(self, name: str) -> dict:
        if name == "__first_version__":
            return {"@attrs": {"": {}}}
        return copy.deepcopy(self.versions[name])

    def record(
        self,
        name: str,
        content: dict,
        prev: str,
        timestamp: datetime.datetime | None,
        make_current: bool = True,
    ) -> None:
        content = copy.deepcopy(content)
        content.pop("@meta", None)
        content.setdefault("@attrs", {"": {}})
        content["@meta"] = {
            "prev_version": prev,
            "timestamp": None if timestamp is None else timestamp.strftime(TIMESTAMP_FORMAT),
        }
        self.versions[name] = content
        self.order.append(name)
        if make_current:
            self.current = name

    def result(self) -> dict:
        out: dict[str, Any] = {
            "@file": {"current_version": self.current, "versions": list(self.order)}
        }
        out.update(self.versions)
        return out


def _commit(vf, rec: _Recorder, name, edit, *, prev=None, timestamp=None, make_current=True):
    """Stage version ``name``: ``edit(group, state)`` mutates both the staged group and
    the expected state dict in the same way."""
    prev_name = rec.current if prev is None else (prev or "__first_version__")
    state = rec.state(prev_name)
    # Attributes of the version group itself are not carried over to the next
    # version (those of datasets and subgroups are).
    state.setdefault("@attrs", {})[""] = {}
    kwargs = {"make_current": make_current}
    if prev is not None:
        kwargs["prev_version"] = prev
    if timestamp is not None:
        kwargs["timestamp"] = timestamp
    with vf.stage_version(name, **kwargs) as g:
        edit(g, state)
    rec.record(name, state, prev_name, timestamp, make_current)


# --------------------------------------------------------------------------- files


def _basic(path: str) -> dict:
    """1-D float64, chunks (4,), fillvalue -1.5, grow/shrink, dataset and version
    attrs, a chunk that becomes all-fill (unmapped), explicit timestamps."""
    rec = _Recorder()
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)

        def v1(g, s):
            x = np.arange(10, dtype="f8")
            g.create_dataset("x", data=x, chunks=(4,), fillvalue=-1.5)
            g["x"].attrs["units"] = "m"
            g["x"].attrs["scale"] = 2.5
            g.attrs["author"] = "alice"
            g.attrs["run"] = np.int64(1)
            s["x"] = x
            s["@attrs"] = {"": {"author": "alice", "run": 1}, "x": {"units": "m", "scale": 2.5}}

        def v2(g, s):  # grow: new elements read as the fill value
            g["x"].resize((14,))
            g["x"][11] = 42.0
            x = np.full(14, -1.5)
            x[:10] = s["x"]
            x[11] = 42.0
            s["x"] = x
            g.attrs["run"] = np.int64(2)
            s["@attrs"][""] = {"run": 2}

        def v3(g, s):  # shrink, and make chunk 0 entirely fill
            g["x"].resize((6,))
            g["x"][0:4] = -1.5
            x = s["x"][:6].copy()
            x[0:4] = -1.5
            s["x"] = x
            g["x"].attrs["units"] = "cm"
            s["@attrs"]["x"]["units"] = "cm"

        def v4(g, s):  # regrow past an old edge: must not resurrect old values
            g["x"].resize((9,))
            x = np.full(9, -1.5)
            x[:6] = s["x"]
            s["x"] = x

        _commit(vf, rec, "v1", v1, timestamp=_ts(1, 0, 123456))
        _commit(vf, rec, "v2", v2, timestamp=_ts(2))
        _commit(vf, rec, "v3", v3, timestamp=_ts(3, 59, 999999))
        _commit(vf, rec, "v4", v4, timestamp=_ts(4, 1, 1))
    return rec.result()


def _multidim(path: str) -> dict:
    """2-D int32 with edge chunks on both axes, 3-D float32, bool; grow and shrink
    along several axes."""
    rec = _Recorder()
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)

        def v1(g, s):
            m = np.arange(35, dtype="i4").reshape(7, 5)
            t = np.arange(60, dtype="f4").reshape(5, 4, 3) / 4
            b = np.array([i % 3 == 0 for i in range(11)])
            g.create_dataset("m", data=m, chunks=(3, 2), fillvalue=-7)
            g.create_dataset("t", data=t, chunks=(2, 2, 2))
            g.create_dataset("b", data=b, chunks=(4,))
            s.update(m=m, t=t, b=b)

        def v2(g, s):
            g["m"][6, 4] = 1000
            g["m"][0:3, 0:2] = -7  # a whole chunk equal to the fill value
            g["t"][4, 3, 2] = -1.0
            g["b"][10] = True
            m, t, b = s["m"].copy(), s["t"].copy(), s["b"].copy()
            m[6, 4] = 1000
            m[0:3, 0:2] = -7
            t[4, 3, 2] = -1.0
            b[10] = True
            s.update(m=m, t=t, b=b)

        def v3(g, s):
            g["m"].resize((9, 3))  # grow axis 0, shrink axis 1
            g["t"].resize((3, 5, 3))
            g["b"].resize((3,))
            m = np.full((9, 3), -7, dtype="i4")
            m[:7] = s["m"][:, :3]
            t = np.zeros((3, 5, 3), dtype="f4")
            t[:, :4] = s["t"][:3]
            s.update(m=m, t=t, b=s["b"][:3].copy())

        _commit(vf, rec, "v1", v1, timestamp=_ts(5))
        _commit(vf, rec, "v2", v2, timestamp=_ts(6))
        _commit(vf, rec, "v3", v3, timestamp=_ts(7))
    return rec.result()


def _strings(path: str) -> dict:
    """Fixed-length bytes (S5) and variable-length UTF-8 str."""
    rec = _Recorder()
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)

        def v1(g, s):
            fb = np.array([b"a", b"bb", b"ccccc", b"", b"dd", b"e"], dtype="S5")
            vs = np.array(["alpha", "", "\u00e9t\u00e9", "a much longer string", "x"], dtype=object)
            g.create_dataset("fixed", data=fb, chunks=(4,))
            g.create_dataset("vlen", data=vs, dtype=h5py.string_dtype(), chunks=(2,))
            s.update(fixed=fb, vlen=vs)

        def v2(g, s):
            g["fixed"][1] = b"zz"
            g["vlen"][2] = "\u2603 snow"
            g["vlen"].resize((7,))
            g["vlen"][6] = "tail"
            fb = s["fixed"].copy()
            fb[1] = b"zz"
            vs = np.empty(7, dtype=object)
            vs[:] = ""
            vs[:5] = s["vlen"]
            vs[2] = "\u2603 snow"
            vs[6] = "tail"
            s.update(fixed=fb, vlen=vs)

        _commit(vf, rec, "v1", v1, timestamp=_ts(8))
        _commit(vf, rec, "v2", v2, timestamp=_ts(9))
    return rec.result()


def _groups(path: str) -> dict:
    """Nested groups, group attrs, gzip, zero-extent and all-fill datasets, a
    dataset deleted in a later version and another one recreated."""
    rec = _Recorder()
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)

        def v1(g, s):
            c = np.arange(12, dtype="i8")
            z = np.linspace(0, 1, 9)
            g.create_dataset("a/b/c", data=c, chunks=(5,))
            g.create_dataset("a/d", data=np.array([1, 2, 3], dtype="u2"), chunks=(2,))
            g.create_dataset("gz", data=z, chunks=(3,), compression="gzip", compression_opts=4)
            g.create_dataset("empty", data=np.zeros((0,), dtype="f8"), chunks=(4,))
            g.create_dataset("empty2d", data=np.zeros((0, 3), dtype="i4"), chunks=(2, 3))
            g.create_dataset("allfill", data=np.full(8, 3, dtype="i2"), chunks=(4,), fillvalue=3)
            g.create_dataset("gone", data=np.arange(5, dtype="f8"), chunks=(2,))
            g["a"].attrs["level"] = "top"
            g["a/b"].attrs["level"] = np.int64(2)
            s.update(
                {
                    "a/b/c": c,
                    "a/d": np.array([1, 2, 3], dtype="u2"),
                    "gz": z,
                    "empty": np.zeros((0,), dtype="f8"),
                    "empty2d": np.zeros((0, 3), dtype="i4"),
                    "allfill": np.full(8, 3, dtype="i2"),
                    "gone": np.arange(5, dtype="f8"),
                }
            )
            s["@attrs"] = {"": {}, "a": {"level": "top"}, "a/b": {"level": 2}}

        def v2(g, s):
            del g["gone"]
            del s["gone"]
            g["a/b/c"][7] = -1
            c = s["a/b/c"].copy()
            c[7] = -1
            s["a/b/c"] = c
            g["empty"].resize((3,))
            g["empty"][:] = [1.0, 2.0, 3.0]
            s["empty"] = np.array([1.0, 2.0, 3.0])
            g["a"].attrs["level"] = "changed"
            s["@attrs"]["a"]["level"] = "changed"

        def v3(g, s):
            # recreate a previously deleted dataset with different contents
            g.create_dataset("gone", data=np.array([9.0, 8.0, 7.0]), chunks=(2,))
            s["gone"] = np.array([9.0, 8.0, 7.0])
            g["empty"].resize((0,))
            s["empty"] = np.zeros((0,), dtype="f8")

        _commit(vf, rec, "v1", v1, timestamp=_ts(10))
        _commit(vf, rec, "v2", v2, timestamp=_ts(11))
        _commit(vf, rec, "v3", v3, timestamp=_ts(12))
    return rec.result()


def _history(path: str) -> dict:
    """Many versions with explicit timestamps; a branch off an old version committed
    with make_current=False, and a branch from the empty root."""
    rec = _Recorder()
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)

        def first(g, s):
            x = np.zeros(40, dtype="i8")
            g.create_dataset("x", data=x, chunks=(8,))
            s["x"] = x

        _commit(vf, rec, "r00", first, timestamp=_ts(13))
        for i in range(1, 25):

            def step(g, s, i=i):
                g["x"][i] = i
                x = s["x"].copy()
                x[i] = i
                s["x"] = x

            _commit(vf, rec, f"r{i:02d}", step, timestamp=_ts(13, i, i))

        def branch(g, s):
            g["x"][39] = -39
            x = s["x"].copy()
            x[39] = -39
            s["x"] = x

        _commit(vf, rec, "branch", branch, prev="r05", timestamp=_ts(14), make_current=False)

        def orphan(g, s):
            y = np.arange(3, dtype="f4")
            g.create_dataset("y", data=y, chunks=(2,))
            s["y"] = y

        _commit(vf, rec, "orphan", orphan, prev="", timestamp=_ts(15), make_current=False)
    return rec.result()


def _deleted(path: str) -> dict:
    """delete_versions on a middle and on the current version."""
    rec = _Recorder()
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)

        def v(i):
            def edit(g, s):
                if i == 0:
                    x = np.arange(10, dtype="f8")
                    g.create_dataset("x", data=x, chunks=(4,))
                    g.create_dataset("only0", data=np.arange(3), chunks=(2,))
                    s["x"] = x
                    s["only0"] = np.arange(3)
                else:
                    g["x"][i] = 100 + i
                    x = s["x"].copy()
                    x[i] = 100 + i
                    s["x"] = x
                    if "only0" in g:
                        del g["only0"]
                        del s["only0"]

            return edit

        for i in range(4):
            _commit(vf, rec, f"v{i}", v(i), timestamp=_ts(16, i))
    with h5py.File(path, "r+") as f:
        delete_versions(f, ["v1", "v3"])
    out = rec.result()
    del out["v1"], out["v3"]
    out["v2"]["@meta"]["prev_version"] = "v0"
    out["@file"] = {"current_version": "v2", "versions": ["v0", "v2"]}
    return out


def _modified(path: str) -> dict:
    """modify_metadata: new chunks and compression (fill value unchanged)."""
    rec = _Recorder()
    with h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)

        def v1(g, s):
            x = np.arange(1, 11, dtype="f8")
            g.create_dataset("x", data=x, chunks=(4,), fillvalue=0.5)
            s["x"] = x

        def v2(g, s):
            g["x"][9] = 99.0
            x = s["x"].copy()
            x[9] = 99.0
            s["x"] = x

        _commit(vf, rec, "v1", v1, timestamp=_ts(17))
        _commit(vf, rec, "v2", v2, timestamp=_ts(18))
    with h5py.File(path, "r+") as f:
        modify_metadata(f, "x", chunks=(3,), compression="gzip", compression_opts=1)
    return rec.result()


@contextlib.contextmanager
def _h5py_before_3_14():
    """Make h5py write a virtual dataset without mappings as h5py before 3.14 did: as a
    plain dataset (its layouts were only made virtual by their first mapping).
    versioned-hdf5 running on such an h5py wrote every dataset mapping no chunk of
    ``raw_data`` (an empty one, or one of fill values only) that way."""
    vds = h5py._hl.vds
    made_virtual = vds.VirtualLayout.__init__

    def old_init(self, *args, **kwargs):
        made_virtual(self, *args, **kwargs)
        self.dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)

    vds.VirtualLayout.__init__ = old_init
    try:
        yield
    finally:
        vds.VirtualLayout.__init__ = made_virtual


def _plain_empty(path: str) -> dict:
    """Written as versioned-hdf5 on h5py before 3.14 wrote them: datasets that map no
    chunk (empty ``e``, never-written ``sp`` with fill value 3, ``e`` grown but not
    written) are plain, non-virtual datasets in the old versions."""
    rec = _Recorder()
    with _h5py_before_3_14(), h5py.File(path, "w") as f:
        vf = VersionedHDF5File(f)

        def v1(g, s):
            x = np.arange(5, dtype="i8")
            g.create_dataset("x", data=x, chunks=(4,))
            g.create_dataset("e", data=np.zeros((0,)), chunks=(4,))
            g.create_dataset("sp", shape=(6,), dtype="i4", chunks=(4,), fillvalue=3)
            s.update(x=x, e=np.zeros((0,)), sp=np.full(6, 3, dtype="i4"))

        def v2(g, s):
            g["x"][0] = 9
            g["e"].resize((3,))
            x = s["x"].copy()
            x[0] = 9
            s.update(x=x, e=np.zeros(3))

        def v3(g, s):
            g["e"][1] = 2.5
            g["sp"][5] = 7
            e, sp = s["e"].copy(), s["sp"].copy()
            e[1] = 2.5
            sp[5] = 7
            s.update(e=e, sp=sp)

        _commit(vf, rec, "v1", v1, timestamp=_ts(19))
        _commit(vf, rec, "v2", v2, timestamp=_ts(20))
        _commit(vf, rec, "v3", v3, timestamp=_ts(21))
    return rec.result()


_MAKERS = {
    "basic.h5": _basic,
    "multidim.h5": _multidim,
    "strings.h5": _strings,
    "groups.h5": _groups,
    "history.h5": _history,
    "deleted.h5": _deleted,
    "modified.h5": _modified,
    "plain_empty.h5": _plain_empty,
}

#: Names of the files make_files writes.
FILE_NAMES = tuple(_MAKERS)

# Facts a reader may assert on the files above (all were checked against 2.6.0).
EXPECTED_LAYOUT = {
    "basic.h5": {"x": {"chunks": (4,), "fillvalue": -1.5, "dtype": "<f8"}},
    "multidim.h5": {
        "m": {"chunks": (3, 2), "fillvalue": -7, "dtype": "<i4"},
        "t": {"chunks": (2, 2, 2), "fillvalue": 0.0, "dtype": "<f4"},
        "b": {"chunks": (4,), "fillvalue": False, "dtype": "|b1"},
    },
    "groups.h5": {"gz": {"chunks": (3,), "compression": "gzip", "compression_opts": 4}},
    "modified.h5": {"x": {"chunks": (3,), "compression": "gzip", "fillvalue": 0.5}},
}


def make_files(directory: str | os.PathLike) -> dict[str, dict]:
    """Write every reference file into ``directory`` and return the expectations."""
    if not HAVE_VERSIONED_HDF5:
        raise RuntimeError("versioned_hdf5 is not importable")
    os.makedirs(directory, exist_ok=True)
    return {
        name: maker(os.path.join(os.fspath(directory), name)) for name, maker in _MAKERS.items()
    }


def check_files(directory: str | os.PathLike, expected: dict[str, dict]) -> None:
    """Compare the files in ``directory`` with ``expected`` using plain h5py
    (the virtual datasets resolve through libhdf5). Raises AssertionError."""
    for fname, exp in expected.items():
        with h5py.File(os.path.join(os.fspath(directory), fname), "r") as f:
            versions = f["_version_data/versions"]
            assert versions.attrs["current_version"] == exp["@file"]["current_version"], fname
            assert sorted(k for k in versions if k != "__first_version__") == sorted(
                exp["@file"]["versions"]
            )
            for vname in versions_of(exp):
                vexp = exp[vname]
                grp = versions[vname]
                assert bool(grp.attrs["committed"]) is True
                assert grp.attrs["prev_version"] == vexp["@meta"]["prev_version"], (fname, vname)
                if vexp["@meta"]["timestamp"] is not None:
                    assert grp.attrs["timestamp"] == vexp["@meta"]["timestamp"], (fname, vname)
                found: list[str] = []
                grp.visititems(
                    lambda n, o, found=found: (
                        found.append(n) if isinstance(o, h5py.Dataset) else None
                    )
                )
                assert sorted(found) == sorted(datasets_of(vexp)), (fname, vname, found)
                for dpath, arr in datasets_of(vexp).items():
                    ds = grp[dpath]
                    assert ds.shape == arr.shape, (fname, vname, dpath, ds.shape, arr.shape)
                    got = (
                        ds.asstr()[()]
                        if h5py.check_string_dtype(ds.dtype) and ds.dtype.kind == "O"
                        else ds[()]
                    )
                    if arr.dtype == object:
                        assert list(got.ravel()) == list(arr.ravel()), (fname, vname, dpath)
                    else:
                        assert ds.dtype == arr.dtype, (fname, vname, dpath, ds.dtype, arr.dtype)
                        np.testing.assert_array_equal(got, arr, err_msg=f"{fname} {vname} {dpath}")
                for opath, attrs in vexp["@attrs"].items():
                    obj = grp[opath] if opath else grp
                    for k, v in attrs.items():
                        assert obj.attrs[k] == v, (fname, vname, opath, k)


if __name__ == "__main__":  # pragma: no cover
    import sys
    import tempfile
    import time

    out = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()
    t0 = time.perf_counter()
    exp = make_files(out)
    t1 = time.perf_counter()
    check_files(out, exp)
    print(
        f"wrote {len(exp)} files to {out} in {t1 - t0:.2f} s with versioned-hdf5 {versioned_hdf5.__version__}; contents verified"
    )
