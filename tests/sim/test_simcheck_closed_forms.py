"""Both simulators against closed forms (design §3.5): a ring AllReduce on a ring graph, a
parameter server on a star, max-min shares of three flows on two links (directly and through
flow-model timings worked out by hand), and first-fit round counts of rings on BCube(4,1)."""

from __future__ import annotations

from itertools import pairwise

import networkx as nx
import numpy as np
import pytest
from simcheck_reference import maxmin_reference, step_link_loads, transfer_links

from arsched.collective import Schedule, Transfer
from arsched.sim import simulate_flow, simulate_rounds
from arsched.sim.maxmin import maxmin_rates
from arsched.sim.paths import CompiledPaths, compile_paths
from arsched.topology import Link, Topology, ring, star
from schedules import ps_allreduce, ring_allreduce, topo

REL = 1e-9

# (alpha, bandwidth, latency): zero overheads, the defaults, and a slow high-latency network
PARAMS = [(0.0, 1e9, 0.0), (5e-6, 12.5e9, 1e-6), (1e-3, 3e8, 2e-5)]


# ---- ring AllReduce on a ring graph ---------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize(("alpha", "bw", "lat"), PARAMS)
@pytest.mark.parametrize("synchronous", [False, True])
def test_ring_on_ring_flow_closed_form(n, alpha, bw, lat, synchronous):
    m = 3e6
    t = ring(n, bw, lat)
    r = simulate_flow(ring_allreduce(t, t.servers, m), alpha, synchronous=synchronous)
    # 2(N-1) steps, each a chunk M/N over one link, nothing shared
    assert r.time_s == pytest.approx(2 * (n - 1) / n * m / bw + 2 * (n - 1) * (alpha + lat), rel=REL)
    assert r.notes["method"] == "sweep"
    assert r.rounds is None


@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize(("alpha", "bw", "lat"), PARAMS)
def test_ring_on_ring_rounds_closed_form(n, alpha, bw, lat):
    m = 3e6
    t = ring(n, bw, lat)
    r = simulate_rounds(ring_allreduce(t, t.servers, m), alpha)
    assert r.rounds == 2 * (n - 1)
    assert r.time_s == pytest.approx(2 * (n - 1) * (m / n / bw + lat + alpha), rel=REL)


@pytest.mark.parametrize("n", [3, 6])
@pytest.mark.parametrize("per_rank", [2, 3])
def test_ring_with_several_chunks_per_block(n, per_rank):
    """Each step sends `per_rank` chunks of M/(N·per_rank) over the same link: in the flow model
    they share it (each at B/per_rank) and finish together, so the time is the same closed form;
    in the round model each takes its own round."""
    m, alpha, bw, lat = 4e6, 3e-6, 12.5e9, 2e-6
    t = ring(n, bw, lat)
    s = ring_allreduce(t, t.servers, m, chunks_per_rank=per_rank)
    f = simulate_flow(s, alpha)
    assert f.notes["method"] == "events"
    assert f.time_s == pytest.approx(2 * (n - 1) / n * m / bw + 2 * (n - 1) * (alpha + lat), rel=REL)
    r = simulate_rounds(s, alpha)
    assert r.rounds == 2 * (n - 1) * per_rank
    chunk = m / (n * per_rank)
    assert r.time_s == pytest.approx(2 * (n - 1) * per_rank * (chunk / bw + lat + alpha), rel=REL)


# ---- parameter server on a star -------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize("chunks", [1, 3])
@pytest.mark.parametrize(("alpha", "bw", "lat"), PARAMS)
def test_parameter_server_on_star_flow(n, chunks, alpha, bw, lat):
    """All (N-1)·C reduces share the PS's downlink w0->s0 (M bytes per rank in all), then all
    copies share its uplink; every transfer crosses two links (2L)."""
    m = 2e6
    t = star(n, bw, lat)
    s = ps_allreduce(t, t.servers, m, num_chunks=chunks)
    r = simulate_flow(s, alpha)
    assert r.time_s == pytest.approx(2 * (n - 1) * m / bw + 2 * (alpha + 2 * lat), rel=REL)
    if (n - 1) * chunks > 1:
        assert r.notes["method"] == "events"
    # every reduce ends together, every copy starts when they are done
    reduce_end = r.end[s.step == 0]
    assert np.allclose(reduce_end, alpha + (n - 1) * m / bw + 2 * lat, rtol=REL, atol=0)
    assert np.allclose(r.start[s.step == 1], reduce_end.max(), rtol=REL, atol=0)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize("chunks", [1, 3])
@pytest.mark.parametrize(("alpha", "bw", "lat"), PARAMS)
def test_parameter_server_on_star_rounds(n, chunks, alpha, bw, lat):
    """One flow per directed link per round: (N-1)·C rounds per step on the PS's port."""
    m = 2e6
    t = star(n, bw, lat)
    r = simulate_rounds(ps_allreduce(t, t.servers, m, num_chunks=chunks), alpha)
    assert r.rounds == 2 * (n - 1) * chunks
    assert r.time_s == pytest.approx(2 * (n - 1) * chunks * (m / chunks / bw + 2 * lat + alpha), rel=REL)


# ---- max-min fair shares ----------------------------------------------------------------------


def hand_paths(flow_links: list[list[int]]) -> CompiledPaths:
    """CompiledPaths built by hand: flow f uses links flow_links[f]."""
    lens = [len(x) for x in flow_links]
    ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    links = np.array([lk for x in flow_links for lk in x], dtype=np.int64)
    owner = np.repeat(np.arange(len(flow_links)), lens)
    zeros = np.zeros(len(flow_links))
    return CompiledPaths(ptr, links, owner, zeros, zeros + 1.0)


CAPS = [(1.0, 3.0), (2.0, 3.0), (10.0, 10.5), (1e9, 1.25e10)]


@pytest.mark.parametrize(("c1", "c2"), CAPS)
def test_maxmin_three_flows_on_two_links(c1, c2):
    # A on link 0, B on links 0 and 1, C on link 1, c1 < c2: link 0 fills first at c1/2 with
    # two flows, freezing A and B; C takes the rest of link 1
    rates = maxmin_rates(np.arange(3), hand_paths([[0], [0, 1], [1]]), np.array([c1, c2]))
    assert rates == pytest.approx([c1 / 2, c1 / 2, c2 - c1 / 2], rel=1e-12)
    # a subset of the flows: B alone on its links gets the smaller capacity
    alone = maxmin_rates(np.array([1]), hand_paths([[0], [0, 1], [1]]), np.array([c1, c2]))
    assert alone == pytest.approx([c1], rel=1e-12)


def line(c1: float, c2: float, l1: float, l2: float) -> Topology:
    """Servers a - b - c; a<->b has bandwidth c1 and latency l1, b<->c has c2 and l2."""
    nodes = [("a", "server"), ("b", "server"), ("c", "server")]
    links = [Link("a", "b", c1, l1), Link("b", "c", c2, l2), Link("b", "a", c1, l1), Link("c", "b", c2, l2)]
    return Topology("line", nodes, links)


def three_flow_schedule(c1, c2, l1, l2, chunk):
    rows = [
        Transfer(0, 0, "a", "b", "reduce", ("a", "b")),  # A: link a->b
        Transfer(0, 1, "a", "c", "reduce", ("a", "b", "c")),  # B: both links
        Transfer(0, 2, "b", "c", "reduce", ("b", "c")),  # C: link b->c
    ]
    return Schedule.from_transfers(line(c1, c2, l1, l2), ("a", "b", "c"), 3 * chunk, 3, rows)


@pytest.mark.parametrize(("c1", "c2"), CAPS)
def test_maxmin_three_flows_through_compile_paths(c1, c2):
    s = three_flow_schedule(c1, c2, 1e-6, 2e-6, 1e6)
    cp = compile_paths(s)
    rates = maxmin_rates(np.arange(3), cp, s.topology.compiled.capacity)
    assert rates == pytest.approx([c1 / 2, c1 / 2, c2 - c1 / 2], rel=1e-12)
    assert maxmin_reference(transfer_links(s), [c1, c2, c1, c2]) == pytest.approx(rates, rel=1e-12)


@pytest.mark.parametrize(("c1", "c2"), CAPS)
@pytest.mark.parametrize("alpha", [0.0, 4e-6])
def test_three_flows_timing_by_hand(c1, c2, alpha):
    """All three start at alpha. C (rate c2 - c1/2 > c1/2) leaves first; A and B stay capped by
    link a->b at c1/2 each and finish together."""
    l1, l2, chunk = 1e-6, 2e-6, 1e6
    s = three_flow_schedule(c1, c2, l1, l2, chunk)
    r = simulate_flow(s, alpha)
    assert r.notes["method"] == "events"
    expect = [
        alpha + chunk / (c1 / 2) + l1,
        alpha + chunk / (c1 / 2) + l1 + l2,
        alpha + chunk / (c2 - c1 / 2) + l2,
    ]
    assert r.end == pytest.approx(expect, rel=REL)
    assert r.start == pytest.approx([0, 0, 0], abs=0)
    assert r.time_s == pytest.approx(max(expect), rel=REL)


@pytest.mark.parametrize("alpha", [0.0, 1e-5])
def test_rate_changes_when_a_late_flow_joins(alpha):
    """A (a->b, fast link) and C (b->c) start at alpha; B forwards A's chunk over b->c, so it
    starts once A is done and shares b->c with C: both drop to c2/2 until C leaves."""
    c1, c2, l1, l2, chunk = 4e9, 1e9, 5e-6, 3e-6, 1e6
    rows = [
        Transfer(0, 0, "a", "b", "reduce", ("a", "b")),  # A
        Transfer(0, 1, "b", "c", "reduce", ("b", "c")),  # C
        Transfer(1, 0, "b", "c", "reduce", ("b", "c")),  # B: reads (b, 0), written by A
    ]
    s = Schedule.from_transfers(line(c1, c2, l1, l2), ("a", "b", "c"), 2 * chunk, 2, rows)
    r = simulate_flow(s, alpha)
    a_done = alpha + chunk / c1 + l1
    b_send = a_done + alpha
    c_left = chunk - c2 * (b_send - alpha)  # bytes C still has when B joins
    assert c_left > 0  # the case is built so that they overlap
    c_sent = b_send + c_left / (c2 / 2)
    b_sent = b_send + (chunk + c_left) / c2  # link b->c runs full from b_send on
    assert r.notes["method"] == "events"
    assert r.start == pytest.approx([0, 0, a_done], rel=REL)
    assert r.end == pytest.approx([a_done, c_sent + l2, b_sent + l2], rel=REL)


# ---- first-fit rounds of rings on BCube(4,1) ------------------------------------------------


def _conflict_graph(order, per_rank: int) -> tuple[nx.Graph, list[set]]:
    """Transfers of one ring step as (rank position, chunk of its block); an edge where two
    share a directed link of their default paths (topology.path)."""
    t = topo("bcube:n=4,k=1")
    n = len(order)
    hops = []
    for i in range(n):
        p = t.path(order[i], order[(i + 1) % n])
        hops.append(set(pairwise(p)))
    g = nx.Graph()
    g.add_nodes_from((i, c) for i in range(n) for c in range(per_rank))
    g.add_edges_from(
        ((i, a), (j, b))
        for i in range(n)
        for j in range(n)
        for a in range(per_rank)
        for b in range(per_rank)
        if (i, a) < (j, b) and hops[i] & hops[j]
    )
    return g, hops


def _cliques(g: nx.Graph) -> bool:
    comps = [g.subgraph(c) for c in nx.connected_components(g)]
    return all(c.number_of_edges() == len(c) * (len(c) - 1) // 2 for c in comps)


def _bcube_ring_orders():
    """Rank orders whose per-step conflicts are pairwise (disjoint cliques)."""
    t = topo("bcube:n=4,k=1")
    rng = np.random.default_rng(7)
    orders = [t.servers, tuple(f"s{4 * (i % 4) + i // 4}" for i in range(16))]
    orders += [tuple(str(x) for x in rng.permutation(t.servers)) for _ in range(8)]
    orders += [tuple(str(x) for x in rng.permutation(t.servers)[:9]) for _ in range(4)]
    return [o for o in orders if _cliques(_conflict_graph(o, 1)[0])]


def _first_fit_time(order, per_rank: int, chunk: float, bw: float, lat: float) -> float:
    """Place one step's transfers in stored order (rank position, then chunk) into the first
    round where their links are free; a round costs chunk/bw plus its longest path latency."""
    _, hops = _conflict_graph(order, per_rank)
    rounds: list[tuple[set, int]] = []  # (links taken, longest hops)
    for i in range(len(order)):
        for _ in range(per_rank):
            k = next((k for k, (used, _) in enumerate(rounds) if not used & hops[i]), len(rounds))
            if k == len(rounds):
                rounds.append((set(), 0))
            used, longest = rounds[k]
            rounds[k] = (used | hops[i], max(longest, len(hops[i])))
    return sum(chunk / bw + longest * lat for _, longest in rounds)


@pytest.mark.parametrize("order", _bcube_ring_orders())
@pytest.mark.parametrize("per_rank", [1, 2])
def test_ring_rounds_on_bcube_hand_count(order, per_rank):
    """When every connected component of a step's conflict graph is a clique, first fit needs
    exactly the largest component's size, whatever the order: 2(N-1) times that."""
    t = topo("bcube:n=4,k=1")
    n = len(order)
    g, _ = _conflict_graph(order, per_rank)
    assert _cliques(g)
    per_step = max(len(c) for c in nx.connected_components(g))
    s = ring_allreduce(t, order, chunks_per_rank=per_rank)
    r = simulate_rounds(s)
    assert r.rounds == 2 * (n - 1) * per_step
    # with pairwise conflicts the component size is the most loaded link's load
    assert per_step == max(step_link_loads(s).values())
    bw, lat = t.links[0].bandwidth, t.links[0].latency
    assert {lk.bandwidth for lk in t.links} == {bw} and {lk.latency for lk in t.links} == {lat}
    step_time = _first_fit_time(order, per_rank, s.chunk_bytes, bw, lat)
    assert r.time_s == pytest.approx(2 * (n - 1) * step_time, rel=REL)


def test_some_bcube_orders_have_conflicts():
    orders = _bcube_ring_orders()
    assert len(orders) >= 8
    loads = [max(step_link_loads(ring_allreduce(topo("bcube:n=4,k=1"), o)).values()) for o in orders]
    assert loads[0] == 1 and max(loads) >= 2
