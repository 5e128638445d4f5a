"""Flip single bytes of an object header and see what h5vc does with each damaged file.

Run as a script (a fresh interpreter, which forks one child per flipped byte, so a
crash inside HDF5 ends the child and is reported, not the scan)::

    python tests/safety/flipscan.py FILE OBJECT OFFSET|FIRST:LAST ...

prints one line per offset into ``OBJECT``'s header in ``FILE`` (or, for an OBJECT
``mappings:PATH``, into the mapping list of the virtual dataset PATH): the offset and the
outcome, ``ok`` (harmless), ``corrupt`` (:class:`~h5vc.errors.CorruptDataError`),
``crash:<signal>`` or the name of any other exception.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile

import h5py
import numpy as np

import h5vc
from h5vc.errors import CorruptDataError


def make(path: str, size: int = 1000, libver: str | None = None) -> None:
    """A file with two versions of one chunked dataset of ``size`` numbers (ten chunks;
    from about 200,000 on they are read by positioned reads).  With ``libver``
    ``"latest"`` its object headers are version 2 (checksummed)."""
    options = {} if libver is None else {"libver": libver}
    with h5vc.open(path, "w", **options) as vf:
        with vf.stage_version("v1") as g:
            g.create_dataset("x", data=np.arange(float(size)), chunks=(size // 10,))
        with vf.stage_version("v2") as g:
            g["x"][5] = -1.0


def read_all_and_commit(path: str) -> None:
    """Read every version's dataset, then commit a change."""
    with h5vc.open(path, "r") as vf:
        for version in vf.versions:
            vf[version]["x"][:]
    with h5vc.open(path, "r+") as vf, vf.stage_version("v3") as g:
        g["x"][0] = 3.0


def commit_first(path: str) -> None:
    """Commit a change with nothing read before, through ``h5vc.open``: the writer
    opens the chunk store itself."""
    with h5vc.open(path, "r+") as vf, vf.stage_version("v3") as g:
        g["x"][0] = 3.0


def commit_first_drop_in(path: str) -> None:
    """The same through ``h5py.File`` + ``VersionedHDF5File``."""
    with h5py.File(path, "r+") as f:
        vf = h5vc.VersionedHDF5File(f)
        with vf.stage_version("v3") as g:
            g["x"][0] = 3.0


#: What each child does with its damaged file, by the name the environment variable
#: ``H5VC_FLIP_ACTION`` gives (default: read everything, then commit).
ACTIONS = {
    "read_all_and_commit": read_all_and_commit,
    "commit_first": commit_first,
    "commit_first_drop_in": commit_first_drop_in,
}


def header_address(path: str, obj: str) -> int:
    """The file offset of ``obj``'s object header."""
    with h5py.File(path, "r") as f:
        return int(h5py.h5o.get_info(f[obj].id).addr) + int(f.userblock_size)


def mappings_address(path: str, obj: str) -> int:
    """The file offset of the mapping list of the virtual dataset ``obj`` (the data of
    its global heap object)."""
    from h5vc.hdf5.header import LAYOUT, stored_messages

    parent, _, name = obj.rpartition("/")
    with h5py.File(path, "r") as f:
        stored = stored_messages(f[parent or "/"], name, frozenset((LAYOUT,)))
        assert stored is not None, f"{obj} has no version-1 header readable from the file"
        body, width = stored.messages[LAYOUT], stored.sizeof_addr
        heap = int.from_bytes(body[2 : 2 + width], "little")
        index = int.from_bytes(body[2 + width : 6 + width], "little")
        data = stored.reader.read(heap, 1 << 20)
        size = stored.sizeof_size
        pos = 8 + size
        while True:  # the objects of the collection, each 8 + size bytes of prefix
            number = int.from_bytes(data[pos : pos + 2], "little")
            length = int.from_bytes(data[pos + 8 : pos + 8 + size], "little")
            if number == index:
                return heap + pos + 8 + size + int(f.userblock_size)
            pos += 8 + size + -(-length // 8) * 8


def flipped(data: bytes, address: int, offset: int) -> bytes:
    """``data`` with the byte at ``address + offset`` inverted."""
    damaged = bytearray(data)
    damaged[address + offset] ^= 0xFF
    return bytes(damaged)


def _outcome(path: str) -> str:
    action = ACTIONS[os.environ.get("H5VC_FLIP_ACTION", "read_all_and_commit")]
    try:
        action(path)
    except CorruptDataError:
        return "corrupt"
    except BaseException as error:
        return type(error).__name__
    return "ok"


def scan(path: str, obj: str, offsets: list[int], workdir: str) -> dict[int, str]:
    """The outcome of each offset's flip, each run in a forked child."""
    if obj.startswith("mappings:"):
        address = mappings_address(path, obj.removeprefix("mappings:"))
    else:
        address = header_address(path, obj)
    with open(path, "rb") as file:
        data = file.read()
    results: dict[int, str] = {}
    for offset in offsets:
        damaged = os.path.join(workdir, f"flip{offset}.h5")
        with open(damaged, "wb") as file:
            file.write(flipped(data, address, offset))
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: no thread runs here, no file is open
            os.close(read_end)
            os.write(write_end, _outcome(damaged).encode())
            os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            said = pipe.read().decode()
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            results[offset] = f"crash:{signal.Signals(os.WTERMSIG(status)).name}"
        else:
            results[offset] = said or f"exit:{os.WEXITSTATUS(status)}"
        os.remove(damaged)
    return results


def main(argv: list[str]) -> None:
    path, obj = argv[0], argv[1]
    offsets: list[int] = []
    for arg in argv[2:]:
        first, _, last = arg.partition(":")
        offsets.extend(range(int(first), int(last)) if last else [int(first)])
    with tempfile.TemporaryDirectory() as workdir:
        for offset, outcome in scan(path, obj, offsets, workdir).items():
            print(offset, outcome, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
