"""`arsched cluster run|compare|schedulers`: trace-driven scheduling of ring-all-reduce jobs on a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress
from rich.table import Table

from arsched.cli.common import emit_json, fits, out, show
from arsched.errors import ArschedError

DEFAULT_CLUSTER = "leafspine:leaves=8,spines=4,servers_per_leaf=8,gpus=8"
TRACE_HELP = (
    "Job trace: a Tiresias CSV, a Philly cluster_job_log .json, a Helios cluster_log.csv, an Alibaba "
    "PAI pai_task_table.csv (with pai_job_table.csv beside it for submission times), or "
    "synthetic:jobs=1000,seed=1 (Philly-like)."
)
CLUSTER_HELP = (
    "A topology spec with gpus=G and optional intra=BW (intra-server bandwidth), e.g. "
    f"'{DEFAULT_CLUSTER}'; a Tiresias cluster spec CSV; or a host-list CSV (ip,DSW,PSW,ASW) "
    "such as the Lingjun file, optionally followed by ',gpus=8'."
)
NETWORK_HELP = (
    "reserved (GADGET's model: bandwidth reserved per ring), shared (rings share links max-min "
    "fairly, as the network does) or ideal (each ring alone: the contention-blind view)."
)

Trace = Annotated[str, typer.Option("--trace", help=TRACE_HELP)]
ClusterSpec = Annotated[str, typer.Option("--cluster", help=CLUSTER_HELP)]
ObjectiveOpt = Annotated[
    str,
    typer.Option(
        help="Utility: jct (sigmoid of JCT), excess (progress up to the required work), energy, fair "
        "(alpha-fair) or loss (loss removed on a concave convergence curve)."
    ),
]
Slot = Annotated[
    str | None,
    typer.Option(
        help="Slot length (--engine slots) or the least time between two decisions (--engine events), "
        "e.g. 30s (default: median job duration / 10)."
    ),
]
Engine = Annotated[
    str | None,
    typer.Option(
        help="When the scheduler decides: events (at arrivals, completions and its own re-allocation "
        "events, at least --slot apart; nothing is computed in between) or slots (every slot, as "
        "GADGET's paper plans). Default: events.",
        show_default=False,
    ),
]
Reallocate = Annotated[
    str | None,
    typer.Option(
        help="With --engine events, also re-plan at least this often, e.g. 600s (default: only at events).",
        show_default=False,
    ),
]
Restart = Annotated[
    str | None,
    typer.Option(
        help="Progress a job loses each time its GPUs change (moved, resized, resumed after a pause), "
        "the same for every job, e.g. 30s; 0s makes restarts free. Default: per model, its checkpoint "
        "(12 bytes per parameter) saved and reloaded at 1 GB/s plus a 10 s relaunch (10-18.5 s).",
        show_default=False,
    ),
]
Elastic = Annotated[
    int | None,
    typer.Option(
        help="Every job may grow to N x its requested GPUs, for every scheduler; FIFO, SJF and Tiresias "
        "run jobs at their request whatever N (rigid by nature). Default: 1, every job rigid.",
        show_default=False,
    ),
]
Seed = Annotated[int, typer.Option(help="Seed of every random choice.")]
SkipBad = Annotated[bool, typer.Option("--skip-bad-rows", help="Drop malformed trace rows and count them.")]
KeepFailed = Annotated[
    bool,
    typer.Option(
        "--keep-failed",
        help="Keep the jobs the trace records as killed or failed (their recorded run time is their "
        "work); by default only completed jobs run.",
    ),
]
GpuSpeed = Annotated[
    str | None,
    typer.Option(
        help="Speed of GPU types relative to the simulated V100-class GPU, for traces that record the "
        "type each job ran on (Alibaba PAI), e.g. T4=0.6,P100=0.55 (measured speed-ups); types not "
        "named keep the default, peak fp32 over the V100's.",
        show_default=False,
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")]
Timings = Annotated[
    bool,
    typer.Option(
        "--timings",
        help="With --json, also print scheduler_s_per_slot (wall-clock; without it the JSON is the "
        "same bytes for the same inputs).",
    ),
]
ArrivalScale = Annotated[
    float,
    typer.Option(
        help="Multiply every arrival time by this factor: below 1 compresses the trace "
        "(0.25 = jobs four times as fast, four times the load)."
    ),
]


def _setup(
    trace: str,
    cluster: str,
    skip_bad: bool,
    objective: str,
    slot: str | None,
    restart: str | None,
    scale: float,
    elastic: int | None,
    engine: str | None,
    reallocate: str | None,
    keep_failed: bool,
    gpu_speed: str | None,
):
    """Check every option, then load the trace and the cluster; returns them with the settings
    every run shares (`config(mode)` gives a mode's SimConfig) and the elasticity."""
    from arsched.cluster import SimConfig, load_trace, parse_cluster
    from arsched.cluster.config import DEFAULT_ENGINE, ENGINES
    from arsched.cluster.gpus import GPU_SPEED, parse_gpu_speeds
    from arsched.cluster.jobs import DEFAULT_ELASTIC
    from arsched.cluster.utility import Objective
    from arsched.units import parse_time

    obj = Objective(objective)
    engine = DEFAULT_ENGINE if engine is None else engine
    _check_choice("--engine", [engine], ENGINES)
    slot_s = parse_time(slot) if slot is not None else None
    if slot_s is not None and slot_s <= 0:
        raise ArschedError(f"--slot must be positive, got {slot!r}")
    every = parse_time(reallocate) if reallocate is not None else None
    if every is not None and engine != "events":
        raise ArschedError(
            "--reallocate applies to --engine events only (the slots engine re-plans every slot)"
        )
    if every is not None and every <= 0:
        raise ArschedError(f"--reallocate must be positive, got {reallocate!r}")
    restart_s = parse_time(restart) if restart is not None else None
    elastic = DEFAULT_ELASTIC if elastic is None else elastic
    speeds = parse_gpu_speeds(gpu_speed) if gpu_speed is not None else GPU_SPEED
    wl, skipped = load_trace(trace, skip_bad, elastic, keep_failed, speeds)
    wl = wl.scale_arrivals(scale)
    cl = parse_cluster(cluster)

    def config(mode: str, seed: int) -> SimConfig:
        return SimConfig(network=mode, objective=obj, engine=engine, slot=slot_s, reallocate=every,
                         restart=restart_s, seed=seed)  # fmt: skip

    return wl, skipped, cl, config, elastic


def _title(wl, cl, cfg, elastic: int, slot_s: float) -> str:
    """What a table ran: trace, cluster, engine, slot and the settings every scheduler shared."""
    timing = (
        f"slots of {slot_s:g} s"
        if cfg.engine == "slots"
        else f"events at least {slot_s:g} s apart"
        + (f", re-planned every {cfg.reallocate:g} s" if cfg.reallocate is not None else "")
    )
    return (
        f"{wl.name} ({len(wl)} jobs) on {cl.describe()}, {timing}, elastic {elastic}, "
        f"restart {cfg.restart_label}"
    )


def _run_all(wl, cl, pairs, config_for, quiet: bool):
    from arsched.cluster import simulate
    from arsched.cluster.schedulers import get_scheduler

    results = []
    with Progress(console=out, transient=True, disable=quiet or not out.is_terminal) as bar:
        for name, mode in pairs:
            task = bar.add_task(f"{name} ({mode})", total=1.0)
            res = simulate(
                wl, cl, get_scheduler(name), config_for(mode), lambda f, t=task: bar.update(t, completed=f)
            )
            results.append(res)
    return results


# (header, cell) of the metric columns; the first JOB_COLUMNS are about the jobs, the rest about
# the cluster, and the two halves become two tables where one would not fit the terminal
METRICS = (
    ("done", lambda r: f"{r.finished}/{r.jobs}"),
    ("avg JCT s", lambda r: f"{r.avg_jct_s:.0f}"),
    ("p95 JCT s", lambda r: f"{r.p95_jct_s:.0f}"),
    ("makespan s", lambda r: f"{r.makespan_s:.0f}"),
    ("utility", lambda r: f"{r.total_utility:.2f}"),
    ("GPU util", lambda r: f"{r.gpu_utilization:.3f}"),
    ("kWh", lambda r: f"{r.energy_kwh:.1f}"),
    ("Jain", lambda r: f"{r.jain_index:.3f}"),
    ("restarts", lambda r: f"{r.restarts}"),
    ("ms/decision", lambda r: f"{r.scheduler_s_per_slot * 1e3:.2f}"),
)
JOB_COLUMNS = 5


def _table(title: str | None, results, metrics) -> Table:
    table = Table(title=title)
    for c in ("scheduler", "network"):
        table.add_column(c, no_wrap=True)
    for c, _ in metrics:
        table.add_column(c, justify="right")
    for r in results:
        table.add_row(r.scheduler, r.network, *(cell(r) for _, cell in metrics))
    return table


def _tables(title: str, results) -> list[Table]:
    """One table of every metric, or two (jobs, then cluster) where one would cut a number."""
    whole = _table(title, results, METRICS)
    if fits(whole):
        return [whole]
    return [_table(title, results, METRICS[:JOB_COLUMNS]), _table(None, results, METRICS[JOB_COLUMNS:])]


def _names(option: str, text: str) -> list[str]:
    """The names of a comma-separated option; an option that names nothing is refused."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        raise ArschedError(f"{option} {text!r} names nothing; give one or more names joined by ','")
    return names


def _check_choice(option: str, values: list[str], allowed: tuple[str, ...]) -> None:
    for v in values:
        if v not in allowed:
            raise ArschedError(f"{option} {v!r} is not one of {', '.join(allowed)}")


def _check_network(modes: list[str]) -> None:
    from arsched.cluster.network import MODES

    _check_choice("--network", modes, MODES)


def run(
    trace: Trace,
    cluster: ClusterSpec = DEFAULT_CLUSTER,
    scheduler: Annotated[
        str,
        typer.Option(
            help="gadget, fifo, sjf, tiresias, optimus or random (see `arsched cluster schedulers`)."
        ),
    ] = "gadget",
    objective: ObjectiveOpt = "jct",
    network: Annotated[str, typer.Option(help=NETWORK_HELP)] = "reserved",
    engine: Engine = None,
    slot: Slot = None,
    reallocate: Reallocate = None,
    restart: Restart = None,
    elastic: Elastic = None,
    seed: Seed = 0,
    skip_bad_rows: SkipBad = False,
    keep_failed: KeepFailed = False,
    gpu_speed: GpuSpeed = None,
    arrival_scale: ArrivalScale = 1.0,
    json_out: Json = False,
    timings: Timings = False,
) -> None:
    """Run one scheduler over a trace and print its metrics."""
    from arsched.cluster.schedulers import get_scheduler

    get_scheduler(scheduler)
    _check_network([network])
    wl, skipped, cl, config, elastic = _setup(
        trace, cluster, skip_bad_rows, objective, slot, restart, arrival_scale, elastic, engine, reallocate,
        keep_failed, gpu_speed,
    )  # fmt: skip
    cfg = config(network, seed)
    (res,) = _run_all(wl, cl, [(scheduler, network)], lambda _m: cfg, json_out)
    if json_out:
        emit_json(res.to_dict(timings))
        return
    if skipped:
        out.print(f"skipped {skipped} bad rows of {trace}")
    for table in _tables(_title(wl, cl, cfg, elastic, res.slot_s), [res]):
        show(table)


def compare(
    trace: Trace,
    cluster: ClusterSpec = DEFAULT_CLUSTER,
    schedulers: Annotated[
        str | None, typer.Option(help="Comma-separated schedulers (default: all).", show_default=False)
    ] = None,
    objective: ObjectiveOpt = "jct",
    network: Annotated[
        str, typer.Option(help="One or more modes, comma-separated. " + NETWORK_HELP)
    ] = "reserved",
    engine: Engine = None,
    slot: Slot = None,
    reallocate: Reallocate = None,
    restart: Restart = None,
    elastic: Elastic = None,
    seed: Seed = 0,
    skip_bad_rows: SkipBad = False,
    keep_failed: KeepFailed = False,
    gpu_speed: GpuSpeed = None,
    arrival_scale: ArrivalScale = 1.0,
    plot: Annotated[
        Path | None, typer.Option(help="Folder for jct_cdf.png, utilization.png, utility.png.")
    ] = None,
    json_out: Json = False,
    timings: Timings = False,
) -> None:
    """Run several schedulers (in one or more network modes) over a trace, side by side."""
    from arsched.cluster.schedulers import SCHEDULERS, get_scheduler

    names = _names("--schedulers", schedulers) if schedulers is not None else list(SCHEDULERS)
    for n in names:
        get_scheduler(n)
    modes = _names("--network", network)
    _check_network(modes)
    if plot is not None and not plot.is_dir():
        raise ArschedError(f"--plot {plot} is not an existing folder")
    wl, skipped, cl, config, elastic = _setup(
        trace, cluster, skip_bad_rows, objective, slot, restart, arrival_scale, elastic, engine, reallocate,
        keep_failed, gpu_speed,
    )  # fmt: skip

    def config_for(mode: str):
        return config(mode, seed)

    results = _run_all(wl, cl, [(n, m) for m in modes for n in names], config_for, json_out)
    if plot is not None:
        from arsched.viz.cluster import plot_runs

        plot_runs(results, plot)
    if json_out:
        emit_json(
            {
                "runs": [
                    {"scheduler": r.scheduler, "network": r.network, **r.to_dict(timings)} for r in results
                ]
            }
        )
        return
    if skipped:
        out.print(f"skipped {skipped} bad rows of {trace}")
    out.print(*_tables(_title(wl, cl, config_for(modes[0]), elastic, results[0].slot_s), results))
    if plot is not None:
        out.print(f"plots in {plot}/: jct_cdf.png, utilization.png, utility.png")


def list_schedulers() -> None:
    """List the schedulers `arsched cluster run --scheduler NAME` can run."""
    from arsched.cluster.schedulers import SCHEDULERS

    table = Table(show_header=True)
    table.add_column("name", no_wrap=True)
    table.add_column("what it does")
    for name, cls in SCHEDULERS.items():
        table.add_row(name, cls.about)
    show(table)


def register(app: typer.Typer) -> None:
    """Add the `arsched cluster` group (run, compare, schedulers) to `app`."""
    group = typer.Typer(
        help=(
            "Schedule a trace of ring-all-reduce training jobs on a GPU cluster (GADGET and baselines) "
            "and score it: JCT, makespan, utilisation, energy, utility, fairness.\n\n"
            "Try `arsched cluster compare --trace ../shared/data/tiresias_60_job.csv "
            "--cluster ../shared/data/tiresias_n32g4.csv --network reserved,shared`."
        ),
        no_args_is_help=True,
    )
    group.command("run")(run)
    group.command("compare")(compare)
    group.command("schedulers")(list_schedulers)
    app.add_typer(group, name="cluster")
