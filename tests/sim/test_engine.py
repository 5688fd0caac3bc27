"""The compiled event engine (`sim.engine`) on its own: the indexed finish heap, batches
(their number changes nothing), progress, a trace log that outgrows its first buffer, and many
flows sharing paths at staggered starts, against the reference flow simulation (simref)."""

from __future__ import annotations

import numpy as np
import pytest
from simref import reference_flow

import arsched.sim.engine as engine
from arsched.algorithms import build
from arsched.sim import simulate_flow
from arsched.sim.deps import derive
from arsched.sim.paths import compile_paths
from arsched.topology import bcube, parse_spec, torus
from schedules import ring_allreduce


def contended_ring(topology, seed: int, nbytes: float = 1e7, chunks: int | None = None):
    """A ring in a random rank order: its hops share links, so the event simulation runs."""
    ranks = list(np.random.default_rng(seed).permutation(topology.servers))
    return ring_allreduce(topology, ranks, nbytes, chunks or len(ranks))


def test_the_indexed_finish_heap_follows_every_change_of_key():
    """Random sets (new paths and changed keys) and removals, in and out of the top, against a
    dict: the heap order holds, every path's recorded position is right, pops come sorted."""
    rng = np.random.default_rng(3)
    paths = 40
    key, val = np.zeros(paths), np.zeros(paths, dtype=np.int64)
    pos = np.full(paths, -1, dtype=np.int64)
    live, n = {}, 0
    for _ in range(2000):
        p = int(rng.integers(paths))
        if p in live and rng.random() < 0.3:
            n = engine._remove(key, val, pos, n, pos[p])
            del live[p]
        else:
            live[p] = float(rng.integers(20))  # ties too
            n = engine._set(key, val, pos, n, live[p], p)
        assert n == len(live)
        assert all(key[(i - 1) // 2] <= key[i] for i in range(1, n))
        assert all(pos[val[i]] == i for i in range(n)) and (pos >= 0).sum() == n
        assert {int(v): float(k) for k, v in zip(key[:n], val[:n], strict=True)} == live
    popped = []
    while n:
        popped.append(key[0])
        n = engine._remove(key, val, pos, n, 0)
    assert popped == sorted(popped) and (pos == -1).all()


def test_batches_change_nothing_and_progress_reaches_the_end(monkeypatch):
    s = contended_ring(bcube(4, 1), seed=1)
    whole = simulate_flow(s, 5e-6)
    assert whole.notes["method"] == "events"
    monkeypatch.setattr(engine, "BATCH", 7)
    cut = simulate_flow(s, 5e-6)
    np.testing.assert_array_equal(cut.end, whole.end)
    seen = []
    cp = compile_paths(s)
    engine.simulate_events(
        cp, derive(s, fifo=True), s.topology.compiled.capacity, s.chunk_bytes, 5e-6,
        progress=lambda done, total: seen.append((done, total)),
    )  # fmt: skip
    assert len(seen) == -(-whole.notes["event_instants"] // 7)
    assert seen == sorted(seen) and seen[-1] == (len(s), len(s))


def test_a_trace_that_outgrows_its_buffer_adds_up_to_every_links_bytes():
    """Thousands of instants against a first buffer of 4 entries per path: the log grows, and
    the rates it rebuilds integrate to the bytes each link carried."""
    s = contended_ring(bcube(4, 1), seed=2)
    r = simulate_flow(s, 5e-6, trace=True)
    assert len(r.link_rate_trace) > 4 * len(s.paths)
    carried = np.zeros(len(r.link_bytes))
    ends = [t for t, _, _ in r.link_rate_trace[1:]] + [r.time_s]
    for (t, links, rates), end in zip(r.link_rate_trace, ends, strict=True):
        carried[links] += rates * (end - t)
    np.testing.assert_allclose(carried, r.link_bytes, rtol=1e-9, atol=1e-6 * s.chunk_bytes)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_flows_sharing_paths_at_staggered_starts_match_the_reference(seed):
    """Several chunks per ring hop (flows on one path that start at different times, once
    their data arrives), on a torus whose random-order ring hops overlap."""
    s = contended_ring(torus((3, 3)), seed, chunks=27)
    r = simulate_flow(s, 1e-6, fifo=False)
    assert r.notes["method"] == "events"
    ready, done = reference_flow(s, 1e-6)
    np.testing.assert_allclose(r.end, done, rtol=1e-9)
    np.testing.assert_allclose(r.start, ready, rtol=1e-9, atol=1e-15)


def test_a_link_is_dropped_only_behind_one_every_flow_of_it_crosses_at_no_more_capacity():
    """Path 0 crosses links 0, 1, 2, path 1 links 1, 3, 4; link 4 carries what link 3 does at
    the same capacity (the lower index stays), link 2 is narrower than the others."""
    ptr = np.array([0, 3, 6])
    links = np.array([0, 1, 2, 1, 3, 4])
    cap = np.array([10.0, 10.0, 5.0, 10.0, 10.0])
    link_ptr = np.array([0, 1, 3, 4, 5, 6])
    link_paths = np.array([0, 0, 1, 0, 1, 1])
    dropped = engine._dominated(ptr, links, link_ptr, link_paths, cap)
    # 0: behind 1 (it carries path 0 and more); 1: nothing carries both paths; 2: narrower
    # than every other link of path 0; 3 and 4 alike: 4 behind 3, 3 behind 1
    assert dropped.tolist() == [True, False, False, True, True]


@pytest.mark.parametrize(
    "spec",
    [
        "fattree:k=4",
        "fattree:k=4,bandwidth=100Gbps/40Gbps/100Gbps",
        "leafspine:leaves=3,spines=2,servers_per_leaf=3",
    ],
)
def test_rings_whose_private_links_are_dropped_match_the_reference(spec):
    """Random-order rings cross links no other hop uses (dropped where another link of the hop
    is no wider) and links they share, some narrower than the private ones: the times are the
    reference's, and the kernel's paths are shorter."""
    s = contended_ring(parse_spec(spec), seed=4)
    cp = compile_paths(s)
    kept = engine._Paths.of_transfers(cp, np.full(len(s), s.chunk_bytes), s.topology.compiled.capacity)
    assert len(kept.links) < len(cp.path_links) and (np.diff(kept.ptr) >= 1).all()
    r = simulate_flow(s, 1e-6, fifo=False)
    assert r.notes["method"] == "events"
    ready, done = reference_flow(s, 1e-6)
    np.testing.assert_allclose(r.end, done, rtol=1e-9)
    np.testing.assert_allclose(r.start, ready, rtol=1e-9, atol=1e-15)


def _max_min_after_every_instant(monkeypatch, s, fifo: bool) -> int:
    """Simulate `s` one instant per kernel call and check the rates after each: no link over
    full, and every sending path with a bottleneck (a full link on which no path is faster), to
    1e-9 — max-min fairness, checked without any refill. Returns the instants checked."""
    box = {}
    run, start, paths = engine._run, engine._start, engine._Paths.of_transfers.__func__
    checked = [0]

    def keep_state(*args, **kw):
        box["a"] = start(*args, **kw)
        return box["a"]

    def keep_paths(cls, cp, chunk, capacity):
        box["p"], box["cap"] = paths(cls, cp, chunk, capacity), capacity
        return box["p"]

    def checked_run(*args):
        code = run(*args)
        a, p, cap = box["a"], box["p"], box["cap"]
        mult, rate = a["mult"], a["prate"]
        live = mult[p.owner] > 0
        owner, links = p.owner[live], p.links[live]
        load, top = np.zeros(len(cap)), np.zeros(len(cap))
        np.add.at(load, links, mult[owner] * rate[owner])
        np.maximum.at(top, links, rate[owner])
        assert (load <= cap * (1 + 1e-9)).all()
        binds = (load[links] >= cap[links] * (1 - 1e-9)) & (rate[owner] >= top[links] * (1 - 1e-9))
        bottlenecked = np.zeros(len(mult), dtype=bool)
        bottlenecked[owner[binds]] = True
        assert bottlenecked[mult > 0].all()
        checked[0] += 1
        return code

    monkeypatch.setattr(engine, "_start", keep_state)
    monkeypatch.setattr(engine._Paths, "of_transfers", classmethod(keep_paths))
    monkeypatch.setattr(engine, "_run", checked_run)
    monkeypatch.setattr(engine, "BATCH", 1)
    assert simulate_flow(s, 1e-6, fifo=fifo).notes["method"] == "events"
    return checked[0]


@pytest.mark.parametrize(
    ("algorithm", "spec", "fifo"),
    [
        ("rhd", "jellyfish:switches=10,ports=5,net_ports=3,seed=4", False),
        ("tree-packing", "dcell:n=3,k=1", True),
        ("group-trees", "leafspine:leaves=4,spines=2,servers_per_leaf=3,bandwidth=100Gbps/40Gbps", True),
        ("tree-packing", "torus:dims=3x4,oneway=1", False),
        ("rhd", "ring:n=8,bandwidth=400Gbps,reverse=100Gbps", False),
    ],
)
def test_every_instant_ends_max_min_fair(monkeypatch, algorithm, spec, fifo):
    """Whatever the refill held or refilled, the rates after each instant are max-min fair, on
    heterogeneous, one-way and asymmetric links too."""
    s = build(algorithm, parse_spec(spec), None, 1e7)
    assert _max_min_after_every_instant(monkeypatch, s, fifo) > 100


@pytest.mark.parametrize(
    "spec",
    ["leafspine:leaves=4,spines=1,servers_per_leaf=3", "leafspine:leaves=3,spines=2,servers_per_leaf=4"],
)
@pytest.mark.parametrize("fifo", [True, False])
def test_tree_flows_that_full_links_keep_at_their_rate_match_the_reference(spec, fifo):
    """Two trees' chunks through racks: many flows at one rate on full uplinks, which keep
    those rates while flows elsewhere start and stop (the local refill holds them)."""
    s = build("group-trees", parse_spec(spec), None, 1e7, chunks=8)
    r = simulate_flow(s, 1e-6, fifo=fifo)
    assert r.notes["method"] == "events"
    ready, done = reference_flow(s, 1e-6, fifo=fifo)
    np.testing.assert_allclose(r.end, done, rtol=1e-9)
    np.testing.assert_allclose(r.start, ready, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("rounds", [0, 1, engine._ROUNDS])
@pytest.mark.parametrize(
    "spec", ["jellyfish:switches=10,ports=5,net_ports=3,seed=4", "dcell:n=3,k=1", "fattree:k=4"]
)
def test_local_refills_and_whole_component_refills_match_the_reference(monkeypatch, spec, rounds):
    """Recursive halving-doubling's exchanges cross long, shared paths at many different
    rates: local refills that settle within the default rounds, local refills cut after one
    round (the whole component refilled where a held path had to join), and the whole
    component at every instant (0 rounds) all give the reference's times."""
    monkeypatch.setattr(engine, "_ROUNDS", rounds)
    s = build("rhd", parse_spec(spec), None, 1e7)
    r = simulate_flow(s, 1e-6, fifo=False)
    assert r.notes["method"] == "events"
    ready, done = reference_flow(s, 1e-6)
    np.testing.assert_allclose(r.end, done, rtol=1e-9)
    np.testing.assert_allclose(r.start, ready, rtol=1e-9, atol=1e-15)
