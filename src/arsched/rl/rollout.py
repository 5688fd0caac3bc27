"""Running episodes: a policy (or a fixed plan, or uniform random decisions) drives an
`Episode` to its schedule, which the flow model times; the decisions are recorded so that
training can recompute their log-probabilities.

A fixed `Plan` is one chunk option (count and stages), one tree shape for every chunk and one of the episode's
`RULES` for every round; `best_plan` is the fastest of them all in the flow model: the warm
start's teacher, and the baseline learning has to beat (greedy-trees' own plan is one of them).

The reward of an episode is its schedule's time in the flow model (in-order connections, the
default) at the instance's message size, divided by the instance's lower bound: the number
users compare. The round model is not used at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from arsched.algorithms.flowtrees import SHAPES
from arsched.algorithms.greedy_trees import best_engine
from arsched.collective.schedule import Schedule
from arsched.defaults import DEFAULT_ALPHA
from arsched.rl.episode import RULES, Episode, RoundGraph
from arsched.rl.forward import Frozen, choice_probs, release
from arsched.rl.instance import Instance
from arsched.sim import simulate_flow

if TYPE_CHECKING:
    from arsched.rl.nets import Policy

LEVELS = ("upper", "lower")


@dataclass
class Trajectory:
    """An episode's decisions and result: `choices` are (kind, rows, chosen row) of the upper
    level, `rounds` (graph, a bool per flow: released, whether the policy's top-scored flow
    went alone: `nets.release_log_prob`) of the lower level; `levels` the levels whose
    decisions were sampled; `plan` the fixed plan that made them, if one did; `gap` is the flow
    model's time over the bound."""

    instance: Instance
    levels: tuple[str, ...] = LEVELS
    choices: list[tuple[str, np.ndarray, int]] = field(default_factory=list)
    rounds: list[tuple[RoundGraph, np.ndarray, bool]] = field(default_factory=list)
    plan: Plan | None = None
    schedule: Schedule | None = None
    time_s: float = float("nan")
    gap: float = float("nan")


class Timer:
    """Times schedules in the flow model at one α, counting the simulator calls (the currency
    of the equal-compute comparison)."""

    def __init__(self, alpha: float) -> None:
        self.alpha = alpha
        self.calls = 0

    def time(self, schedule: Schedule) -> tuple[float, float]:
        """The schedule's time and its lower bound, in seconds."""
        self.calls += 1
        result = simulate_flow(schedule, self.alpha)
        return result.time_s, result.bound_s


@dataclass(frozen=True)
class Plan:
    """Fixed decisions for a whole episode: the index of the chunk option among the instance's
    options, the tree shape (index into `SHAPES`) of every chunk, the round rule of `RULES`."""

    chunks: int
    shape: int
    rule: str


def greedy_plan(inst: Instance) -> Plan:
    """greedy-trees' decisions as a plan (`best_engine`: its chunk count and tree shape, and
    its conflict-free rounds): one of the plans `best_plan` weighs."""
    shape, engine = best_engine(inst.topology, inst.ranks, inst.nbytes, None, None, "hrl")
    return Plan(inst.chunk_options.index((len(engine.trees), 1)), SHAPES.index(shape), "greedy")


def best_plan(inst: Instance, timer: Timer) -> Trajectory:
    """The fastest fixed plan's episode in the flow model at the timer's α (the first at ties;
    computed once per instance and α): every chunk option, shape and rule, except those whose
    busiest link alone needs longer than the best time so far (a lower bound on their time,
    from the library's link usage). Pipelined options (more than one stage) are tried with
    `asap` only: their stages already order each connection's chunks, and greedy's and lead's
    rounds on them were slower on every option and shape measured (BCube(3,1), DCell(3,1);
    one-offs), at 4–5 times the engine's time."""
    known = inst.best_plans
    if timer.alpha not in known:
        best = None
        for k in range(len(inst.chunk_options)):
            for s in range(len(SHAPES)):
                best = _fastest(inst, timer, k, s, best)
        known[timer.alpha] = best
    return known[timer.alpha]


def option_plans(inst: Instance, timer: Timer) -> dict[tuple[int, int], Trajectory]:
    """For every chunk option and tree shape, the fastest fixed plan (of the rules `best_plan`
    weighs); what a teacher for many networks chooses from (`training.teachers`). The fastest
    of them is `best_plan`'s (a plan that `best_plan` prunes is no faster than its best), and is
    kept as such."""
    plans = {
        (k, s): _fastest(inst, timer, k, s, None)
        for k in range(len(inst.chunk_options))
        for s in range(len(SHAPES))
    }
    inst.best_plans.setdefault(timer.alpha, min(plans.values(), key=lambda p: p.time_s))
    return plans


def _fastest(inst: Instance, timer: Timer, option: int, shape: int, best: Trajectory | None) -> Trajectory:
    """The fastest of `best` and the plans of chunk option `option` with tree shape `shape`,
    unless the busiest link of that shape alone needs longer than `best` (see `best_plan`)."""
    count, stages = inst.chunk_options[option]
    load = np.zeros(len(inst.capacity))
    for links, counts in inst.library(count).usage[shape]:
        load[links] += counts
    floor = float((load * (inst.nbytes / count) / inst.capacity).max())
    for rule in RULES if stages == 1 else ("asap",):
        if best is not None and floor >= best.time_s:
            break
        t = run(inst, None, timer, "plan", plan=Plan(option, shape, rule))
        if best is None or t.time_s < best.time_s:
            best = t
    return best


def _pick(logits: np.ndarray, rng: np.random.Generator | None, explore: float) -> int:
    if rng is None:
        return int(np.argmax(logits))
    return int(rng.choice(len(logits), p=choice_probs(logits, explore)))


def run(
    inst: Instance,
    policy: Policy | Frozen | None,
    timer: Timer | None,
    mode: str = "policy",
    rng: np.random.Generator | None = None,
    meta: dict | None = None,
    levels: tuple[str, ...] = LEVELS,
    plan: Plan | None = None,
) -> Trajectory:
    """One episode: `policy` (the networks' best decisions), `sample` (the decisions of the
    `levels` drawn from the networks' distributions with `rng`, the other level's the networks'
    best), `plan` (the fixed decisions of `plan`) or `random` (uniform decisions drawn with
    `rng`: the search baseline's; each flow of a round released with probability 1/2). Without
    a `timer` the schedule is not simulated (`time_s` and `gap` stay NaN). The networks run in
    numpy (`policy.frozen()`)."""
    net = None if policy is None else policy.frozen()
    ep = Episode(inst, DEFAULT_ALPHA if timer is None else timer.alpha)
    traj = Trajectory(inst, levels=levels if mode == "sample" else (), plan=plan)
    draw_upper = rng if mode == "sample" and "upper" in levels else None
    draw_lower = rng if mode == "sample" and "lower" in levels else None

    def decide(kind: str, rows: np.ndarray) -> int:
        if mode == "plan":
            k = plan.chunks if kind == "chunks" else plan.shape
        elif mode == "random":
            k = int(rng.integers(len(rows)))
        else:
            k = _pick(net.option_logits(rows, kind), draw_upper, net.explore)
        traj.choices.append((kind, rows, k))
        return k

    ep.choose_chunks(decide("chunks", ep.option_features()))
    while not ep.upper_done:
        ep.choose_tree(decide("tree", ep.tree_features()))
    while not ep.finished:
        g = ep.round_graph()
        lone = False
        if mode == "plan":
            go = ep.rule_release(g, plan.rule)
        elif mode == "random":
            go = release(np.zeros(len(g.flows)), rng)
        else:
            scores = net.round_scores(g)
            go = release(scores, draw_lower, net.explore)
            lone = bool(go.sum() == 1 and go[int(np.argmax(scores))])
        ep.play(g, go)
        traj.rounds.append((g, go, lone))
    traj.schedule = ep.schedule(meta)
    if timer is not None:
        traj.time_s, bound = timer.time(traj.schedule)
        traj.gap = traj.time_s / bound
    return traj
