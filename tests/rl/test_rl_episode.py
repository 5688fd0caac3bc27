"""The learned scheduler's episodes, networks and log-probabilities: every episode ends in a
valid schedule whatever decides it, the round probability is exact, the flow network is
equivariant, and the teacher is greedy-trees' rule."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from arsched.algorithms.flowtrees import SHAPES
from arsched.algorithms.greedy_trees import first_fit, widen
from arsched.collective import numeric_check, validate
from arsched.rl.episode import FLOW_FEATURES, LINK_FEATURES, Episode, RoundGraph
from arsched.rl.forward import sample_order
from arsched.rl.instance import Instance
from arsched.rl.nets import FlowScorer, Policy, round_log_prob
from arsched.rl.rollout import MODES, Timer, run
from arsched.sim import DEFAULT_ALPHA, simulate_flow, simulate_rounds
from arsched.topology import parse_spec

SPECS = [
    "bcube:n=3,k=1",
    "dcell:n=2,k=1",
    "jellyfish:switches=8,ports=4,net_ports=3,seed=1",
    "fattree:k=4",
    "torus:dims=3x3,oneway=1",  # directed links
    "ring:n=6,bandwidth=400Gbps,reverse=100Gbps",  # asymmetric bandwidth
    "hgx:boxes=2,gpus_per_box=2",  # a GPU fabric
]


@pytest.fixture(scope="module")
def policy():
    torch.manual_seed(5)
    return Policy.create(hidden=16, layers=1)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("mode", MODES)
def test_every_episode_ends_in_a_valid_schedule(spec, mode, policy):
    inst = Instance(parse_spec(spec), nbytes=4e6)
    timer = Timer(DEFAULT_ALPHA)
    traj = run(inst, policy, timer, mode, np.random.default_rng(3))
    s = traj.schedule
    assert validate(s).ok and numeric_check(s).ok
    # every round is conflict-free: the round model needs exactly one round per step
    assert simulate_rounds(s).rounds == s.num_steps == len(traj.rounds)
    flow = simulate_flow(s, DEFAULT_ALPHA)
    assert traj.time_s == flow.time_s and traj.gap == pytest.approx(flow.time_s / flow.bound_s)
    assert traj.gap >= 1 - 1e-9 and timer.calls == 1
    kinds = [k for k, _, _ in traj.choices]
    assert kinds == ["chunks"] + ["tree"] * (len(kinds) - 1)
    assert len(kinds) - 1 == inst.chunk_options[traj.choices[0][2]]


@pytest.mark.parametrize("spec", ["dcell:n=3,k=1", "bcube:n=3,k=1", "torus:dims=3x3,oneway=1"])
def test_the_greedy_mode_is_greedy_trees(spec):
    """The teacher's chunk count and shape are greedy-trees' plan, and its rounds, first fit in
    greedy's order widened by the swaps, are greedy-trees' steps: the same transfers, step by
    step (without the swaps DCell(3,1) took 16 rounds where greedy-trees takes 12)."""
    from arsched.algorithms import build

    topo = parse_spec(spec)
    inst = Instance(topo, nbytes=64e6)
    traj = run(inst, None, Timer(DEFAULT_ALPHA), "greedy")
    greedy = build("greedy-trees", topo, None, 64e6)
    shapes = {SHAPES[k] for kind, _, k in traj.choices if kind == "tree"}
    assert shapes == {greedy.meta["trees"]}
    assert inst.chunk_options[traj.choices[0][2]] == greedy.meta["chunks"]

    def rows(s):
        return sorted(map(tuple, np.column_stack([s.step, s.chunk, s.src, s.dst, s.op]).tolist()))

    assert rows(traj.schedule) == rows(greedy)


def _tiny_graph(rng: np.random.Generator, flows: int, links: int) -> RoundGraph:
    edges = [
        (f, int(lk)) for f in range(flows) for lk in rng.choice(links, size=rng.integers(1, 3), replace=False)
    ]
    ef, el = (np.array(x, dtype=np.int64) for x in zip(*edges, strict=True))
    return RoundGraph(
        np.arange(flows),
        rng.random((flows, FLOW_FEATURES)).astype(np.float32),
        rng.random((links, LINK_FEATURES)).astype(np.float32),
        ef,
        el,
    )


def _first_fit_local(g: RoundGraph, order) -> tuple[int, ...]:
    used: set[int] = set()
    taken = []
    for f in order:
        mine = set(g.edge_link[g.edge_flow == f].tolist())
        if not mine & used:
            used |= mine
            taken.append(int(f))
    return tuple(taken)


@pytest.mark.parametrize("seed", range(6))
def test_the_round_probability_is_exact(seed):
    """Sum the Plackett–Luce probability of every order of a small round by brute force, grouped
    by the pick sequence first fit makes of it: each group's total is exp(round_log_prob), and
    the groups sum to 1."""
    rng = np.random.default_rng(seed)
    g = _tiny_graph(rng, flows=5, links=4)
    scores = torch.as_tensor(rng.normal(size=5) * 2)
    w = np.exp(scores.numpy())
    totals: dict[tuple[int, ...], float] = {}
    for order in itertools.permutations(range(5)):
        p, left = 1.0, w.sum()
        for f in order:
            p *= w[f] / left
            left -= w[f]
        key = _first_fit_local(g, order)
        totals[key] = totals.get(key, 0.0) + p
    assert sum(totals.values()) == pytest.approx(1.0)
    for picks, p in totals.items():
        pk = np.array(picks)
        lp = round_log_prob(scores, torch.as_tensor(g.conflicts(pk)), torch.as_tensor(pk))
        assert float(torch.exp(lp)) == pytest.approx(p, rel=1e-9)


def test_sampled_rounds_follow_their_probability():
    """Gumbel-perturbed orders give first-fit rounds at the frequencies round_log_prob states."""
    rng = np.random.default_rng(11)
    g = _tiny_graph(rng, flows=4, links=3)
    scores = rng.normal(size=4)
    counts: dict[tuple[int, ...], int] = {}
    draws = 20_000
    for _ in range(draws):
        key = _first_fit_local(g, sample_order(scores, rng))
        counts[key] = counts.get(key, 0) + 1
    for picks, c in counts.items():
        pk = np.array(picks)
        lp = round_log_prob(torch.as_tensor(scores), torch.as_tensor(g.conflicts(pk)), torch.as_tensor(pk))
        p = float(torch.exp(lp))
        assert abs(c / draws - p) < 4 * np.sqrt(p * (1 - p) / draws) + 1e-3


def test_the_flow_network_is_equivariant_and_size_free():
    torch.manual_seed(0)
    net = FlowScorer(hidden=16, layers=2)
    rng = np.random.default_rng(2)
    g = _tiny_graph(rng, flows=7, links=5)
    fp, lp = rng.permutation(7), rng.permutation(5)
    inv_f, inv_l = np.argsort(fp), np.argsort(lp)
    h = RoundGraph(g.flows[fp], g.x_flow[fp], g.x_link[lp], inv_f[g.edge_flow], inv_l[g.edge_link])
    with torch.no_grad():
        assert torch.allclose(net(h), net(g)[fp], atol=1e-6)
        bigger = _tiny_graph(rng, flows=40, links=12)
        assert net(bigger).shape == (40,)


def test_first_fit_in_the_policy_order_is_what_the_episode_plays():
    inst = Instance(parse_spec("bcube:n=3,k=1"), nbytes=1e6)
    ep = Episode(inst, DEFAULT_ALPHA)
    ep.choose_chunks(0)
    while not ep.upper_done:
        ep.choose_tree(0)
    g = ep.round_graph()
    order = np.arange(len(g.flows))[::-1]
    expected = first_fit(ep.engine, g.flows[order])
    widened = set(widen(ep.engine, g.flows[order], expected))
    before = ep.engine.done.copy()
    taken = ep.play(g, order)
    assert g.flows[taken].tolist() == expected  # the decision: first fit's picks
    assert set(np.flatnonzero(ep.engine.done & ~before).tolist()) == widened  # what ran
    assert len(widened) > len(expected)  # here the swaps trade a pick for two flows
