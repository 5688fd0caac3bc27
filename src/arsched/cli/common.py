"""What every command module shares: the topology help text, the console, JSON output and
the output-path check made before any work starts."""

from __future__ import annotations

import json
import logging
import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from arsched.errors import ArschedError
from arsched.topology.spec import DIRECTED_EXAMPLES, SPEC_EXAMPLES

SPEC_HELP = (
    "A topology: a family spec such as "
    + ", ".join(f"'{e}'" for e in SPEC_EXAMPLES[:5])
    + " (add bandwidth=100Gbps, latency=1us, one value or one per level joined by '/'), "
    "a GPU cluster such as 'hgx:boxes=4,gen=h100,fabric=rail' or 'mi250:boxes=2,fabric=clos' "
    "(NVSwitch or xGMI boxes with NICs; nvlink=, nic=, oversub=, spines=, planes=), "
    "a directed ring or torus such as "
    + " or ".join(f"'{e}'" for e in DIRECTED_EXAMPLES)
    + " (oneway=1: links in the + direction only; reverse=: the other direction's bandwidth), "
    "or a file: .json, .graphml, or a .csv host list with columns ip,DSW,PSW,ASW."
)

# the flow model's connection discipline, in `simulate` and `compare` alike
FIFO_OPTION = typer.Option(
    "--fifo/--no-fifo",
    help="Flow model: each connection carries its steps in order, as NCCL channels and MSCCL thread "
    "blocks do (the default); --no-fifo sends every ready transfer at once.",
)

COLLECTIVE_OPTION = typer.Option(
    "--collective",
    "-c",
    help="allreduce, reduce_scatter, allgather, broadcast, reduce or alltoall (docs/formats.md says "
    "what each must compute).",
)
ROOT_OPTION = typer.Option(help="The root rank of broadcast and reduce (default: the first rank).")


def check_collective(name: str) -> str:
    """`name` if it is a collective arsched schedules, else one sentence listing them."""
    from arsched.collective.kinds import NAMES

    if name not in NAMES:
        raise ArschedError(f"--collective must be one of {', '.join(NAMES)}, got {name!r}")
    return name


out = Console()


class _Rate(ProgressColumn):
    """Units per second, once rich has measured a speed."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Any) -> Text:
        return Text(f"{task.speed:,.0f} {self.unit}/s" if task.speed else "")


@contextmanager
def progress_bar(what: str, unit: str = "transfers", enabled: bool = True) -> Iterator[Callable[..., None]]:
    """A `progress(done, total, phase=None)` callback drawing a transient bar on stderr (on a
    terminal only, and when `enabled`): long event simulations show their transfers done and
    rate, training its phase and steps; short work never draws. `phase` renames the bar."""
    columns = (
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), _Rate(unit), TimeElapsedColumn()
    )  # fmt: skip
    with Progress(
        *columns, console=Console(stderr=True), transient=True, disable=not (enabled and sys.stderr.isatty())
    ) as bar:
        task = None

        def update(done: int, total: int, phase: str | None = None) -> None:
            nonlocal task
            if task is None:
                task = bar.add_task(what, total=total)
            bar.update(task, completed=done, total=total, description=phase or what)

        yield update


class _ToStatus(logging.Handler):
    """Shows every record it gets on a rich status line."""

    def __init__(self, status: Any) -> None:
        super().__init__(logging.INFO)
        self.status = status

    def emit(self, record: logging.LogRecord) -> None:
        self.status.update(record.getMessage())


@contextmanager
def log_status(logger: str) -> Iterator[None]:
    """A transient status line on stderr (on a terminal only) with the latest INFO message of
    `logger`: what a long search (auto trying its candidates) is doing, without -v's full log."""
    if not sys.stderr.isatty():
        yield
        return
    log = logging.getLogger(logger)
    level = log.level
    with Console(stderr=True).status("") as status:
        handler = _ToStatus(status)
        log.addHandler(handler)
        if not log.isEnabledFor(logging.INFO):
            log.setLevel(logging.INFO)  # its records reach the root's handlers only with -v
        try:
            yield
        finally:
            log.removeHandler(handler)
            log.setLevel(level)


def _measure(table: Table) -> Measurement:
    """The width `table` needs (minimum: every cell whole, headers wrapped at spaces)."""
    unbounded = out.options.update_width(1 << 20)  # a table's measure is clamped to the width given
    return out.measure(table, options=unbounded)


def fits(table: Table) -> bool:
    """True if `table` fits the console without cutting a cell (headers may wrap at spaces)."""
    return _measure(table).minimum <= out.width


def show(table: Table) -> None:
    """Print `table` with no cell cut short where the console allows it: with blank column
    separators where its borders would not fit, and with column widths chosen here where it
    must wrap headers (rich's own shrinking narrows the widest columns first and can cut a
    number that a wrapped header would have left room for)."""
    if not fits(table):
        table.box, table.show_edge, table.pad_edge, table.padding = (
            box.SIMPLE_HEAD,
            False,
            False,
            (0, 1, 0, 0),
        )
    need = _measure(table)
    if need.maximum <= out.width or need.minimum > out.width:
        out.print(table)
        return
    slack = out.width - need.minimum
    unbounded = out.options.update_width(1 << 20)
    for column in table.columns:
        parts = [Measurement.get(out, unbounded, c) for c in (column.header, *column.cells)]
        lo, hi = max(m.minimum for m in parts), max(m.maximum for m in parts)
        if column.no_wrap:
            lo = hi
        column.width = lo + min(hi - lo, slack)
        slack -= column.width - lo
    out.print(table)


def _finite(value: Any) -> Any:
    """`value` with every NaN or infinite float replaced by None (JSON has no such numbers)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def emit_json(obj: dict[str, Any]) -> None:
    """Print `obj` as indented JSON on stdout (the `--json` output of every command); a number
    that is undefined or infinite (e.g. the mean JCT of a run that finished no job) is null, so
    the output is always valid JSON."""
    sys.stdout.write(json.dumps(_finite(obj), indent=2, allow_nan=False) + "\n")


def check_output(path: Path | None, suffixes: tuple[str, ...], what: str) -> None:
    """Refuse an output path with the wrong suffix or a missing folder before any work is done."""
    if path is None:
        return
    if path.suffix.lower() not in suffixes:
        raise ArschedError(f"{what} {path} must end in {' or '.join(suffixes)}")
    if not path.parent.exists():
        raise ArschedError(f"cannot write {path}: folder {path.parent} does not exist")
