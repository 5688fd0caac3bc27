"""Does the learned scheduler's warm start reproduce its teacher? On bench_rl's nine instances:
greedy-trees' schedule, its decisions replayed in the learning environment, the best fixed plan
(the teacher: the fastest chunk option — count and pipeline stages —, tree shape and round
rule), and the policy after the warm
start alone (imitation, no policy-gradient step), each timed in the flow model (in-order
connections, α = 5 µs) at 256 MB.

greedy-trees replayed must equal greedy-trees: otherwise the environment cannot express
greedy's rounds. The teacher is never slower (greedy's plan is one of the plans). The warm
policy shows how much of the teacher imitation recovers (each rule's round is a feature of the
flows, so all of it can be). Every schedule is validated.

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
from arsched.algorithms.flowtrees import SHAPES
from arsched.collective import validate
from arsched.rl.config import TrainConfig
from arsched.rl.instance import Instance
from arsched.rl.rollout import Timer, best_plan, greedy_plan, run
from arsched.rl.training import train
from arsched.sim import DEFAULT_ALPHA, simulate_flow
from arsched.topology import parse_spec

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import markdown, publish
from bench_rl import INSTANCES

NBYTES = 256e6
HEAD = ["network", "servers", "greedy-trees", "greedy replayed", "teacher", "plan", "warm policy", "warm s"]


def measure(spec: str, out: str) -> list[str]:
    """One instance's row: ranks, greedy-trees, its replay, the teacher episode and its plan, the
    warm policy, warm-start seconds."""
    topo = parse_spec(spec)
    greedy = build("greedy-trees", topo, None, NBYTES)
    inst = Instance(topo, None, NBYTES, spec)
    replay = run(inst, None, Timer(DEFAULT_ALPHA), "plan", plan=greedy_plan(inst))
    teacher = best_plan(inst, Timer(DEFAULT_ALPHA))
    assert all(validate(s).ok for s in (greedy, replay.schedule, teacher.schedule))
    start = time.perf_counter()
    meta = train(TrainConfig(topologies=(spec,), iterations=0, out=Path(out)))
    took = time.perf_counter() - start
    gaps = (simulate_flow(greedy).gap, replay.gap, teacher.gap)
    p = teacher.plan
    chunks, stages = inst.chunk_options[p.chunks]
    chosen = f"{chunks}{f' in {stages} stages' if stages > 1 else ''}, {SHAPES[p.shape]}, {p.rule}"
    row = [topo.name, str(len(topo.servers)), *(f"{g:.3f}" for g in gaps), chosen]
    return [*row, f"{meta['gaps'][0]:.3f}", f"{took:.0f}"]


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
        "`greedy replayed` runs greedy-trees' decisions (chunk count, tree shape, the greedy rule's "
        "rounds) in the learning environment; it must equal greedy-trees. `teacher` is the best "
        "fixed plan (`plan`: chunks and their pipeline stages, tree shape, round rule), the warm "
        "start's teacher. `warm policy` "
        "is the deterministic policy after the warm start alone (`arsched train --iterations 0`: "
        "imitation of the teacher). Every schedule validated. Produced by "
        "`benchmarks/bench_rl_warm.py`.",
        markdown(HEAD, rows),
    )


if __name__ == "__main__":
    main()
