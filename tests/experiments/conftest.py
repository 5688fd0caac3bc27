"""Small configs shared by the experiment tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from expconfigs import SMALL

from arsched.algorithms.registry import register, unregister


@pytest.fixture
def small_config(tmp_path: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(SMALL)
    return path


@pytest.fixture
def temporary_algorithm():
    """`add(name, builder)` registers a builder for this test only; it is removed afterwards."""
    names: list[str] = []

    def add(name: str, builder) -> None:
        register(name, "test")(builder)
        names.append(name)

    yield add
    for name in names:
        unregister(name)
