"""Every benchmark script still imports against the current package (a rename that forgets a
benchmark fails here, not months later in `make bench`); running them is `make bench`'s job."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parent.parent / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda p: p.name)
def test_benchmark_imports(script):
    namespace = runpy.run_path(str(script), run_name="imported_by_tests")
    if not script.name.startswith("_"):
        assert callable(namespace.get("main")), f"{script.name} has no main()"
