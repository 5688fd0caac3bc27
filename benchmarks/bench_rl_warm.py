"""Does the learned scheduler's warm start reproduce its teacher? On bench_rl's nine instances:
greedy-trees' schedule, its decisions replayed in the learning environment, the best fixed plan
(the teacher: the fastest chunk option — count and pipeline stages —, tree shape and round
rule), and the policy after the warm
start alone (imitation, no policy-gradient step), each timed in the flow model (in-order
connections, α = 5 µs) at 256 MB.

greedy-trees replayed must equal greedy-trees: otherwise the environment cannot express
greedy's rounds. The teacher is never slower (greedy's plan is one of the plans). The warm
policy shows how much of the teacher imitation recovers (each rule's round is a feature of the
flows, so all of it can be). Beside them, the shipped general policy (`-a hrl` without a
checkpoint: a warm start on six other networks whose teachers share one kind of plan,
`--shared-teacher`), run unchanged on the nine and on bench_rl's five networks of families or
link kinds it never saw, with the seconds its schedule takes to build. Every schedule is
validated.

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
from arsched.rl.checkpoint import DEFAULT, read_meta
from arsched.rl.config import TrainConfig
from arsched.rl.instance import Instance
from arsched.rl.rollout import Timer, best_plan, greedy_plan, run
from arsched.rl.training import train
from arsched.sim import DEFAULT_ALPHA, simulate_flow
from arsched.topology import parse_spec

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import markdown, publish
from bench_rl import INSTANCES, UNSEEN

NBYTES = 256e6
HEAD = ["network", "servers", "greedy-trees", "greedy replayed", "teacher", "plan", "warm policy", "warm s"]
GENERAL = ["general policy", "its plan", "infer s", "hrl", "kept", "hrl s"]
UNSEEN_HEAD = ["network", "servers", "greedy-trees", "teacher", "plan", "tree-packing", *GENERAL]


def describe(inst: Instance, option: int, shape: str, rule: str | None) -> str:
    """A plan in words: chunks (and their pipeline stages), tree shape(s), round rule."""
    chunks, stages = inst.chunk_options[option]
    return f"{chunks}{f' in {stages} stages' if stages > 1 else ''}, {shape}" + (f", {rule}" if rule else "")


def general(spec: str, inst: Instance) -> list[str]:
    """The shipped policy's gap on one network (`fallback=False`), its chunk option and tree
    shapes and the seconds to build its schedule; then `-a hrl` as users get it (the fallback
    on): its gap, which schedule it kept and its seconds, built first (so its seconds, not the
    policy's, include loading the compiled kernels)."""
    start = time.perf_counter()
    kept = build("hrl", parse_spec(spec), None, NBYTES)
    took_kept = time.perf_counter() - start
    start = time.perf_counter()
    schedule = build("hrl", parse_spec(spec), None, NBYTES, fallback=False)
    took = time.perf_counter() - start
    assert validate(schedule).ok and validate(kept).ok
    info = schedule.meta["hrl"]
    option = inst.chunk_options.index((info["chunks"], info["stages"]))
    shapes = "+".join(info["trees"])
    source = "policy" if kept.meta["hrl"]["source"] == "policy" else "greedy"
    return [
        f"{simulate_flow(schedule).gap:.3f}",
        describe(inst, option, shapes, None),
        f"{took:.1f}",
        f"{simulate_flow(kept).gap:.3f}",
        source,
        f"{took_kept:.1f}",
    ]


def measure(spec: str, out: str) -> list[str]:
    """One instance's row: ranks, greedy-trees, its replay, the teacher episode and its plan, the
    warm policy, warm-start seconds, and the general policy's columns."""
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
    row = [
        topo.name,
        str(len(topo.servers)),
        *(f"{g:.3f}" for g in gaps),
        describe(inst, p.chunks, SHAPES[p.shape], p.rule),
    ]
    return [*row, f"{meta['gaps'][0]:.3f}", f"{took:.0f}", *general(spec, inst)]


def measure_unseen(spec: str) -> list[str]:
    """A network the general policy's training never saw (nor any per-instance training here):
    greedy-trees, the best fixed plan, tree packing and the general policy."""
    topo = parse_spec(spec)
    inst = Instance(topo, None, NBYTES, spec)
    teacher = best_plan(inst, Timer(DEFAULT_ALPHA))
    others = [build(name, topo, None, NBYTES) for name in ("greedy-trees", "tree-packing")]
    assert all(validate(s).ok for s in (teacher.schedule, *others))
    greedy, packing = (f"{simulate_flow(s).gap:.3f}" for s in others)
    p = teacher.plan
    plan = describe(inst, p.chunks, SHAPES[p.shape], p.rule)
    return [
        topo.name,
        str(len(topo.servers)),
        greedy,
        f"{teacher.gap:.3f}",
        plan,
        packing,
        *general(spec, inst),
    ]


def tally(rows: list[list[str]], teacher: int, greedy: int, policy: int) -> str:
    """How many rows' general policy is within 5 % of the teacher, ≥ 3 % faster than
    greedy-trees, and more than 1 % slower than it (issue 23's targets)."""
    near = sum(float(r[policy]) <= 1.05 * float(r[teacher]) for r in rows)
    ahead = sum(float(r[policy]) * 1.03 <= float(r[greedy]) for r in rows)
    behind = sum(float(r[policy]) > 1.01 * float(r[greedy]) for r in rows)
    return (
        f"within 5 % of the per-instance teacher on **{near}/{len(rows)}**, ≥ 3 % faster than "
        f"greedy-trees on **{ahead}/{len(rows)}**, more than 1 % slower than it on **{behind}/{len(rows)}**"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="two instances")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    specs = INSTANCES[:2] if args.quick else INSTANCES
    unseen = UNSEEN[:1] if args.quick else UNSEEN
    work = Path(tempfile.mkdtemp(prefix="bench_rl_warm_"))
    with ProcessPoolExecutor(args.workers) as pool:
        rows = list(pool.map(measure, specs, [str(work / str(i)) for i in range(len(specs))]))
        unseen_rows = list(pool.map(measure_unseen, unseen))
    nine = tally(rows, HEAD.index("teacher"), HEAD.index("greedy-trees"), len(HEAD))
    others = tally(unseen_rows, 3, 2, len(UNSEEN_HEAD) - len(GENERAL))
    hrl = len(HEAD) + GENERAL.index("hrl")
    nine_kept = tally(rows, HEAD.index("teacher"), HEAD.index("greedy-trees"), hrl)
    others_kept = tally(unseen_rows, 3, 2, len(UNSEEN_HEAD) - len(GENERAL) + GENERAL.index("hrl"))
    shipped = read_meta(DEFAULT)
    publish(
        "hrl's warm start against its teacher (bench_rl_warm.py)",
        "Gap = time / lower bound in the flow model (in-order connections, α = 5 µs) at 256 MB. "
        "`greedy replayed` runs greedy-trees' decisions (chunk count, tree shape, the greedy rule's "
        "rounds) in the learning environment; it must equal greedy-trees. `teacher` is the best "
        "fixed plan (`plan`: chunks and their pipeline stages, tree shape, round rule), the warm "
        "start's teacher. `warm policy` "
        "is the deterministic policy after the warm start alone (`arsched train --iterations 0`: "
        "imitation of the teacher). `general policy` is the shipped policy (`-a hrl` without a "
        f"checkpoint; made by `{shipped['command']}`: "
        f"the warm start alone, its teachers sharing one kind of plan, {shipped['teacher_option']}), "
        "run unchanged (`-a hrl --no-fallback`); `its plan` is its chunk option and the tree shapes "
        "it chose, `infer s` the seconds to build its schedule (numpy, one process of the pool). "
        f"On the nine it is {nine}; on the unseen networks {others} (issue 23's targets: within "
        "5 %, ≥ 3 % faster on 6 of 9, never more than 1 % slower). `hrl` is what `-a hrl` gives: "
        "the same policy's schedule or, where the flow model times it faster, greedy-trees' plan "
        "replayed (`kept`: which one); `hrl s` its seconds, greedy-trees' search included, timed "
        f"before the policy alone (so it also pays for loading compiled kernels). On the nine it is "
        f"{nine_kept}; on the unseen networks {others_kept}. Tasks ran "
        f"{args.workers} at a time. Every schedule validated. Produced by "
        "`benchmarks/bench_rl_warm.py`.",
        markdown(HEAD + GENERAL, rows)
        + "\n\nNetworks of families or link kinds that no training saw (bench_rl's):\n\n"
        + markdown(UNSEEN_HEAD, unseen_rows),
    )


if __name__ == "__main__":
    main()
