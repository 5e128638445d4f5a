"""Sample records: the strings that say where a stored sample lives.

Two formats, one per backend, each a frozen dataclass with ``encode()``/``decode()``::

    00:<uid>$<dataset> <index>*<shape>                     e.g. "00:WzUtdu$3 199*20 2 3"
    01:<uid>:<xxh64>:<dataset>:<index>:<shape>             e.g. "01:rlUK3C:8067007c0f05c359:16:105:10 10"

``<shape>`` lists the dimensions separated by single spaces; a scalar sample has an empty
shape. Numbers are written in canonical decimal (no sign, no leading zeros), so that
``encode(decode(text)) == text`` for every valid record.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from h5vc.errors import RecordFormatError

__all__ = [
    "SEP_KEY",
    "SEP_HSH",
    "SEP_LST",
    "SEP_SLC",
    "Record00",
    "Record01",
    "SampleRecord",
    "encode_record",
    "decode_record",
]

SEP_KEY = ":"
SEP_HSH = "$"
SEP_LST = " "
SEP_SLC = "*"

_UID = r"[A-Za-z0-9]+"
_NUMBER = r"(?:0|[1-9][0-9]*)"
_SHAPE = rf"(?:{_NUMBER}(?: {_NUMBER})*)?"
_CHECKSUM = r"[0-9a-f]{16}"

_RECORD_00 = re.compile(
    rf"00:(?P<uid>{_UID})\$(?P<dataset>{_NUMBER}) (?P<index>{_NUMBER})\*(?P<shape>{_SHAPE})"
)
_RECORD_01 = re.compile(
    rf"01:(?P<uid>{_UID}):(?P<checksum>{_CHECKSUM}):(?P<dataset>{_NUMBER})"
    rf":(?P<index>{_NUMBER}):(?P<shape>{_SHAPE})"
)
_UID_RE = re.compile(_UID)
_NUMBER_RE = re.compile(_NUMBER)
_CHECKSUM_RE = re.compile(_CHECKSUM)

_EXPECTED = {
    "00": "'00:<uid>$<dataset> <index>*<shape>'",
    "01": "'01:<uid>:<xxh64 hex>:<dataset>:<index>:<shape>'",
}


def _format_shape(shape: tuple[int, ...]) -> str:
    return SEP_LST.join(str(dim) for dim in shape)


def _check_fields(
    code: str, uid: str, dataset: str, index: int, shape: tuple[int, ...], checksum: str | None
) -> None:
    """Raise RecordFormatError unless the fields can be encoded and decoded back unchanged."""
    problems = []
    if not isinstance(uid, str) or not _UID_RE.fullmatch(uid):
        problems.append(f"uid {uid!r} (letters and digits)")
    if not isinstance(dataset, str) or not _NUMBER_RE.fullmatch(dataset):
        problems.append(f"dataset {dataset!r} (a decimal string such as '0')")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        problems.append(f"index {index!r} (an int >= 0)")
    if not isinstance(shape, tuple) or not all(
        isinstance(dim, int) and not isinstance(dim, bool) and dim >= 0 for dim in shape
    ):
        problems.append(f"shape {shape!r} (a tuple of ints >= 0)")
    if checksum is not None and (
        not isinstance(checksum, str) or not _CHECKSUM_RE.fullmatch(checksum)
    ):
        problems.append(f"checksum {checksum!r} (16 lowercase hex digits)")
    if problems:
        raise RecordFormatError(
            f"Expected valid fields for a {code!r} record. Got invalid {', '.join(problems)}."
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Record00:
    """Where a backend ``00`` sample lives: file, dataset number, collection index, shape."""

    FORMAT_CODE: ClassVar[str] = "00"

    uid: str
    dataset: str
    index: int
    shape: tuple[int, ...]
    format_code: str = field(default="00", init=False)

    def __post_init__(self) -> None:
        _check_fields("00", self.uid, self.dataset, self.index, self.shape, None)

    def encode(self) -> str:
        """The record string, e.g. ``"00:2HvGf9$0 0*10"``."""
        return (
            f"00{SEP_KEY}{self.uid}{SEP_HSH}{self.dataset}{SEP_LST}{self.index}"
            f"{SEP_SLC}{_format_shape(self.shape)}"
        )

    @classmethod
    def decode(cls, text: str) -> Record00:
        """Parse a ``00`` record string; raise RecordFormatError quoting it if malformed."""
        return _decode_00(text)


@dataclass(frozen=True, slots=True, kw_only=True)
class Record01:
    """Where a backend ``01`` sample lives, with the xxhash64 of its raw bytes."""

    FORMAT_CODE: ClassVar[str] = "01"

    uid: str
    checksum: str
    dataset: str
    index: int
    shape: tuple[int, ...]
    format_code: str = field(default="01", init=False)

    def __post_init__(self) -> None:
        _check_fields("01", self.uid, self.dataset, self.index, self.shape, self.checksum)

    def encode(self) -> str:
        """The record string, e.g. ``"01:rlUK3C:8067007c0f05c359:16:105:10 10"``."""
        return SEP_KEY.join(
            (
                "01",
                self.uid,
                self.checksum,
                self.dataset,
                str(self.index),
                _format_shape(self.shape),
            )
        )

    @classmethod
    def decode(cls, text: str) -> Record01:
        """Parse a ``01`` record string; raise RecordFormatError quoting it if malformed."""
        return _decode_01(text)


SampleRecord = Record00 | Record01

# Decoding builds records without running ``__post_init__``: the record pattern accepts
# exactly the strings whose fields pass ``_check_fields`` (the same sub-patterns for uid,
# dataset and checksum; index and shape dimensions are canonical decimals, hence ints >= 0),
# so checking the fields again would only repeat the pattern match.
_new = object.__new__
_set = object.__setattr__


def _malformed(code: str, text: object) -> RecordFormatError:
    return RecordFormatError(f"Expected a record like {_EXPECTED[code]}. Got {text!r} instead.")


def _decode_00(text: str) -> Record00:
    match = _RECORD_00.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise _malformed("00", text)
    uid, dataset, index, shape = match.groups()
    record = _new(Record00)
    _set(record, "uid", uid)
    _set(record, "dataset", dataset)
    _set(record, "index", int(index))
    _set(record, "shape", tuple(map(int, shape.split(SEP_LST))) if shape else ())
    _set(record, "format_code", "00")
    return record


def _decode_01(text: str) -> Record01:
    match = _RECORD_01.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise _malformed("01", text)
    uid, checksum, dataset, index, shape = match.groups()
    record = _new(Record01)
    _set(record, "uid", uid)
    _set(record, "checksum", checksum)
    _set(record, "dataset", dataset)
    _set(record, "index", int(index))
    _set(record, "shape", tuple(map(int, shape.split(SEP_LST))) if shape else ())
    _set(record, "format_code", "01")
    return record


_DECODERS: dict[str, Callable[[str], SampleRecord]] = {"00": _decode_00, "01": _decode_01}


def encode_record(record: SampleRecord) -> str:
    """The record string of ``record``."""
    if not isinstance(record, Record00 | Record01):
        raise RecordFormatError(
            f"Expected a Record00 or Record01. Got {type(record).__name__} instead."
        )
    return record.encode()


def decode_record(text: str) -> SampleRecord:
    """Parse a record string of either backend; raise RecordFormatError quoting it if malformed."""
    decoder = _DECODERS.get(text[:2]) if isinstance(text, str) else None
    if decoder is None:
        raise RecordFormatError(
            f"Expected a record starting with a format code in {sorted(_DECODERS)}, like "
            f"{_EXPECTED['00']} or {_EXPECTED['01']}. Got {text!r} instead."
        )
    return decoder(text)
