"""One episode of the learned scheduler: the decisions of both levels and what they observe.

The **upper level** makes the decisions greedy-trees fixes before it schedules anything: first
the chunk option (a chunk count and a number of pipeline stages, one of the instance's
options), then, chunk by chunk, which tree of the instance's library carries that chunk. Each
decision is a choice among a few options described by a row of features each
(`option_features`, `tree_features`), so one network scores any number of them. The **lower
level** then builds the schedule one *round* per step: every available flow is a node of a
bipartite flow–link graph (`RoundGraph`), a network scores every node, and each flow is
released now or kept for a later round (`play`). Flows of a round may share links: in the
flow model (in-order connections) a round only orders each connection's transfers, and the
paper's conflict-free rounds were what capped its pipeline there (`benchmarks/bench_rl_warm.py`:
from the same chunk counts and tree shapes, rounds released by another rule are up to 15 %
faster). Three fixed rules (`RULES`) are expressible as features, and each is the best on some
network: greedy-trees' conflict-free round (`GREEDY`), every available flow (`asap`), and the
flow that leads its connection (`LEAD`: one per connection, the longest critical path first);
the policy may follow any or none. With S stages, chunk c of C *enters* in stage c·S // C: the
stage clock advances by one per round and jumps to the next stage with an available flow when
the clock's stage has none; the rules take only entered flows (in one stage all have entered),
so a pipelined option sends its chunks into the trees stage by stage, as tree packing's
pipeline does (`ENTERED`). An episode has a budget of rounds, `BUDGET` times what any fixed
rule's rounds need: twice the tallest tree, the stages and the busiest link's flows (greedy's
conflict-free rounds). A policy that keeps back most flows, as a cold start's does, would
otherwise make episodes of thousands of rounds; at the budget the remaining flows go as soon as
they have entered, and those rounds are no decisions. Every feature is a ratio or a flag (no
ids, no counts that grow with the network), so one policy runs on networks it never saw.
Whatever the decisions, the episode ends in a schedule the validator accepts: every round is
checked by the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arsched.algorithms.flowtrees import REDUCE, SHAPES, FlowTreeEngine
from arsched.algorithms.greedy_trees import critical_path, fill_round, round_order
from arsched.collective.schedule import Schedule
from arsched.rl.instance import Instance

OPTION_FEATURES = 6
TREE_FEATURES = 7 + len(SHAPES)
FLOW_FEATURES = 12
GREEDY = 9  # the flow feature that says it is in greedy-trees' round
LEAD = 10  # ... that says it leads its connection
ENTERED = 11  # ... that says its chunk has entered (its stage has begun)
LINK_FEATURES = 3
RULES = ("greedy", "asap", "lead")  # the fixed rounds the features express (`rule_release`)
BUDGET = 3  # an episode's rounds, over the floor (greedy's were at most 1.12 times it; one-off)


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


class Episode:
    """The state of one episode on an instance."""

    def __init__(self, instance: Instance, alpha: float) -> None:
        self.instance = instance
        self.alpha = alpha
        self.chunks: int | None = None
        self.stages = 1
        self.shapes: list[int] = []
        self.engine: FlowTreeEngine | None = None

    # ---- upper level -------------------------------------------------------------------
    @property
    def upper_done(self) -> bool:
        return self.engine is not None

    def option_features(self) -> np.ndarray:
        """One row per chunk option: chunks per rank / 8, one chunk's bytes over what a link of
        the fastest kind moves in α (log2 / 32), one chunk's bytes over the message's, 1 for
        the first option, one over the stages, and a stage's chunks per rank / 8."""
        inst = self.instance
        n, top = inst.num_ranks, float(inst.capacity.max())
        rows = []
        for i, (c, stages) in enumerate(inst.chunk_options):
            size = inst.nbytes / c
            speed = np.log2(max(size / (top * max(self.alpha, 1e-9)), 1e-9)) / 32
            rows.append([c / n / 8, speed, 1 / c, i == 0, 1 / stages, c / stages / n / 8])
        return np.asarray(rows, dtype=np.float32)

    def choose_chunks(self, option: int) -> None:
        self.chunks, self.stages = self.instance.chunk_options[option]
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
        self._entry = (np.arange(self.chunks) * self.stages // self.chunks)[e.flow_chunk]
        self._clock = 0  # the earliest stage whose chunks may enter in the next round
        busiest = np.bincount(e.link_matrix.ravel(), minlength=num_links + 1)[:num_links].max()
        tallest = max(self._lib.height[s, c] for c, s in enumerate(self.shapes))
        self.round_budget = int(BUDGET * (busiest + self.stages + 2 * tallest))

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
        busiest link, its place in greedy-trees' order (1 first, 0 last), whether greedy-trees'
        round takes it, and whether it leads its connection (the longest critical path of the
        connection's available flows, then the lowest chunk), both among the entered flows, and
        whether its chunk has entered. The last four are the fixed rules' advice, which the
        policy may follow or not (without the place, greedy's ties, broken by chunk and source,
        could not be learned from id-free features and the warm start fell short of its
        teacher); link features: remaining load, available flows, speed."""
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
        entered = self._entry[flows] <= self._stage(flows)
        by_place = np.argsort(place, kind="stable")
        greedy = np.isin(flows, fill_round(e, flows[by_place[entered[by_place]]]))
        by_lead = np.lexsort((e.flow_chunk[flows], -self._prio[flows]))
        by_lead = by_lead[entered[by_lead]]
        lead = np.zeros(len(flows), dtype=bool)
        conn = e.flow_src[flows] * len(self.instance.ranks) + e.flow_dst[flows]
        lead[by_lead[np.unique(conn[by_lead], return_index=True)[1]]] = True
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
                greedy,
                lead,
                entered,
            ]
        ).astype(np.float32)
        rows, cols = np.nonzero(mine < num_links)
        links, edge_link = np.unique(mine[rows, cols], return_inverse=True)
        x_link = np.column_stack(
            [_relative(remain[links]), _relative(avail_count[links]), 1.0 / self._slow[links]]
        ).astype(np.float32)
        return RoundGraph(flows, x_flow, x_link, rows.astype(np.int64), edge_link.ravel().astype(np.int64))

    def _stage(self, flows: np.ndarray) -> int:
        """The stage whose chunks have entered by this round: the clock, or the next stage with
        an available flow if none of the clock's has one."""
        return max(self._clock, int(self._entry[flows].min()))

    def play(self, graph: RoundGraph, release: np.ndarray) -> None:
        """Run the graph's flows where `release` (a bool per flow, at least one) is true as this
        round; the others stay available for a later round. The stage clock moves on by one.
        At the round budget the episode ends: every remaining flow goes as soon as it has
        entered."""
        self._execute(graph.flows, np.asarray(release, dtype=bool))
        if self.rounds >= self.round_budget:
            while not self.engine.finished:
                flows = np.flatnonzero(self.engine.available)
                self._execute(flows, self._entry[flows] <= self._stage(flows))

    def _execute(self, flows: np.ndarray, release: np.ndarray) -> None:
        self._clock = self._stage(flows) + 1
        self.engine.execute(flows[release], exclusive=False)
        self._since[(self._since < 0) & self.engine.available] = self.rounds

    @staticmethod
    def rule_release(graph: RoundGraph, rule: str) -> np.ndarray:
        """The flows one of the fixed `RULES` releases, among the entered ones: greedy-trees'
        conflict-free round, all of them (`asap`), or the flow leading each connection
        (`lead`); read from the features, so a policy can express each."""
        return graph.x_flow[:, {"greedy": GREEDY, "asap": ENTERED, "lead": LEAD}[rule]] > 0.5

    def schedule(self, meta: dict | None = None) -> Schedule:
        return self.engine.schedule(meta)
