"""Shared by the benchmark scripts: build a schedule, time it, and refuse an invalid one."""

from __future__ import annotations

import time
from collections.abc import Callable

from arsched.collective import Schedule, validate


def checked(make: Callable[..., Schedule], *args: object, **params: object) -> tuple[Schedule, float]:
    """(the schedule `make(*args, **params)` builds, its synthesis seconds); an invalid schedule
    is a builder bug and stops the benchmark."""
    start = time.perf_counter()
    s = make(*args, **params)
    took = time.perf_counter() - start
    report = validate(s)
    if not report.ok:
        raise RuntimeError(f"{s.algorithm} built an invalid schedule: {report.message}")
    return s, took
