"""Each hand-written scenario gives the same results on versioned-hdf5 and on h5vc."""

from __future__ import annotations

import pytest
from differential import Pair
from scenarios import ALLOW, SCENARIOS


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario(tmp_path, name: str) -> None:
    Pair(tmp_path, allow=ALLOW.get(name, ())).run_all(SCENARIOS[name])
