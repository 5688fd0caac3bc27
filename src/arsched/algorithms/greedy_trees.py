"""`greedy-trees`: flow trees scheduled round by round by fixed policies, the hierarchical-RL
paper's pipeline (arXiv 2503.21013) without learning.

Every chunk gets a flow tree (`arsched.algorithms.flowtrees.build_trees`; by default 4 chunks
per rank, so that pipeline fill and drain cost little beside the link-load bound); every round all trees
are selected (the upper level's choice) and flows are picked one at a time, those crossing
the link with the most flows left first, then the longest remaining critical path, skipping
any that conflicts with a flow already picked (the lower level's choice), until none is left.
Each tree shape of `candidate_engines` is run and the fastest plan in the flow model kept
(`best_engine`). It is the non-learned reference the RL scheduler must beat, on the same
engine and judged by the same measure; the RL scheduler (arsched.rl) imitates its decisions for
its warm start.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numba
import numpy as np

from arsched.algorithms.common import check_nbytes, check_ranks, chunk_multiple, ring_order
from arsched.algorithms.flowtrees import REDUCE, SHAPES, FlowTreeEngine, build_trees
from arsched.algorithms.registry import NotApplicable, register
from arsched.algorithms.trees import tree_depths, tree_heights
from arsched.collective.schedule import Schedule
from arsched.defaults import DEFAULT_ALPHA
from arsched.sim.flow import simulate_flow
from arsched.topology.core import Topology


def critical_path(engine: FlowTreeEngine) -> np.ndarray:
    """Flows still to run after each flow on the longest chain through it (its priority):
    a reduce from v has v's depth more reduces above it plus the tree's broadcast depth; a
    broadcast into v has the height of v's subtree below it."""
    prio = np.zeros(engine.num_flows)
    for t, tree in enumerate(engine.trees):
        height = tree_heights(tree.parent)
        depth = tree_depths(tree.parent, height)
        mine = np.flatnonzero(engine.flow_tree == t)
        up = engine.flow_kind[mine] == REDUCE
        prio[mine[up]] = depth[engine.flow_src[mine[up]]] + depth.max()
        prio[mine[~up]] = height[engine.flow_dst[mine[~up]]]
    return prio


def default_chunks(num_ranks: int) -> int:
    """4 chunks per rank up to 32 ranks, 2 up to 64, then 1: more chunks amortise the pipeline
    fill and drain (a depth-d tree needs 2d rounds for one chunk), fewer keep episodes short."""
    return num_ranks * max(1, min(4, 128 // num_ranks))


def round_order(engine: FlowTreeEngine, prio: np.ndarray) -> np.ndarray:
    """Each available flow's place in this round's order (others get the flow count): the
    most flows left on its busiest link first (the round model's bound is that load), then
    the longest critical path `prio`, then chunk, then source."""
    e = engine
    avail = np.flatnonzero(e.available)
    num_links = e.topology.compiled.num_links
    remain = np.bincount(e.link_matrix[~e.done].ravel(), minlength=num_links + 1)
    remain[num_links] = 0  # the padding
    pressure = remain[e.link_matrix[avail]].max(1)
    key = np.lexsort((e.flow_src[avail], e.flow_chunk[avail], -prio[avail], -pressure))
    rank = np.full(e.num_flows, e.num_flows, dtype=np.int64)
    rank[avail[key]] = np.arange(len(avail))
    return rank


def first_fit(engine: FlowTreeEngine, flows: np.ndarray) -> list[int]:
    """The flows, in the given order, that share no directed link with an earlier pick."""
    num_links = engine.topology.compiled.num_links
    return _first_fit(engine.link_matrix, np.asarray(flows, dtype=np.int64), num_links).tolist()


def fill_round(engine: FlowTreeEngine, flows: np.ndarray) -> list[int]:
    """A conflict-free subset of the flows (given in priority order) for one round: first fit,
    then `widen`."""
    return widen(engine, flows, first_fit(engine, flows))


def widen(engine: FlowTreeEngine, flows: np.ndarray, picked: list[int]) -> list[int]:
    """The conflict-free `picked` of the flows (in priority order), after (1,2)-swaps while any
    helps: a picked flow is traded for two or more unpicked ones (earliest first) that conflict
    with it alone. First fit gives a maximal set; the swaps make it larger (on BCube a round can
    carry a flow on every port, and first fit leaves some idle)."""
    num_links = engine.topology.compiled.num_links
    flows = np.asarray(flows, dtype=np.int64)
    return _widen(
        engine.link_matrix, flows, np.asarray(picked, dtype=np.int64), engine.num_flows, num_links
    ).tolist()


@numba.njit(cache=True)
def _first_fit(link_matrix, flows, num_links):  # pragma: no cover - compiled
    """`first_fit` on the padded (flows × width) link matrix (padding: `num_links`).
    Compiled, as `_widen`: greedy-trees runs them every round, most of its time in Python."""
    owner = np.full(num_links + 1, -1, dtype=np.int64)
    unmarked = np.zeros(num_links + 1, dtype=np.int64)
    out = np.empty(len(flows), dtype=np.int64)
    k = 0
    for f in flows:
        if _fits(link_matrix[f], num_links, unmarked, -1, owner, -1):
            _set(link_matrix[f], num_links, owner, f)
            out[k] = f
            k += 1
    return out[:k]


@numba.njit(cache=True)
def _fits(links, num_links, mark, stamp, owner, p):  # pragma: no cover - compiled
    """Whether no link of a padded row is marked `stamp` or owned by a flow other than p."""
    for lk in links:
        if lk < num_links and (mark[lk] == stamp or (owner[lk] != -1 and owner[lk] != p)):
            return False
    return True


@numba.njit(cache=True)
def _set(links, num_links, array, value):  # pragma: no cover - compiled
    """array[lk] = value for every link of a padded row of the link matrix."""
    for lk in links:
        if lk < num_links:
            array[lk] = value


@numba.njit(cache=True)
def _widen(link_matrix, flows, picked, num_flows, num_links):  # pragma: no cover - compiled
    """`widen` on the padded link matrix: each pass finds the unpicked flows blocked by exactly
    one picked flow p, then, p by p in index order, adds those of them (in the flows' order)
    that fit beside each other and the other picks in place of p where two or more do."""
    owner = np.full(num_links + 1, -1, dtype=np.int64)  # the last entry: the padding
    for f in picked:
        _set(link_matrix[f], num_links, owner, f)
    chosen = np.zeros(num_flows, dtype=np.bool_)
    chosen[picked] = True
    mark = np.zeros(num_links + 1, dtype=np.int64)  # == stamp: taken by the adds in place of p
    stamp = 0
    add = np.empty(len(flows), dtype=np.int64)
    changed = True
    while changed:
        changed = False
        rest = flows[~chosen[flows]]
        blocker = np.full(len(rest), -1, dtype=np.int64)
        for i in range(len(rest)):
            b = -1
            for lk in link_matrix[rest[i]]:
                o = owner[lk]
                if o >= 0 and b < 0:
                    b = o
                elif o >= 0 and o != b:
                    b = -2
                    break
            blocker[i] = max(b, -1)
        if not (blocker >= 0).any():
            break
        for p in np.unique(blocker[blocker >= 0]):
            if (blocker == p).sum() < 2 or not chosen[p]:
                continue
            stamp += 1
            k = 0
            for i in range(len(rest)):
                if blocker[i] != p:
                    continue
                u = rest[i]
                if _fits(link_matrix[u], num_links, mark, stamp, owner, p):
                    _set(link_matrix[u], num_links, mark, stamp)
                    add[k] = u
                    k += 1
            if k >= 2:
                _set(link_matrix[p], num_links, owner, -1)
                chosen[p] = False
                for j in range(k):
                    _set(link_matrix[add[j]], num_links, owner, add[j])
                    chosen[add[j]] = True
                changed = True
    return flows[chosen[flows]]


def run_greedy(engine: FlowTreeEngine) -> None:
    """Drive the engine to the end: each round, available flows in `round_order`, `fill_round`."""
    prio = critical_path(engine)
    while not engine.finished:
        rank = round_order(engine, prio)
        candidates = np.flatnonzero(engine.available)
        engine.execute(fill_round(engine, candidates[np.argsort(rank[candidates])]))


def candidate_engines(
    topology: Topology,
    ranks: tuple[str, ...],
    nbytes: float,
    chunks: int,
    fanout: int | None = None,
    algorithm: str = "greedy-trees",
    shape: str | None = None,
) -> dict[str, FlowTreeEngine]:
    """One engine per tree shape (`arsched.algorithms.flowtrees.SHAPES`, or only `shape`; chains follow
    the ring order)."""
    order = ring_order(topology, ranks)
    index = {r: i for i, r in enumerate(ranks)}
    order_idx = [index[r] for r in order]
    return {
        s: FlowTreeEngine(
            topology, ranks, nbytes, build_trees(topology, ranks, chunks, fanout, s, order_idx), algorithm
        )
        for s in (SHAPES if shape is None else (shape,))
    }


def candidate_chunks(num_ranks: int, chunks: int | None) -> tuple[int, ...]:
    """The chunk counts greedy tries: `chunks` if given; else `default_chunks`, then one chunk
    per rank (fewer, longer rounds: where the ring is at the bound, as on one-port networks,
    more chunks move the same bytes in more rounds and pay each round's latency more often)."""
    if chunks is not None:
        return (chunks,)
    return tuple(dict.fromkeys((default_chunks(num_ranks), num_ranks)))


MAX_RANKS = 128  # the most ranks greedy-trees and hrl (its warm start) take
_BEST_PLAN: weakref.WeakKeyDictionary[Topology, dict] = weakref.WeakKeyDictionary()


def best_engine(
    topology: Topology,
    ranks: tuple[str, ...],
    nbytes: float,
    chunks: int | None = None,
    fanout: int | None = None,
    algorithm: str = "greedy-trees",
) -> tuple[str, FlowTreeEngine]:
    """The chunk count (of `candidate_chunks`) and tree shape on which greedy's schedule is
    fastest in the default flow model (in-order connections, α = `DEFAULT_ALPHA`) at `nbytes`
    (the first candidate at ties), and its engine, at the start. A candidate whose busiest link
    alone needs longer than the best time so far (its flows' bytes at that link's capacity: a
    lower bound on its time) is not run. The flow model and not the fewest rounds: hrl is
    rewarded by it, and the rounds disagree with it where it matters (BCube, DCell, Jellyfish:
    `benchmarks/bench_rl_warm.py`). The choice is cached per topology,
    ranks, size, chunks and fanout (the RL environments and training ask for it many times).
    More than `MAX_RANKS` ranks are refused (NotApplicable) before any search."""
    if len(ranks) > MAX_RANKS:
        raise NotApplicable(
            f"{algorithm} is limited to {MAX_RANKS} ranks: greedy's round-by-round search grows with "
            f"the square of the ranks (minutes at 256), and {topology.name} has {len(ranks)}"
        )
    known = _BEST_PLAN.setdefault(topology, {})
    key = (ranks, float(nbytes), chunks, fanout)
    if key in known:
        count, shape = known[key]
        return shape, candidate_engines(topology, ranks, nbytes, count, fanout, algorithm, shape)[shape]
    best = None  # time, chunks, shape, engine
    c = topology.compiled
    for count in candidate_chunks(len(ranks), chunks):
        for shape, engine in candidate_engines(topology, ranks, nbytes, count, fanout, algorithm).items():
            flows = np.bincount(engine.link_matrix.ravel(), minlength=c.num_links + 1)[: c.num_links]
            if best is not None and (flows * (nbytes / count) / c.capacity).max() >= best[0]:
                continue
            run_greedy(engine)
            took = simulate_flow(engine.schedule(), DEFAULT_ALPHA).time_s
            if best is None or took < best[0]:
                best = (took, count, shape, engine)
    known[key] = best[1:3]
    best[3].reset()
    return best[2], best[3]


@register("greedy-trees", "flow trees per chunk, rounds of non-conflicting flows, critical path first")
def greedy_trees(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    chunks: int | None = None,
    fanout: int | None = None,
) -> Schedule:
    """Greedy flow-tree scheduling (the RL pipeline with heuristic policies); minimises rounds
    greedily, one tree per chunk, roots spread over the ranks, the fastest in the flow model of
    the tree shapes and, unless `chunks` is given, of the chunk counts `candidate_chunks`."""
    rs = check_ranks(topology, ranks, "greedy-trees")
    nbytes = check_nbytes(nbytes, "greedy-trees")
    if chunks is not None:
        chunks = chunk_multiple(chunks, len(rs), "greedy-trees", ranks=len(rs))
    shape, engine = best_engine(topology, rs, nbytes, chunks, fanout)
    run_greedy(engine)
    chosen = len(engine.trees)
    return engine.schedule({"params": {"chunks": chunks, "fanout": fanout}, "chunks": chosen, "trees": shape})
