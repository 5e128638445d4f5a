"""Sample record strings: the seeds' examples, round trips and malformed input."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from h5vc.errors import RecordFormatError
from h5vc.samples import Record00, Record01, decode_record, encode_record

uids = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=1
)
numbers = st.integers(min_value=0, max_value=10**12)
shapes = st.lists(numbers, max_size=6).map(tuple)
checksums = st.text(alphabet="0123456789abcdef", min_size=16, max_size=16)
records = st.one_of(
    st.builds(Record00, uid=uids, dataset=numbers.map(str), index=numbers, shape=shapes),
    st.builds(
        Record01,
        uid=uids,
        checksum=checksums,
        dataset=numbers.map(str),
        index=numbers,
        shape=shapes,
    ),
)


def test_decode_00_first_example() -> None:
    record = decode_record("00:2HvGf9$0 0*10")
    assert isinstance(record, Record00)
    assert record.format_code == "00"
    assert (record.uid, record.dataset, record.index, record.shape) == ("2HvGf9", "0", 0, (10,))


def test_decode_00_second_example() -> None:
    record = decode_record("00:WzUtdu$3 199*20 2 3")
    assert (record.uid, record.dataset, record.index, record.shape) == (
        "WzUtdu",
        "3",
        199,
        (20, 2, 3),
    )


def test_decode_01_examples() -> None:
    record = decode_record("01:rlUK3C:8067007c0f05c359:16:105:10 10")
    assert isinstance(record, Record01)
    assert record.format_code == "01"
    assert record.uid == "rlUK3C"
    assert record.checksum == "8067007c0f05c359"
    assert (record.dataset, record.index, record.shape) == ("16", 105, (10, 10))
    second = decode_record("01:rlUK3C:b89f873d3d153a9c:8:199:20 2 3")
    assert (second.dataset, second.index, second.shape) == ("8", 199, (20, 2, 3))


@pytest.mark.parametrize(
    "text",
    [
        "00:2HvGf9$0 0*10",
        "00:WzUtdu$3 199*20 2 3",
        "01:rlUK3C:8067007c0f05c359:16:105:10 10",
        "01:rlUK3C:b89f873d3d153a9c:8:199:20 2 3",
        "00:a$0 0*",
        "01:a:0000000000000000:0:0:",
    ],
)
def test_encode_decoded_gives_same_string(text: str) -> None:
    assert encode_record(decode_record(text)) == text


def test_scalar_shape_round_trips() -> None:
    for record in (
        Record00(uid="x1", dataset="2", index=3, shape=()),
        Record01(uid="x1", checksum="0123456789abcdef", dataset="2", index=3, shape=()),
    ):
        assert decode_record(record.encode()) == record
        assert decode_record(record.encode()).shape == ()


@given(records)
@example(Record00(uid="0", dataset="0", index=0, shape=(0,)))
def test_round_trip(record: Record00 | Record01) -> None:
    text = encode_record(record)
    assert decode_record(text) == record
    assert encode_record(decode_record(text)) == text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "00",
        "02:2HvGf9$0 0*10",
        "00:2HvGf9$0 0*10 ",
        "00:2HvGf9$0 0*10\n",
        "00:2HvGf9$00 0*10",
        "00:2HvGf9$0 -1*10",
        "00:2HvGf9$0 +1*10",
        "00:2HvGf9$0 0*10  2",
        "00:2HvGf9$0 0*1.5",
        "00:2HvGf9:0 0*10",
        "00:2Hv:Gf9$0 0*10",
        "00:$0 0*10",
        "00:2HvGf9$0*10",
        "01:rlUK3C:8067007c0f05c35:16:105:10 10",
        "01:rlUK3C:8067007C0F05C359:16:105:10 10",
        "01:rlUK3C:8067007c0f05c359:16:105",
        "01:rlUK3C:8067007c0f05c359:16:105:10 10:",
        "01:rlUK3C$16 105*10 10",
        "01:rlUK3C:8067007c0f05c359:16:1_05:10 10",
        "01:rlUK3C:8067007c0f05c359:16:\u0661:10",  # a non-ASCII digit
    ],
)
def test_malformed_record_raises_quoting_it(text: str) -> None:
    with pytest.raises(RecordFormatError) as info:
        decode_record(text)
    assert isinstance(info.value, ValueError)
    assert repr(text) in str(info.value)


def test_non_string_record_raises() -> None:
    with pytest.raises(RecordFormatError):
        decode_record(b"00:2HvGf9$0 0*10")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "fields",
    [
        {"uid": "", "dataset": "0", "index": 0, "shape": ()},
        {"uid": "a:b", "dataset": "0", "index": 0, "shape": ()},
        {"uid": "ab", "dataset": "01", "index": 0, "shape": ()},
        {"uid": "ab", "dataset": 0, "index": 0, "shape": ()},
        {"uid": "ab", "dataset": "0", "index": -1, "shape": ()},
        {"uid": "ab", "dataset": "0", "index": True, "shape": ()},
        {"uid": "ab", "dataset": "0", "index": 0, "shape": [1, 2]},
        {"uid": "ab", "dataset": "0", "index": 0, "shape": (1, -2)},
    ],
)
def test_invalid_fields_raise(fields: dict[str, object]) -> None:
    with pytest.raises(RecordFormatError):
        Record00(**fields)  # type: ignore[arg-type]


def test_invalid_checksum_raises() -> None:
    with pytest.raises(RecordFormatError, match="checksum"):
        Record01(uid="ab", checksum="xyz", dataset="0", index=0, shape=())


def test_records_are_frozen_dataclasses() -> None:
    record = decode_record("00:2HvGf9$0 0*10")
    assert dataclasses.is_dataclass(record)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.index = 1  # type: ignore[misc]
    assert hash(record) == hash(decode_record("00:2HvGf9$0 0*10"))


def test_encode_record_rejects_other_objects() -> None:
    with pytest.raises(RecordFormatError, match="Got str instead"):
        encode_record("00:2HvGf9$0 0*10")  # type: ignore[arg-type]


_UIDS = ["ab", "X9", "", "a:b", "a b", "\u0661"]
_CHECKSUMS = ["0123456789abcdef", "0123456789ABCDEF", "0123456789abcde", "0123456789abcdef0"]
_NUMBERS = ["0", "7", "10", "00", "-1", "+1", "1_0", "\u0661", ""]
_SHAPES = ["", "3 4", "0", "3 0 4", "3  4", "3 4 ", " 3", "03", "3\n"]


def _record_text(code: str, uid: str, checksum: str, numbers: list[str], shape: str) -> str:
    dataset, index = numbers
    if code == "00":
        return f"00:{uid}${dataset} {index}*{shape}"
    return f"{code}:{uid}:{checksum}:{dataset}:{index}:{shape}"


# Mostly near-valid record strings: each field valid or broken in one of several ways.
record_like_text = st.builds(
    _record_text,
    st.sampled_from(["00", "01", "02"]),
    st.sampled_from(_UIDS),
    st.sampled_from(_CHECKSUMS),
    st.lists(st.sampled_from(_NUMBERS), min_size=2, max_size=2),
    st.sampled_from(_SHAPES),
)


@given(record_like_text)
@example("01:ab:0123456789abcdef:0:7:3 4")
@example("00:ab$10 7*3 0 4")
def test_decoded_records_pass_the_field_checks(text: str) -> None:
    # Decoding skips the constructor's field checks; every record it returns must pass
    # them, and every string it rejects must raise RecordFormatError quoting it.
    try:
        record = decode_record(text)
    except RecordFormatError as err:
        assert repr(text) in str(err)
        return
    fields = {f.name: getattr(record, f.name) for f in dataclasses.fields(record) if f.init}
    rebuilt = type(record)(**fields)
    assert rebuilt == record and hash(rebuilt) == hash(record)
    assert record.format_code == text[:2]
    assert encode_record(record) == text
