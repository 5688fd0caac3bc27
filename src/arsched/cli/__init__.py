"""The `arsched` command line.

One Typer app; every module here adds the commands of one group through its `register(app)`,
called below in the order `arsched --help` lists them. Every bad input ends with one sentence on
stderr and exit code 2; a schedule that is well formed but wrong ends `validate` with exit code
1. Nothing below this package prints.

The shape: verbs on networks and schedules sit at the top level (`arsched topology`, `bound`,
`schedule`, `validate`, `simulate`, `compare`, `run`, `export`, `import`), and so do the
experiment and training verbs that drive them (`sweep`, `report`, `train`); a subsystem with its
own inputs, the GPU-cluster scheduler (job traces and clusters, not schedules), is one group,
`arsched cluster run|compare|schedulers`. The same option means the same thing everywhere:
`-t/--topology` a topology spec or file, `-s/--size` bytes per rank, `-a/--algorithm(s)`
algorithm names, `-o/--out` the file or folder written, `--json` machine-readable output on
stdout, `--model flow|rounds`, `--alpha` the per-transfer overhead, `--fifo/--no-fifo` in-order
connections (the default) or not, `--plot` pictures (a PNG file; a folder for `cluster compare`,
which draws three).
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from arsched import limits
from arsched.cli import cluster, experiments, network, runtime, schedules, train
from arsched.errors import ArschedError

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


def _options(
    verbose: Annotated[
        int,
        typer.Option(
            "--verbose",
            "-v",
            count=True,
            help="Show on stderr what the library decides (-v), and in detail (-vv).",
        ),
    ] = 0,
    max_memory: Annotated[
        str | None,
        typer.Option(
            "--max-memory",
            help=(
                "Refuse at once any input that would need more memory than this, e.g. 64GB "
                f"(default: half the machine's memory, or {limits.ENV})."
            ),
            show_default=False,
        ),
    ] = None,
) -> None:
    """Options of every command, given before the command's name: `arsched -v schedule ...`."""
    if max_memory is not None:
        limits.set_max_memory(max_memory)
    if verbose:
        level = logging.INFO if verbose == 1 else logging.DEBUG
        logging.basicConfig(level=level, format="%(name)s: %(message)s", stream=sys.stderr, force=True)
        logging.getLogger().setLevel(level)


app.callback()(_options)
for _group in (network, schedules, runtime, experiments, train, cluster):
    _group.register(app)


def _usage_error(e: Exception) -> bool:
    """True for the command-line parser's usage errors (typer's vendored or plain click)."""
    return getattr(e, "exit_code", None) == 2 and hasattr(e, "format_message")


def main(argv: list[str] | None = None) -> None:
    """Entry point: turn every bad input into one sentence on stderr and exit code 2."""
    try:
        code = app(args=argv, standalone_mode=False)
    except typer.Exit as e:
        code = e.exit_code
    except typer.Abort:
        code = 130
    except (ArschedError, OSError) as e:
        sys.stderr.write(f"error: {e}\n")
        code = 2
    except Exception as e:
        if not _usage_error(e):
            raise
        msg = " ".join(e.format_message().split())
        if not msg:  # bare `arsched`: the help was shown
            sys.exit(0)
        ctx = getattr(e, "ctx", None)
        cmd = ctx.command_path if ctx is not None else "arsched"
        sys.stderr.write(f"error: {msg} (see {cmd} --help)\n")
        code = 2
    sys.exit(code or 0)
