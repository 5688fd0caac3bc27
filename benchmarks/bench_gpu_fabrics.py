"""AllReduce on GPU-cluster fabrics: `hierarchical` with its chosen piece sizes beside equal
pieces, tree packing and a ring, at 16 MB and 256 MB.

For every fabric (A100 and H100 HGX boxes on a rail-optimised or ToR fabric, dual-plane NICs,
oversubscribed spines, MI250 boxes on their xGMI mesh): the gap to the bound (time / bound) in
the default flow model (in-order connections, α = 5 µs) and the synthesis time, measured side
by side in one run. "hierarchical, equal pieces" is the same plan (groups, modes) cut into the
estimate's best number of equal pieces, which is what `hierarchical` built before pieces could
differ in size, on one channel per rank pair; "one route per pair" is `hierarchical(stripes=1)`,
each connection on a single route (one queue pair), where striping changes the schedule. The
pieces column says where `hierarchical` chose two channels per rank pair (`Schedule.channels`).
Tree packing is left out above `PACKING_RANKS` ranks (minutes of synthesis and simulation).

Run: python benchmarks/bench_gpu_fabrics.py [--quick]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from arsched.algorithms import build
from arsched.algorithms.hierarchical import Plan, estimate
from arsched.sim import simulate_flow
from arsched.topology import parse_spec

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _build import checked
from _table import markdown, publish

FABRICS = [
    "hgx:boxes=2",
    "hgx:boxes=4",
    "hgx:boxes=8",
    "hgx:boxes=2,gen=h100",
    "hgx:boxes=4,gen=h100",
    "hgx:boxes=4,fabric=clos",
    "hgx:boxes=3,gpus_per_box=4",
    "hgx:boxes=4,planes=2",
    "hgx:boxes=4,gen=h100,fabric=clos,planes=2",
    "hgx:boxes=4,gpus_per_box=4,su=2,oversub=2",
    "mi250:boxes=2",
]
QUICK = ["hgx:boxes=2", "hgx:boxes=4,gen=h100"]
SIZES = (16e6, 256e6)
ALPHA = 5e-6
PACKING_RANKS = 32


def _timed(make, *args, **params):
    s, took = checked(make, *args, **params)
    return simulate_flow(s, ALPHA).gap, took, s


def _equal_pieces(topo, chosen, nbytes):
    """hierarchical's plan of `chosen` with the estimate's best equal pieces."""
    p = chosen.meta["params"]
    grid = np.array([[topo.servers.index(r) for r in row] for row in p["groups"]])
    options = estimate(topo, topo.servers, Plan(grid, p["intra"], p["rail"]), nbytes, ALPHA)
    stages = next(len(w) for _, w in options if len(set(w)) == 1)
    return build("hierarchical", topo, None, nbytes, intra=p["intra"], rail=p["rail"], stages=stages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two fabrics only")
    args = parser.parse_args()
    rows = []
    for spec in QUICK if args.quick else FABRICS:
        topo = parse_spec(spec)
        n = len(topo.servers)
        for nbytes in SIZES:
            gap, took, chosen = _timed(build, "hierarchical", topo, None, nbytes)
            equal, _, _ = _timed(_equal_pieces, topo, chosen, nbytes)
            single, _, one = _timed(build, "hierarchical", topo, None, nbytes, stripes=1)
            single_cell = f"{single:.3f}" if one.paths != chosen.paths else "same"
            if n <= PACKING_RANKS:
                packing, packing_s, _ = _timed(build, "tree-packing", topo, None, nbytes)
                packing_cells = [f"{packing:.3f}", f"{packing_s:.2f}"]
            else:
                packing_cells = ["not run", ""]
            ring, _, _ = _timed(build, "ring", topo, None, nbytes)
            p = chosen.meta["params"]
            pieces = "+".join(map(str, p["pieces"]))
            pieces += f", {chosen.channels} channels" if chosen.channels > 1 else ""
            mode = f"{p['intra']}/{p['rail']}"
            cells = [f"{gap:.3f}", f"{took:.2f}", mode, pieces, f"{equal:.3f}", single_cell]
            cells += [*packing_cells, f"{ring:.3f}"]
            rows.append([spec, n, f"{nbytes / 1e6:g} MB", *cells])
            print(" ".join(map(str, rows[-1])), file=sys.stderr, flush=True)
    header = ["fabric", "ranks", "size", "hierarchical", "synthesis (s)", "intra/rail", "pieces (units)"]
    header += ["hierarchical, equal pieces", "one route per pair", "tree packing", "synthesis (s)", "ring"]
    publish(
        "GPU-cluster fabrics (bench_gpu_fabrics.py)",
        "Gap to the bound (time / bound) in the default flow model (in-order connections, "
        f"α = {ALPHA * 1e6:g} µs) of `hierarchical` (pieces of the sizes it chose, in units of one "
        "chunk per rank, or of as many as a rank pair has routes to stripe over), the same plan in "
        "equal pieces (its choice before pieces could differ) on one channel per rank pair, "
        "the same with one route per rank pair (`stripes=1`; 'same' where striping changes "
        "nothing: single-port NICs below non-blocking spines), "
        f"tree packing (up to {PACKING_RANKS} ranks) and a ring; `hierarchical` (here and with one "
        "route per pair) and tree packing choose one or two channels per rank pair by simulation "
        "(the pieces column says where `hierarchical` took two), the ring uses one; synthesis times "
        "on this machine, "
        "side by side in one run. Every schedule validated.",
        markdown(header, rows),
    )


if __name__ == "__main__":
    main()
