"""The round model (sim.rounds): closed forms for a ring on a ring graph and a parameter server
on a star, round counts of rings on BCube(4,1) against an independent count of link conflicts,
and the RoundEngine driven by greedy policies (same rounds and time as simulate_rounds when it
goes step by step; dependencies and conflicts enforced)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from simref import (
    first_fit,
    link_lists,
    max_link_load,
    ps_allreduce,
    recursive_doubling_allreduce,
    ring_allreduce,
    semantic_preds,
    steps_of,
    topo,
)

from arsched.errors import ArschedError
from arsched.sim import RoundEngine, simulate_rounds
from arsched.topology import ring, star

# ---- closed forms ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "alpha", "bw", "lat", "per_rank"),
    [
        (2, 0.0, 1e9, 1e-6, 1),
        (3, 5e-6, 1.25e10, 1e-6, 1),
        (5, 2e-6, 1e9, 0.0, 1),
        (8, 1e-5, 5e9, 3e-6, 1),
        (6, 1e-6, 1e9, 2e-6, 2),
    ],
)
def test_ring_on_ring_closed_form(n, alpha, bw, lat, per_rank):
    m = 8e6
    t = ring(n, bw, lat)
    s = ring_allreduce(t, t.servers, m, chunks_per_rank=per_rank)
    res = simulate_rounds(s, alpha)
    # every step sends `per_rank` chunks of M/(N·per_rank) over each ring link, one per round
    chunk = m / n / per_rank
    assert res.rounds == 2 * (n - 1) * per_rank
    assert res.time_s == pytest.approx(2 * (n - 1) * per_rank * (chunk / bw + lat + alpha), rel=1e-12)
    if per_rank == 1:
        assert res.time_s == pytest.approx(2 * (n - 1) * (m / n / bw + lat + alpha), rel=1e-12)
    assert res.model == "rounds" and res.alpha == alpha


@pytest.mark.parametrize(("n", "chunks"), [(3, 1), (5, 1), (8, 1), (4, 3)])
@pytest.mark.parametrize("alpha", [0.0, 4e-6])
def test_parameter_server_on_star_closed_form(n, chunks, alpha):
    m, bw, lat = 4e6, 1e9, 1.5e-6
    t = star(n, bw, lat)
    s = ps_allreduce(t, t.servers, m, num_chunks=chunks)
    res = simulate_rounds(s, alpha)
    # step 0: all (N-1)·C reduces cross the switch's link into the PS, one per round; step 1:
    # all copies cross the link out of it. Each round: one chunk over two hops.
    assert res.rounds == 2 * (n - 1) * chunks
    expect = 2 * (n - 1) * chunks * (m / chunks / bw + 2 * lat + alpha)
    assert res.time_s == pytest.approx(expect, rel=1e-12)


def slots_time(schedule, alpha: float) -> tuple[int, float]:
    """Rounds and time by an independent count: first fit per step over the written paths,
    each round lasting chunk / slowest used link + longest path latency + α."""
    top = schedule.topology
    links = link_lists(schedule)
    rounds, total = 0, 0.0
    for rows in steps_of(schedule).values():
        rnd = first_fit([set(links[i]) for i in rows])
        for r in range(max(rnd) + 1):
            members = [i for i, x in zip(rows, rnd, strict=True) if x == r]
            bw = min(top.link(u, v).bandwidth for i in members for u, v in links[i])
            lat = max(sum(top.link(u, v).latency for u, v in links[i]) for i in members)
            total += schedule.chunk_bytes / bw + lat + alpha
        rounds += max(rnd) + 1
    return rounds, total


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 5])
def test_ring_on_bcube_rounds_equal_a_hand_count(seed):
    t = topo("bcube:n=4,k=1")
    rng = np.random.default_rng(seed)
    ranks = t.servers if seed == 0 else tuple(str(x) for x in rng.permutation(np.array(t.servers)))
    n = len(ranks)
    s = ring_allreduce(t, ranks, 1e6)
    res = simulate_rounds(s, 2e-6)
    # every step of a ring has the same N (src, dst) pairs; count their conflicts on the
    # default routes: max load per directed link, and whether conflicts come in pairs only
    paths = [t.path(ranks[i], ranks[(i + 1) % n]) for i in range(n)]
    sets = [set(itertools.pairwise(p)) for p in paths]
    load = max_link_load(sets)
    degree = max(sum(1 for j, o in enumerate(sets) if j != i and sets[i] & o) for i in range(n))
    rounds, time_s = slots_time(s, 2e-6)
    assert res.rounds == rounds
    assert res.time_s == pytest.approx(time_s, rel=1e-12)
    assert res.rounds >= 2 * (n - 1) * load
    if degree <= 1:  # conflicts are pairwise: first fit needs exactly the max load per step
        assert res.rounds == 2 * (n - 1) * load
    if seed == 0:
        # in order, neighbours share a level-0 switch or relay through the first server of
        # the next group: no link carries two transfers of one step
        assert (load, res.rounds) == (1, 2 * (n - 1))


def test_round_start_and_end_follow_the_slots():
    t = star(4, 1e9, 1e-6)
    s = ps_allreduce(t, t.servers, 3e6)
    res = simulate_rounds(s, 1e-6)
    d = 3e6 / 1e9 + 2e-6 + 1e-6
    # one transfer per round, in stored order: starts at k·d and lasts d
    np.testing.assert_allclose(res.start, np.arange(6) * d, rtol=1e-12, atol=1e-18)
    np.testing.assert_allclose(res.end, np.arange(1, 7) * d, rtol=1e-12)


def test_empty_schedule():
    t = star(3)
    s = ps_allreduce(t, t.servers)
    empty = type(s)(t, s.ranks, 1e6, 1, *([np.zeros(0)] * 6), paths=())
    res = simulate_rounds(empty)
    assert (res.time_s, res.rounds, len(res.start)) == (0.0, 0, 0)


# ---- RoundEngine -----------------------------------------------------------------------------


def shares_link(links, a: int, b: int) -> bool:
    return bool(set(links[a]) & set(links[b]))


def drive(schedule, alpha: float, step_by_step: bool):
    """Run a greedy conflict-free policy to completion: each round takes the available
    transfers in stored order (of the lowest unfinished step only, if `step_by_step`) that
    share no link with those already taken. Checks every dependency on the way."""
    eng = RoundEngine(schedule, alpha)
    links = link_lists(schedule)
    preds = semantic_preds(schedule)
    top = schedule.topology
    steps = np.array([t.step for t in schedule.transfers])
    done: set[int] = set()
    total = 0.0
    while not eng.finished:
        avail = eng.available().tolist()
        assert avail == sorted(t for t in range(len(schedule)) if t not in done and preds[t] <= done)
        if step_by_step:
            low = steps[avail].min()
            avail = [t for t in avail if steps[t] == low]
        chosen: list[int] = []
        for t in avail:
            if not any(shares_link(links, t, c) for c in chosen):
                chosen.append(t)
        bw = min(top.link(u, v).bandwidth for i in chosen for u, v in links[i])
        lat = max(sum(top.link(u, v).latency for u, v in links[i]) for i in chosen)
        duration = eng.execute(np.array(chosen))
        assert duration == pytest.approx(schedule.chunk_bytes / bw + lat + alpha, rel=1e-12)
        total += duration
        done |= set(chosen)
        assert eng.done.sum() == len(done)
    assert eng.time == pytest.approx(total, rel=1e-12)
    return eng


def engine_cases():
    bc = topo("bcube:n=4,k=1")
    rng = np.random.default_rng(7)
    shuffled = tuple(str(x) for x in rng.permutation(np.array(bc.servers)))
    ft = topo("fattree:k=4")
    tor = topo("torus:dims=3x3")
    st5 = star(5)
    return {
        "ring-bcube-shuffled": ring_allreduce(bc, shuffled, 1e6),
        "ring-fattree-2chunks": ring_allreduce(ft, ft.servers[:8], 1e6, chunks_per_rank=2),
        "ps-star": ps_allreduce(st5, st5.servers, 1e6, num_chunks=2),
        "rd-torus": recursive_doubling_allreduce(tor, tor.servers[:8], 1e6, num_chunks=2),
    }


CASES = engine_cases()


@pytest.mark.parametrize("name", list(CASES))
def test_engine_step_by_step_policy_equals_simulate_rounds(name):
    s = CASES[name]
    eng = drive(s, 1e-6, step_by_step=True)
    res = simulate_rounds(s, 1e-6)
    assert eng.rounds == res.rounds
    assert eng.time == pytest.approx(res.time_s, rel=1e-12)


@pytest.mark.parametrize("name", list(CASES))
def test_engine_greedy_asynchronous_policy(name):
    s = CASES[name]
    eng = drive(s, 0.0, step_by_step=False)
    res = simulate_rounds(s)
    assert eng.rounds <= res.rounds
    assert eng.time >= res.bound_s * (1 - 1e-9)  # the port-model bound holds across steps too
    # a directed link carries one transfer per round
    assert eng.rounds >= max_link_load([set(x) for x in link_lists(s)])
    assert eng.done.all() and len(eng.available()) == 0


def test_engine_rejects_unavailable_and_conflicting_rounds():
    t = star(4)
    s = ps_allreduce(t, t.servers, 1e6)  # 0-2: reduces into s0 (step 0); 3-5: copies (step 1)
    eng = RoundEngine(s)
    assert eng.available().tolist() == [0, 1, 2]
    with pytest.raises(ArschedError, match="transfer 3 is not available"):
        eng.execute(np.array([3]))
    with pytest.raises(ArschedError, match="share a directed link"):
        eng.execute(np.array([0, 1]))
    with pytest.raises(ArschedError, match="at least one transfer"):
        eng.execute(np.array([], dtype=np.int64))
    assert (eng.rounds, eng.time) == (0, 0.0) and not eng.done.any()
    eng.execute(np.array([0]))
    with pytest.raises(ArschedError, match="transfer 0 is not available"):
        eng.execute(np.array([0]))
    eng.execute(np.array([1]))
    assert eng.available().tolist() == [2]
    eng.execute(np.array([2]))
    # every copy waits for all reduces into the PS buffer; now they may go, but share s0 -> w0
    assert eng.available().tolist() == [3, 4, 5]
    with pytest.raises(ArschedError, match="share a directed link"):
        eng.execute(np.array([4, 5]))
    for k in (3, 4, 5):
        eng.execute(np.array([k]))
    assert eng.finished and eng.rounds == 6


@pytest.mark.parametrize("name", list(CASES))
def test_engine_conflicts_agree_with_shared_links(name):
    s = CASES[name]
    eng = RoundEngine(s)
    links = link_lists(s)
    rows = next(iter(steps_of(s).values()))[:24]
    for a in rows:
        for b in rows:
            if a != b:
                assert eng.conflicts(a, b) == shares_link(links, a, b)
    rng = np.random.default_rng(0)
    for _ in range(30):
        ids = rng.choice(rows, size=int(rng.integers(1, min(len(rows), 6) + 1)), replace=False)
        expect = not any(shares_link(links, a, b) for a in ids for b in ids if a < b)
        assert eng.conflict_free(ids) == expect
