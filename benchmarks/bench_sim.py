"""Speed and memory of the simulators.

1. Scaling: ring AllReduce (100 MB) over the first N hosts of a k=16 fat-tree, N = 64 ... 1,024
   (two million transfers at the top), in the flow model (α = 5 µs) and the round model, one
   core. Peak memory is measured with tracemalloc (numpy reports its buffers there).
2. Contention: schedules whose flows share links, so the flow model runs its event simulation;
   the table gives events and transfers per second.

Run: python benchmarks/bench_sim.py [--quick]
"""

from __future__ import annotations

import sys
import time
import tracemalloc

import numpy as np

from arsched.bounds import allreduce_bound
from arsched.collective import ScheduleBuilder
from arsched.sim import simulate_flow, simulate_rounds
from arsched.topology import bcube, fattree, star

sys.path.insert(0, __file__.rsplit("/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/examples")
from ring_schedule import ring_allreduce

from _table import markdown, publish


def timed(fn, *args, memory: bool = True, **kw):
    """(result, seconds, peak bytes); the peak comes from a second run under tracemalloc,
    which slows Python code down and so is kept out of the timing."""
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    elapsed = time.perf_counter() - t0
    peak = 0
    if memory:
        tracemalloc.start()
        fn(*args, **kw)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return out, elapsed, peak


def parameter_server(topo, n):
    b = ScheduleBuilder(topo, topo.servers[:n], 100e6, 1, "ps")
    for r in topo.servers[1:n]:
        b.add(0, 0, r, topo.servers[0], "reduce")
    for r in topo.servers[1:n]:
        b.add(1, 0, topo.servers[0], r, "copy")
    return b.build()


def main(quick: bool = False) -> None:
    topo = fattree(16)
    allreduce_bound(topo, topo.servers)  # the bound is cached per topology and ranks; warm it
    rows = []
    for n in (64, 128, 256, 512, 1024):
        if quick and n > 128:
            break
        s = ring_allreduce(topo, ranks=topo.servers[:n])
        allreduce_bound(topo, s.ranks)
        fr, ft, fm = timed(simulate_flow, s)
        rr, rt, rm = timed(simulate_rounds, s)
        rows.append(
            [
                n,
                len(s),
                f"{ft:.2f} s",
                fr.notes["method"],
                f"{fm / 2**20:.0f} MiB",
                f"{fr.gap:.3f}",
                f"{rt:.2f} s",
                f"{len(s) / rt / 1e6:.2f} M/s",
                f"{rm / 2**20:.0f} MiB",
                f"{rr.gap:.3f}",
            ]
        )
    publish(
        "Simulator scaling",
        "Ring AllReduce of 100 MB on the first N hosts of fattree(16): flow model (α = 5 µs) time, "
        "the exact method it used, peak memory and gap to the bound; round model time, transfers "
        "per second, peak memory and gap. The lower bound (cached per topology and ranks) is "
        "computed before the timing; `bench_bounds.py` times it. Produced by `benchmarks/bench_sim.py`.",
        markdown(
            [
                "ranks",
                "transfers",
                "flow",
                "method",
                "flow memory",
                "flow gap",
                "rounds",
                "rounds rate",
                "rounds memory",
                "rounds gap",
            ],
            rows,
        ),
    )
    rng = np.random.default_rng(0)
    cases = [
        ("ps, star(64)", parameter_server(star(64), 64)),
        (
            "ring, random order, bcube(4,2)",
            ring_allreduce(bcube(4, 2), ranks=list(rng.permutation(bcube(4, 2).servers))),
        ),
        (
            "ring, random order, 32 hosts of fattree(8)",
            ring_allreduce(fattree(8), ranks=list(rng.permutation(fattree(8).servers)[:32])),
        ),
    ]
    rows = []
    for name, s in cases:
        if quick and len(s) > 5000:
            continue
        r, t, _ = timed(simulate_flow, s, memory=False)
        instants = r.notes.get("event_instants", 0)
        rows.append(
            [
                name,
                len(s),
                r.notes["method"],
                instants,
                f"{t:.2f} s",
                f"{instants / t:.0f}/s",
                f"{len(s) / t:.0f}/s",
                f"{r.gap:.2f}",
            ]
        )
    publish(
        "Flow model under contention",
        "Schedules whose flows share links at the same time, so the flow model runs its exact event "
        "simulation (max-min rates recomputed at every event instant where the set of sending flows "
        "changes). This path is far slower per transfer than the contention-free sweep above. "
        "Produced by `benchmarks/bench_sim.py`.",
        markdown(
            ["schedule", "transfers", "method", "event instants", "time", "instants", "transfers", "gap"],
            rows,
        ),
    )


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
