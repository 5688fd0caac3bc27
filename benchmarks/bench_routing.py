"""Speed of default routing on large topologies, side by side with networkx.

For the hosts of a fat-tree and of the 847-host production Clos (if ../shared is beside the
project), route every ordered pair of the first N hosts with arsched's router (batched BFS to
all destinations, vectorised next-hop tables, cached paths) and with networkx.shortest_path per
pair (same fewest-hop length; its tie-break differs), in the same run.

Run: python benchmarks/bench_routing.py
"""

from __future__ import annotations

import sys
import time
from itertools import permutations
from pathlib import Path

import networkx as nx

from arsched.topology import fattree, load

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import markdown, publish

CLOS = Path(__file__).resolve().parents[2] / "shared" / "data" / "lingjun2023_topo.csv"


def main() -> None:
    cases = [(fattree(8), 128), (fattree(16), 256), (fattree(16), 1024)]
    if CLOS.exists():
        cases.append((load(CLOS), 847))
    rows = []
    for topo, n in cases:
        hosts = topo.servers[:n]
        pairs = list(permutations(hosts, 2))
        t0 = time.perf_counter()
        paths = topo.router.paths(pairs)
        ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = topo.router.paths(pairs)
        cached = time.perf_counter() - t0
        assert paths == again
        g = topo.to_networkx()
        sample = pairs[:: max(1, len(pairs) // 20000)]
        t0 = time.perf_counter()
        ref = [nx.shortest_path(g, s, d) for s, d in sample]
        ref_t = (time.perf_counter() - t0) * len(pairs) / len(sample)
        lookup = {p: i for i, p in enumerate(pairs)}
        assert all(len(r) == len(paths[lookup[(r[0], r[-1])]]) for r in ref)
        rows.append(
            [
                topo.name,
                n,
                len(topo.nodes),
                len(pairs),
                f"{ours:.2f} s",
                f"{len(pairs) / ours / 1e6:.2f} M/s",
                f"{cached:.2f} s",
                f"{ref_t:.1f} s ({ref_t / ours:.0f}×)",
            ]
        )
    publish(
        "Routing",
        "Default fewest-hop paths for every ordered pair of the first N hosts: first computation, "
        "the cached second call, and networkx.shortest_path per pair in the same run (timed on up "
        "to 20,000 sampled pairs and scaled to all pairs), with its slowdown. Path lengths agree. "
        "Produced by `benchmarks/bench_routing.py`.",
        markdown(["topology", "hosts", "nodes", "pairs", "arsched", "rate", "cached", "networkx"], rows),
    )


if __name__ == "__main__":
    main()
