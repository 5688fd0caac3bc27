"""Test-wide set-up: the shared helper modules in tests/ and tests/sim/ are importable, and one
Hypothesis profile for every property test.

The profile is deterministic (`derandomize`: the examples follow from each test's name, so a
run fails the same way every time, and no example database is kept), has no deadline (a loaded
2-core machine must not turn slow examples into failures) and accepts slow data generation.
A test that needs a different number of examples says so with `@settings(max_examples=...)`,
which inherits the rest of the profile. `ARSCHED_FUZZ_SEED` (set by benchmarks/bench_fuzz.py)
switches to seeded random examples for a long campaign outside CI.
"""

import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE / "sim"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

settings.register_profile(
    "arsched",
    max_examples=40,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("campaign", parent=settings.get_profile("arsched"), derandomize=False)
settings.load_profile("campaign" if os.environ.get("ARSCHED_FUZZ_SEED") else "arsched")
