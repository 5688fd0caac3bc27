"""Greedy flow-tree scheduling: the hierarchical-RL paper's pipeline with fixed policies.

Every chunk gets a flow tree (`arsched.flowtrees.build_trees`); every round all trees are
selected (the upper level's choice) and flows are picked one at a time, longest remaining
critical path first, skipping any that conflicts with a flow already picked (the lower
level's choice), until none is left. It is the non-learned reference the RL scheduler must
beat, on the same engine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arsched.algorithms.common import check_ranks, check_size, chunk_multiple
from arsched.algorithms.registry import register
from arsched.collective.schedule import Schedule
from arsched.flowtrees import REDUCE, FlowTreeEngine, build_trees
from arsched.topology.core import Topology


def critical_path(engine: FlowTreeEngine) -> np.ndarray:
    """Flows still to run after each flow on the longest chain through it (its priority):
    a reduce from v has v's depth more reduces above it plus the tree's broadcast depth; a
    broadcast into v has the height of v's subtree below it."""
    prio = np.zeros(engine.num_flows)
    for t, tree in enumerate(engine.trees):
        parent = tree.parent
        depth = np.zeros(len(parent), dtype=np.int64)
        order = np.argsort([_depth(parent, v) for v in range(len(parent))], kind="stable")
        for v in order:
            depth[v] = 0 if parent[v] < 0 else depth[parent[v]] + 1
        height = np.zeros(len(parent), dtype=np.int64)
        for v in order[::-1]:
            if parent[v] >= 0:
                height[parent[v]] = max(height[parent[v]], height[v] + 1)
        mine = np.flatnonzero(engine.flow_tree == t)
        up = engine.flow_kind[mine] == REDUCE
        prio[mine[up]] = depth[engine.flow_src[mine[up]]] + depth.max()
        prio[mine[~up]] = height[engine.flow_dst[mine[~up]]]
    return prio


def _depth(parent: np.ndarray, v: int) -> int:
    d = 0
    while parent[v] >= 0:
        v, d = int(parent[v]), d + 1
    return d


def priority_rank(engine: FlowTreeEngine, prio: np.ndarray) -> np.ndarray:
    """Each flow's place in the scheduling order: priority first, then chunk, then source."""
    order = np.lexsort((engine.flow_src, engine.flow_chunk, -prio))
    rank_in_order = np.empty(engine.num_flows, dtype=np.int64)
    rank_in_order[order] = np.arange(engine.num_flows)
    return rank_in_order


def run_greedy(engine: FlowTreeEngine) -> None:
    """Drive the engine to the end: each round, available flows by priority, first fit."""
    rank_in_order = priority_rank(engine, critical_path(engine))
    used = np.zeros(engine.topology.compiled.num_links, dtype=bool)
    while not engine.finished:
        candidates = np.flatnonzero(engine.available)
        picked = []
        used[:] = False
        for f in candidates[np.argsort(rank_in_order[candidates])].tolist():
            links = engine.links_of(f)
            if not used[links].any():
                used[links] = True
                picked.append(f)
        engine.execute(picked)


@register("greedy-trees", "flow trees per chunk, rounds of non-conflicting flows, critical path first")
def greedy_trees(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    chunks: int | None = None,
    fanout: int | None = None,
) -> Schedule:
    """Greedy flow-tree scheduling (the RL pipeline with heuristic policies); minimises rounds
    greedily, one tree per chunk, roots spread over the ranks."""
    rs = check_ranks(topology, ranks, "greedy-trees")
    nbytes = check_size(nbytes, "greedy-trees")
    chunks = chunk_multiple(chunks, len(rs), "greedy-trees")
    engine = FlowTreeEngine(topology, rs, nbytes, build_trees(topology, rs, chunks, fanout), "greedy-trees")
    run_greedy(engine)
    return engine.schedule({"params": {"chunks": chunks, "fanout": fanout}})
