"""Does the learned scheduler's warm start reproduce its teacher? On bench_rl's nine instances:
greedy-trees' schedule, the same decisions replayed in the learning environment (the teacher
episode), and the policy after the warm start alone (imitation, no policy-gradient step), each
timed in the flow model (in-order connections, α = 5 µs) at 256 MB.

The teacher must equal greedy-trees: otherwise the environment cannot express greedy's rounds
and learning starts below its own baseline. The warm policy shows how much of the teacher
imitation recovers (a flow's place in greedy's order is one of its features, so all of it can be).
Every schedule is validated.

Run: python benchmarks/bench_rl_warm.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from arsched.algorithms import build
from arsched.collective import validate
from arsched.rl.config import TrainConfig
from arsched.rl.instance import Instance
from arsched.rl.rollout import Timer, run
from arsched.rl.training import train
from arsched.sim import DEFAULT_ALPHA, simulate_flow
from arsched.topology import parse_spec

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import markdown, publish
from bench_rl import INSTANCES

NBYTES = 256e6


def measure(spec: str, out: str) -> list[str]:
    """One instance's row: ranks, greedy-trees, teacher episode, warm policy, warm-start seconds."""
    topo = parse_spec(spec)
    greedy = build("greedy-trees", topo, None, NBYTES)
    validate(greedy)
    teacher = run(Instance(topo, None, NBYTES, spec), None, Timer(DEFAULT_ALPHA), "greedy")
    validate(teacher.schedule)
    start = time.perf_counter()
    meta = train(TrainConfig(topologies=(spec,), iterations=0, out=Path(out)))
    took = time.perf_counter() - start
    gaps = (simulate_flow(greedy).gap, teacher.gap, meta["gaps"][0])
    return [topo.name, str(len(topo.servers)), *(f"{g:.3f}" for g in gaps), f"{took:.0f}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="two instances")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    specs = INSTANCES[:2] if args.quick else INSTANCES
    work = Path(tempfile.mkdtemp(prefix="bench_rl_warm_"))
    with ProcessPoolExecutor(args.workers) as pool:
        rows = list(pool.map(measure, specs, [str(work / str(i)) for i in range(len(specs))]))
    publish(
        "hrl's warm start against its teacher (bench_rl_warm.py)",
        "Gap = time / lower bound in the flow model (in-order connections, α = 5 µs) at 256 MB. "
        "`teacher` replays greedy-trees' decisions (chunk count, tree shape, its round order) in the "
        "learning environment; it must equal greedy-trees. `warm policy` is the deterministic policy "
        "after the warm start alone (`arsched train --iterations 0`: imitation of the teacher). "
        "Every schedule validated. Produced by `benchmarks/bench_rl_warm.py`.",
        markdown(["network", "servers", "greedy-trees", "teacher", "warm policy", "warm start (s)"], rows),
    )


if __name__ == "__main__":
    main()
