"""`arsched run`, `arsched export` and `arsched import`: schedules on real processes and in MSCCL XML."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from arsched.cli.common import SPEC_HELP, check_output, emit_json, out
from arsched.errors import ArschedError
from arsched.fileio import check_input

SCHEDULE_ARG = typer.Argument(help="A schedule file (.json, or columnar .npz).", show_default=False)


def run_cmd(
    file: Annotated[Path, SCHEDULE_ARG],
    backend: Annotated[str, typer.Option(help="gloo (CPU processes) or nccl (one GPU per rank).")] = "gloo",
    size: Annotated[
        str | None,
        typer.Option("--size", "-s", help="Vector size per rank, e.g. 64MB (default: the schedule's)."),
    ] = None,
    repeat: Annotated[int, typer.Option(help="Timed runs of each; the median is reported.")] = 5,
    timeout: Annotated[
        float, typer.Option(help="Seconds without progress on any rank before the run is stopped.")
    ] = 60.0,
    seed: Annotated[int, typer.Option(help="Seed of the random input vectors.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Execute a schedule with torch.distributed, one local process per rank, on real tensors.

    Each rank starts as the schedule's collective says and sends and receives its chunks step
    by step (batched isend/irecv per step), then the same processes run torch's own collective
    (all_reduce, reduce_scatter_single, all_gather_single, broadcast, reduce or
    all_to_all_single) on the same input: the result is compared (max abs error; the inputs are
    integers, so a correct schedule gives exactly 0) and both are timed side by side. Times are
    this machine's loopback, not the schedule's topology. Exit 1 if the result differs from
    torch's.
    """
    from arsched.collective import load
    from arsched.runtime.executor import run_schedule
    from arsched.runtime.layout import TORCH_CALLS
    from arsched.units import parse_size

    nbytes = None if size is None else parse_size(size)
    if nbytes is not None and nbytes <= 0:
        raise ArschedError(f"--size must be positive, got {size!r}")
    schedule = load(file)
    result = run_schedule(schedule, nbytes=nbytes, backend=backend, repeat=repeat, timeout=timeout, seed=seed)
    if as_json:
        emit_json(result.to_dict())
    else:
        table = Table(
            title=f"{schedule.algorithm} on {result.ranks} local {backend} processes "
            f"({result.nbytes / 1e6:g} MB per rank, median of {repeat})",
            show_header=False,
        )
        call = TORCH_CALLS[schedule.collective]
        table.add_row(f"max abs error vs torch {call}", f"{result.max_abs_error:g}")
        table.add_row("schedule time", f"{result.time_s * 1e3:.3f} ms")
        table.add_row(f"torch {call} time", f"{result.torch_allreduce_time_s * 1e3:.3f} ms")
        table.add_row("schedule / torch", f"{result.time_s / result.torch_allreduce_time_s:.2f}×")
        out.print(table)
        out.print("[dim]Times are this machine's loopback, not the schedule's topology.[/dim]")
    if result.max_abs_error != 0:
        raise typer.Exit(1)


def export_cmd(
    file: Annotated[Path, SCHEDULE_ARG],
    out_file: Annotated[Path, typer.Option("--out", "-o", help="Where to write (.xml).", show_default=False)],
    fmt: Annotated[str, typer.Option("--format", help="Output format: msccl-xml.")] = "msccl-xml",
    proto: Annotated[str, typer.Option(help="MSCCL protocol: Simple, LL or LL128.")] = "Simple",
    min_size: Annotated[str, typer.Option(help="Smallest size MSCCL should use it for.")] = "0",
    max_size: Annotated[
        str | None, typer.Option(help="Size from which MSCCL should not use it (default: no limit).")
    ] = None,
) -> None:
    """Write a schedule as an MSCCL algorithm (XML) that the MSCCL runtime can load.

    `coll` is the schedule's collective; in place (AllToAll out of place, relayed chunks in
    scratch), one thread block per peer and direction, waits between thread blocks from the
    schedule's step semantics. Check the file with `arsched import`.
    """
    from arsched.collective import load
    from arsched.runtime.msccl_export import save_xml
    from arsched.runtime.msccl_format import MAX_BYTES
    from arsched.units import parse_size

    if fmt != "msccl-xml":
        raise ArschedError(f"--format must be msccl-xml, got {fmt!r}")
    check_output(out_file, (".xml",), "--out")
    lo = int(parse_size(min_size))
    hi = MAX_BYTES if max_size is None else int(parse_size(max_size))
    schedule = load(file)
    save_xml(schedule, out_file, proto=proto, min_bytes=lo, max_bytes=hi)
    out.print(f"wrote {out_file}: {schedule.algorithm}, {schedule.num_ranks} gpus, {len(schedule)} transfers")


def import_cmd(
    file: Annotated[Path, typer.Argument(help="An MSCCL XML algorithm file.", show_default=False)],
    topology_spec: Annotated[str, typer.Option("--topology", "-t", help=SPEC_HELP, show_default=False)],
    out_file: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="Where to write the schedule: .json, or .npz (compact).", show_default=False
        ),
    ],
    ranks: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated servers for gpus 0, 1, ... (default: the topology's first servers)."
        ),
    ] = None,
    size: Annotated[
        str,
        typer.Option("--size", "-s", help="One rank's buffer (the schedule's `bytes`), e.g. 100MB."),
    ] = "100MB",
) -> None:
    """Read an MSCCL XML algorithm (ours or another tool's) into a validated schedule of its
    collective (`coll`).

    Sends and receives are matched per connection; steps are the earliest the program's
    order allows; paths come from the topology's routing. A race between thread blocks, a
    scratch buffer outside AllToAll or a malformed file is reported in one sentence (exit 2).
    """
    from arsched.collective import save
    from arsched.runtime.msccl_import import load_xml
    from arsched.topology import parse_spec
    from arsched.units import parse_size

    check_output(out_file, (".json", ".npz"), "--out")
    nbytes = parse_size(size)
    if nbytes <= 0:
        raise ArschedError(f"--size must be positive, got {size!r}")
    check_input(file, "MSCCL XML file")
    topo = parse_spec(topology_spec)
    names = None if ranks is None else [r.strip() for r in ranks.split(",") if r.strip()]
    schedule = load_xml(file, topo, names, nbytes)
    save(schedule, out_file)
    sys.stdout.write(
        f"wrote {out_file}: {len(schedule)} transfers in {schedule.num_steps} steps, "
        f"valid {schedule.kind.title}\n"
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command("run")(run_cmd)
    app.command("export")(export_cmd)
    app.command("import")(import_cmd)
