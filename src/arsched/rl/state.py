"""One episode of hierarchical flow-tree scheduling: the state both RL levels act on.

A round is built in two stages, as in the paper: the upper level selects a set of flow trees,
then the lower level picks flows one at a time from the selected trees, each one available and
sharing no directed link with those already picked, until no such flow is left; the round then
executes on the `FlowTreeEngine` (merges happen, new flows become available). The trees are
greedy's best shape, and the candidates are kept in greedy's order: first the flows of greedy's
plan for the rest of the round (`fill_round` over the candidates), then the others, each part
in `round_order` (the busiest link's flows first, then the longest remaining critical path);
a pick outside the plan drops the plan's flows it conflicts with (the plan is drawn, with
greedy's swaps, once per round: redrawing it on every such pick cost more than the rest of
an environment step). So always picking the first candidate
with all trees selected is exactly `greedy-trees`.
Everything per step is numpy over a dense flow × link incidence.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arsched.algorithms.common import check_ranks, chunk_multiple
from arsched.algorithms.flowtrees import REDUCE, FlowTreeEngine
from arsched.algorithms.greedy_trees import (
    best_engine,
    critical_path,
    fill_round,
    incidence,
    round_order,
)
from arsched.errors import ArschedError
from arsched.topology.core import Topology


class RoundState:
    """The engine plus the round under construction: selected trees, picked flows, used links."""

    def __init__(self, engine: FlowTreeEngine) -> None:
        self.engine = e = engine
        self.num_trees = len(e.trees)
        self.inc_f32 = incidence(e)
        self.inc = self.inc_f32.astype(bool)
        self.hops = self.inc.sum(1)
        self.prio = critical_path(e)
        self.is_reduce = e.flow_kind == REDUCE
        self.tree_size = np.bincount(e.flow_tree, minlength=self.num_trees)
        self.reset()

    def reset(self) -> RoundState:
        """Back to the start of the episode (the static arrays are kept); returns self."""
        self.engine.reset()
        self.selected = np.ones(self.num_trees, dtype=bool)
        self.previous = np.zeros(self.num_trees, dtype=bool)
        self.blocked = np.zeros(self.engine.num_flows, dtype=bool)
        self.picked: list[int] = []
        self.candidates = np.zeros(0, dtype=np.int64)
        self.order = np.zeros(self.engine.num_flows, dtype=np.int64)
        self.plan = np.zeros(self.engine.num_flows, dtype=bool)  # greedy's flows for the round
        self.cache: dict = {}  # per-round values of the features (see arsched.rl.features)
        return self

    @classmethod
    def create(
        cls,
        topology: Topology,
        chunks: int | None = None,
        nbytes: float = 1e8,
        algorithm: str = "hrl",
        ranks: Sequence[str] | None = None,
    ) -> RoundState:
        """A fresh episode on the ranks (default: all servers): one flow tree per chunk (default
        greedy-trees' choice, `best_engine`), of the shape (and chunk count) on which greedy-trees
        is fastest."""
        ranks = check_ranks(topology, ranks, algorithm)
        if chunks is not None:
            chunks = chunk_multiple(chunks, len(ranks), algorithm, ranks=len(ranks))
        return cls(best_engine(topology, ranks, nbytes, chunks, algorithm=algorithm)[1])

    @property
    def finished(self) -> bool:
        return self.engine.finished

    @property
    def rounds(self) -> int:
        return len(self.engine.rounds)

    def rounds_left_bound(self) -> int:
        """A lower bound on the rounds still needed: the busiest link's remaining flows (one per
        round) or the longest remaining chain of flows, whichever is larger."""
        left = ~self.engine.done
        if not left.any():
            return 0
        # a reduce's priority counts itself and the chain after it; a broadcast's only the chain
        chain = self.prio[left] + ~self.is_reduce[left]
        return int(max((left.astype(np.float32) @ self.inc_f32).max(), chain.max()))

    def tree_has_available(self) -> np.ndarray:
        """Per tree: does it have an available flow (the trees the upper level may select)."""
        e = self.engine
        return np.bincount(e.flow_tree[e.available], minlength=self.num_trees) > 0

    def select(self, trees: np.ndarray) -> bool:
        """Start a round on the selected trees (a bool per tree). Trees without available flows
        are dropped; if none is left, every tree with an available flow is selected (an empty
        choice means "no preference"). Returns whether that fallback was used."""
        if self.picked:
            raise ArschedError("a round is under construction: finish it before selecting trees")
        ok = self.tree_has_available()
        sel = np.asarray(trees, dtype=bool)[: self.num_trees] & ok
        fallback = not sel.any()
        self.selected = ok if fallback else sel
        self.blocked[:] = False
        self.order = round_order(self.engine, self.prio)  # this round's greedy order
        e = self.engine
        idx = np.flatnonzero(e.available & self.selected[e.flow_tree])
        self.plan[:] = False
        self.plan[fill_round(e, idx[np.argsort(self.order[idx], kind="stable")])] = True
        self._refresh()
        return fallback

    def _refresh(self) -> None:
        e = self.engine
        idx = np.flatnonzero(e.available & self.selected[e.flow_tree] & ~self.blocked)
        self.candidates = idx[np.lexsort((self.order[idx], ~self.plan[idx]))]

    def pick(self, k: int) -> bool:
        """Add candidate number k to the round; when no candidate is left, execute the round and
        return True (the caller then selects the next round's trees)."""
        f = int(self.candidates[k])
        self.picked.append(f)
        self.blocked |= self.inc[:, self.inc[f]].any(1)
        self.plan &= ~self.blocked  # a pick outside the plan drops the plan's flows it blocks
        self._refresh()
        if len(self.candidates):
            return False
        self.engine.execute(self.picked)
        self.previous = self.selected.copy()
        self.picked = []
        self.candidates = np.zeros(0, dtype=np.int64)
        return True


def run_episode(state: RoundState, upper, lower) -> RoundState:
    """Drive an episode to the end with `upper(state) -> bool per tree` and
    `lower(state) -> candidate index` (the same loop the environments step through)."""
    while not state.finished:
        state.select(upper(state))
        while not state.pick(lower(state)):
            pass
    return state


def all_trees(state: RoundState) -> np.ndarray:
    """The fixed upper policy of `greedy-trees`: every tree, every round."""
    return np.ones(state.num_trees, dtype=bool)


def first_candidate(state: RoundState) -> int:
    """The fixed lower policy of `greedy-trees`: the next flow of greedy's plan for the round."""
    return 0


def random_policies(seed: int) -> tuple:
    """A random upper and lower policy (for tests: every episode must end in a valid schedule)."""
    rng = np.random.default_rng(seed)

    def upper(state: RoundState) -> np.ndarray:
        return rng.random(state.num_trees) < 0.5

    def lower(state: RoundState) -> int:
        return int(rng.integers(len(state.candidates)))

    return upper, lower
