"""The flow model beside a peer: the same contended schedules in SimGrid's fluid model.

Each schedule (issue 22's contended cases: a parameter server on a star, rings in random order
on BCube and fat-trees, tree packing on BCube and DCell, NCCL's double binary tree on
fat-trees) is run in the flow model (`simulate_flow`: in-order connections, α = 5 µs) and in
SimGrid 3.32's CM02 max-min model with the same semantics (`arsched.sim.fluid_peer`), one after
the other in one run: both times, their relative difference, both wall-clock times and the
speed ratio (SimGrid's wall / the flow model's). The flow model's compilation is warmed up
first; SimGrid's wall is its run alone (its platform build is shown apart, its process start
and the dependency derivation are left out).

Needs SimGrid's Python bindings (`apt-get install python3-simgrid`; `make bench` installs it).
Run: python benchmarks/bench_simgrid.py [--quick]
"""

from __future__ import annotations

import sys
import time

import numpy as np

from arsched.algorithms import build
from arsched.errors import ArschedError
from arsched.sim import simulate_flow
from arsched.sim.fluid_peer import available, simulate_simgrid
from arsched.topology import bcube, fattree, parse_spec, star

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _build import checked
from _table import markdown, publish
from bench_sim import parameter_server

LIMIT = 300  # seconds SimGrid gets per case


def random_ring(topo, n=None):
    """A 100 MB ring over `n` servers (all by default) in a random order (seed 0)."""
    ranks = np.random.default_rng(0).permutation(topo.servers)[:n]
    return build("ring", topo, list(ranks), 100e6, order="given")


CASES = {  # the first four also with --quick
    "ps, star(64)": lambda: parameter_server(star(64), 64),
    "ring, random order, 32 hosts of fattree(8)": lambda: random_ring(fattree(8), 32),
    "tree packing 16 MB, dcell(3,1)": lambda: build("tree-packing", parse_spec("dcell:n=3,k=1"), None, 16e6),
    "dbtree 256 MB, fattree(8)": lambda: build("dbtree", fattree(8), None, 256e6),
    "ps, star(256)": lambda: parameter_server(star(256), 256),
    "ring, random order, bcube(4,2)": lambda: random_ring(bcube(4, 2)),
    "ring, random order, fattree(8)": lambda: random_ring(fattree(8)),
    "ring, random order, fattree(12)": lambda: random_ring(fattree(12)),
    "tree packing 16 MB, bcube(4,1)": lambda: build("tree-packing", bcube(4, 1), None, 16e6),
    "tree packing 64 MB, bcube(4,1)": lambda: build("tree-packing", bcube(4, 1), None, 64e6),
    "tree packing 256 MB, dcell(3,1)": lambda: build(
        "tree-packing", parse_spec("dcell:n=3,k=1"), None, 256e6
    ),
    "dbtree 256 MB, fattree(12)": lambda: build("dbtree", fattree(12), None, 256e6),
}
QUICK = 4


def main(quick: bool) -> None:
    if not available():
        sys.exit("bench_simgrid needs SimGrid's Python bindings: apt-get install python3-simgrid")
    simulate_flow(parameter_server(star(3), 3))  # the compiled engine loaded before any clock starts
    rows = []
    for name in list(CASES)[:QUICK] if quick else CASES:
        s, _ = checked(CASES[name])
        start = time.perf_counter()
        flow = simulate_flow(s)
        flow_wall = time.perf_counter() - start
        row = [name, f"{len(s):,}", flow.notes["method"], f"{flow.time_s * 1e3:.6g}", f"{flow_wall:.3f}"]
        try:
            peer = simulate_simgrid(s, timeout=LIMIT)
        except ArschedError as e:
            print(f"{name}: {e}", file=sys.stderr)
            rows.append([*row, f"not done in {LIMIT} s", "", "", "", ""])
            continue
        diff = abs(peer.time_s - flow.time_s) / flow.time_s
        ratio = peer.wall_s / flow_wall
        print(f"{name}: difference {diff:.1e}, SimGrid {ratio:.1f}x the flow model's wall", file=sys.stderr)
        rows.append(
            [
                *row,
                f"{peer.time_s * 1e3:.6g}",
                f"{diff:.1e}",
                f"{peer.wall_s:.3f}",
                f"{peer.build_s:.3f}",
                f"{ratio:.1f}",
            ]
        )
    publish(
        "Flow model beside SimGrid (bench_simgrid.py)",
        "The same contended schedules in the flow model and in SimGrid 3.32 (Debian's python3-simgrid), "
        "one after the other in one run, times in ms. The flow model: in-order connections, α = 5 µs, "
        "its exact method (`events` where flows share links). SimGrid (`arsched.sim.fluid_peer`): the "
        "CM02 max-min model with bandwidth and latency factors 1, weight-S 0, no TCP window bound, no "
        "cross-traffic, timing precision 1e-13 s and solver precision 1e-9; one SimGrid link per directed "
        "link, an explicit route per path, and one actor driving the flow model's semantics (α before "
        "each transfer, dependencies, the path latency after its last byte) around SimGrid's "
        "communications. difference: |SimGrid − flow| / flow. Wall times: the flow model's "
        "`simulate_flow` call (its compilation warmed up first) and SimGrid's run (its platform build "
        "apart; its process start and the dependency derivation not counted); speed ratio = SimGrid "
        f"wall / flow wall. SimGrid gets {LIMIT} s per case.",
        markdown(
            [
                "schedule",
                "transfers",
                "flow method",
                "flow (ms)",
                "flow wall (s)",
                "SimGrid (ms)",
                "difference",
                "SimGrid wall (s)",
                "SimGrid build (s)",
                "speed ratio",
            ],
            rows,
        ),
    )


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
