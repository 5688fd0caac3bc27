"""Test-wide set-up: the shared helper modules in tests/ and tests/sim/ are importable."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE / "sim"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
