"""A version's timestamp is after its parent's: explicit ones are checked, the
current time is moved past the parent's."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

import h5vc
from h5vc.errors import InvalidTimestampError


def _ts(second: int) -> datetime:
    return datetime(2030, 1, 1, 0, 0, second, tzinfo=timezone.utc)


@pytest.mark.parametrize("second", [5, 4])  # equal to the parent's, then earlier
def test_a_timestamp_not_after_the_parents_is_refused(tmp_path: Path, second: int) -> None:
    path = tmp_path / "data.h5"
    with h5vc.open(str(path), "w") as vf:
        with vf.stage_version("v1", timestamp=_ts(5)) as g:
            g.create_dataset("x", data=np.arange(3))
        before = path.stat().st_size
        with (
            pytest.raises(
                InvalidTimestampError, match="later than that of its parent version 'v1'"
            ),
            vf.stage_version("v2", timestamp=_ts(second)),
        ):
            pass
        assert vf.versions == ["v1"]
        assert path.stat().st_size == before
        with vf.stage_version("v2", timestamp=_ts(6)) as g:
            g["x"][0] = 9
        assert vf.get_version_by_timestamp(_ts(5)).version_name == "v1"


def test_the_current_time_moves_past_a_parent_in_the_future(tmp_path: Path) -> None:
    with h5vc.open(str(tmp_path / "data.h5"), "w") as vf:
        future = datetime(2100, 1, 1, tzinfo=timezone.utc)
        with vf.stage_version("v1", timestamp=future) as g:
            g.create_dataset("x", data=np.arange(3))
        with vf.stage_version("v2") as g:
            g["x"][0] = 1
        assert vf.version_info("v2").timestamp == np.datetime64("2100-01-01T00:00:00.000001")
        assert vf[future].version_name == "v1"
