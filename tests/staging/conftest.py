"""Hypothesis profiles for the staging engine tests.

The ``ci`` profile (default) runs enough examples that the random-sequence
test alone covers a thousand cases; ``dev`` is quicker.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("H5VC_HYPOTHESIS_PROFILE", "ci"))
