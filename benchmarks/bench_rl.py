"""The hierarchical deep-RL scheduler (`hrl`, arXiv 2503.21013) against the baselines.

Nine instances (three BCube, three DCell, three Jellyfish, 8–32 servers). Per instance a policy
pair is trained with `--steps` environment steps (imitation warm start, then alternating
MaskablePPO; with `--cold` also from scratch, no imitation), and one general policy is trained
on a separate set of smaller topologies and run on all nine (held out: other sizes, other
Jellyfish seeds). Every schedule is validated, then timed in the round model (α = 0) and the
flow model (α = 5 µs) at 256 MB, beside ps, ring, greedy-trees, tree-packing and the bound.
Best-of-k sampling is a separate column: it is a search at inference, not learning. Also
measured: environment steps per second on BCube(4,1) (one core), training time per instance
(single-threaded torch) and inference time per schedule.

Run: python benchmarks/bench_rl.py [--steps N] [--phases P] [--cold] [--samples K] [--quick]
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from arsched.algorithms import build
from arsched.algorithms.evaluate import evaluate_all
from arsched.collective import validate
from arsched.rl.envs import TreeSelectEnv, WorkloadEnv
from arsched.rl.training import TrainConfig, train
from arsched.sim import DEFAULT_ALPHA, simulate_flow, simulate_rounds
from arsched.topology import parse_spec

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import markdown, publish

INSTANCES = [
    "bcube:n=3,k=1",
    "bcube:n=4,k=1",
    "bcube:n=3,k=2",
    "dcell:n=3,k=1",
    "dcell:n=4,k=1",
    "dcell:n=5,k=1",
    "jellyfish:switches=8,ports=4,net_ports=3,seed=1",
    "jellyfish:switches=16,ports=4,net_ports=3,seed=1",
    "jellyfish:switches=16,ports=5,net_ports=3,seed=2",
]
GENERAL_SET = [  # none of the nine: other sizes and other Jellyfish seeds
    "bcube:n=2,k=2",
    "dcell:n=2,k=1",
    "jellyfish:switches=12,ports=4,net_ports=3,seed=5",
    "jellyfish:switches=10,ports=5,net_ports=3,seed=7",
]
BASELINES = ["ps", "ring", "greedy-trees", "tree-packing"]
SIZE = 256e6


def env_speed(spec: str = "bcube:n=4,k=1", seconds: float = 3.0) -> tuple[float, float]:
    """Steps per second of the lower env (uniformly random legal actions) and of the upper env
    (all selectable trees; the greedy lower policy fills each round), one core."""
    rng = np.random.default_rng(0)
    rates = []
    for env in (WorkloadEnv([parse_spec(spec)]), TreeSelectEnv([parse_spec(spec)])):
        env.reset(seed=0)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            mask = env.action_masks()
            if isinstance(env, WorkloadEnv):
                action = int(rng.choice(np.flatnonzero(mask)))
            else:
                action = mask.reshape(-1, 2)[:, 1].astype(np.int8)
            *_, done, _, _ = env.step(action)
            n += 1
            if done:
                env.reset()
        rates.append(n / (time.perf_counter() - t0))
    return rates[0], rates[1]


def gains(folder: Path) -> str:
    """Rounds removed by the accepted PPO phases and by the self-imitation steps (log.csv),
    and the fewest rounds of an explored episode that self-imitation fitted (kept or not)."""
    by = {"ppo": 0, "self-imitation": 0}
    rows = list(csv.DictReader((folder / "log.csv").open()))
    best = sum(map(int, rows[0]["rounds"].split()))
    for r in rows[1:]:
        total = sum(map(int, r["rounds"].split()))
        if r["accepted"] == "1" and total < best:
            by["self-imitation" if r["level"] == "self-imitation" else "ppo"] += best - total
            best = total
    explored = [sum(map(int, r["explored_rounds"].split())) for r in rows if r.get("explored_rounds")]
    return f"{by['ppo']} / {by['self-imitation']} / {min(explored) if explored else '–'}"


def run_hrl(topo, checkpoint: Path, samples: int = 1) -> tuple[dict, float]:
    """Build, validate and time an hrl schedule: (results, inference seconds)."""
    t0 = time.perf_counter()
    s = build("hrl", topo, None, SIZE, checkpoint=checkpoint, samples=samples)
    elapsed = time.perf_counter() - t0
    assert validate(s).ok, "hrl built an invalid schedule"
    rounds = simulate_rounds(s)
    flow = simulate_flow(s, DEFAULT_ALPHA)
    return {"rounds": rounds.rounds, "rgap": rounds.gap, "rtime": rounds.time_s, "fgap": flow.gap}, elapsed


def baselines(topo) -> dict[str, dict]:
    by_round = {r.algorithm: r for r in evaluate_all(topo, [SIZE], BASELINES, "rounds")}
    by_flow = {r.algorithm: r for r in evaluate_all(topo, [SIZE], BASELINES, "flow")}
    return {
        name: {
            "rounds": by_round[name].rounds,
            "rgap": by_round[name].gap,
            "rtime": by_round[name].time_s,
            "fgap": by_flow[name].gap,
        }
        for name in BASELINES
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=12_000, help="training steps per instance (both levels)")
    ap.add_argument("--phases", type=int, default=8)
    ap.add_argument("--self-imitation", type=int, default=16, help="sampled episodes per self-imitation")
    ap.add_argument("--explore", type=float, default=0.05, help="self-imitation: P(flow pick sampled)")
    ap.add_argument("--general-steps", type=int, default=None, help="steps of the general policy")
    ap.add_argument("--cold", action="store_true", help="also train each instance from scratch")
    ap.add_argument("--samples", type=int, default=8, help="k of the best-of-k column")
    ap.add_argument("--quick", action="store_true", help="three instances, tiny budgets (a smoke run)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    instances = INSTANCES[::3] if args.quick else INSTANCES
    steps = 600 if args.quick else args.steps
    general_steps = args.general_steps or 2 * steps
    work = Path(tempfile.mkdtemp(prefix="bench_rl_"))

    lower_rate, upper_rate = env_speed(seconds=1.0 if args.quick else 3.0)
    t0 = time.perf_counter()

    def config(specs: list[str], n: int, out: Path, warm: bool = True) -> TrainConfig:
        return TrainConfig(
            specs,
            out=out,
            steps=n,
            phases=args.phases,
            warm_start=warm,
            self_imitation=args.self_imitation,
            explore=args.explore,
        )

    train(config(GENERAL_SET, general_steps, work / "general"))
    general_time = time.perf_counter() - t0

    rows, flow_rows, tally = (
        [],
        [],
        {"ps": 0, "ring": 0, "ring_tie": 0, "greedy": 0, "bound": 0, "general": 0, "cold": 0, "fewer": 0},
    )
    for spec in instances:
        topo = parse_spec(spec)
        base = baselines(topo)
        variants = {}
        t0 = time.perf_counter()
        train(config([spec], steps, work / "warm"))
        train_s = time.perf_counter() - t0
        variants["hrl"], infer_s = run_hrl(topo, work / "warm")
        variants["best"], _ = run_hrl(topo, work / "warm", args.samples)
        variants["general"], _ = run_hrl(topo, work / "general")
        if args.cold:
            train(config([spec], steps, work / "cold", warm=False))
            variants["cold"], _ = run_hrl(topo, work / "cold")
        h, g = variants["hrl"], base["greedy-trees"]
        tally["ps"] += h["rtime"] < base["ps"]["rtime"]
        tally["ring"] += h["rtime"] < base["ring"]["rtime"]
        tally["ring_tie"] += h["rtime"] <= base["ring"]["rtime"] * 1.001
        tally["greedy"] += h["rounds"] <= g["rounds"]
        tally["fewer"] += h["rounds"] < g["rounds"]
        tally["general"] += variants["general"]["rounds"] <= g["rounds"]
        tally["cold"] += "cold" in variants and variants["cold"]["rounds"] <= g["rounds"]
        family_bound = spec.startswith(("bcube", "dcell"))
        tally["bound"] += family_bound and h["rgap"] <= 1.15
        cols = [base[n] for n in BASELINES] + [variants[v] for v in ("hrl", "best", "general")]
        cols += [variants["cold"]] if args.cold else []
        rows.append(
            [topo.name, len(topo.servers)]
            + [f"{c['rounds']} ({c['rgap']:.2f})" for c in cols]
            + [gains(work / "warm"), f"{train_s:.0f}", f"{infer_s * 1e3:.0f}"]
        )
        flow_rows.append([topo.name, len(topo.servers)] + [f"{c['fgap']:.3f}" for c in cols])
        print(topo.name, rows[-1][2:], flush=True)

    names = [
        *BASELINES,
        "hrl",
        f"hrl best-of-{args.samples}",
        "hrl general",
        *(["hrl cold"] if args.cold else []),
    ]
    n = len(instances)
    nb = sum(s.startswith(("bcube", "dcell")) for s in instances)
    intro = (
        f"Round model (α = 0) and flow model (α = 5 µs, 100 Gb/s links) at 256 MB; every schedule "
        f"validated. Per instance, `hrl` is trained with {steps} environment steps in {args.phases} "
        f"alternating phases (`arsched train --steps {steps} --phases {args.phases} --self-imitation "
        f"{args.self_imitation} --explore {args.explore}`): the two networks first imitate greedy-trees; "
        f"then MaskablePPO trains one level at a time, and after each PPO phase both networks are "
        f"fitted to the best of {args.self_imitation} episodes that follow the policy but sample each "
        f"flow pick with probability {args.explore:g}, {2 * args.explore:g} or {3 * args.explore:g} "
        f"(cycling over the episodes; self-imitation); a phase is kept "
        f"only if it adds no rounds on the training instance. The column `rounds cut by PPO / "
        f"self-imitation / best explored` says which of the two found the rounds `hrl` saves over "
        f"greedy-trees, and the fewest rounds of an explored episode (what self-imitation tried to "
        f"make deterministic; where it is below `hrl`, the fit did not reproduce it). "
        f"`hrl best-of-{args.samples}` keeps the fewest rounds of the deterministic run and "
        f"{args.samples - 1} sampled ones: a search at inference, not learning. `hrl general` is "
        f"one policy trained ({general_steps} steps, {general_time:.0f} s) on "
        f"{', '.join(GENERAL_SET)} and run unchanged on every instance (all held out)."
        + (" `hrl cold` is trained from scratch (no imitation) with the same budget." if args.cold else "")
        + "\n\nWhat limited the flow trees (1.6-1.9x the bound before) and what changed: the bound "
        "is reachable in the round model (bcube-native, a dimension-by-dimension reduce-scatter/"
        "all-gather, measures 1.002x on bcube(3,1)), so the gap was the pipeline, in three parts. "
        "(1) Chunks: with one chunk per rank a depth-d tree needs 2d rounds for its chunk, as "
        "much as the whole bound on bcube(3,1) (8 rounds); now 4 chunks per rank up to 32 ranks "
        "(2 up to 64, `default_chunks`), or one per rank where that is faster "
        "(`candidate_chunks`: greedy keeps the plan with the least rounds / chunks, then the fewest "
        "rounds). (2) Trees: one shape per root overloaded some links "
        "(9 flows on the busiest link of bcube(3,1) where 8 suffice) and deep trees fill slowly; "
        "now each chunk has its own tree and greedy keeps the best of five shapes "
        "(`arsched.algorithms.flowtrees.SHAPES`: load-balanced shortest-path trees, which on BCube are its "
        "native dimension-ordered trees; load-balanced trees with or without a depth penalty; "
        "ring chains; the old nearest-first trees). (3) Round filling: first fit leaves ports "
        "idle (12-16 of 18 possible flows per round on bcube(3,1)); greedy now takes the flows "
        "of the most loaded link first and improves each round by (1,2)-swaps (`fill_round`). "
        "On one-port Jellyfish a ring is at the bound (its gap above 1 is the links' latency, "
        "paid once per round), so nothing can beat it there; with 4 chunks per rank the flow "
        "trees moved the same bytes in 4x the rounds and paid the latency more often (1-2% "
        "slower), so greedy now also tries one chunk per rank, where chains in the ring's own "
        "order tie the ring (tested against the ring's own rounds and time)."
        + f"\n\nTargets of issue 5, for the deterministic `hrl`: beats ps on {tally['ps']}/{n}, beats "
        f"ring on {tally['ring']}/{n} and is within 0.1% of ring or faster on {tally['ring_tie']}/{n} "
        f"(time in the round model; target: beats on all), ≥ greedy-trees (no more "
        f"rounds) on {tally['greedy']}/{n} (target ≥ 7 of 9; on its own training instance this holds by "
        f"construction: imitation start and rollback), fewer rounds than greedy-trees on "
        f"{tally['fewer']}/{n}, within 1.15× of the round-model bound on "
        f"{tally['bound']}/{nb} BCube/DCell instances (target all). `hrl general` ≥ greedy-trees on "
        f"{tally['general']}/{n}"
        + (f"; `hrl cold` on {tally['cold']}/{n}" if args.cold else "")
        + f".\n\nEnvironment speed on BCube(4,1), one core: {lower_rate:,.0f} lower-level steps/s "
        f"(random legal picks; target ≥ 5,000), {upper_rate:,.0f} upper-level steps/s (each a "
        f"whole round filled by the greedy lower policy). Training is single-threaded torch; "
        f"inference is one deterministic schedule. Produced by `benchmarks/bench_rl.py"
        + (" --cold" if args.cold else "")
        + f" --steps {steps} --phases {args.phases} --self-imitation {args.self_imitation}"
        f" --explore {args.explore}`."
    )
    head = ["topology", "ranks", *names]
    table = (
        "Rounds (gap = time / round-model bound):\n\n"
        + markdown([*head, "rounds cut by PPO / self-imitation / best explored", "train s", "infer ms"], rows)
        + "\n\nFlow model, gap = time / bound:\n\n"
        + markdown(head, flow_rows)
    )
    publish("Hierarchical RL (hrl)", intro, table)


if __name__ == "__main__":
    main()
