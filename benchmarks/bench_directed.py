"""Tree packing's AllReduce on directed networks: its default against its pipeline alone.

On a network whose links are not all paired with an equal reverse (one-way rings and tori,
rings with a slower way back) tree packing has two schedules: the directed pipeline (in-trees
up, out-trees down, pipelined; `levels=false`), whose length is the fastest of a few
candidates in the flow model, and its own ReduceScatter then AllGather, each over shortest-path
trees placed level by level (`packing.build._directed_default`, kept where the flow model puts
it within 2 % of the bound, else the faster of the two). For every network: the default's gap
to the bound (time / bound; flow model, in-order connections, α = 5 µs) and which schedule it
is, the pipeline alone, and the pipeline of the length the time with barriers picks (what tree
packing ran before its pipelines were timed), at 256 MB and 16 MB, with the default's
synthesis time. "developed" networks are those the two changes were developed on; "judged"
networks were not looked at until both were written.

Run: python benchmarks/bench_directed.py
"""

from __future__ import annotations

import sys
import time

import numpy as np

from arsched.algorithms import build
from arsched.algorithms.common import check_ranks
from arsched.algorithms.packing.directed import pack_directed
from arsched.algorithms.packing.lp import MAX_ITERATIONS
from arsched.algorithms.packing.pipeline import choose_stages
from arsched.algorithms.routes import route
from arsched.algorithms.trees import in_out_sends
from arsched.collective import validate
from arsched.defaults import DEFAULT_ALPHA
from arsched.sim import simulate_flow
from arsched.topology import Topology, parse_spec

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import markdown, publish

DEVELOPED = ["torus:dims=4x3,oneway=1", "torus:dims=5x4,oneway=1", "ring:n=12,reverse=50Gbps"]
JUDGED = [
    "torus:dims=6x4,oneway=1",
    "torus:dims=2x3x4,oneway=1",
    "torus:dims=3x3x3,oneway=1",
    "torus:dims=7x2,oneway=1",
    "ring:n=9,oneway=1",
    "ring:n=10,reverse=25Gbps",
]
SIZES = (256e6, 16e6)
SECTION = "Tree packing on directed networks (bench_directed.py)"


def gap(schedule) -> float:
    report = validate(schedule)
    if not report.ok:
        raise RuntimeError(f"{schedule.algorithm} built an invalid schedule: {report.message}")
    return simulate_flow(schedule, DEFAULT_ALPHA).gap


def barrier_pick(topo: Topology, size: float) -> tuple[int, int]:
    """(units, stages) of the directed pipeline that the time with barriers picks."""
    ranks = check_ranks(topo, None, "tree-packing")
    packed = pack_directed(topo, ranks, MAX_ITERATIONS)
    sends = [in_out_sends(i, o) for i, o in zip(packed.ins, packed.outs, strict=True)]
    routes = route(topo, ranks, np.concatenate([x[0] for x in sends]), np.concatenate([x[1] for x in sends]))
    units, stages, _ = choose_stages(sends, packed.weights, packed.rate, routes, topo, size, DEFAULT_ALPHA)
    return units, stages


def row(spec: str, role: str, size: float) -> list[object]:
    topo = parse_spec(spec)
    t0 = time.perf_counter()
    chosen = build("tree-packing", topo, None, size)
    synthesis = time.perf_counter() - t0
    kind = "halves" if chosen.meta["params"].get("halves") else "pipeline"
    piped = gap(build("tree-packing", topo, None, size, levels=False))
    units, stages = barrier_pick(topo, size)
    priced = gap(build("tree-packing", topo, None, size, units=units, stages=stages))
    return [
        spec,
        role,
        len(topo.servers),
        f"{size / 1e6:g} MB",
        f"{gap(chosen):.3f} ({kind})",
        f"{piped:.3f}",
        f"{priced:.3f} ({units} × {stages})",
        f"{synthesis:.1f}",
    ]


def main() -> None:
    cases = [(s, "developed") for s in DEVELOPED] + [(s, "judged") for s in JUDGED]
    rows = [row(spec, role, size) for spec, role in cases for size in SIZES]
    header = [
        "network",
        "role",
        "ranks",
        "size",
        "default (which)",
        "pipeline alone",
        "pipeline by barrier times (units × stages)",
        "synthesis (s)",
    ]
    intro = __doc__.split("\n\nRun:")[0].split("\n\n", 1)[1].replace("\n", " ")
    publish(SECTION, intro + " Produced by `benchmarks/bench_directed.py`.", markdown(header, rows))


if __name__ == "__main__":
    main()
