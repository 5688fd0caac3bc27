"""`arsched validate|simulate|algorithms|schedule|compare`: build, check and time schedules."""

from __future__ import annotations

import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np
import typer
from rich.table import Table

from arsched.cli.common import (
    COLLECTIVE_OPTION,
    FIFO_OPTION,
    ROOT_OPTION,
    SPEC_HELP,
    check_collective,
    check_output,
    emit_json,
    log_status,
    out,
    progress_bar,
    show,
)
from arsched.cli.network import check_finite
from arsched.errors import ArschedError

if TYPE_CHECKING:  # the CLI imports the heavy modules inside its commands
    from arsched.collective import Schedule


def validate(
    file: Annotated[
        Path, typer.Argument(help="A schedule file (.json, or columnar .npz).", show_default=False)
    ],
    numeric: Annotated[
        bool, typer.Option(help="Also execute it on random float64 data and compare sums.")
    ] = False,
) -> None:
    """Prove a schedule computes the AllReduce sum: exit 0 if valid, 1 with the first violation.

    The check applies the step semantics symbolically (who has whose data in every buffer);
    a malformed file exits 2.
    """
    from arsched.collective import load, numeric_check
    from arsched.collective import validate as check

    schedule = load(file)
    report = check(schedule)
    if report.ok and numeric:
        report = numeric_check(schedule)
    if not report.ok:
        sys.stdout.write(f"INVALID {file}: {report.message}\n")
        raise typer.Exit(1)
    sys.stdout.write(f"OK {file}: {report.message} ({schedule.algorithm} on {schedule.topology.name})\n")


def simulate(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="A schedule file (.json or .npz); several are jobs sharing one network.",
            show_default=False,
        ),
    ],
    model: Annotated[
        str, typer.Option(help="flow: continuous time, max-min link sharing; rounds: the RL paper's rounds.")
    ] = "flow",
    alpha: Annotated[
        str | None, typer.Option(help="Per-transfer overhead, e.g. 5us (default 5us for flow, 0 for rounds).")
    ] = None,
    sync: Annotated[bool, typer.Option("--sync", help="Flow model: a barrier between steps.")] = False,
    fifo: Annotated[bool, FIFO_OPTION] = True,
    start: Annotated[
        str | None,
        typer.Option(help="Several schedules: when each job starts, e.g. 0,2ms (default: all at 0)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
    plot: Annotated[
        Path | None, typer.Option(help="Write link utilisation and a transfer timeline to a PNG.")
    ] = None,
) -> None:
    """Simulate a schedule and print its time beside the lower bound (gap = time / bound).

    Several schedules on one network are jobs simulated together in the flow model, each from
    its --start time: each job's time with the others, alone, and the slowdown between them.
    Every schedule is validated first: a simulator only times schedules that compute the sum.
    """
    from arsched.collective import load
    from arsched.collective import validate as check
    from arsched.defaults import MODELS, default_alpha
    from arsched.units import parse_time

    if model not in MODELS:
        raise ArschedError(f"--model must be flow or rounds, got {model!r}")
    check_output(plot, (".png",), "--plot")
    if len(files) > 1 and (model != "flow" or plot is not None):
        raise ArschedError("several schedules are simulated together in the flow model, without --plot")
    if start is not None and len(files) == 1:
        raise ArschedError("--start is for several schedules (jobs); one schedule starts at 0")
    a = parse_time(alpha) if alpha is not None else default_alpha(model)
    schedules = []
    for file in files:
        schedule = load(file)
        report = check(schedule)
        if not report.ok:
            raise ArschedError(f"{file} is not a valid AllReduce: {report.message}")
        schedules.append(schedule)
    if len(files) > 1:
        starts = None if start is None else [parse_time(x) for x in start.split(",")]
        _simulate_jobs(files, schedules, starts, a, sync, fifo, as_json)
    else:
        _simulate_one(files[0], schedules[0], model, a, sync, fifo, as_json, plot)


def _simulate_one(
    file: Path,
    schedule: Schedule,
    model: str,
    a: float,
    sync: bool,
    fifo: bool,
    as_json: bool,
    plot: Path | None,
) -> None:
    """`simulate` of one schedule: its time, rounds, bound and gap."""
    from arsched.sim import simulate_flow, simulate_rounds

    with np.errstate(over="ignore", invalid="ignore"), progress_bar("simulating") as progress:
        if model == "flow":
            result = simulate_flow(
                schedule, a, synchronous=sync, trace=plot is not None, fifo=fifo, progress=progress
            )
        else:
            result = simulate_rounds(schedule, a)
    check_finite({"simulated_time": result.time_s}, str(file))
    if plot is not None:
        from arsched.viz.plots import plot_simulation

        plot_simulation(result, plot)
    if as_json:
        emit_json(result.to_dict())
        return
    table = Table(
        title=f"{schedule.algorithm} on {schedule.topology.name}: {result.model} model", show_header=False
    )
    table.add_row("time", f"{result.time_s * 1e3:.4f} ms")
    if result.rounds is not None:
        table.add_row("rounds", str(result.rounds))
    table.add_row("lower bound", f"{result.bound_s * 1e3:.4f} ms")
    table.add_row("gap (time / bound)", f"{result.gap:.3f}×")
    table.add_row("algbw / busbw", f"{result.algbw * 8 / 1e9:.2f} / {result.busbw * 8 / 1e9:.2f} Gb/s")
    table.add_row("transfers", f"{len(schedule)} in {schedule.num_steps} steps, α = {a * 1e6:g} µs")
    out.print(table)
    if plot is not None:
        out.print(f"wrote {plot}")


def _simulate_jobs(
    files: list[Path],
    schedules: list[Schedule],
    starts: list[float] | None,
    a: float,
    sync: bool,
    fifo: bool,
    as_json: bool,
) -> None:
    """`simulate` of several schedules as jobs on one network: each job's slowdown."""
    from arsched.sim import simulate_jobs

    names = [str(f) for f in files]
    with np.errstate(over="ignore", invalid="ignore"), progress_bar("simulating jobs") as progress:
        result = simulate_jobs(
            schedules, starts, a, fifo=fifo, synchronous=sync, names=names, progress=progress
        )
    check_finite({"makespan": result.makespan_s}, ", ".join(names))
    if as_json:
        emit_json(result.to_dict())
        return
    table = Table(title=f"{len(files)} jobs on {schedules[0].topology.name}: flow model, α = {a * 1e6:g} µs")
    for column in ("job", "algorithm", "start", "time", "alone", "slowdown"):
        table.add_column(column)
    for job, s in zip(result.jobs, schedules, strict=True):
        table.add_row(
            job.name,
            s.algorithm,
            f"{job.start_s * 1e3:.4f} ms",
            f"{job.time_s * 1e3:.4f} ms",
            f"{job.alone_s * 1e3:.4f} ms",
            f"{job.slowdown:.3f}×",
        )
    out.print(table)
    out.print(f"all done at {result.makespan_s * 1e3:.4f} ms ({result.event_instants:,} event instants)")


def list_algorithms() -> None:
    """List the algorithms `arsched schedule --algorithm NAME` can build, and for which
    collectives."""
    from arsched.algorithms import algorithms

    table = Table(show_header=True)
    table.add_column("name", no_wrap=True)
    table.add_column("collectives")
    table.add_column("what it does")
    for a in algorithms(None):
        table.add_row(a.name, ", ".join(a.collectives), a.summary)
    show(table)


def schedule(
    topology_spec: Annotated[str, typer.Option("--topology", "-t", help=SPEC_HELP, show_default=False)],
    algorithm: Annotated[
        str,
        typer.Option(
            "--algorithm", "-a", help="An algorithm name (see `arsched algorithms`).", show_default=False
        ),
    ],
    out_file: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="Where to write the schedule: .json, or .npz (compact).", show_default=False
        ),
    ],
    size: Annotated[
        str, typer.Option("--size", "-s", help="One rank's buffer: 100MB, 1GiB, 4096 (bytes).")
    ] = "100MB",
    chunks: Annotated[
        int | None, typer.Option(help="Number of chunks (the algorithm's default if not given).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for algorithms that make random choices.")] = 0,
    collective: Annotated[str, COLLECTIVE_OPTION] = "allreduce",
    root: Annotated[str | None, ROOT_OPTION] = None,
    checkpoint: Annotated[
        Path | None,
        typer.Option(help="hrl: a policy folder made by `arsched train` (default: the shipped one)."),
    ] = None,
    samples: Annotated[
        int, typer.Option(help="hrl: keep the best of the deterministic run and k − 1 seeded samples.")
    ] = 1,
    fallback: Annotated[
        bool,
        typer.Option(
            "--fallback/--no-fallback",
            help="hrl: keep greedy-trees' plan where it is faster than the policy's schedule.",
        ),
    ] = True,
    budget: Annotated[
        float | None,
        typer.Option(
            help="auto: seconds to spend trying algorithms (default 60); simulating what was built "
            "but cut short may take as long again."
        ),
    ] = None,
) -> None:
    """Build a schedule (AllReduce unless --collective says otherwise), validate it and write it as
    arsched.schedule/1 JSON.

    `-a auto` tries every algorithm that applies, cheapest first, simulates each in the default
    flow model (in-order connections, α 5 µs) and keeps the fastest: what to run first on a
    network nobody tuned for.
    """
    from arsched.algorithms import build
    from arsched.collective import save
    from arsched.collective import validate as check
    from arsched.topology import parse_spec
    from arsched.units import parse_size

    check_output(out_file, (".json", ".npz"), "--out")
    check_collective(collective)
    nbytes = parse_size(size)
    topo = parse_spec(topology_spec)
    params = {} if chunks is None else {"chunks": chunks}
    if algorithm == "hrl":
        params.update(
            samples=samples,
            seed=seed,
            fallback=fallback,
            **({} if checkpoint is None else {"checkpoint": checkpoint}),
        )
    elif checkpoint is not None or samples != 1 or not fallback:
        raise ArschedError("--checkpoint, --samples and --no-fallback apply only to --algorithm hrl")
    if budget is not None:
        if algorithm != "auto":
            raise ArschedError("--budget applies only to --algorithm auto")
        params["budget"] = budget
    _check_params(algorithm, params, collective)
    start = time.perf_counter()
    with log_status("arsched.algorithms.auto") if algorithm == "auto" else nullcontext():
        result = build(algorithm, topo, None, nbytes, collective, root, **params)
    took = time.perf_counter() - start
    result.meta["seed"] = seed
    report = check(result)
    if not report.ok:  # a builder bug: never write a wrong schedule
        raise RuntimeError(f"{algorithm} built an invalid schedule: {report.message}")
    save(result, out_file)
    out.print(f"wrote {out_file}: {report.message}; synthesised in {took:.2f} s")
    if "auto" in result.meta:
        search = result.meta["auto"]
        gaps = [c["gap"] for c in search["candidates"] if c["algorithm"] == search["chosen"] and "gap" in c]
        if gaps:
            gap, model = gaps[0], search["model"]
            out.print(f"auto chose {search['chosen']}: {gap:.3f}× the bound in the {model} model")
        else:
            out.print(
                f"auto chose {search['chosen']} by its lower bound: no simulation ended within the budget "
                "(a larger --budget times them)"
            )
    kept = result.meta.get("hrl", {})
    if kept.get("source", "policy") != "policy":
        out.print(
            f"hrl kept greedy-trees' plan, {kept['greedy_gap']:.3f}× the bound in the flow model, where "
            f"the policy's schedule is {kept['policy_gap']:.3f}× (--no-fallback writes the policy's)"
        )


def _check_params(algorithm: str, params: dict[str, object], collective: str = "allreduce") -> None:
    """Refuse options the algorithm's builder of `collective` does not take (tree-packing has no
    chunk count), naming the parameters it does take."""
    from arsched.algorithms import get

    takes = get(algorithm).parameters_of(collective)
    unknown = [] if takes is None else [k for k in params if k not in takes]
    if unknown:
        raise ArschedError(
            f"{algorithm} takes no --{unknown[0]}; its parameters are {', '.join(takes) or 'none'} "
            "(set them in a sweep config's params)"
        )


def compare(
    topology_spec: Annotated[str, typer.Option("--topology", "-t", help=SPEC_HELP, show_default=False)],
    algorithms: Annotated[
        str | None, typer.Option("--algorithms", "-a", help="Comma-separated names (default: all).")
    ] = None,
    size: Annotated[
        str, typer.Option("--size", "-s", help="Comma-separated sizes, e.g. 1MB,256MB.")
    ] = "1MB,256MB",
    model: Annotated[str, typer.Option(help="flow or rounds.")] = "flow",
    alpha: Annotated[
        str | None, typer.Option(help="Per-transfer overhead (default 5us flow, 0 rounds).")
    ] = None,
    fifo: Annotated[bool, FIFO_OPTION] = True,
    csv_file: Annotated[Path | None, typer.Option("--csv", help="Also write the rows to a CSV file.")] = None,
    plot: Annotated[Path | None, typer.Option(help="Bar chart of the gaps to a PNG.")] = None,
    collective: Annotated[str, COLLECTIVE_OPTION] = "allreduce",
    root: Annotated[str | None, ROOT_OPTION] = None,
) -> None:
    """Compare algorithms on one topology: time, rounds, bandwidths, bound, gap, synthesis time
    (AllReduce unless --collective says otherwise).

    Every schedule is validated before it is simulated; algorithms that do not apply to the
    topology are listed with the reason.
    """
    from arsched.algorithms.evaluate import evaluate_all
    from arsched.collective.kinds import TITLES
    from arsched.defaults import MODELS
    from arsched.topology import parse_spec
    from arsched.units import parse_size, parse_time

    if model not in MODELS:
        raise ArschedError(f"--model must be flow or rounds, got {model!r}")
    check_collective(collective)
    check_output(csv_file, (".csv",), "--csv")
    check_output(plot, (".png",), "--plot")
    sizes = [parse_size(x) for x in size.split(",") if x.strip()]
    if not sizes or min(sizes) <= 0:
        raise ArschedError(f"--size needs positive sizes, got {size!r}")
    names = [x.strip() for x in algorithms.split(",") if x.strip()] if algorithms else None
    if names:
        from arsched.algorithms import get

        for name in names:
            get(name).builder(collective)
    topo = parse_spec(topology_spec)
    a = parse_time(alpha) if alpha is not None else None
    rows = evaluate_all(topo, sizes, names, model, a, fifo, collective, root)
    at_once = model == "flow" and not fifo
    what = "" if collective == "allreduce" else f"{TITLES[collective]}, "
    table = Table(title=f"{what}{topo.name}, {model} model" + (", every transfer at once" if at_once else ""))
    cols = ["algorithm", "MB", "time ms", "bound ms", "gap", "busbw Gb/s", "synth ms"]
    cols += ["rounds"] if model == "rounds" else []
    for col in cols:  # names never cut: the numeric columns' headers wrap instead (see show)
        if col == "algorithm":
            table.add_column(col, no_wrap=True)
        else:
            table.add_column(col, justify="right")
    skipped = {}
    for r in rows:
        if r.note:
            skipped[r.algorithm] = r.note
            continue
        cells = [
            r.algorithm,
            f"{r.bytes / 1e6:g}",
            f"{r.time_s * 1e3:.4g}",
            f"{r.bound_s * 1e3:.4g}",
            f"{r.gap:.3f}",
            f"{r.busbw * 8 / 1e9:.1f}",
            f"{r.synthesis_s * 1e3:.1f}",
        ]
        table.add_row(*cells, *([str(r.rounds)] if model == "rounds" else []))
    show(table)
    for name, why in skipped.items():
        out.print(f"[dim]{name}: {why}[/dim]")
    if csv_file is not None:
        import csv
        import io

        from arsched.fileio import write_atomic

        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(rows[0].to_dict()))
        writer.writeheader()
        writer.writerows(r.to_dict() for r in rows)
        write_atomic(csv_file, buf.getvalue())
        out.print(f"wrote {csv_file}")
    if plot is not None:
        from arsched.viz.plots import plot_gaps

        plot_gaps(rows, f"{what}{topo.name}, {model} model", plot)
        out.print(f"wrote {plot}")


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command()(validate)
    app.command()(simulate)
    app.command("algorithms")(list_algorithms)
    app.command()(schedule)
    app.command()(compare)
