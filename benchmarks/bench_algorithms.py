"""The algorithm comparison table: every algorithm (auto included) on the issue's topologies,
flow model (α = 5 µs; in-order connections, the default, and at 256 MB also every transfer at
once), 1 MB and 256 MB, with the gap to the lower bound and the synthesis time.

Run: python benchmarks/bench_algorithms.py [--quick] [--only ALGORITHM ...]
(`--only` reruns those algorithms' rows and keeps every other row of the published table.)
"""

from __future__ import annotations

import argparse
import sys

from arsched.algorithms.evaluate import evaluate_all
from arsched.topology import parse_spec

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import markdown, previous_rows, publish

SECTION = "Algorithm comparison"

TOPOLOGIES = [
    "bcube:n=2,k=1",
    "bcube:n=3,k=1",
    "bcube:n=4,k=1",
    "dcell:n=2,k=1",
    "dcell:n=3,k=1",
    "dcell:n=4,k=1",
    "jellyfish:switches=8,ports=4,net_ports=3,seed=1",
    "jellyfish:switches=16,ports=4,net_ports=3,seed=1",
    "jellyfish:switches=16,ports=5,net_ports=3,seed=2",
    "torus:dims=4x4",
    "fattree:k=4",
]


def main(quick: bool = False, only: list[str] | None = None) -> None:
    rows = []
    for spec in TOPOLOGIES[:3] if quick else TOPOLOGIES:
        topo = parse_spec(spec)
        results = evaluate_all(topo, [1e6, 256e6], only)
        at_once = {r.algorithm: r for r in evaluate_all(topo, [256e6], only, fifo=False)}
        by_alg: dict[str, dict[float, object]] = {}
        for r in results:
            by_alg.setdefault(r.algorithm, {})[r.bytes] = r
        for name, per_size in by_alg.items():
            small, large = per_size[1e6], per_size[256e6]
            if small.note:
                continue
            rows.append(
                [
                    topo.name,
                    len(topo.servers),
                    name,
                    f"{small.gap:.2f}",
                    f"{large.gap:.3f}",
                    f"{at_once[name].gap:.3f}",
                    f"{large.time_s * 1e3:.3f}",
                    f"{large.bound_s * 1e3:.3f}",
                    f"{max(small.synthesis_s, large.synthesis_s) * 1e3:.1f}",
                ]
            )
    if only:
        fresh = {(r[0], r[2]): r for r in rows}
        rows = [fresh.pop((r[0], r[2]), r) for r in previous_rows(SECTION)] + list(fresh.values())
    publish(
        SECTION,
        "Flow model with α = 5 µs and 100 Gb/s, 1 µs links, in-order connections (the default: each "
        "connection carries its steps in order, as a runtime's channels do). Gap = simulated time / "
        "lower bound (1 is optimal) at 1 MB and 256 MB, at 256 MB also with every transfer sent at "
        "once (`--no-fifo`), the 256 MB time and bound in ms, and the synthesis time (the larger of "
        "the two sizes; includes the ps root search, the multi-ring candidate simulations, tree "
        "packing's LP and its level placement, for hrl greedy-trees' search besides the policy's "
        "episode (its fallback, kept where faster), and for auto every candidate it built). "
        "Topology-native schemes appear only on their family. `hierarchical`, `torus-native` and "
        "`tree-packing` choose one or two channels per rank pair by simulation (`Schedule.channels`); "
        "the others use one. Produced by "
        "`benchmarks/bench_algorithms.py`.",
        markdown(
            [
                "topology",
                "ranks",
                "algorithm",
                "gap 1 MB",
                "gap 256 MB",
                "gap 256 MB, all at once",
                "time 256 MB (ms)",
                "bound (ms)",
                "synthesis (ms)",
            ],
            rows,
        ),
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the first three networks only")
    ap.add_argument("--only", action="append", help="rerun only this algorithm's rows (repeatable)")
    args = ap.parse_args()
    main(args.quick, args.only)
