"""Version timestamps: parsed from users, stored as text, read back."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import numpy as np

from h5vc.errors import InvalidTimestampError, TimestampTypeError
from h5vc.store import layout

__all__ = ["attr_str", "format_timestamp", "now", "parse_timestamp", "read_timestamp"]


def parse_timestamp(value: Any) -> np.datetime64:
    """A user timestamp as ``datetime64[us]`` in UTC; naive or non-UTC is an error."""
    if isinstance(value, np.datetime64):
        if np.isnat(value):
            raise InvalidTimestampError("Expected a valid timestamp. Got NaT instead.")
        return value.astype("datetime64[us]")
    if isinstance(value, datetime):
        offset = value.utcoffset()
        if offset is None:
            raise InvalidTimestampError(
                f"Expected a timezone-aware datetime in UTC. Got the naive datetime "
                f"{value.isoformat()} instead; pass tzinfo=datetime.timezone.utc."
            )
        if offset.total_seconds() != 0:
            raise InvalidTimestampError(
                f"Expected a datetime in UTC. Got {value.isoformat()} (UTC offset "
                f"{offset}) instead; convert it with .astimezone(datetime.timezone.utc)."
            )
        return np.datetime64(value.replace(tzinfo=None), "us")
    raise TimestampTypeError(
        f"Expected a datetime.datetime or numpy.datetime64 timestamp. "
        f"Got {type(value).__name__} instead."
    )


def format_timestamp(ts: np.datetime64) -> str:
    """The stored form: ``'%Y-%m-%d %H:%M:%S.%f+0000'``."""
    text = str(ts.astype("datetime64[us]"))
    return text.replace("T", " ") + "+0000"


def read_timestamp(text: str | bytes) -> np.datetime64:
    """A stored timestamp (h5vc's form or any ``TIMESTAMP_FORMAT`` text) as UTC."""
    if isinstance(text, bytes):
        text = text.decode()
    if text.endswith("+0000"):
        return np.datetime64(text[:-5].replace(" ", "T"), "us")
    parsed = datetime.strptime(text, layout.TIMESTAMP_FORMAT)
    return parse_timestamp(parsed.astimezone(timezone.utc))


def attr_str(value: Any) -> str:
    """A text attribute as ``str`` (HDF5 gives bytes, str or a 0-d array)."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.ndarray) and value.shape == ():
        return attr_str(value[()])
    return str(value)


def now() -> np.datetime64:
    """The current time, UTC, in microseconds."""
    return np.datetime64(datetime.now(timezone.utc).replace(tzinfo=None), "us")
