"""The `arsched` Typer app and the small helpers every command module shares.

`arsched.cli` holds the core commands; each module of `arsched.commands` adds its own commands
to the same `app` when imported, so a new capability brings its commands without touching the
core.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from arsched.errors import ArschedError
from arsched.topology.spec import SPEC_EXAMPLES

SPEC_HELP = (
    "A topology: a family spec such as "
    + ", ".join(f"'{e}'" for e in SPEC_EXAMPLES[:5])
    + " (add bandwidth=100Gbps, latency=1us, one value or one per level joined by '/'), "
    "or a file: .json, .graphml, or a .csv host list with columns ip,DSW,PSW,ASW."
)

app = typer.Typer(
    name="arsched",
    help=(
        "AllReduce scheduling for data-center and GPU-cluster networks.\n\n"
        "Start with `arsched topology bcube:n=4,k=1` to see a network and its AllReduce lower "
        "bound, `arsched bound --topology torus:dims=4x4 --size 100MB` for the bound of one "
        "size, and `arsched validate FILE.json` to prove a schedule computes the right sum."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
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


def import_commands() -> None:
    """Import every module of `arsched.commands`, each of which registers its commands on `app`."""
    import arsched.commands as pkg

    for mod in sorted(m.name for m in pkgutil.iter_modules(pkg.__path__)):
        importlib.import_module(f"arsched.commands.{mod}")
