"""AllReduce at cluster scale: what arsched builds for a hundred to a thousand ranks, how close it
is to the bound, and how long building and simulating it take.

For every network and algorithm: the gap to the bound (time / bound) in the default flow model
(in-order connections, α = 5 µs) at 256 MB and 16 MB, the synthesis time, the simulation
time and the number of transfers, measured one after the other in one run; an algorithm that
does not apply to a network (`hierarchical` without boxes, `torus-native` off tori) has no row.
Tree packing is not in the table: it takes at most 256 ranks. `sharded-ps` is left out above `SHARDED_RANKS`
ranks, where its N(N − 1) concurrent flows make the event simulation take minutes and
gigabytes (issue 22).

Run: python benchmarks/bench_scale.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time

from arsched.algorithms import NotApplicable, build
from arsched.sim import simulate_flow
from arsched.topology import parse_spec

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _build import checked
from _table import markdown, publish

NETWORKS = [
    "fattree:k=8",
    "fattree:k=16",
    "leafspine:leaves=32,spines=16,servers_per_leaf=16",
    "hgx:boxes=32,fabric=clos",
    "hgx:boxes=64,gen=h100",
    "hgx:boxes=128",
    "torus:dims=16x16",
    "torus:dims=8x8x8",
    "torus:dims=32x32",
]
QUICK = ["fattree:k=8"]
ALGORITHMS = ["rhd", "sharded-ps", "ring", "dbtree", "hierarchical", "torus-native"]
SIZES = (256e6, 16e6)
ALPHA = 5e-6
SHARDED_RANKS = 256


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one network only")
    args = parser.parse_args()
    rows = []
    for spec in QUICK if args.quick else NETWORKS:
        topo = parse_spec(spec)
        n = len(topo.servers)
        for name in ALGORITHMS:
            if name == "sharded-ps" and n > SHARDED_RANKS:
                continue
            for nbytes in SIZES:
                try:
                    s, built = checked(build, name, topo, None, nbytes)
                except NotApplicable:
                    break
                start = time.perf_counter()
                r = simulate_flow(s, ALPHA)
                simulated = time.perf_counter() - start
                cells = [f"{r.gap:.3f}", f"{built:.2f}", f"{simulated:.1f}", f"{len(s):,}"]
                rows.append([spec, n, name, f"{nbytes / 1e6:g} MB", *cells])
                print(" ".join(map(str, rows[-1])), file=sys.stderr, flush=True)
    header = ["network", "ranks", "algorithm", "size", "gap", "synthesis (s)", "simulation (s)", "transfers"]
    publish(
        "AllReduce at scale (bench_scale.py)",
        "Gap to the bound (time / bound) in the default flow model (in-order connections, "
        f"α = {ALPHA * 1e6:g} µs), synthesis and simulation times on this machine, one after the "
        "other in one run; every schedule validated. `rhd` and `sharded-ps` route over spread "
        f"equal-cost paths (d-mod-k). `sharded-ps` only up to {SHARDED_RANKS} ranks (its N(N − 1) "
        "concurrent flows take the event simulation minutes and gigabytes beyond).",
        markdown(header, rows),
    )


if __name__ == "__main__":
    main()
