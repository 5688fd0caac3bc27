"""Small configs shared by the experiment tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from expconfigs import SMALL


@pytest.fixture
def small_config(tmp_path: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(SMALL)
    return path
