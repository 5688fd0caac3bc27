"""Balanced steps (arsched.algorithms.packing.balanced): the step dynamic program against
brute force, the greedy placement against the bandwidth bound, and the schedules against the
validator and the flow model."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from arsched.algorithms import build
from arsched.algorithms.packing import balanced as B
from arsched.algorithms.packing.pipeline import step_overhead
from arsched.algorithms.routes import all_pairs
from arsched.algorithms.trees import tree_heights
from arsched.bounds import allreduce_bound
from arsched.collective import numeric_check, validate
from arsched.collective.schedule import ScheduleBuilder
from arsched.errors import ArschedError
from arsched.sim import simulate_flow
from arsched.topology import parse_spec


@pytest.mark.parametrize("seed", range(5))
def test_cheapest_steps_matches_brute_force(seed):
    """Every assignment of steps 1..R to a 6-node tree's edges, a child's before its
    parent's: the dynamic program finds the cheapest, and returns steps that cost that much."""
    rng = np.random.default_rng(seed)
    n, steps = 6, 4
    parent = np.array([-1] + [int(rng.integers(0, v)) for v in range(1, n)])
    cost = rng.random((n, steps))
    kids = np.arange(1, n)
    best = np.inf
    for choice in itertools.product(range(1, steps + 1), repeat=n - 1):
        step = np.array([steps + 1, *choice])
        if (step[kids] < step[parent[kids]]).all():
            best = min(best, cost[kids, step[kids] - 1].sum())
    value, step = B.cheapest_steps(parent, tree_heights(parent), cost)
    assert value == pytest.approx(best)
    assert step[0] == steps + 1 and (step[kids] < step[parent[kids]]).all()
    assert cost[kids, step[kids] - 1].sum() == pytest.approx(best)


@pytest.mark.parametrize(
    ("spec", "hops", "peers"),
    [("torus:dims=4x4", 1, 4), ("dcell:n=3,k=1", 2, 3), ("bcube:n=3,k=1", 2, 4), ("fattree:k=4", 6, 15)],
)
def test_the_overlay_is_the_nearest_pairs_that_join_all_ranks(spec, hops, peers):
    """A torus's own links; a DCell's cell mates (through the switch) and its direct link; a
    BCube's servers one switch away; on a fat-tree the pods are 6 links apart, so every pair."""
    topo = parse_spec(spec)
    ranks = tuple(topo.servers)
    routes = B.overlay(topo, ranks)
    assert routes.hops.max() == hops
    assert (np.bincount(routes.src, minlength=len(ranks)) == peers).all()
    every = all_pairs(topo, ranks)
    kept = every.index(routes.src, routes.dst, len(ranks))
    for i, q in enumerate(kept.tolist()):  # the subset keeps each pair's own route
        assert (
            routes.links[routes.ptr[i] : routes.ptr[i + 1]] == every.links[every.ptr[q] : every.ptr[q + 1]]
        ).all()
    assert ((every.hops <= hops).sum()) == len(routes.src)


def _relays(topo, routes, i):
    """The nodes route i passes between its ends."""
    c = topo.compiled
    return {c.node_ids[x] for x in c.link_dst[routes.links[routes.ptr[i] : routes.ptr[i + 1] - 1]].tolist()}


def test_the_overlay_relays_through_no_other_rank():
    """DCell(2,2)'s servers have two direct links, so two-link routes through a third server
    exist beside the cell mates behind a switch: the overlay keeps the routes whose inner nodes
    are switches, which still join all ranks."""
    topo = parse_spec("dcell:n=2,k=2")
    ranks = tuple(topo.servers)
    routes = B.overlay(topo, ranks)
    inner = set().union(*(_relays(topo, routes, i) for i in range(len(routes.src))))
    assert inner and not inner & set(ranks)
    every = all_pairs(topo, ranks)
    short = np.flatnonzero(every.hops <= routes.hops.max())
    assert any(_relays(topo, every, i) & set(ranks) for i in short.tolist())  # there were some to leave out
    assert np.bincount(routes.src, minlength=len(ranks)).min() >= 1


def test_balanced_steps_reject_bad_parameters():
    topo = parse_spec("ring:n=4")
    with pytest.raises(ArschedError, match="replace the pipeline"):
        build("tree-packing", topo, None, 1e6, levels=True, stages=4)
    with pytest.raises(ArschedError, match="true or false"):
        build("tree-packing", topo, None, 1e6, levels="yes")


@pytest.mark.parametrize(
    "spec",
    [
        "ring:n=5",
        "torus:dims=3x3",
        "torus:dims=2x2x2",
        "dcell:n=2,k=1",
        "bcube:n=3,k=1",
        "jellyfish:switches=8,ports=4,net_ports=3,seed=1",
    ],
)
def test_forced_balanced_steps_are_valid(spec):
    """Valid and numerically right, every transfer on its overlay pair's own route."""
    topo = parse_spec(spec)
    ranks = tuple(topo.servers)
    s = build("tree-packing", topo, None, 16e6, levels=True)
    assert s.meta["params"]["levels"] is True
    assert s.step.min() == 0 and s.step.max() == 2 * s.meta["level_steps"] - 1  # R up, R down
    assert s.num_chunks == B.chunk_count(len(ranks), 16e6) == 16e6 // B.MIN_CHUNK
    assert validate(s).ok and numeric_check(s).ok
    routes = B.overlay(topo, ranks)
    c = topo.compiled
    want = {
        (ranks[a], *(c.node_ids[x] for x in c.link_dst[routes.links[routes.ptr[i] : routes.ptr[i + 1]]]))
        for i, a in enumerate(routes.src.tolist())
    }
    assert {s.paths[i] for i in np.unique(s.path_id).tolist()} <= want


def test_balanced_steps_reach_the_bound_on_the_torus():
    """On the 4×4 torus the placement's time with barriers is within 3 % of the bandwidth
    bound and the default picks the balanced steps at 256 MB; with in-order connections they run
    within 5 % of the bound, faster than the pipelined trees."""
    topo = parse_spec("torus:dims=4x4")
    ranks = tuple(topo.servers)
    size = 256e6
    bound = allreduce_bound(topo, ranks, size)
    chosen = build("tree-packing", topo, None, size)
    assert chosen.meta["params"]["levels"] is True and validate(chosen).ok
    assert bound <= chosen.meta["level_time"] <= bound * 1.03
    assert chosen.num_chunks == B.chunk_count(len(ranks), size) == B.CHUNKS
    piped = build("tree-packing", topo, None, size, levels=False)
    assert validate(piped).ok
    gap = simulate_flow(chosen, fifo=True).gap
    assert gap <= 1.05
    assert simulate_flow(chosen, fifo=True).time_s < simulate_flow(piped, fifo=True).time_s


def test_balanced_steps_weigh_the_total_load_on_a_mesh_of_unequal_links():
    """An MI250 box (16 GCDs, xGMI links of 50 to 200 GB/s, every link saturated at the cut
    bound): with barriers within 1.5× the bound over 256 chunks, where the sharp prices alone
    at the first R that the next two do not improve took 1.72× (measured); the plan, whose R and
    sharpness are the searched ones, valid."""
    topo = parse_spec("mi250:boxes=1")
    ranks = tuple(topo.servers)
    bound = allreduce_bound(topo, ranks, 256e6)
    plan = B.balance(topo, ranks, 256e6, step_overhead(topo, 5e-6), chunks=256)
    assert bound <= plan.time <= 1.5 * bound
    b = ScheduleBuilder(topo, ranks, 256e6, len(plan.columns), "tree-packing", {})
    B.add_balanced(b, plan)
    s = b.build()
    assert validate(s).ok and numeric_check(s).ok


def test_the_placement_keeps_its_load_and_steps_right():
    """The load a placement keeps after sweeps is the sum of its columns' loads, every child
    adds into its parent before the parent does, and the barrier time is the sum of the
    steps' busiest links plus their overhead."""
    topo = parse_spec("dcell:n=2,k=1")
    ranks = tuple(topo.servers)
    net = B.Network.of(topo, ranks)
    placer = B.Placer(net, net.least_steps + 1, 64)
    placer.sweep()
    want = np.zeros_like(placer.load)
    for parent, step, rows in placer.columns:
        kids = np.flatnonzero(parent >= 0)
        assert (step[kids] < step[parent[kids]]).all() and step.min() >= 1
        assert step[parent < 0] == placer.steps + 1
        np.add.at(want.reshape(-1), rows, placer.inverse[rows])
    assert np.allclose(placer.load, want)
    plan = placer.plan(1e8, 1e-5)
    busiest = want.max(axis=1) * 1e8 / 64 / net.scale
    assert plan.time == pytest.approx(busiest.sum() + (busiest > 0).sum() * 1e-5)


@pytest.mark.parametrize("spec", ["dcell:n=3,k=1", "hgx:boxes=2,gpus_per_box=4"])
def test_a_compiled_sweep_is_the_chunk_by_chunk_placement_under_numpys_prices(spec):
    """Two sweeps (the first placement and one rip-up pass), compiled with prices taken again
    only where the load moved, equal the chunk-by-chunk placement under every price taken
    afresh by numpy: the same columns and load, to the bit."""
    topo = parse_spec(spec)
    net = B.Network.of(topo, tuple(topo.servers))
    n, chunks = len(net.pair), 3 * len(net.pair) + 1
    placer = B.Placer(net, net.least_steps + 1, chunks)
    placer.sweep()
    load, use = np.zeros_like(placer.load), net.use
    columns = [(None, None, np.zeros(0, dtype=np.int64))] * chunks
    for _ in range(2):
        for k in range(chunks):
            B._add(load.reshape(-1), columns[k][2], placer.inverse, -1.0)
            weight = np.exp(placer.sharpness * (load / max(load.max(), 1e-300)))
            wide = net.wide_parents[k % n], net.wide_heights[k % n]
            args = (net.caps, load, placer.inverse, use.indptr, use.indices, use.data, net.pair)
            columns[k] = B._placement(weight, *args, *net.edges, *net.into, k % n, *wide, len(net.caps))
    assert np.array_equal(load, placer.load)
    for got, want in zip(placer.columns, columns, strict=True):
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


def test_polish_keeps_the_fastest_placement_it_saw():
    """Sweeps after polish: the time is the least of the times after every sweep that plain
    sweeps from the same start reach (sweeps are deterministic), and the load kept is its
    columns' load; at most SWEEPS sweeps, fewer after PATIENCE without a faster one."""
    topo = parse_spec("dcell:n=4,k=1")
    ranks = tuple(topo.servers)
    net = B.Network.of(topo, ranks)
    steps, overhead = net.least_steps + 1, 1e-5
    plain = B.Placer(net, steps, 64)
    seen = [plain.time(1e8, overhead)]
    for _ in range(6):
        plain.sweep()
        seen.append(plain.time(1e8, overhead))
    polished = B.Placer(net, steps, 64)
    polished.polish(1e8, overhead, 6)
    want, idle = seen[0], 0
    for t in seen[1:]:  # the sweeps polish runs: none after PATIENCE in a row without a faster one
        if idle == B.PATIENCE:
            break
        want, idle = (t, 0) if t < want else (want, idle + 1)
    assert polished.time(1e8, overhead) == want
    assert want < seen[-1]  # plain sweeps lose what an earlier sweep found here: keeping it matters
    load = np.zeros_like(polished.load)
    for _, _, rows in polished.columns:
        np.add.at(load.reshape(-1), rows, polished.inverse[rows])
    assert np.allclose(polished.load, load)


@pytest.mark.parametrize("spec", ["dcell:n=3,k=1", "hgx:boxes=2,gpus_per_box=4", "torus:dims=3x3"])
def test_the_compiled_costs_and_rows_are_numpys_to_the_bit(spec):
    """Under a random load, the compiled prices, join costs and their prefix minimum equal the
    scipy product and numpy expressions they replace, exactly; a column's rows are every
    route link of every edge, up at its step and down at the mirrored one."""
    topo = parse_spec(spec)
    net = B.Network.of(topo, tuple(topo.servers))
    rng = np.random.default_rng(7)
    steps, n = net.least_steps + 2, len(net.pair)
    load = rng.random((2 * steps, len(net.caps)))
    weight = np.exp(10.0 * load / load.max()) / net.caps
    u, v = net.edges
    price, cost, prefix = B._costs(weight, net.use.indptr, net.use.indices, net.use.data, net.pair, u, v)
    assert np.array_equal(price, (net.use @ weight.T).T)
    s = np.arange(steps)  # edge e: u[e] sending to v[e] at step s and back at 2R + 1 − s
    up, down = price[s][:, net.pair[u, v]].T, price[2 * steps - 1 - s][:, net.pair[v, u]].T
    want = up + down - 1e-12 * np.arange(1, steps + 1)
    assert np.array_equal(cost, want) and np.array_equal(prefix, np.minimum.accumulate(want, axis=1))
    parent, height = net.wide_parents[0], net.wide_heights[0]  # a tree, and steps for it, to take the rows of
    step = B.cheapest_steps(parent, height, rng.random((n, steps)))[1]
    rows = B._rows(parent, step, steps, net.pair, net.use.indptr, net.use.indices, len(net.caps))
    kids = np.flatnonzero(parent >= 0)
    expect = []
    for pairs, at in (
        (net.pair[kids, parent[kids]], step[kids] - 1),
        (net.pair[parent[kids], kids], 2 * steps - step[kids]),
    ):
        for q, s in zip(pairs, at, strict=True):
            links = net.use.indices[net.use.indptr[q] : net.use.indptr[q + 1]]
            expect.extend(s * len(net.caps) + links)
    assert rows.tolist() == expect


@pytest.mark.parametrize("spec", [pytest.param("bcube:n=3,k=1", marks=pytest.mark.slow), "dcell:n=2,k=1"])
def test_balanced_steps_beat_the_pipeline_on_switched_networks(spec):
    """Over the overlay's few peers per rank, in-order connections keep the balanced steps in
    order on switched networks too: the default picks them at 256 MB, within 5 % of the bound
    in the flow model with in-order connections, and faster than the pipelined trees."""
    topo = parse_spec(spec)
    chosen = build("tree-packing", topo, None, 256e6)
    piped = build("tree-packing", topo, None, 256e6, levels=False)
    assert chosen.meta["params"]["levels"] is True and validate(chosen).ok and validate(piped).ok
    fast = simulate_flow(chosen, fifo=True)
    assert fast.gap <= 1.05
    assert fast.time_s < simulate_flow(piped, fifo=True).time_s


def test_join_adds_the_free_ranks_by_their_cheapest_edges():
    """Prim from a partial tree: on a path 0-1-2-3-4 with a shortcut 4-0 dearer than 3-4, rank
    3 joins 2, then 4 joins 3; the ranks already in the tree keep their parents."""
    weight = np.full((5, 5), np.inf)
    for u, v, w in [(0, 1, 1.0), (1, 2, 1.0), (2, 3, 2.0), (3, 4, 1.0), (4, 0, 5.0)]:
        weight[u, v] = weight[v, u] = w
    parent = np.array([-1, 0, 1, -1, -1])
    assert B.join(parent, 0, weight).tolist() == [-1, 0, 1, 2, 3]
    assert parent.tolist() == [-1, 0, 1, -1, -1]  # not changed in place


def test_a_stranded_prim_tree_is_joined_and_its_steps_chosen_again():
    """Where Prim strands ranks, the placement keeps the tree Prim grew, joins the stranded
    ranks to it and chooses every step again, in order (child before parent), instead of
    falling back to the breadth-first tree; the schedule of such trees is valid."""
    topo = parse_spec("dcell:n=2,k=1")
    ranks = tuple(topo.servers)
    net = B.Network.of(topo, ranks)
    steps, n = net.least_steps + 2, len(ranks)
    rng = np.random.default_rng(3)
    u, v = net.edges
    use = net.use
    columns, joined = [], 0
    for k in range(2 * n):
        root = k % n
        weight = np.exp(10.0 * rng.random((2 * steps, len(net.caps)))) / net.caps
        price, cost, prefix = B._costs(weight, use.indptr, use.indices, use.data, net.pair, u, v)
        grown, step, _ = B.prim(cost, prefix, root, u, v, *net.into)
        kept = grown.copy()
        kept[np.argsort(-step, kind="stable")[n // 2 :]] = -1  # the later half stranded
        wide = net.wide_parents[root], net.wide_heights[root]
        parent, step = B._restep(kept, root, price, prefix, net.pair, *wide, u, v)
        assert (parent >= 0).sum() == n - 1 and parent[root] == -1
        had = kept >= 0
        if np.array_equal(parent[had], kept[had]):
            joined += 1
        else:  # only where the joined tree was taller than R
            assert np.array_equal(parent, net.wide_parents[root])
        kids = np.flatnonzero(parent >= 0)
        assert (step[kids] < step[parent[kids]]).all() and step[kids].min() >= 1 and step[root] == steps + 1
        columns.append((parent, step))
    assert joined >= len(columns) // 2
    b = ScheduleBuilder(topo, ranks, 1e6, len(columns), "tree-packing", {})
    B.add_balanced(b, B.BalancedPlan(columns, net.routes, steps, 0.0))
    s = b.build()
    assert validate(s).ok and numeric_check(s).ok


def _dense_prim(cost, prefix, u, v, root, n):
    """Prim over the (n × n × R) costs (infinite off the overlay), rank by rank: the reference
    the per-edge `prim` must reproduce, ties included."""
    steps = cost.shape[1]
    dense_cost = np.full((n, n, steps), np.inf)
    dense_prefix = np.full((n, n, steps), np.inf)
    dense_cost[u, v], dense_prefix[u, v] = cost, prefix
    parent, step = np.full(n, -1), np.zeros(n, dtype=np.int64)
    step[root] = steps + 1
    free = np.ones(n, dtype=bool)
    free[root] = False
    best, via = dense_prefix[:, root, steps - 1].copy(), np.full(n, root)
    best[root] = np.inf
    for _ in range(n - 1):
        c = int(np.argmin(best))
        if not np.isfinite(best[c]):
            return parent, step, False
        p = parent[c] = via[c]
        step[c] = int(np.argmin(dense_cost[c, p, : step[p] - 1])) + 1
        free[c], best[c] = False, np.inf
        if step[c] > 1:
            for x in range(n):
                if free[x] and dense_prefix[x, c, step[c] - 2] < best[x]:
                    best[x], via[x] = dense_prefix[x, c, step[c] - 2], c
    return parent, step, True


@pytest.mark.parametrize(
    "spec", ["dcell:n=3,k=1", "torus:dims=3x4", "jellyfish:switches=8,ports=5,net_ports=3,seed=3"]
)
def test_prim_over_the_overlay_edges_is_prim_over_all_rank_pairs(spec):
    """Prim on per-edge costs, walking each new parent's edges from its children, grows the
    same trees at the same steps as Prim over every rank pair, with no load (equal prices: ties)
    and under random link-step loads (some strand ranks at R = least steps, some do not)."""
    topo = parse_spec(spec)
    net = B.Network.of(topo, tuple(topo.servers))
    n, u, v = len(net.pair), *net.edges
    rng = np.random.default_rng(11)
    stranded = 0
    for trial in range(24):
        steps = net.least_steps + trial % 3
        load = rng.random((2 * steps, len(net.caps))) if trial >= 3 else np.zeros((2 * steps, len(net.caps)))
        weight = np.exp(10.0 * load) / net.caps  # no load at first: equal prices, ties
        _, cost, prefix = B._costs(weight, net.use.indptr, net.use.indices, net.use.data, net.pair, u, v)
        root = trial % n
        got = B.prim(cost, prefix, root, u, v, *net.into)
        want = _dense_prim(cost, prefix, u, v, root, n)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]) and got[2] == want[2]
        stranded += not got[2]
    assert 0 < stranded < 24
