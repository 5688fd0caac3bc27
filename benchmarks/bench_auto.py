"""`auto` against issue 21's targets: the best schedule arsched makes, on networks it was
developed on and on networks nobody tuned for.

For every network: the algorithm `auto` chose, its gap to the bound (time / bound) in the
default model (flow, in-order connections, α = 5 µs) at 256 MB and 16 MB, and the synthesis
time (auto's whole search: every candidate built and simulated, with the budget given). The
targets (issue 21): ≤ 1.03× at 256 MB and ≤ 1.10× at 16 MB; the last columns say met or by
how much they are missed. Networks: "tuned" are families and sizes the algorithms were
developed and benchmarked on; "untuned" other sizes of those families, seeded Jellyfish, a
heterogeneous leaf-spine, GPU clusters (`hgx`, `mi250`), directed networks (one-way tori of
3×3 and of 5×3, the latter with no Hamiltonian cycle at all, a ring with 4× bandwidth one
way) and the real 847-host production Clos of `shared/data` (racks of 3 to 24 servers on one
to three uplinks; where that file is present), which no constant was tuned on.

Run: python benchmarks/bench_auto.py [--quick] [--budget SECONDS] [--only NETWORK ...]
(each `--only` reruns one network and keeps the other rows of the last published table.)
"""

from __future__ import annotations

import argparse
import multiprocessing
import queue
import sys
import time
from pathlib import Path

import networkx as nx

from arsched.algorithms import build
from arsched.sim import simulate_flow
from arsched.topology import Topology, load, parse_spec

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import markdown, previous_rows, publish

LARGE = "leafspine:leaves=128,spines=32,servers_per_leaf=32"
"""4,096 ranks: issue 21 allows 10 minutes of synthesis there, so auto's budget is scaled by
`LARGE_SCALE` (and the network's wall time with it)."""
JELLYFISH_512 = "jellyfish:switches=128,ports=8,net_ports=4,seed=3"
"""512 servers with no structure, beyond tree packing's LP: its balanced steps take minutes to
place and each simulation of them minutes more, so this one is scaled as `LARGE` is."""
LARGE_SCALE = 5

TUNED = ["bcube:n=4,k=1", "dcell:n=4,k=1", "torus:dims=4x4", "fattree:k=4"]
UNTUNED = [
    "bcube:n=5,k=1",
    "bcube:n=3,k=2",
    "torus:dims=5x3",
    "torus:dims=3x3x2",
    "dcell:n=5,k=1",
    "jellyfish:switches=12,ports=5,net_ports=3,seed=7",
    "fattree:k=6",
    "leafspine:leaves=4,spines=2,servers_per_leaf=3,bandwidth=100Gbps/400Gbps",
    "hgx:boxes=2",
    "hgx:boxes=2,gen=h100",
    "hgx:boxes=4",
    "hgx:boxes=4,gen=h100",
    "hgx:boxes=4,gen=h100,fabric=clos,planes=2",
    "mi250:boxes=2",
    "hgx:boxes=16,gen=h100",
    "fattree:k=16",
    "hgx:boxes=128",
    "jellyfish:switches=64,ports=8,net_ports=4,seed=5",
    JELLYFISH_512,
    LARGE,
]
QUICK = ["torus:dims=4x4", "torus:dims=5x3", "hgx:boxes=2", "one-way torus 3x3"]
TARGETS = {256e6: 1.03, 16e6: 1.10}
SECTION = "auto against issue 21's targets (bench_auto.py)"


def one_way_torus(a: int, b: int, bandwidth: float = 12.5e9) -> Topology:
    """An a×b torus whose links run one way only in each dimension."""
    g = nx.DiGraph()
    g.add_nodes_from((f"s{i}", {"kind": "server"}) for i in range(a * b))
    for i in range(a):
        for j in range(b):
            u = i * b + j
            for v in (((i + 1) % a) * b + j, i * b + (j + 1) % b):
                g.add_edge(f"s{u}", f"s{v}", bandwidth=bandwidth, latency=1e-6)
    return Topology.from_networkx(g, name=f"one-way-torus({a}x{b})")


def asymmetric_ring(n: int, bandwidth: float = 12.5e9, ratio: float = 4.0) -> Topology:
    """A ring whose clockwise links are `ratio` times faster than the others."""
    g = nx.DiGraph()
    g.add_nodes_from((f"s{i}", {"kind": "server"}) for i in range(n))
    for i in range(n):
        j = (i + 1) % n
        g.add_edge(f"s{i}", f"s{j}", bandwidth=bandwidth * ratio, latency=1e-6)
        g.add_edge(f"s{j}", f"s{i}", bandwidth=bandwidth, latency=1e-6)
    return Topology.from_networkx(g, name=f"asymmetric-ring({n},{ratio:g}x)")


DIRECTED = {
    "one-way torus 3x3": lambda: one_way_torus(3, 3),
    "asymmetric ring 8": lambda: asymmetric_ring(8),
    "one-way torus 5x3": lambda: one_way_torus(5, 3),
}
CLOS = Path(__file__).resolve().parents[2] / "shared" / "data" / "lingjun2023_topo.csv"
REAL = {"real Clos, 847 hosts": lambda: load(CLOS)} if CLOS.exists() else {}


def _network(name: str) -> Topology:
    special = DIRECTED | REAL
    return special[name]() if name in special else parse_spec(name)


def _verdict(gap: float, target: float) -> str:
    return "met" if gap <= target else f"missed by {(gap / target - 1) * 100:.1f} %"


def _measure(name: str, budget: float, out: multiprocessing.Queue) -> None:
    """auto at each target size on one network: (chosen, gap, seconds) per size, to `out`."""
    topo = _network(name)
    result = []
    for size in TARGETS:
        start = time.perf_counter()
        s = build("auto", topo, None, size, budget=budget)
        took = time.perf_counter() - start
        gap = simulate_flow(s).gap
        no_alpha = simulate_flow(s, 0.0)
        print(f"{name} {size / 1e6:g} MB: {s.algorithm} {gap:.3f} in {took:.1f} s", file=sys.stderr)
        result.append((s.algorithm, gap, took, no_alpha.gap, no_alpha.bound_s))
    out.put((len(topo.servers), result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="four networks only")
    parser.add_argument("--budget", type=float, default=120.0, help="auto's budget per build (s)")
    parser.add_argument("--limit", type=float, default=900.0, help="wall seconds per network")
    parser.add_argument(
        "--only",
        action="append",
        help="a network to rerun (repeat for more; names hold commas); the table keeps the others' last rows",
    )
    args = parser.parse_args()
    cases = [(n, "tuned") for n in TUNED] + [(n, "untuned") for n in [*UNTUNED, *DIRECTED, *REAL]]
    if args.quick:
        cases = [(n, kind) for n, kind in cases if n in QUICK]
    only = None if args.only is None else set(args.only)
    if only is not None and not only <= {n for n, _ in cases}:
        parser.error(f"--only: unknown networks {sorted(only - {n for n, _ in cases})}")
    kept = {row[0]: row for row in previous_rows(SECTION)} if only is not None else {}
    rows = []
    ctx = multiprocessing.get_context("spawn")
    for name, kind in cases:
        if only is not None and name not in only:
            if name in kept:
                rows.append(kept[name])
            continue
        out = ctx.Queue()
        scale = LARGE_SCALE if name in (LARGE, JELLYFISH_512) else 1
        proc = ctx.Process(target=_measure, args=(name, args.budget * scale, out))
        proc.start()
        try:
            ranks, result = out.get(timeout=args.limit * scale)
        except queue.Empty:
            rows.append([name, kind, "", *[f"did not finish in {args.limit * scale:g} s"] * 8, "", ""])
            continue
        finally:
            proc.kill()
            proc.join()
        row: list[object] = [name, kind, ranks]
        for algorithm, gap, took, _, _ in result:
            row += [algorithm, f"{gap:.3f}", f"{took:.1f}"]
        row += [_verdict(r[1], t) for r, t in zip(result, TARGETS.values(), strict=True)]
        rows.append([*row, " / ".join(f"{r[3]:.3f}" for r in result), f"{result[-1][4] * 1e6:.0f}"])
    header = ["network", "kind", "ranks"]
    header += ["256 MB: chosen", "gap", "synthesis (s)", "16 MB: chosen", "gap", "synthesis (s)"]
    header += ["≤ 1.03× at 256 MB", "≤ 1.10× at 16 MB", "gap at α = 0 (256 / 16 MB)", "16 MB bound (µs)"]
    publish(
        SECTION,
        "The schedule `auto` makes (every applicable algorithm built and simulated; the fastest kept "
        f"and validated; budget {args.budget:g} s per build, and as much again for simulating what was "
        "built but cut short) and its gap to the bound in the default model "
        "(flow, in-order connections, α = 5 µs; `hierarchical`, `torus-native` and `tree-packing` "
        "choose one or two channels per rank pair by simulation, the others use one). Synthesis "
        "time is auto's whole search on this machine; "
        f"a network gets {args.limit:g} s of wall time for both sizes ({LARGE}, 4,096 ranks: "
        f"{LARGE_SCALE}× the budget and the wall time, issue 21's 10 minutes at that size; the same "
        f"for {JELLYFISH_512}, 512 servers with no structure, where tree packing's balanced steps "
        "take minutes to place and each simulation of them minutes more). "
        "Tuned: families and sizes the algorithms were developed on; untuned: the rest. Why a target "
        "is missed: the last column is the chosen schedule's gap with no per-transfer overhead (α = 0). "
        "Where it is within the target, the miss is α, which the bandwidth bound leaves out: the "
        "schedule's steps on the critical path each pay 5 µs, against the 16 MB bound in the last "
        "column. Where it is not, the schedule itself moves too many bytes over some link "
        "(GPU boxes: both intra-box phases of the hierarchical scheme cross each GPU's NVLink or xGMI "
        "links, see `hierarchical`'s docstring; MI250's mesh: deep trees; the 256- and 512-server Jellyfish: "
        "tree packing's balanced steps, which leave some link-steps above the mean load: see "
        "`packing.balanced`'s docstring; the real Clos: `group-trees`, whose trees between its 48 "
        "racks and inside them are about 27 hops deep, each costing α and a latency per chunk, "
        "with at most 1,024 chunks: see its docstring).",
        markdown(header, rows),
    )


if __name__ == "__main__":
    main()
