"""GADGET and the baselines on traces, every scheduler under the same settings; speed; ILP ratio.

Every comparison runs all schedulers with one elasticity setting (`elastic`: a job may grow to
elastic x its request; FIFO, SJF, Tiresias, Themis and Gandiva stay at the request whatever it
is) and one restart cost (by default each model's checkpoint save + reload + relaunch,
`arsched.cluster.models`).

1. The Tiresias 60-job trace on its 16-server x 4-GPU spec, as recorded and with arrivals
   compressed 4x (`--arrival-scale 0.25`: the recorded trace offers the cluster ~23 % load, too
   little to separate schedulers), and a 1,000-job synthetic Philly-like trace on a leaf-spine of
   64 servers x 8 GPUs (8 leaves, 4 spines, 100 Gb/s), every scheduler, objective `jct`, in
   `reserved` and `shared` modes, plus `ideal` (each ring alone) to show how much contention
   costs each scheduler's decisions under real sharing; all of it rigid (elastic 1) and elastic
   (elastic 2), then GADGET's lead over the best baseline per setting.
   Spread: the synthetic trace over 5 seeds at three loads (arrivals as generated, compressed 2x
   and 4x), shared mode, rigid and elastic, every scheduler: mean +- std of the average JCT and
   GADGET's per-seed gap to each scheduler (mean, min-max).
2. Restart-cost sensitivity: the 1,000-job trace, shared mode, every scheduler but the random
   ablation at fixed restart costs 0-120 s, rigid and elastic.
3. GADGET on the 1,000-job trace under each objective (reserved mode, elastic 2).
4. Wall time of every scheduler on the 1,000-job trace per mode (target: < 60 s), and GADGET's
   decision time for one slot with 1,000 active jobs on 512 servers x 8 GPUs (target <= 20 ms, as
   in `--only scale`).

`--only scale` runs instead the speed targets: GADGET's decision for 1,000 active jobs on 512
servers (target <= 20 ms), every scheduler on a 5,000-job trace on 1,024 servers (all together
<= 60 s), growth with jobs (1,250 to 10,000; at most n log n) and GADGET on a 100,000-job trace on
2,048 servers (time and memory), each trace asking for 0.9 of the GPUs, and the 100,000-job trace
again asking for 1.5 of them (overloaded: the queue grows while jobs arrive); its own section.

`--only ilp` runs instead every scheduler's summed slot gain over the exact ILP optimum (HiGHS)
on random small instances, for every objective, with GADGET's candidate sizes and with free sizes:
60 on one switch (one level), 30 on two-leaf leaf-spines (two levels); its own section.

Sections 1-4 run the slots engine (GADGET's model: a decision every slot). `--only engines` runs
instead the two engines side by side (its own section of docs/results.md): every scheduler but
the random ablation on the 5,000-job synthetic trace on 64 servers x 8 GPUs, shared mode, and
GADGET at elastic 2 in the reserved mode; GADGET and Tiresias on the 1,000-job trace and on the
Tiresias 60-job trace as recorded: decisions, wall time, average JCT of each.

`--only fingerprints [FILE]` prints one line per run of a fixed set (every scheduler, both engines,
reserved and shared, elastic 1 and 2, as generated and overloaded, restart 0, periodic re-planning,
every objective; small traces, a few minutes): a hash of its JCTs and decision instants, its average
JCT, restarts and decisions; given FILE (an earlier run's output), the lines that differ, exit 1 if
any. A change meant to leave results alone must leave these lines alone.

Run: python benchmarks/bench_cluster.py [--quick] [--only engines|ilp|scale|fingerprints]
(--quick: 200 jobs, fewer ILP instances, printed only, docs/results.md left alone)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from arsched.cluster import SimConfig, load_trace, parse_cluster, simulate
from arsched.cluster.ilp import TIME_LIMIT, compare, random_instance
from arsched.cluster.schedulers import SCHEDULERS, SlotState, get_scheduler
from arsched.cluster.synthetic import synthetic
from arsched.cluster.utility import OBJECTIVES, Objective

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import markdown, publish

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
LEAFSPINE = "leafspine:leaves=8,spines=4,servers_per_leaf=8,gpus=8"
MODES = ("reserved", "shared", "ideal")
ELASTIC = ((1, "rigid: elastic 1"), (2, "elastic 2"))
RESTARTS = (0.0, 15.0, 30.0, 60.0, 120.0)
RIGID = ("fifo", "sjf", "tiresias", "themis", "gandiva")  # rigid by nature: elasticity leaves them alone
BASELINES = (
    "fifo",
    "sjf",
    "tiresias",
    "optimus",
    "pollux",
    "themis",
    "gandiva",
)  # GADGET's lead is against these
SEEDS = (1, 2, 3, 4, 5)  # the spread table's synthetic traces
ENGINE = "slots"  # sections 1-5: GADGET's slotted model (the engines section compares both)
LOADS = ((1.0, "load x1"), (0.5, "load x2 (--arrival-scale 0.5)"), (0.25, "load x4 (--arrival-scale 0.25)"))


def run_trace(wl, cl, config: SimConfig = SimConfig(), modes=MODES, names=tuple(SCHEDULERS)):
    """Every scheduler in every mode under one config: results and wall times per mode."""
    results, walls = {}, dict.fromkeys(modes, 0.0)
    for mode in modes:
        for name in names:
            t0 = time.perf_counter()
            cfg = SimConfig(network=mode, restart=config.restart, objective=config.objective, engine=ENGINE)
            results[name, mode] = simulate(wl, cl, get_scheduler(name), cfg)
            walls[mode] += time.perf_counter() - t0
    return results, walls


def table(results) -> str:
    rows = []
    for name in SCHEDULERS:
        for mode in ("reserved", "shared"):
            r = results[name, mode]
            blind = results[name, "ideal"]
            rows.append([
                name + (" (rigid)" if name in RIGID else ""), mode, f"{r.finished}/{r.jobs}",
                f"{r.avg_jct_s:.0f}", f"{r.p95_jct_s:.0f}", f"{r.makespan_s:.0f}", len(r.slot_starts),
                f"{r.total_utility:.1f}", f"{r.gpu_utilization:.3f}", f"{r.jain_index:.3f}", r.restarts,
                f"{r.avg_jct_s / blind.avg_jct_s:.2f}", f"{r.scheduler_s_per_slot * 1e3:.2f}",
            ])  # fmt: skip
    return markdown(
        ["scheduler", "network", "done", "avg JCT s", "p95 JCT s", "makespan s", "slots", "utility (jct)",
         "GPU util", "Jain", "restarts", "avg JCT / ideal", "ms/slot"], rows,
    )  # fmt: skip


def lead(setting: str, results) -> list[list[str]]:
    """GADGET's average JCT against the best baseline's, per network mode (negative: GADGET ahead)."""
    rows = []
    for mode in ("reserved", "shared"):
        g = results["gadget", mode].avg_jct_s
        best = min(BASELINES, key=lambda n: results[n, mode].avg_jct_s)
        b = results[best, mode].avg_jct_s
        rows.append([setting, mode, f"{g:.0f}", f"{best} {b:.0f}", f"{(g / b - 1) * 100:+.0f} %"])
    return rows


def spread_table(jobs: int, cl) -> str:
    """Every scheduler on the synthetic trace over SEEDS at each of LOADS, shared mode, rigid and
    elastic: mean +- std of the average JCT, and GADGET's gap to the scheduler per seed."""
    jct = {}
    for elastic, _ in ELASTIC:
        for seed in SEEDS:
            for scale, _ in LOADS:
                wl = synthetic(jobs, seed=seed, elastic=elastic).scale_arrivals(scale)
                res, _ = run_trace(wl, cl, modes=("shared",))
                for name in SCHEDULERS:
                    jct[name, elastic, scale, seed] = res[name, "shared"].avg_jct_s
    rows = []
    for elastic, _ in ELASTIC:
        for name in SCHEDULERS:
            row = [name + (" (rigid)" if name in RIGID else ""), str(elastic)]
            for scale, _ in LOADS:
                v = np.array([jct[name, elastic, scale, s] for s in SEEDS])
                g = np.array([jct["gadget", elastic, scale, s] for s in SEEDS]) / v * 100 - 100
                gap = f"{g.mean():+.1f} % ({g.min():+.1f} to {g.max():+.1f})"
                row += [f"{v.mean():.0f} ± {v.std():.0f}", "-" if name == "gadget" else gap]
            rows.append(row)
    head = ["scheduler", "elastic"]
    for _, what in LOADS:
        head += [f"avg JCT s, {what.split(' (')[0]}", f"GADGET vs it, {what.split(' (')[0]}"]
    return (
        f"**Spread over seeds and loads**: synthetic Philly-like {jobs:,} jobs, seeds "
        f"{', '.join(map(str, SEEDS))}, at {', '.join(w for _, w in LOADS[:-1])} and {LOADS[-1][1]}, "
        "64 servers x 8 GPUs, "
        "leaf-spine 8x4, shared mode, restart per model. Average JCT: mean ± std over the seeds; "
        "GADGET vs it: GADGET's average JCT over the scheduler's on the same trace, minus 1, mean over "
        "the seeds (min to max); negative: GADGET ahead\n\n" + markdown(head, rows)
    )


def sensitivity(wl, cl, elastic: int) -> list[list[str]]:
    """Average JCT (and restarts) of every scheduler but the random ablation per fixed restart cost."""
    names = [n for n in SCHEDULERS if n != "random"]
    runs = {c: run_trace(wl, cl, SimConfig(restart=c), ("shared",), names)[0] for c in RESTARTS}
    return [
        [f"{name}{' (rigid)' if name in RIGID else ''}", f"{elastic}"]
        + [f"{runs[c][name, 'shared'].avg_jct_s:.0f} ({runs[c][name, 'shared'].restarts})" for c in RESTARTS]
        for name in names
    ]


def decision_time(cold: bool = False, repeats: int = 7) -> tuple[float, float, int]:
    """GADGET's decision for 1,000 active jobs (elastic 2, none running yet) on 512 servers x 8
    GPUs: best and median of `repeats`, routes found beforehand (as in a running simulation); `cold`:
    the rings' links looked up afresh every time (a warm cache holds this decision's rings, as
    it holds most of a running simulation's)."""
    cl = parse_cluster("leafspine:leaves=32,spines=8,servers_per_leaf=16,gpus=8")
    wl = synthetic(1000, seed=5, elastic=2)
    st = SlotState(float(wl.arrival.max()), 60.0, np.arange(len(wl)), wl.work.copy(), np.zeros(len(wl)), {},
                   wl, cl, Objective("jct"), 5e-6, 0)  # fmt: skip
    g = get_scheduler("gadget")
    g.decide(st)
    times, placed = [], 0
    for _ in range(repeats):
        if cold:
            cl.ring_cache.clear()
        t0 = time.perf_counter()
        placed = len(g.decide(st))
        times.append(time.perf_counter() - t0)
    return min(times), float(np.median(times)), placed


def objectives(wl, cl) -> str:
    """GADGET under every objective, each scored by its own total utility."""
    rows = []
    for name in OBJECTIVES:
        r = simulate(wl, cl, get_scheduler("gadget"), SimConfig(objective=Objective(name), engine=ENGINE))
        rows.append([name, f"{r.finished}/{r.jobs}", f"{r.avg_jct_s:.0f}", f"{r.p95_jct_s:.0f}",
                     f"{r.makespan_s:.0f}", f"{r.total_utility:.1f}", f"{r.gpu_utilization:.3f}",
                     f"{r.energy_kwh:.0f}", f"{r.jain_index:.3f}"])  # fmt: skip
    return markdown(
        [
            "objective",
            "done",
            "avg JCT s",
            "p95 JCT s",
            "makespan s",
            "own utility",
            "GPU util",
            "kWh",
            "Jain",
        ],
        rows,
    )


def _deciding(r) -> float:
    """Seconds the scheduler spent deciding over a whole run."""
    return r.scheduler_s_per_slot * len(r.slot_starts)


def engines(quick: bool = False) -> None:
    """Both engines on the same runs, side by side (see the module docstring)."""
    jobs = 500 if quick else 5000
    cl = parse_cluster(LEAFSPINE)
    wl60, _ = load_trace(str(DATA / "tiresias_60_job.csv"))
    cases = [
        (f"synthetic {jobs:,} jobs, 64x8 GPUs", synthetic(jobs, seed=1), cl, "shared", name)
        for name in SCHEDULERS
        if name != "random"  # it redraws every ring every slot, so both engines decide every interval
    ]
    cases.append((f"synthetic {jobs:,} jobs, 64x8 GPUs, elastic 2", synthetic(jobs, seed=1, elastic=2), cl,
                  "reserved", "gadget"))  # fmt: skip
    wl1k = synthetic(jobs // 5, seed=1)
    cases += [
        (f"synthetic {jobs // 5:,} jobs, 64x8 GPUs", wl1k, cl, "shared", n) for n in ("gadget", "tiresias")
    ]
    spec60 = parse_cluster(str(DATA / "tiresias_cluster_spec.csv"))
    cases += [
        ("Tiresias 60 jobs as recorded, 16x4 GPUs", wl60, spec60, "shared", n) for n in ("gadget", "tiresias")
    ]
    rows, totals = [], {"slots": 0.0, "events": 0.0}
    for what, wl, c, mode, name in cases:
        runs = {}
        for engine in ("slots", "events"):
            t0 = time.perf_counter()
            runs[engine] = simulate(wl, c, get_scheduler(name), SimConfig(network=mode, engine=engine))
            runs[engine].wall = time.perf_counter() - t0
            totals[engine] += runs[engine].wall
        s, e = runs["slots"], runs["events"]
        rows.append([what, f"{name} ({mode})", len(s.slot_starts), len(e.slot_starts),
                     f"{s.wall:.2f} ({_deciding(s):.2f})", f"{e.wall:.2f} ({_deciding(e):.2f})",
                     f"{s.wall / e.wall:.2f}", f"{s.avg_jct_s:.0f}", f"{e.avg_jct_s:.0f}",
                     f"{(e.avg_jct_s / s.avg_jct_s - 1) * 100:+.2f} %"])  # fmt: skip
    rows.append(["all of the above", "", "", "", f"{totals['slots']:.1f}", f"{totals['events']:.1f}",
                 f"{totals['slots'] / totals['events']:.2f}", "", "", ""])  # fmt: skip
    table = markdown(
        ["trace", "scheduler (network)", "decisions, slots", "decisions, events", "wall s (deciding), slots",
         "wall s (deciding), events", "speed-up", "avg JCT s, slots", "avg JCT s, events",
         "JCT events vs slots"],
        rows,
    )  # fmt: skip
    intro = (
        "`benchmarks/bench_cluster.py --only engines`. The same runs in the slots engine (a decision "
        "every slot) and the events engine (a decision at arrivals, completions and the scheduler's "
        "re-allocation events, at least a slot apart; no periodic re-planning): decisions taken, wall "
        "time of the whole run and, in brackets, of the scheduler's decisions alone, average JCT. Slot "
        "(and minimum interval) a tenth of the median job "
        "duration, elastic 1 unless said, restart per model. Wall times on 2 cores shared with other work: "
        "reruns of the same run differed by up to 25 %, so smaller differences are noise."
    )
    if quick:
        print(intro, table, sep="\n\n")
        return
    publish("Cluster simulator: slots and events engines", intro, table)


ILP_CLUSTERS = (
    (False, "one level: 2-4 servers x 4 GPUs, one switch (star ILP)"),
    (True, "two levels: 2 leaves x 1-2 servers x 2 GPUs, 1-2 spines (ring ILP)"),
)
ILP_SIZES = ((False, "GADGET's candidates"), (True, "free (1 to the bound)"))


def _ratio(gain: float, opt) -> float:
    """A scheduler's gain over the optimum; over HiGHS's upper bound where the ILP hit its time
    limit (so a lower bound on the ratio); 1 where nothing gains."""
    top = opt.gain if opt.proven else opt.bound
    return gain / top if top > 0 else 1.0


def ilp(quick: bool = False) -> None:
    """Every scheduler's summed slot gain over the exact optimum, per objective, cluster level and
    size rule, on random small instances (see the module docstring)."""
    counts = (10, 4) if quick else (60, 30)
    ratios, unproven, solve = {}, {}, {}
    for (leafspine, _), count in zip(ILP_CLUSTERS, counts, strict=True):
        for objective in OBJECTIVES:
            for free, _ in ILP_SIZES:
                key = leafspine, objective, free
                unproven[key], solve[key] = 0, []
                for seed in range(count):
                    t0 = time.perf_counter()
                    opt, gains = compare(random_instance(seed, objective, leafspine), SCHEDULERS, free)
                    solve[key].append(time.perf_counter() - t0)
                    unproven[key] += not opt.proven
                    for name, gain in gains.items():
                        ratios.setdefault((*key, name), []).append(_ratio(gain, opt))
    rows = []
    for leafspine, where in ILP_CLUSTERS:
        for objective in OBJECTIVES:
            for free, what in ILP_SIZES:
                r = np.array(ratios[leafspine, objective, free, "gadget"])
                t = solve[leafspine, objective, free]
                rows.append([
                    where.split(":")[0], objective, what, len(r), unproven[leafspine, objective, free],
                    f"{r.mean():.3f} ± {r.std():.3f}", f"{r.min():.3f}", f"{np.percentile(r, 10):.3f}",
                    f"{(r >= 0.9999).mean():.2f}", f"{np.median(t):.2f} / {max(t):.2f}",
                ])  # fmt: skip
    gadget = markdown(
        ["cluster", "objective", "sizes", "instances", "hit time limit", "GADGET / optimum, mean ± std",
         "min", "p10", "share at optimum (>= 0.9999)", "s per instance, median / max"], rows,
    )  # fmt: skip
    cells = [(ls, o, w.split(" level")[0]) for ls, w in ILP_CLUSTERS for o in OBJECTIVES]
    rows = []
    for name in SCHEDULERS:
        free_ratios = [np.array(ratios[ls, o, True, name]) for ls, o, _ in cells]
        rows.append([name + (" (rigid)" if name in RIGID else "")]
                    + [f"{r.mean():.3f} ± {r.std():.3f}" for r in free_ratios])  # fmt: skip
    others = markdown(["scheduler"] + [f"{o}, {lv} level" for _, o, lv in cells], rows)
    intro = (
        "`benchmarks/bench_cluster.py --only ilp`. One slot of random small instances "
        f"(`arsched.cluster.ilp.random_instance`, seeds 0 to {counts[0] - 1} on one level and 0 to "
        f"{counts[1] - 1} on two levels): 3-6 jobs with 10-100 % of their work left, each allowed twice "
        "its request (at most 8 GPUs), no restart cost. Each scheduler decides the slot from scratch; its "
        "decision is scored as the reserved network mode scores it (rings reserve in commit order) under "
        "the objective's slot values, and its summed gain v(w, b) - v(0) is divided by the exact optimum "
        "(HiGHS via scipy.optimize.milp, at most "
        f"{TIME_LIMIT:g} s per ILP; where it hit that limit, by HiGHS's upper bound, so the ratio is a lower "
        "bound). Sizes: the optimum chooses among GADGET's candidates (powers of two up to the bound, "
        "and the request) or any count from 1 to the bound (free). One level: a ring over several servers "
        "takes their whole NICs (exact for the reserved model on a star); two levels: rings enumerated "
        "with rates in eighths of a link, the ring's rate alone and the compared decisions' own rates. "
        "Spread: mean ± std over the instances (seeds)."
    )
    table = (
        "**GADGET / exact slot optimum, per objective**\n\n" + gadget
        + "\n\n**Every scheduler / exact slot optimum, free sizes** (mean ± std over the instances; the "
        "rigid ones run every job at its request, the others choose up to twice it)\n\n" + others
    )  # fmt: skip
    if quick:
        print(intro, table, sep="\n\n")
        return
    publish("Cluster scheduling: exact slot optimum", intro, table)


SCALE_SERVERS = 1024  # the 5,000-job trace and the growth runs: 64 leaves x 16 servers x 8 GPUs
HUGE = (100_000, 2048)  # jobs, servers: the trace that must run (time and memory reported)
GROWTH = (1250, 2500, 5000, 10000)
GROWTH_REPEATS = 3  # growth times: the best of this many runs (the machine is shared)
SCALE_REPEATS = 2  # the 5,000-job times: the best of this many runs
DECISION_REPEATS = 15
SCALE_LOAD = 0.9  # GPUs asked over GPUs while jobs arrive (see scale_trace)
OVERLOAD = 1.5  # the 100,000-job trace again, asking for more than the cluster has: the queue grows


def scale_cluster(servers: int):
    """A leaf-spine of `servers` x 8 GPUs, 16 servers per leaf, 16 spines."""
    return parse_cluster(f"leafspine:leaves={servers // 16},spines=16,servers_per_leaf=16,gpus=8")


def scale_trace(jobs: int, servers: int, load: float = SCALE_LOAD):
    """The synthetic trace (seed 1) with its arrivals spread so that, while jobs arrive, it asks
    for `load` of the cluster's GPUs (GPU-seconds over GPUs x arrival span): below 1 the
    queue stays bounded, so time per job measures the simulator rather than a backlog that grows
    with the trace."""
    wl = synthetic(jobs, seed=1)
    asked = float((wl.gpus * wl.duration).sum())
    return wl.scale_arrivals(asked / (load * 8 * servers * float(wl.arrival.max())))


def _timed(
    jobs: int, servers: int, name: str, load: float = SCALE_LOAD
) -> tuple[float, float, int, float, float, float, int]:
    """One default run (events engine, reserved mode) in this process: wall s, CPU s, decisions,
    longest decision s, average JCT, peak resident memory of the process in GB, most active jobs
    at a decision."""
    import resource

    wl, cl = scale_trace(jobs, servers, load), scale_cluster(servers)
    scheduler = get_scheduler(name)
    most = [0]
    decide = scheduler.decide

    def counted(state):
        most[0] = max(most[0], len(state.active))
        return decide(state)

    scheduler.decide = counted  # type: ignore[method-assign]
    t0, c0 = time.perf_counter(), time.process_time()
    r = simulate(wl, cl, scheduler, SimConfig())
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return wall, cpu, len(r.slot_starts), r.scheduler_s_max, r.avg_jct_s, rss, most[0]


def scale(quick: bool = False) -> None:
    """The speed targets of issue 24 (see the module docstring): one decision, a 5,000-job trace
    on 1,024 servers for every scheduler, growth with jobs, and a 100,000-job trace."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    jobs, growth, huge = (1000, GROWTH[:2], (5000, 1024)) if quick else (5000, GROWTH, HUGE)
    rows = []
    for cold in (False, True):
        best, med, placed = decision_time(cold, DECISION_REPEATS)
        rings = "ring links afresh" if cold else "rings remembered"
        rows.append([f"GADGET decision, 1,000 active jobs (elastic 2), 512x8 GPUs ({placed} placed), "
                     f"{rings}, best / median of {DECISION_REPEATS} (ms)",
                     f"{best * 1e3:.1f} / {med * 1e3:.1f}", "<= 20"])  # fmt: skip
    cl, wl = scale_cluster(SCALE_SERVERS), scale_trace(jobs, SCALE_SERVERS)
    t0 = time.perf_counter()
    cl.routes(np.arange(cl.num_servers))
    rows.append([f"routes of every server pair, {SCALE_SERVERS:,} servers (s, once per cluster)",
                 f"{time.perf_counter() - t0:.2f}", ""])  # fmt: skip
    total = {}
    for name in SCHEDULERS:
        walls = []
        for _ in range(SCALE_REPEATS):
            t0 = time.perf_counter()
            r = simulate(wl, cl, get_scheduler(name), SimConfig())
            walls.append(time.perf_counter() - t0)
        total[name] = min(walls)
        rows.append([f"{name}: {jobs:,} jobs, {SCALE_SERVERS:,}x8 GPUs, {len(r.slot_starts)} decisions "
                     f"(longest {r.scheduler_s_max * 1e3:.0f} ms), avg JCT {r.avg_jct_s:.0f} s (s)",
                     f"{total[name]:.1f}", ""])  # fmt: skip
    rest = sum(v for k, v in total.items() if k != "random")
    rows.append([f"all {len(SCHEDULERS)} schedulers, {jobs:,} jobs, {SCALE_SERVERS:,} servers (s)",
                 f"{sum(total.values()):.1f}", "<= 60"])  # fmt: skip
    rows.append(["all but the random ablation (s)", f"{rest:.1f}", ""])
    for load in (SCALE_LOAD, OVERLOAD):
        with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:  # its own memory
            got = pool.submit(_timed, *huge, "gadget", load).result()
        wall, cpu, decisions, longest, avg, rss, most = got
        rows.append([f"GADGET, {huge[0]:,}-job trace on {huge[1]:,}x8 GPUs asking for {load:g} of them: "
                     f"{decisions:,} decisions (longest {longest:.2f} s, at most {most:,} active jobs), "
                     f"avg JCT {avg:.0f} s; wall s / CPU s / peak memory GB",
                     f"{wall:.0f} / {cpu:.0f} / {rss:.2f}", "runs"])  # fmt: skip
    grow = {}
    for n in growth:
        for name in SCHEDULERS:
            if name != "random":
                times = []
                for _ in range(GROWTH_REPEATS):
                    t0 = time.perf_counter()
                    simulate(scale_trace(n, SCALE_SERVERS), cl, get_scheduler(name), SimConfig())
                    times.append(time.perf_counter() - t0)
                grow[name, n] = min(times)
    head = (
        ["scheduler"] + [f"{n:,} jobs (s)" for n in growth] + ["exponent per doubling", "largest / n log n"]
    )
    growth_rows = []
    size = np.array(growth, dtype=float)
    for name in [x for x in SCHEDULERS if x != "random"]:
        t = np.array([grow[name, n] for n in growth])
        exps = np.log(t[1:] / t[:-1]) / np.log(size[1:] / size[:-1])
        nlogn = (t[-1] / t[0]) / (size[-1] * np.log(size[-1]) / (size[0] * np.log(size[0])))
        growth_rows.append(
            [name, *(f"{x:.2f}" for x in t), ", ".join(f"{e:.2f}" for e in exps), f"{nlogn:.2f}"]
        )
    intro = (
        "`benchmarks/bench_cluster.py --only scale`. Default runs (events engine, reserved mode, elastic 1, "
        "restart per model) of the synthetic trace (seed 1) on leaf-spines of 16 servers x 8 GPUs per leaf "
        f"and 16 spines, arrivals spread so that the trace asks for {SCALE_LOAD:g} of the cluster's GPUs "
        "while jobs arrive (GPU-seconds over GPUs x arrival span; above 1 the queue, and with it every "
        "decision, grows with the trace). "
        "Wall times on 2 cores shared with other work (reruns differed by up to 25 %): each 5,000-job time "
        f"is the best of {SCALE_REPEATS} runs. Growth: the best of {GROWTH_REPEATS} runs on the same "
        f"{SCALE_SERVERS:,}-server cluster (routes already found) and longer traces; 'exponent per doubling' "
        "is log(t2/t1)/log(n2/n1) between neighbouring sizes (n log n from 5,000 to 10,000 jobs: 1.11); "
        "'largest / n log n': time at the largest size over time at the smallest, divided by the same ratio "
        "of n log n (at most 1: no faster growth than n log n). The 100,000-job runs are GADGET's alone, "
        f"each in its own process (peak resident memory of that process), asking for {SCALE_LOAD:g} and for "
        f"{OVERLOAD:g} of the GPUs (overloaded: the queue grows while jobs arrive); CPU s is that process's "
        "CPU time, less inflated by the machine's other work than the wall time."
    )
    table = (
        "**Speed at scale**\n\n" + markdown(["measure", "value", "target"], rows)
        + "\n\n**Growth with jobs**\n\n" + markdown(head, growth_rows)
    )  # fmt: skip
    if quick:
        print(intro, table, sep="\n\n")
        return
    publish("Cluster scheduling at scale", intro, table)


def main(quick: bool = False) -> None:
    jobs = 200 if quick else 1000
    sections, leads, speed_rows = [], [], []
    spec60 = parse_cluster(str(DATA / "tiresias_cluster_spec.csv"))
    cl1k = parse_cluster(LEAFSPINE)
    for elastic, what in ELASTIC:
        wl60, _ = load_trace(str(DATA / "tiresias_60_job.csv"), elastic=elastic)
        for scale, arrivals in (
            (1.0, "as recorded"),
            (0.25, "arrivals compressed 4x (--arrival-scale 0.25)"),
        ):
            res60, _ = run_trace(wl60.scale_arrivals(scale), spec60)
            sections.append(f"**Tiresias 60-job trace, {arrivals}, 16 servers x 4 GPUs (one switch); {what}, "
                            "restart per model**\n\n" + table(res60))  # fmt: skip
            leads += lead(f"Tiresias 60 jobs, {arrivals.split(' (')[0]}, {what}", res60)
        wl1k = synthetic(jobs, seed=1, elastic=elastic)
        res1k, walls = run_trace(wl1k, cl1k)
        sections.append(f"**Synthetic Philly-like {jobs:,} jobs (seed 1), 64 servers x 8 GPUs, leaf-spine "
                        f"8x4; {what}, restart per model**\n\n" + table(res1k))  # fmt: skip
        leads += lead(f"synthetic {jobs:,} jobs, {what}", res1k)
        speed_rows += [[f"all {len(SCHEDULERS)} schedulers to completion, {jobs:,} jobs, 64x8 GPUs, "
                        f"{what}, {m} mode (s)",
                        f"{walls[m]:.1f}", "< 60"] for m in MODES]  # fmt: skip
    sections.append(
        "**GADGET's average JCT against the best of FIFO, SJF, Tiresias, Optimus-, Pollux-, Themis- and "
        "Gandiva-style** (from the tables "
        "above; negative: GADGET ahead)\n\n"
        + markdown(["setting", "network", "GADGET avg JCT s", "best baseline, avg JCT s", "GADGET vs best"],
                   leads)
    )  # fmt: skip
    sections.append(spread_table(jobs, cl1k))
    sens = []
    for elastic, _ in ELASTIC:
        sens += sensitivity(synthetic(jobs, seed=1, elastic=elastic), cl1k, elastic)
    sections.append(
        f"**Restart-cost sensitivity**: synthetic {jobs:,} jobs, shared mode, the same fixed cost for every "
        "job and scheduler; average JCT in s (restarts). The random ablation is left out: it redraws every "
        "ring every slot, so every running job restarts every slot\n\n"
        + markdown(["scheduler", "elastic"] + [f"restart {c:g} s" for c in RESTARTS], sens)
    )  # fmt: skip
    wl2 = synthetic(jobs, seed=1, elastic=2)
    sections.append(f"**GADGET's objectives on the {jobs:,}-job trace (reserved, elastic 2, restart per "
                    "model)**: each run scored by its own objective's total utility (`loss`: the concave "
                    "loss curve 1/(9x+1))\n\n" + objectives(wl2, cl1k))  # fmt: skip
    best, med, placed = decision_time(repeats=DECISION_REPEATS)
    speed_rows.append([f"GADGET decision, 1,000 active jobs (elastic 2), 512x8 GPUs ({placed} placed), "
                       f"best / median of {DECISION_REPEATS} (ms)", f"{best * 1e3:.1f} / {med * 1e3:.1f}",
                       "<= 20"])  # fmt: skip
    sections.append("**Speed**\n\n" + markdown(["measure", "value", "target"], speed_rows))
    sections.append(
        "The exact slot optimum (every objective, free sizes, one and two levels), the two engines side by "
        'side and the speed targets at scale: their own sections, "Cluster scheduling: exact slot '
        'optimum" (`--only ilp`), "Cluster simulator: slots and events engines" (`--only engines`) and '
        '"Cluster scheduling at scale" (`--only scale`).'
    )
    intro = (
        "`benchmarks/bench_cluster.py`. GADGET here is our reconstruction from the paper's abstract and "
        "secondary sources (every constant ours). Every table runs the slots engine (a decision every "
        "slot: GADGET's model; `--only engines` compares it with the events engine, the CLI's default) "
        "and all schedulers under one elasticity "
        "setting (elastic N: every job may grow to N x its request; FIFO, SJF, Tiresias, Themis- and "
        "Gandiva-style are rigid by nature and run every job at its request whatever N; GADGET, "
        "Optimus-style, Pollux-style and the random ablation "
        "choose a size up to N x the request when N > 1, and at elastic 1 run every job at its request too) "
        "and one restart cost (unless a table says otherwise, per model: a "
        "checkpoint of 12 bytes per parameter saved and reloaded at 1 GB/s plus a 10 s relaunch, 10-18.5 s; "
        "charged whenever a job that ran before gets other GPUs, is resized or resumes after a pause). JCT in"
        " seconds; utility is the sum of sigmoid completion-time utilities; 'restarts' counts the restarts "
        "charged; 'avg JCT / ideal' is the scheduler's average JCT in that mode over its average JCT when "
        "every ring has the network to itself (the contention-blind view): what link contention costs its "
        "decisions. Every run goes until its last job finishes ('slots' simulated); GADGET, "
        "Optimus, Pollux and the random ablation run a job older than 10x its compute-only duration first "
        "(anti-starvation). The "
        "random ablation keeps GADGET's worker counts but draws every ring's GPUs at random each slot. "
        "Times (ms/slot, Speed) on 2 cores shared with other work."
    )
    if quick:
        print(intro, *sections, sep="\n\n")
        return
    publish("Cluster scheduling (GADGET and baselines)", intro, "\n\n".join(sections))


def fingerprint_runs():
    """The runs `--only fingerprints` hashes: (label, trace, cluster, config, schedulers)."""
    every, cl = tuple(SCHEDULERS), parse_cluster(LEAFSPINE)
    small = parse_cluster("leafspine:leaves=4,spines=2,servers_per_leaf=4,gpus=8")
    big = parse_cluster("leafspine:leaves=64,spines=16,servers_per_leaf=16,gpus=8")
    wl60, _ = load_trace(str(DATA / "tiresias_60_job.csv"), elastic=2)
    spec60 = parse_cluster(str(DATA / "tiresias_cluster_spec.csv"))
    runs = []
    for elastic in (1, 2):
        wl = synthetic(500, seed=1, elastic=elastic)
        for mode in ("reserved", "shared"):
            for engine in ("events", "slots"):
                cfg = SimConfig(network=mode, engine=engine)
                runs.append((f"500 e{elastic} {mode} {engine}", wl, cl, cfg, every))
    runs.append(
        ("60 e2 shared events", wl60.scale_arrivals(0.25), spec60, SimConfig(network="shared"), every)
    )
    wl = synthetic(1000, seed=2, interval=0.625, elastic=2)
    runs.append(("big 1000 e2 reserved events", wl, big, SimConfig(), every[:5] + every[6:]))  # no random
    for elastic in (1, 2):
        for seed in (3, 4):
            wl, what = synthetic(400, seed=seed, elastic=elastic).scale_arrivals(0.15), f"over400 s{seed}"
            what += f" e{elastic}"
            for mode, engine in (("reserved", "events"), ("shared", "slots"), ("reserved", "slots")):
                runs.append(
                    (f"{what} {mode} {engine}", wl, small, SimConfig(network=mode, engine=engine), every)
                )
            allocators = ("gadget", "optimus", "pollux")
            runs.append((f"{what} restart0", wl, small, SimConfig(restart=0.0), (*allocators, "random")))
            runs.append(
                (f"{what} realloc", wl, small, SimConfig(reallocate=600.0), (*allocators, "tiresias"))
            )
            for objective in ("excess", "energy", "fair", "loss"):
                cfg = SimConfig(objective=Objective(objective))
                runs.append((f"{what} {objective}", wl, small, cfg, ("gadget",)))
    return runs


def fingerprints(check: str | None = None) -> int:
    """Print (or, given an earlier output `check`, compare) one line per fingerprinted run."""
    import hashlib

    lines = []
    for what, wl, cl, config, names in fingerprint_runs():
        for name in names:
            r = simulate(wl, cl, get_scheduler(name), config)
            digest = hashlib.sha256(r.jct.tobytes() + r.slot_starts.tobytes()).hexdigest()[:16]
            done = f"{r.avg_jct_s!r} | {r.restarts} | {len(r.slot_starts)}"
            lines.append(f"{what} | {name} | {digest} | {done}")
            if check is None:
                print(lines[-1], flush=True)
    if check is None:
        return 0
    before = set(Path(check).read_text().splitlines())
    diff = sorted(set(lines) ^ before)
    for line in diff:
        print(("- " if line in before else "+ ") + line)
    print(f"{len(lines)} runs, {len(diff)} lines differ")
    return 1 if diff else 0


ONLY = {"engines": engines, "ilp": ilp, "scale": scale}

if __name__ == "__main__":
    args = sys.argv[1:]
    if "--only" in args:
        only = args[args.index("--only") + 1] if args.index("--only") + 1 < len(args) else ""
        if only == "fingerprints":
            rest = args[args.index("--only") + 2 :]
            sys.exit(fingerprints(rest[0] if rest else None))
        if only not in ONLY:
            sys.exit(f"--only takes {' or '.join(ONLY)} or fingerprints, got {only!r}")
        ONLY[only](quick="--quick" in args)
    else:
        main(quick="--quick" in args)
