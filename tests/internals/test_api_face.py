"""``VersionedHDF5File`` is written in one place: every public method and property is
defined in ``h5vc/api.py`` (logic lives in plain functions of the layers below)."""

from __future__ import annotations

import inspect

import h5vc
from h5vc.api import VersionedHDF5File


def _function(member: object) -> object:
    return member.fget if isinstance(member, property) else member


def test_the_class_has_no_base_but_object() -> None:
    assert VersionedHDF5File.__mro__ == (VersionedHDF5File, object)


def test_every_public_member_is_written_in_api() -> None:
    public = {
        name: _function(member)
        for name, member in vars(VersionedHDF5File).items()
        if not name.startswith("_") and callable(_function(member))
    }
    # The ref methods and the history tools are among them.
    for name in ("merge", "cherry_pick", "revert", "blame", "bisect", "squash", "branches"):
        assert name in public
    elsewhere = [n for n, f in public.items() if getattr(f, "__module__", None) != "h5vc.api"]
    assert not elsewhere
    inherited = [
        name
        for name in dir(VersionedHDF5File)
        if not name.startswith("_") and name not in vars(VersionedHDF5File)
    ]
    assert not inherited


def test_no_public_member_is_a_stub() -> None:
    for name, member in vars(VersionedHDF5File).items():
        function = _function(member)
        if callable(function) and not name.startswith("__"):
            source = inspect.getsource(function)  # type: ignore[arg-type]
            assert "NotImplementedError" not in source, name
    assert h5vc.VersionedHDF5File is VersionedHDF5File
