"""Schedule files by their extension: `.npz` is the columnar binary form (`columnar`), anything
else the `arsched.schedule/1` JSON (`serialize`), the interchange format."""

from __future__ import annotations

import os
from pathlib import Path

from arsched.collective.columnar import SUFFIX, load_columnar, save_columnar
from arsched.collective.schedule import Schedule
from arsched.collective.serialize import load_json, save_json


def save(schedule: Schedule, path: str | os.PathLike) -> None:
    """Write the schedule to `path` (columnar for `.npz`, else JSON), atomically."""
    (save_columnar if Path(path).suffix == SUFFIX else save_json)(schedule, path)


def load(path: str | os.PathLike) -> Schedule:
    """Read a schedule file (columnar for `.npz`, else JSON); ScheduleFormatError with one
    sentence if it is missing or malformed."""
    return (load_columnar if Path(path).suffix == SUFFIX else load_json)(path)
