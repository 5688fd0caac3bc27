"""GADGET and the baselines on traces, in the reserved and shared network modes; speed; ILP ratio.

1. The Tiresias 60-job trace on its 16-server x 4-GPU spec, as recorded and with arrivals
   compressed 4x (`--arrival-scale 0.25`: the recorded trace offers the cluster ~23 % load, too
   little to separate schedulers), and a 1,000-job synthetic Philly-like trace on a leaf-spine of
   64 servers x 8 GPUs (8 leaves, 4 spines, 100 Gb/s), every scheduler, objective `jct`, in
   `reserved` and `shared` modes, plus `ideal` (each ring alone) to show how much contention
   costs each scheduler's decisions under real sharing. Every run goes to completion (or the
   simulator's horizon; the `done` column counts finished jobs).
2. GADGET on the 1,000-job trace under each objective (reserved mode).
3. Wall time of every scheduler on the 1,000-job trace per mode (target: < 60 s), and GADGET's
   decision time for one slot with 1,000 active jobs on 512 servers x 8 GPUs (target <= 50 ms).
4. GADGET's summed slot gain over the exact ILP optimum (HiGHS) on random small instances: 60 on
   one switch, 40 on two-leaf leaf-spines.

Run: python benchmarks/bench_cluster.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from arsched.cluster import SimConfig, load_trace, parse_cluster, simulate
from arsched.cluster.ilp import gadget_gain, optimum_gain, random_instance
from arsched.cluster.schedulers import SCHEDULERS, SlotState, get_scheduler
from arsched.cluster.synthetic import synthetic
from arsched.cluster.utility import OBJECTIVES, Objective

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import markdown, publish

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
LEAFSPINE = "leafspine:leaves=8,spines=4,servers_per_leaf=8,gpus=8"
MODES = ("reserved", "shared", "ideal")


def run_trace(wl, cl):
    """Every scheduler in every mode: rows of results and wall times per mode."""
    results, walls = {}, {m: 0.0 for m in MODES}
    for mode in MODES:
        for name in SCHEDULERS:
            t0 = time.perf_counter()
            results[name, mode] = simulate(wl, cl, get_scheduler(name), SimConfig(network=mode))
            walls[mode] += time.perf_counter() - t0
    return results, walls


def table(results) -> str:
    rows = []
    for name in SCHEDULERS:
        for mode in ("reserved", "shared"):
            r = results[name, mode]
            blind = results[name, "ideal"]
            rows.append([
                name, mode, f"{r.finished}/{r.jobs}", f"{r.avg_jct_s:.0f}", f"{r.p95_jct_s:.0f}",
                f"{r.makespan_s:.0f}", len(r.slot_starts), f"{r.total_utility:.1f}",
                f"{r.gpu_utilization:.3f}", f"{r.jain_index:.3f}", f"{r.avg_jct_s / blind.avg_jct_s:.2f}",
                f"{r.scheduler_s_per_slot * 1e3:.2f}",
            ])  # fmt: skip
    return markdown(
        ["scheduler", "network", "done", "avg JCT s", "p95 JCT s", "makespan s", "slots", "utility (jct)",
         "GPU util", "Jain", "avg JCT / ideal", "ms/slot"], rows,
    )  # fmt: skip


def decision_time() -> tuple[float, float, int]:
    """GADGET's decision for 1,000 active jobs on 512 servers x 8 GPUs: best and median of 5."""
    cl = parse_cluster("leafspine:leaves=32,spines=8,servers_per_leaf=16,gpus=8")
    wl = synthetic(1000, seed=5)
    st = SlotState(float(wl.arrival.max()), 60.0, np.arange(len(wl)), wl.work.copy(), np.zeros(len(wl)), {},
                   wl, cl, Objective("jct"), 5e-6, 0)  # fmt: skip
    g = get_scheduler("gadget")
    g.decide(st)  # routes cached, as in a running simulation
    times, placed = [], 0
    for _ in range(5):
        t0 = time.perf_counter()
        placed = len(g.decide(st))
        times.append(time.perf_counter() - t0)
    return min(times), float(np.median(times)), placed


def objectives(wl, cl) -> str:
    """GADGET under every objective, each scored by its own total utility."""
    rows = []
    for name in OBJECTIVES:
        r = simulate(wl, cl, get_scheduler("gadget"), SimConfig(objective=Objective(name)))
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


def main() -> None:
    sections = []
    wl60, _ = load_trace(str(DATA / "tiresias_60_job.csv"))
    spec60 = parse_cluster(str(DATA / "tiresias_cluster_spec.csv"))
    for scale, what in ((1.0, "as recorded"), (0.25, "arrivals compressed 4x (--arrival-scale 0.25)")):
        res60, _ = run_trace(wl60.scale_arrivals(scale), spec60)
        sections.append(
            f"**Tiresias 60-job trace, {what}, 16 servers x 4 GPUs (one switch)**\n\n" + table(res60)
        )
    wl1k = synthetic(1000, seed=1)
    cl1k = parse_cluster(LEAFSPINE)
    res1k, walls = run_trace(wl1k, cl1k)
    sections.append("**Synthetic Philly-like 1,000 jobs (seed 1), 64 servers x 8 GPUs, leaf-spine 8x4**\n\n"
                    + table(res1k))  # fmt: skip
    sections.append("**GADGET's objectives on the 1,000-job trace (reserved)**: each run scored by its own "
                    "objective's total utility (`loss`: the concave loss curve 1/(9x+1))\n\n"
                    + objectives(wl1k, cl1k))  # fmt: skip
    best, med, placed = decision_time()
    speed = markdown(
        ["measure", "value", "target"],
        [[f"all 6 schedulers to completion, 1,000 jobs, 64x8 GPUs, {m} mode (s)", f"{walls[m]:.1f}", "< 60"]
         for m in MODES]
        + [[f"GADGET decision, 1,000 active jobs, 512x8 GPUs ({placed} placed), best/median of 5 (ms)",
            f"{best * 1e3:.0f} / {med * 1e3:.0f}", "<= 50"]],
    )  # fmt: skip
    sections.append("**Speed**\n\n" + speed)
    rows = []
    cases = (
        (False, 60, "2-4 servers x 4 GPUs, one switch (star ILP)"),
        (True, 40, "2 leaves x 1-2 servers x 2 GPUs, 1-2 spines (ring ILP)"),
    )
    for leafspine, count, what in cases:
        ratios = []
        for seed in range(count):
            st = random_instance(seed, leafspine=leafspine)
            opt = optimum_gain(st)
            ratios.append(gadget_gain(st) / opt if opt > 0 else 1.0)
        r = np.array(ratios)
        rows.append([what, len(r), f"{r.min():.3f}", f"{np.percentile(r, 10):.3f}", f"{np.median(r):.3f}",
                     f"{r.mean():.3f}", f"{(r >= 0.9999).mean():.2f}"])  # fmt: skip
    ilp = markdown(
        ["cluster", "instances", "min", "p10", "median", "mean", "share at optimum (>= 0.9999)"], rows
    )
    sections.append(
        "**GADGET / exact slot optimum** (3-6 jobs, objective jct; the ring ILP also picks each ring's rate, "
        "in eighths of a link, where GADGET reserves all a ring can get)\n\n" + ilp
    )
    publish(
        "Cluster scheduling (GADGET and baselines)",
        "`benchmarks/bench_cluster.py`. JCT in seconds; utility is the sum of sigmoid completion-time "
        "utilities; 'avg JCT / ideal' is the scheduler's average JCT in that mode over its average JCT when "
        "every ring has the network to itself (the contention-blind view): what link contention costs "
        "its decisions. Every run goes until its last job finishes ('slots' simulated); GADGET, Optimus and "
        "the random ablation run a job older than 10x its compute-only duration first (anti-starvation). "
        "The random ablation keeps GADGET's worker counts but draws every ring's GPUs at random each slot.",
        "\n\n".join(sections),
    )


if __name__ == "__main__":
    main()
