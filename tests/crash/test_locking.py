"""One writer at a time: a second one gets a specific error; readers are not blocked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pyrun import run_python

import h5vc
from h5vc.errors import WriterActiveError


def test_a_second_writer_is_refused_and_readers_read(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(10))
        second = run_python(
            f"""
            import h5vc
            try:
                with h5vc.open({str(path)!r}, "r+"):
                    pass
            except h5vc.errors.WriterActiveError as err:
                print("refused:", err)
            """
        )
        assert second.returncode == 0, second.stderr
        assert "refused:" in second.stdout
        assert str(path) in second.stdout and "another process is writing" in second.stdout
        reader = run_python(
            f"""
            import h5vc
            with h5vc.open({str(path)!r}) as vf:
                print(vf["v1"]["x"][()].sum())
            """
        )
        assert reader.returncode == 0, reader.stderr
        assert reader.stdout.strip() == "45"
        with (
            pytest.raises(WriterActiveError, match="already has it open for writing"),
            h5vc.open(str(path), "a"),
        ):
            pass
        with vf.stage_version("v2") as g:
            g["x"][0] = 7
    with h5vc.open(str(path), "r+") as vf:  # the lock went with the first writer
        assert vf["v2"]["x"][0] == 7


def test_a_killed_writer_leaves_no_lock(tmp_path: Path) -> None:
    path = tmp_path / "data.h5"
    killed = run_python(
        f"""
        import os, signal, numpy as np, h5vc
        with h5vc.open({str(path)!r}, "w") as vf:
            with vf.stage_version("v1") as g:
                g.create_dataset("x", data=np.arange(10))
            with vf.stage_version("v2") as g:
                g["x"][3] = -1
                g["x"].attrs["note"] = "never committed"
                vf.f.flush()
                os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    assert killed.returncode == -9
    with h5vc.open(str(path), "a") as vf:
        assert vf.versions == ["v1"]
        with vf.stage_version("v2") as g:
            g["x"][3] = -2
    with h5vc.open(str(path)) as vf:
        assert vf["v2"]["x"][3] == -2


def test_a_writer_never_writes_the_file_outside_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every writable open h5vc makes of the file, the last one that settles its free
    space included, goes through the journal (and so under the writer lock)."""
    import h5py

    opens: list[tuple[object, str]] = []
    real = h5py.File

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, name: object, mode: str = "r", *args: object, **kwargs: object):
            opens.append((name, mode))
            super().__init__(name, mode, *args, **kwargs)

    monkeypatch.setattr(h5py, "File", Recording)
    path = tmp_path / "data.h5"
    with h5vc.open(str(path), "w") as vf, vf.stage_version("v1") as g:
        g.create_dataset("x", data=np.arange(10))
    with h5vc.open(str(path), "r+") as vf, vf.stage_version("v2") as g:
        g["x"][0] = 5
    writable = [(name, mode) for name, mode in opens if mode != "r"]
    assert writable and all(not isinstance(name, str | Path) for name, _ in writable), opens
