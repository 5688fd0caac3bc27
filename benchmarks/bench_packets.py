"""The flow model against a packet-level simulator (ns-3): how optimistic is it, and where?

Each schedule (ring, tree packing, parameter server, NCCL's double binary tree) on two networks
with unique shortest paths (a star of 8 servers; two leaves of 4 servers under one spine, the
uplinks 4× faster) at 64 KB, 1 MB, 16 MB and 256 MB, α = 5 µs: its time in the flow model
(in-order connections, the default) and in ns-3 (`arsched.sim.packets`: TCP connections per
rank pair, 9,000-byte MTU, store-and-forward switches), the ratio flow / packets (1 = exact,
below 1 = the flow model is optimistic) and both simulators' wall time, side by side in one run.

Needs the ns3 wheel (`pip install ns3`; `make bench` installs it).
Run: python benchmarks/bench_packets.py [--quick]
"""

from __future__ import annotations

import sys
import time

from arsched.algorithms import build
from arsched.sim import simulate_flow
from arsched.sim.packets import available, simulate_packets
from arsched.topology import parse_spec

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import markdown, publish

NETWORKS = ["star:n=8", "leafspine:leaves=2,spines=1,servers_per_leaf=4,bandwidth=100Gbps/400Gbps"]
ALGORITHMS = ["ring", "tree-packing", "ps", "dbtree"]
SIZES = [64e3, 1e6, 16e6, 256e6]


def main(quick: bool) -> None:
    if not available():
        sys.exit("bench_packets needs the ns3 wheel: pip install ns3")
    rows = []
    for net in NETWORKS[:1] if quick else NETWORKS:
        topo = parse_spec(net)
        for algorithm in ALGORITHMS:
            for size in SIZES[:2] if quick else SIZES:
                s = build(algorithm, topo, None, size)
                start = time.perf_counter()
                flow = simulate_flow(s)
                flow_wall = time.perf_counter() - start
                packets = simulate_packets(s)
                ratio = flow.time_s / packets.time_s
                print(f"{net} {algorithm} {size:g}: {ratio:.3f}", file=sys.stderr)
                rows.append(
                    [
                        net.split(",bandwidth")[0],
                        algorithm,
                        f"{size / 1e6:g} MB",
                        f"{len(s):,}",
                        f"{flow.time_s * 1e3:.4f}",
                        f"{packets.time_s * 1e3:.4f}",
                        f"{ratio:.3f}",
                        f"{flow_wall:.3f}",
                        f"{packets.wall_s:.2f}",
                    ]
                )
    publish(
        "Flow model against packets (bench_packets.py)",
        "The same schedule in the flow model (in-order connections, α = 5 µs) and in ns-3 3.44 "
        "(`arsched.sim.packets`: one NewReno TCP connection per rank pair, opened beforehand; 9,000-byte "
        "MTU; drop-tail switch queues; shortest-path routes, unique on these networks, so the same as "
        "the schedule's), times in ms. flow / packets below 1 means the flow model is optimistic. "
        "Networks: a star of 8 servers at 100 Gb/s; two leaves of 4 servers under one spine, "
        "100 Gb/s down, 400 Gb/s up. Wall times: the flow model's simulation and ns-3's run (not its "
        "start-up), one after the other in one run.",
        markdown(
            [
                "network",
                "algorithm",
                "size",
                "transfers",
                "flow",
                "packets",
                "flow / packets",
                "flow wall (s)",
                "ns-3 wall (s)",
            ],
            rows,
        ),
    )


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
