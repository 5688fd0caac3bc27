"""What every command module shares: the topology help text, the console, JSON output and
the output-path check made before any work starts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from arsched.errors import ArschedError
from arsched.topology.spec import SPEC_EXAMPLES

SPEC_HELP = (
    "A topology: a family spec such as "
    + ", ".join(f"'{e}'" for e in SPEC_EXAMPLES[:5])
    + " (add bandwidth=100Gbps, latency=1us, one value or one per level joined by '/'), "
    "or a file: .json, .graphml, or a .csv host list with columns ip,DSW,PSW,ASW."
)

out = Console()


def emit_json(obj: dict[str, Any]) -> None:
    """Print `obj` as indented JSON on stdout (the `--json` output of every command)."""
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")


def check_output(path: Path | None, suffixes: tuple[str, ...], what: str) -> None:
    """Refuse an output path with the wrong suffix or a missing folder before any work is done."""
    if path is None:
        return
    if path.suffix.lower() not in suffixes:
        raise ArschedError(f"{what} {path} must end in {' or '.join(suffixes)}")
    if not path.parent.exists():
        raise ArschedError(f"cannot write {path}: folder {path.parent} does not exist")
