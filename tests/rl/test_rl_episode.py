"""The learned scheduler's episodes, networks and log-probabilities: every episode ends in a
valid schedule whatever decides it, the round probability is exact, the flow network is
equivariant, the fixed rules do what they say (greedy's is greedy-trees) and the best plan is
the fastest of them."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from arsched.algorithms import build
from arsched.algorithms.flowtrees import SHAPES
from arsched.algorithms.greedy_trees import critical_path
from arsched.collective import numeric_check, validate
from arsched.rl.episode import BUDGET, ENTERED, FLOW_FEATURES, LINK_FEATURES, RULES, Episode, RoundGraph
from arsched.rl.forward import choice_probs, release
from arsched.rl.instance import Instance
from arsched.rl.nets import FlowScorer, Policy, choice_log_probs, release_log_prob
from arsched.rl.rollout import Plan, Timer, best_plan, greedy_plan, run
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


DRIVERS = ["policy", "sample", "random", *(f"plan:{r}" for r in RULES)]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("driver", DRIVERS)
def test_every_episode_ends_in_a_valid_schedule(spec, driver, policy):
    inst = Instance(parse_spec(spec), nbytes=4e6)
    timer = Timer(DEFAULT_ALPHA)
    mode, _, rule = driver.partition(":")
    one_stage = max(k for k, (_, stages) in enumerate(inst.chunk_options) if stages == 1)
    last = len(inst.chunk_options) - 1 if rule == "asap" else one_stage  # the plans best_plan weighs
    plan = Plan(last, len(SHAPES) - 1, rule) if rule else None
    traj = run(inst, policy, timer, mode, np.random.default_rng(3), plan=plan)
    s = traj.schedule
    assert validate(s).ok and numeric_check(s).ok
    assert s.num_steps >= len(traj.rounds)  # more where an episode reaches its round budget
    if rule:
        assert s.num_steps == len(traj.rounds)
    if rule == "greedy":  # conflict-free: the round model needs exactly one round per step
        assert simulate_rounds(s).rounds == s.num_steps
    flow = simulate_flow(s, DEFAULT_ALPHA)
    assert traj.time_s == flow.time_s and traj.gap == pytest.approx(flow.time_s / flow.bound_s)
    assert traj.gap >= 1 - 1e-9 and timer.calls == 1
    kinds = [k for k, _, _ in traj.choices]
    assert kinds == ["chunks"] + ["tree"] * (len(kinds) - 1)
    assert len(kinds) - 1 == inst.chunk_options[traj.choices[0][2]][0]


def _rows(s):
    return sorted(map(tuple, np.column_stack([s.step, s.chunk, s.src, s.dst, s.op]).tolist()))


@pytest.mark.parametrize("spec", ["dcell:n=3,k=1", "bcube:n=3,k=1", "torus:dims=3x3,oneway=1"])
def test_the_greedy_rule_on_greedys_plan_is_greedy_trees(spec):
    """greedy-trees' chunk count and shape with the greedy rule (first fit in greedy's order,
    widened by the swaps) are greedy-trees' steps: the same transfers, step by step."""
    topo = parse_spec(spec)
    inst = Instance(topo, nbytes=64e6)
    traj = run(inst, None, Timer(DEFAULT_ALPHA), "plan", plan=greedy_plan(inst))
    assert _rows(traj.schedule) == _rows(build("greedy-trees", topo, None, 64e6))


@pytest.mark.parametrize("spec", ["dcell:n=2,k=1", "bcube:n=3,k=1", "ring:n=6,reverse=100Gbps"])
def test_the_best_plan_is_the_fastest_fixed_plan(spec):
    """No plan of any chunk option, shape and rule it weighs (pipelined options with `asap`) is
    faster than `best_plan`'s (brute force), so it is never slower than greedy-trees; it is
    computed once per instance."""
    inst = Instance(parse_spec(spec), nbytes=16e6)
    timer = Timer(DEFAULT_ALPHA)
    best = best_plan(inst, timer)
    calls = timer.calls
    assert best_plan(inst, timer) is best and timer.calls == calls
    assert validate(best.schedule).ok
    for k, (_, stages) in enumerate(inst.chunk_options):
        for s in range(len(SHAPES)):
            for rule in RULES if stages == 1 else ("asap",):
                assert run(inst, None, timer, "plan", plan=Plan(k, s, rule)).time_s >= best.time_s
    greedy = run(inst, None, timer, "plan", plan=greedy_plan(inst))
    assert greedy.time_s >= best.time_s


@pytest.mark.parametrize("spec", ["ring:n=4", "hgx:boxes=2,gpus_per_box=2", "bcube:n=3,k=1"])
def test_chunk_options_fit_a_runtime_and_pay_their_latency(spec):
    """No option has more than 256 chunks (MSCCL's steps per thread block); a pipelined
    option's chunks take at least α to cross the slowest link, so a 1 MB message is offered
    one-stage options only and a 256 MB one pipelined options too."""
    topo = parse_spec(spec)
    slowest = min(topo.compiled.capacity)
    piped = {}
    for nbytes in (1e6, 16e6, 256e6):
        options = Instance(topo, nbytes=nbytes).chunk_options
        assert all(c <= 256 for c, _ in options) and any(s == 1 for _, s in options)
        piped[nbytes] = [c for c, s in options if s > 1]
        assert all(nbytes / c >= DEFAULT_ALPHA * slowest for c in piped[nbytes])
    assert not piped[1e6] and piped[256e6]


def test_the_rules_release_what_they_say():
    """Round by round: greedy's release is conflict-free, asap's everything available, lead's
    one flow per connection, the one with the longest critical path there."""
    inst = Instance(parse_spec("bcube:n=3,k=1"), nbytes=1e6)
    ep = Episode(inst, DEFAULT_ALPHA)
    ep.choose_chunks(0)
    while not ep.upper_done:
        ep.choose_tree(0)
    e = ep.engine
    prio = critical_path(e)
    while not ep.finished:
        g = ep.round_graph()
        greedy, lead = ep.rule_release(g, "greedy"), ep.rule_release(g, "lead")
        assert greedy.any() and e.conflict_free(g.flows[greedy].tolist())
        assert ep.rule_release(g, "asap").all()
        conn = list(zip(e.flow_src[g.flows].tolist(), e.flow_dst[g.flows].tolist(), strict=True))
        assert len({conn[i] for i in np.flatnonzero(lead)}) == lead.sum() == len(set(conn))
        for i in np.flatnonzero(lead):
            mates = [j for j in range(len(conn)) if conn[j] == conn[i]]
            assert prio[g.flows[i]] == prio[g.flows[mates]].max()
        before = e.done.copy()
        ep.play(g, lead)  # exactly the released flows run; the others stay available
        assert set(np.flatnonzero(e.done & ~before).tolist()) == set(g.flows[lead].tolist())
        assert e.available[g.flows[~lead]].all()


@pytest.mark.parametrize("rule", RULES)
def test_pipelined_options_send_chunks_in_stage_by_stage(rule):
    """With S stages, chunk c of C enters in stage c·S // C: every rule releases only entered
    flows, the clock moves on by one stage per round and skips a stage with nothing available,
    so the first round holds only the first stage's chunks and every chunk starts no earlier
    than its stage; the schedule is valid."""
    inst = Instance(parse_spec("dcell:n=2,k=1"), nbytes=16e6)
    k = next(i for i, (_, stages) in enumerate(inst.chunk_options) if stages > 1)
    chunks, stages = inst.chunk_options[k]
    ep = Episode(inst, DEFAULT_ALPHA)
    ep.choose_chunks(k)
    assert (ep.chunks, ep.stages) == (chunks, stages)
    while not ep.upper_done:
        ep.choose_tree(0)
    e = ep.engine
    entry = np.arange(chunks) * stages // chunks
    clock = 0
    while not ep.finished:  # up to the round budget (greedy's and lead's rounds reach it here)
        g = ep.round_graph()
        stage = max(clock, int(entry[e.flow_chunk[g.flows]].min()))
        entered = entry[e.flow_chunk[g.flows]] <= stage
        assert np.array_equal(g.x_flow[:, ENTERED] > 0.5, entered)
        go = ep.rule_release(g, rule)
        assert go.any() and not (go & ~entered).any()
        ep.play(g, go)
        clock = stage + 1
    s = ep.schedule()
    first = np.full(chunks, s.num_steps)
    np.minimum.at(first, s.chunk, s.step)
    assert (first[entry == 0] == 0).any() and (first >= entry).all()
    assert first[entry > 0].min() > 0
    assert validate(s).ok and numeric_check(s).ok


@pytest.mark.parametrize("spec", ["dcell:n=2,k=1", "torus:dims=3x3,oneway=1"])
@pytest.mark.parametrize("option", [0, -1])  # one stage, pipelined
def test_an_episode_ends_at_its_round_budget(spec, option):
    """A policy that releases one flow a round (as a cold start's can) decides exactly the
    budget's rounds, BUDGET times what the fixed rules need (the busiest link's flows, the
    stages, twice the tallest tree); then every remaining flow goes as soon as it has entered,
    and the schedule is valid. No rule's plan reaches the budget on these networks."""
    inst = Instance(parse_spec(spec), nbytes=16e6)
    k = range(len(inst.chunk_options))[option]
    ep = Episode(inst, DEFAULT_ALPHA)
    ep.choose_chunks(k)
    while not ep.upper_done:
        ep.choose_tree(0)
    e, lib = ep.engine, inst.library(ep.chunks)
    busiest = np.bincount(e.link_matrix[e.link_matrix < len(inst.capacity)]).max()
    assert ep.round_budget == BUDGET * (busiest + ep.stages + 2 * lib.height[0].max())
    decided = 0
    while not ep.finished:
        g = ep.round_graph()
        one = np.zeros(len(g.flows), dtype=bool)
        one[-1] = True
        ep.play(g, one)
        decided += 1
    assert decided == ep.round_budget < ep.rounds <= decided + ep.stages + 2 * lib.height[0].max()
    s = ep.schedule()
    assert validate(s).ok and numeric_check(s).ok
    for rule in RULES:
        traj = run(inst, None, None, "plan", plan=Plan(k, 0, rule))
        assert traj.schedule.num_steps == len(traj.rounds) < ep.round_budget


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


def _log_prob(scores: np.ndarray, go: np.ndarray, explore: float = 0.0) -> float:
    lone = bool(go.sum() == 1 and go[int(np.argmax(scores))])
    one_round = torch.zeros(len(go), dtype=torch.long)
    args = (torch.as_tensor(scores), torch.as_tensor(go), torch.as_tensor([lone]), one_round, 1, explore)
    return float(release_log_prob(*args)[0])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("explore", [0.0, 0.1])
def test_the_round_probability_is_exact(seed, explore):
    """Sum the probability of every outcome of the independent draws of a small round by brute
    force, grouped by the release it gives (none drawn: the top-scored flow alone): each
    group's total is exp(release_log_prob), and the groups sum to 1, with and without the
    exploration floor."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=5) * 2
    p = (1 - explore) / (1 + np.exp(-scores)) + explore / 2
    totals: dict[tuple[bool, ...], float] = {}
    for draw in itertools.product([False, True], repeat=5):
        d = np.array(draw)
        prob = float(np.prod(np.where(d, p, 1 - p)))
        if not d.any():
            d[int(np.argmax(scores))] = True
        totals[tuple(d)] = totals.get(tuple(d), 0.0) + prob
    assert sum(totals.values()) == pytest.approx(1.0)
    assert len(totals) == 2**5 - 1
    for go, prob in totals.items():
        assert np.exp(_log_prob(scores, np.array(go), explore)) == pytest.approx(prob, rel=1e-9)


@pytest.mark.parametrize("explore", [0.0, 0.2])
def test_sampled_rounds_follow_their_probability(explore):
    """`forward.release` draws releases at the frequencies release_log_prob states, and its
    mode is every positive score (the top alone if none is), whatever the exploration floor;
    with it, even a flow scored far below every other goes in about explore/2 of the draws."""
    rng = np.random.default_rng(11)
    scores = np.append(rng.normal(size=4) - 1, -50.0)
    counts: dict[tuple[bool, ...], int] = {}
    draws = 20_000
    for _ in range(draws):
        key = tuple(release(scores, rng, explore).tolist())
        counts[key] = counts.get(key, 0) + 1
    for go, c in counts.items():
        prob = np.exp(_log_prob(scores, np.array(go), explore))
        assert abs(c / draws - prob) < 4 * np.sqrt(prob * (1 - prob) / draws) + 1e-3
    last = sum(c for go, c in counts.items() if go[-1]) / draws
    assert abs(last - explore / 2) < 0.01
    assert release(np.array([-3.0, -1.0, -2.0]), None, explore).tolist() == [False, True, False]
    assert release(np.array([2.0, -1.0, 0.5]), None, explore).tolist() == [True, False, True]


@pytest.mark.parametrize("explore", [0.0, 0.3])
def test_upper_choices_follow_their_probability(explore):
    """The upper level's sampled choices: numpy's probabilities (`choice_probs`) are torch's
    (`choice_log_probs`) and sum to 1; the floor gives every option at least explore/K."""
    logits = np.array([4.0, -3.0, 0.5, -20.0])
    p = choice_probs(logits, explore)
    lp = choice_log_probs(torch.as_tensor(logits), 0, explore).numpy()
    np.testing.assert_allclose(np.exp(lp), p, rtol=1e-9)
    assert p.sum() == pytest.approx(1.0) and p.min() >= explore / 4 - 1e-12 and p.argmax() == 0


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
