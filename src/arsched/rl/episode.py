"""One episode of the learned scheduler: the decisions of both levels and what they observe.

The **upper level** makes the decisions greedy-trees fixes before it schedules anything: first
the chunk count (one of the instance's options), then, chunk by chunk, which tree of the
instance's library carries that chunk. Each decision is a choice among a few options described
by a row of features each (`option_features`, `tree_features`), so one network scores any
number of them. The **lower level** then builds the schedule one *round* per step: every
available flow is a node of a bipartite flow–link graph (`RoundGraph`), a network scores every
node, and the round is the conflict-free set that first fit takes in score order (the flows
sharing no directed link with a flow taken before them). Sampling the order by Gumbel noise on
the scores makes the round a draw from a Plackett–Luce policy whose probability is exact
(`arsched.rl.nets.round_log_prob`), so an episode is tens to hundreds of decisions, not one per
flow. The environment then widens the round with greedy-trees' swaps (`widen`), a fixed rule
like the engine's checks: with it, greedy's own order gives greedy-trees' rounds exactly
(without it, fewer flows per round and slower schedules: the warm start imitated a weaker
teacher than the baseline it is judged against; bench_rl_warm). Every feature
is a ratio (no ids, no counts that grow with the network), so one policy runs on networks it
never saw. Whatever the decisions, the episode ends in a schedule the
validator accepts: every round is checked by the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from arsched.algorithms.flowtrees import REDUCE, SHAPES, FlowTreeEngine
from arsched.algorithms.greedy_trees import critical_path, first_fit, round_order, widen
from arsched.collective.schedule import Schedule
from arsched.rl.instance import Instance

OPTION_FEATURES = 4
TREE_FEATURES = 7 + len(SHAPES)
FLOW_FEATURES = 9
PLACE = FLOW_FEATURES - 1  # the flow feature that is its place in greedy-trees' order
LINK_FEATURES = 3


def _relative(x: np.ndarray) -> np.ndarray:
    """x divided by its largest magnitude (zeros stay zeros)."""
    top = float(np.abs(x).max()) if x.size else 0.0
    return x / top if top > 0 else np.zeros_like(x)


@dataclass(frozen=True)
class RoundGraph:
    """The available flows of a round and the links they cross: `flows` (engine indices),
    `x_flow` (F × FLOW_FEATURES), `x_link` (L × LINK_FEATURES), and the incidence as edge lists
    `edge_flow`, `edge_link` (local indices)."""

    flows: np.ndarray
    x_flow: np.ndarray
    x_link: np.ndarray
    edge_flow: np.ndarray
    edge_link: np.ndarray

    def conflicts(self, picks: np.ndarray) -> np.ndarray:
        """K × F: does each of the `picks` share a directed link with each flow (a flow
        conflicts with itself)."""
        shape = (len(self.flows), len(self.x_link))
        inc = sparse.csr_matrix((np.ones(len(self.edge_flow)), (self.edge_flow, self.edge_link)), shape=shape)
        return (inc[picks] @ inc.T).toarray() > 0


class Episode:
    """The state of one episode on an instance."""

    def __init__(self, instance: Instance, alpha: float) -> None:
        self.instance = instance
        self.alpha = alpha
        self.chunks: int | None = None
        self.shapes: list[int] = []
        self.engine: FlowTreeEngine | None = None

    # ---- upper level -------------------------------------------------------------------
    @property
    def upper_done(self) -> bool:
        return self.engine is not None

    def option_features(self) -> np.ndarray:
        """One row per chunk count: chunks per rank / 8, one chunk's bytes over what a link of
        the fastest kind moves in α (log2 / 32), one chunk's bytes over the message's, and 1
        for the count greedy-trees would try first."""
        inst = self.instance
        n, top = inst.num_ranks, float(inst.capacity.max())
        rows = []
        for i, c in enumerate(inst.chunk_options):
            size = inst.nbytes / c
            rows.append(
                [c / n / 8, np.log2(max(size / (top * max(self.alpha, 1e-9)), 1e-9)) / 32, 1 / c, i == 0]
            )
        return np.asarray(rows, dtype=np.float32)

    def choose_chunks(self, option: int) -> None:
        self.chunks = self.instance.chunk_options[option]
        self._lib = self.instance.library(self.chunks)
        self._load = np.zeros(len(self.instance.capacity))  # seconds of one chunk per link

    def tree_features(self) -> np.ndarray:
        """One row per shape for the next chunk: how much its flows raise the busiest link's
        load, the load on its own busiest link, how much of its traffic crosses links already
        loaded, its total link time, its height (each relative to the best of the shapes), the
        chunks chosen so far, whether its shape is the previous chunk's, and the shape."""
        c = len(self.shapes)
        lib, load = self._lib, self._load
        slow = self.instance.capacity.max() / self.instance.capacity
        peak = load.max()
        raw = []
        for s in range(len(SHAPES)):
            links, counts = lib.usage[s][c]
            add = counts * slow[links]
            after = load[links] + add
            raw.append(
                [
                    max(after.max(initial=0.0), peak) - peak,
                    after.max(initial=0.0),
                    float(add @ load[links]) / max(float(add.sum()) * (load.mean() + 1.0), 1e-12),
                    add.sum(),
                    lib.height[s, c],
                ]
            )
        raw = np.asarray(raw)
        rel = np.stack([_relative(raw[:, j]) for j in range(raw.shape[1])], axis=1)
        prev = np.zeros(len(SHAPES))
        if self.shapes:
            prev[self.shapes[-1]] = 1.0
        progress = np.full(len(SHAPES), c / lib.chunks)
        return np.column_stack([rel, progress, prev, np.eye(len(SHAPES))]).astype(np.float32)

    def choose_tree(self, shape: int) -> None:
        c = len(self.shapes)
        links, counts = self._lib.usage[shape][c]
        self._load[links] += counts * (self.instance.capacity.max() / self.instance.capacity[links])
        self.shapes.append(int(shape))
        if len(self.shapes) == self.chunks:
            self._start_rounds()

    def _start_rounds(self) -> None:
        e = self.engine = self.instance.engine(self.chunks, self.shapes)
        num_links = len(self.instance.capacity)
        self._slow = np.append(self.instance.capacity.max() / self.instance.capacity, 0.0)  # pad: 0
        self._prio = critical_path(e)
        self._is_reduce = (e.flow_kind == REDUCE).astype(np.float32)
        self._hops = (e.link_matrix < num_links).sum(1).astype(np.float32)
        self._path_speed = 1.0 / np.where(e.link_matrix < num_links, self._slow[e.link_matrix], 0.0).max(1)
        self._tree_flows = np.bincount(e.flow_tree, minlength=len(e.trees)).astype(np.float64)
        self._since = np.where(e.available, 0, -1)

    # ---- lower level -------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self.engine is not None and self.engine.finished

    @property
    def rounds(self) -> int:
        return len(self.engine.rounds) if self.engine is not None else 0

    def round_graph(self) -> RoundGraph:
        """The graph of this round's available flows (see the module docstring). Flow features:
        direction, remaining critical path, remaining load of its busiest link, hops, its
        tree's progress, rounds waited, path speed, how many available flows compete for its
        busiest link, and its place in greedy-trees' order (1 first, 0 last: the heuristic's
        advice, which the policy may follow or not; without it greedy's ties, broken by chunk
        and source, could not be learned from id-free features and the warm start fell short
        of its teacher); link features: remaining load, available flows, speed."""
        e = self.engine
        num_links = len(self.instance.capacity)
        flows = np.flatnonzero(e.available)
        lm = e.link_matrix
        remain = np.bincount(lm[~e.done].ravel(), minlength=num_links + 1) * self._slow
        mine = lm[flows]
        avail_count = np.bincount(mine.ravel(), minlength=num_links + 1).astype(np.float64)
        avail_count[num_links] = 0
        remain[num_links] = 0
        tree_done = np.bincount(e.flow_tree[e.done], minlength=len(e.trees)) / self._tree_flows
        age = self.rounds - self._since[flows]
        place = round_order(e, self._prio)[flows]
        x_flow = np.column_stack(
            [
                self._is_reduce[flows],
                _relative(self._prio[flows]),
                _relative(remain[mine].max(1)),
                _relative(self._hops[flows]),
                tree_done[e.flow_tree[flows]],
                _relative(age.astype(np.float64)),
                self._path_speed[flows],
                _relative(avail_count[mine].max(1)),
                1.0 - place / max(len(flows) - 1, 1),
            ]
        ).astype(np.float32)
        rows, cols = np.nonzero(mine < num_links)
        links, edge_link = np.unique(mine[rows, cols], return_inverse=True)
        x_link = np.column_stack(
            [_relative(remain[links]), _relative(avail_count[links]), 1.0 / self._slow[links]]
        ).astype(np.float32)
        return RoundGraph(flows, x_flow, x_link, rows.astype(np.int64), edge_link.ravel().astype(np.int64))

    def play(self, graph: RoundGraph, order: np.ndarray) -> np.ndarray:
        """Run the round that first fit takes from the graph's flows in `order` (local
        indices), widened by greedy-trees' swaps (`widen`: a rule of the environment, as in
        greedy-trees, so that greedy's order gives greedy's rounds); returns the local indices
        first fit took, in the order taken: the decision whose probability the policy gives."""
        e = self.engine
        ordered = graph.flows[order]
        picked = first_fit(e, ordered)
        local = {int(f): i for i, f in enumerate(graph.flows.tolist())}
        e.execute(widen(e, ordered, picked))
        self._since[(self._since < 0) & e.available] = self.rounds
        return np.array([local[f] for f in picked], dtype=np.int64)

    def greedy_order(self, graph: RoundGraph) -> np.ndarray:
        """greedy-trees' order of the graph's flows (busiest link first, then the longest
        critical path): the teacher of the warm start, read from the flows' place feature
        (`PLACE`: distinct places stay distinct in float32 below 2**24 flows)."""
        return np.argsort(-graph.x_flow[:, PLACE], kind="stable")

    def schedule(self, meta: dict | None = None) -> Schedule:
        return self.engine.schedule(meta)
