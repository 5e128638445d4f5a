"""The whole library against a model: ``{version: {path: ndarray}}``.

Each step stages a version on top of a random earlier one (or an empty one),
applies random edits (slice assignments, resizes, dataset creation and deletion,
attributes) to the staged group and to a copy of the model, then commits it or
aborts it by raising inside ``stage_version``.  After every step each committed
version must read equal to the model through h5vc and through plain h5py.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from h5vc import VersionedHDF5File


@dataclass(frozen=True)
class Spec:
    """Fixed metadata of one dataset path (chunks and dtype may never change)."""

    ndim: int
    dtype: str
    chunks: tuple[int, ...]
    fill: object


SPECS = {
    "a": Spec(1, "i4", (3,), -1),
    "b": Spec(2, "f8", (2, 3), 0.5),
    "g/c": Spec(1, "bool", (4,), False),
    "g/h/d": Spec(2, "u1", (3, 2), 7),
}
MAX_EXTENT = 7


@dataclass
class VersionModel:
    data: dict[str, np.ndarray] = field(default_factory=dict)
    attrs: dict[str, dict[str, int]] = field(default_factory=dict)


class Abort(Exception):
    """Raised inside stage_version to leave without committing."""


def values(spec: Spec, shape: tuple[int, ...]) -> st.SearchStrategy:
    if spec.dtype == "bool":
        elements = st.booleans()
    elif spec.dtype == "f8":
        elements = st.sampled_from([0.5, -2.25, 3.0, 1e300])
    else:
        info = np.iinfo(spec.dtype)
        elements = st.integers(max(info.min, -50), min(info.max, 200))
    return elements | st.lists(elements, min_size=1, max_size=1).map(
        lambda one: np.full(shape, one[0], dtype=spec.dtype)
    )


def slices(n: int) -> st.SearchStrategy:
    bounds = st.none() | st.integers(-n - 1, n + 1)
    return st.builds(slice, bounds, bounds, st.none() | st.integers(1, 3) | st.integers(-3, -1))


class VersionedStoreMachine(RuleBasedStateMachine):
    #: data_version of the file under test (1001: h5vc's layout; 1000: its first
    #: layout, upgraded by the first commit; 4: compat layout).
    data_version = 1001

    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="h5vc-machine-"))
        self.path = self.directory / "machine.h5"
        self.file = h5py.File(self.path, "w")
        if self.data_version != 1001:
            # A fresh file in an older layout: h5vc keeps writing versioned-hdf5's
            # layout (4) and upgrades its own first layout (1000).
            VersionedHDF5File(self.file)
            self.file["_version_data/versions"].attrs["data_version"] = np.int64(self.data_version)
        self.vf = VersionedHDF5File(self.file)
        self.model: dict[str, VersionModel] = {}
        self.current = ""
        self.counter = 0
        #: The settings of each path now (``modify_metadata`` changes them); values
        #: are always drawn from the domain of ``SPECS``.
        self.specs = dict(SPECS)

    @initialize()
    def start(self) -> None:
        assert self.vf.versions == []
        assert self.vf.data_version == self.data_version

    # -- staging ---------------------------------------------------------------------

    def _edit(self, data, group, state: VersionModel) -> None:
        kind = data.draw(st.sampled_from(["create", "setitem", "resize", "delete", "attr"]))
        present = sorted(state.data)
        if kind == "create" or not present:
            absent = sorted(set(SPECS) - set(state.data))
            if not absent:
                return
            path = data.draw(st.sampled_from(absent))
            spec = self.specs[path]
            shape = tuple(data.draw(st.integers(0, MAX_EXTENT)) for _ in range(spec.ndim))
            array = np.asarray(data.draw(values(SPECS[path], shape)), dtype=SPECS[path].dtype)
            array = np.broadcast_to(array, shape).astype(spec.dtype)
            group.create_dataset(path, data=array, chunks=spec.chunks, fillvalue=spec.fill)
            state.data[path] = array
            state.attrs[path] = {}
            return
        path = data.draw(st.sampled_from(present))
        spec = self.specs[path]
        array = state.data[path]
        if kind == "setitem":
            index = tuple(data.draw(slices(n)) for n in array.shape)
            target = array[index].shape
            value = data.draw(values(SPECS[path], target))
            group[path][index] = value
            array[index] = value
        elif kind == "resize":
            shape = tuple(data.draw(st.integers(0, MAX_EXTENT)) for _ in range(spec.ndim))
            group[path].resize(shape)
            grown = np.full(shape, spec.fill, dtype=spec.dtype)
            common = tuple(slice(0, min(a, b)) for a, b in zip(array.shape, shape))
            grown[common] = array[common]
            state.data[path] = grown
        elif kind == "delete":
            del group[path]
            del state.data[path]
            del state.attrs[path]
        else:
            key = data.draw(st.sampled_from(["k1", "k2"]))
            value = data.draw(st.integers(-5, 5))
            group[path].attrs[key] = value
            state.attrs[path][key] = value

    @rule(data=st.data(), make_current=st.booleans(), abort=st.booleans())
    def stage(self, data, make_current: bool, abort: bool) -> None:
        prev = data.draw(st.sampled_from(["", *sorted(self.model)]), label="prev")
        state = copy.deepcopy(self.model.get(prev, VersionModel()))
        name = f"v{self.counter}"
        self.counter += 1
        n_edits = data.draw(st.integers(0, 4), label="edits")
        try:
            with self.vf.stage_version(name, prev_version=prev, make_current=make_current) as g:
                for _ in range(n_edits):
                    self._edit(data, g, state)
                if abort:
                    raise Abort
        except Abort:
            assert name not in self.vf
            return
        self.model[name] = state
        if make_current:
            self.current = name

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def change_current(self, data) -> None:
        name = data.draw(st.sampled_from(sorted(self.model)))
        self.vf.current_version = name
        self.current = name

    @rule()
    def reopen(self) -> None:
        self.file.close()
        self.file = h5py.File(self.path, "r+")
        self.vf = VersionedHDF5File(self.file)

    # -- checks ---------------------------------------------------------------------

    @invariant()
    def versions_match_the_model(self) -> None:
        assert sorted(self.vf.versions) == sorted(self.model)
        assert self.vf.current_version == (self.current or "__first_version__")
        vds = self.file["_version_data/versions"]
        for name, state in self.model.items():
            version = self.vf[name]
            found: list[str] = []
            version.visititems(
                lambda p, o, found=found: found.append(p) if hasattr(o, "dtype") else None
            )
            assert sorted(found) == sorted(state.data), name
            for path, expected in state.data.items():
                dataset = version[path]
                assert dataset.shape == expected.shape
                assert dataset.dtype == expected.dtype
                assert dataset.chunks == self.specs[path].chunks
                np.testing.assert_array_equal(dataset[()], expected)
                np.testing.assert_array_equal(vds[name][path][()], expected)
                assert dict(dataset.attrs) == state.attrs[path]

    @invariant()
    def hash_tables_are_consistent(self) -> None:
        store = self.file["_version_data"]
        for path, spec in self.specs.items():
            if f"{path}/raw_data" not in store:
                continue
            rows = int(store[f"{path}/hash_table"].attrs["largest_index"])
            # Slots past the rows are free (released by a delete), never short.
            assert store[f"{path}/raw_data"].shape[0] >= rows * spec.chunks[0]
            hashes = store[f"{path}/hash_table"]["hash"][:rows]
            assert len({bytes(h) for h in hashes}) == rows

    def teardown(self) -> None:
        self.file.close()
        shutil.rmtree(self.directory, ignore_errors=True)


class CompatLayoutMachine(VersionedStoreMachine):
    """The same machine on a file in versioned-hdf5's layout (data_version 4); after
    every commit versioned-hdf5 itself must read every version as the model says."""

    data_version = 4

    @invariant()
    def versioned_hdf5_reads_every_version(self) -> None:
        import versioned_hdf5

        assert self.file["_version_data/versions"].attrs["data_version"] == 4
        self.file.flush()
        vf = versioned_hdf5.VersionedHDF5File(self.file)
        for name, state in self.model.items():
            version = vf[name]
            for path, expected in state.data.items():
                np.testing.assert_array_equal(version[path][()], expected)


class FirstLayoutMachine(VersionedStoreMachine):
    """The same machine on a file of h5vc's first layout (data_version 1000): the first
    commit moves it to 1001, and nothing committed before is misread afterwards."""

    data_version = 1000

    @invariant()
    def upgraded_once_written(self) -> None:
        expected = 1001 if self.model else 1000
        assert self.file["_version_data/versions"].attrs["data_version"] == expected


MACHINE_SETTINGS = settings(settings.get_profile("h5vc-store-machine"))
TestVersionedStore = VersionedStoreMachine.TestCase
TestVersionedStore.settings = MACHINE_SETTINGS
TestCompatLayout = CompatLayoutMachine.TestCase
TestCompatLayout.settings = settings(MACHINE_SETTINGS, max_examples=15)
TestFirstLayout = FirstLayoutMachine.TestCase
TestFirstLayout.settings = settings(MACHINE_SETTINGS, max_examples=10)
