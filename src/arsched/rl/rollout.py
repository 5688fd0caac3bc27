"""Running episodes: a policy (or greedy-trees' rules, or uniform random decisions) drives an
`Episode` to its schedule, which the flow model times; the decisions are recorded so that
training can recompute their log-probabilities.

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
from arsched.rl.episode import Episode, RoundGraph
from arsched.rl.forward import Frozen, sample_order
from arsched.rl.instance import Instance
from arsched.sim import simulate_flow

if TYPE_CHECKING:
    from arsched.rl.nets import Policy

MODES = ("policy", "sample", "greedy", "random")
LEVELS = ("upper", "lower")


@dataclass
class Trajectory:
    """An episode's decisions and result: `choices` are (kind, rows, chosen row) of the upper
    level, `rounds` (graph, local indices taken in order) of the lower level; `levels` the
    levels whose decisions were sampled; `gap` is the flow model's time over the bound."""

    instance: Instance
    levels: tuple[str, ...] = LEVELS
    choices: list[tuple[str, np.ndarray, int]] = field(default_factory=list)
    rounds: list[tuple[RoundGraph, np.ndarray]] = field(default_factory=list)
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


def greedy_plan(inst: Instance) -> tuple[int, int]:
    """greedy-trees' upper decisions on an instance (`best_engine`): the index of its chunk count
    among the instance's options and of its tree shape among `SHAPES` (every chunk's)."""
    shape, engine = best_engine(inst.topology, inst.ranks, inst.nbytes, None, None, "hrl")
    return inst.chunk_options.index(len(engine.trees)), SHAPES.index(shape)


def _pick(logits: np.ndarray, rng: np.random.Generator | None) -> int:
    if rng is None:
        return int(np.argmax(logits))
    p = np.exp(logits - logits.max())
    return int(rng.choice(len(p), p=p / p.sum()))


def run(
    inst: Instance,
    policy: Policy | Frozen | None,
    timer: Timer | None,
    mode: str = "policy",
    rng: np.random.Generator | None = None,
    meta: dict | None = None,
    levels: tuple[str, ...] = LEVELS,
) -> Trajectory:
    """One episode: `policy` (the networks' best decisions), `sample` (the decisions of the
    `levels` drawn from the networks' distributions with `rng`, the other level's the networks'
    best), `greedy` (greedy-trees' decisions: the warm start's teacher) or `random` (uniform
    decisions drawn with `rng`: the search baseline's). Without a `timer` the schedule is not
    simulated (`time_s` and `gap` stay NaN). The networks run in numpy (`policy.frozen()`)."""
    net = None if policy is None else policy.frozen()
    ep = Episode(inst, DEFAULT_ALPHA if timer is None else timer.alpha)
    traj = Trajectory(inst, levels=levels if mode == "sample" else ())
    plan = greedy_plan(inst) if mode == "greedy" else None
    draw_upper = rng if mode == "sample" and "upper" in levels else None
    draw_lower = rng if mode == "sample" and "lower" in levels else None

    def decide(kind: str, rows: np.ndarray) -> int:
        if mode == "greedy":
            k = plan[0] if kind == "chunks" else plan[1]
        elif mode == "random":
            k = int(rng.integers(len(rows)))
        else:
            k = _pick(net.option_logits(rows, kind), draw_upper)
        traj.choices.append((kind, rows, k))
        return k

    ep.choose_chunks(decide("chunks", ep.option_features()))
    while not ep.upper_done:
        ep.choose_tree(decide("tree", ep.tree_features()))
    while not ep.finished:
        g = ep.round_graph()
        if mode == "greedy":
            order = ep.greedy_order(g)
        elif mode == "random":
            order = rng.permutation(len(g.flows))
        else:
            order = sample_order(net.round_scores(g), draw_lower)
        traj.rounds.append((g, ep.play(g, order)))
    traj.schedule = ep.schedule(meta)
    if timer is not None:
        traj.time_s, bound = timer.time(traj.schedule)
        traj.gap = traj.time_s / bound
    return traj
