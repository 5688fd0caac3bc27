"""multi-ring (arsched.algorithms.multiring): rings weighted by the LP's rates on asymmetric and
one-way networks, staircase cycles on tori, searched cycles on directed networks, and equal
shares kept where weights gain nothing. The ring orders alone: test_ring_orders.py."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from test_ring_orders import plain_torus, random_digraph

from arsched.algorithms import build
from arsched.algorithms.ring import add_ring
from arsched.collective import validate
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.collective.serialize import dumps
from arsched.errors import ArschedError
from arsched.sim import simulate_flow
from arsched.topology import parse_spec
from arsched.topology.core import Topology

SIZE = 256e6
RNG = np.random.default_rng(8)
# asymmetric rings: (ranks, forward Gb/s, reverse Gb/s), the reverse at most half the forward
ASYMMETRIC = [
    (int(n), int(fwd), int(fwd // ratio))
    for n, fwd, ratio in zip(
        RNG.choice(np.arange(4, 13), 4, replace=False),
        RNG.choice([200, 300, 400], 4),
        RNG.choice([2, 3, 4, 5], 4, replace=False),
        strict=True,
    )
]
NEAR = 1.03  # gap allowed at 256 MB: α per step and the path latency, no bandwidth lost


def valid(s: Schedule) -> Schedule:
    report = validate(s)
    assert report.ok, report.message
    return s


def rings(s: Schedule) -> list[tuple[int, float]]:
    """(chunks, bandwidth of its first hop) of every ring of a weighted multi-ring schedule."""
    c = s.topology.compiled
    out, first = [], 0
    for count in s.meta["params"]["shares"]:
        at = int(np.flatnonzero(s.chunk == first)[0])
        src, dst = c.node_ids[s.src[at]], c.node_ids[s.dst[at]]
        out.append((count, s.topology.link(src, dst).bandwidth))
        first += count
    return out


def equal_opposite(topo: Topology) -> Schedule:
    """Two opposite rings over the servers in order, with equal shares."""
    n = len(topo.servers)
    b = ScheduleBuilder(topo, None, SIZE, 2 * n, "equal")
    add_ring(b, np.arange(n), 0, 1)
    add_ring(b, np.array([0, *range(n - 1, 0, -1)]), n, 1)
    return valid(b.build())


@pytest.mark.parametrize(("n", "fwd", "rev"), ASYMMETRIC, ids=lambda v: str(v))
def test_opposite_rings_take_shares_in_proportion_to_their_directions(n, fwd, rev):
    topo = parse_spec(f"ring:n={n},bandwidth={fwd}Gbps,reverse={rev}Gbps")
    s = valid(build("multi-ring", topo, None, SIZE))
    (a, bw_a), (b, bw_b) = sorted(rings(s), key=lambda r: -r[1])
    fast, slow = topo.link("s0", "s1").bandwidth, topo.link("s1", "s0").bandwidth
    assert (bw_a, bw_b) == (fast, slow)
    units = (a + b) // n
    assert abs(a / (a + b) - fast / (fast + slow)) <= 1 / units  # the rounding's resolution
    time_s = simulate_flow(s).time_s
    assert simulate_flow(s).gap <= NEAR
    assert time_s < 0.85 * simulate_flow(equal_opposite(topo)).time_s  # equal shares wait for the slow ring
    assert time_s < 0.85 * simulate_flow(build("ring", topo, None, SIZE)).time_s


@pytest.mark.parametrize(
    "spec", ["torus:dims=4x4,reverse=25Gbps", "torus:dims=3x3,bandwidth=200Gbps,reverse=50Gbps"]
)
def test_an_asymmetric_torus_runs_plus_cycles_and_their_reverses_by_bandwidth(spec):
    topo = parse_spec(spec)
    s = valid(build("multi-ring", topo, None, SIZE))
    fast, slow = topo.link("s0", "s1").bandwidth, topo.link("s1", "s0").bandwidth
    by_bw: dict[float, list[int]] = {}
    for count, bw in rings(s):
        by_bw.setdefault(bw, []).append(count)
    assert set(by_bw) == {fast, slow} and len(by_bw[fast]) == len(by_bw[slow]) == 2
    assert by_bw[fast][0] * slow == by_bw[slow][0] * fast  # the shares stand as the bandwidths
    assert simulate_flow(s).gap <= NEAR
    assert simulate_flow(s).time_s < 0.5 * simulate_flow(build("ring", topo, None, SIZE)).time_s


@pytest.mark.parametrize(
    "spec", ["torus:dims=3x3,oneway=1", "torus:dims=4x6,oneway=1", "torus:dims=3x3x3,oneway=1"]
)
def test_a_one_way_torus_runs_disjoint_hamiltonian_cycles(spec):
    topo = parse_spec(spec)
    s = valid(build("multi-ring", topo, None, SIZE))
    assert {len(s.paths[p]) for p in np.unique(s.path_id)} == {2}  # every hop one link, moving +
    shares = s.meta["params"]["shares"]
    assert len(set(shares)) == 1 and len(shares) >= 2  # equal links, equal shares
    assert simulate_flow(s).gap <= NEAR
    assert simulate_flow(s).time_s < 0.6 * simulate_flow(build("ring", topo, None, SIZE)).time_s


def test_staircase_cycles_speed_up_a_two_way_torus():
    topo = parse_spec("torus:dims=4x4")
    s = valid(build("multi-ring", topo, None, SIZE))
    assert s.meta["params"]["shares"] == [16] * 4  # two + cycles and their reverses
    assert simulate_flow(s).gap <= NEAR


@pytest.mark.parametrize("spec", ["ring:n=6", "bcube:n=3,k=1", "fattree:k=4", "dcell:n=2,k=1"])
def test_equal_shares_are_kept_where_weights_gain_nothing(spec):
    s = valid(build("multi-ring", parse_spec(spec), None, SIZE))
    assert "shares" not in s.meta["params"]


def test_the_same_inputs_give_the_same_bytes():
    specs = ["ring:n=8,bandwidth=400Gbps,reverse=100Gbps", "torus:dims=3x3x3,oneway=1"]
    here = [dumps(build("multi-ring", parse_spec(spec), None, 1e6)) for spec in specs]
    assert here == [dumps(build("multi-ring", parse_spec(spec), None, 1e6)) for spec in specs]
    code = (  # another process, another string hash seed: no set or dict order leaks in
        "import hashlib, sys; from arsched.algorithms import build; "
        "from arsched.collective.serialize import dumps; from arsched.topology import parse_spec; "
        "print(*(hashlib.sha256(dumps(build('multi-ring', parse_spec(s), None, 1e6)).encode())"
        ".hexdigest() for s in sys.argv[1:]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code, *specs], env=env, capture_output=True, text=True)
    assert out.stdout.split() == [hashlib.sha256(x.encode()).hexdigest() for x in here], out.stderr


@pytest.mark.parametrize("seed", [1, 2])
def test_a_random_directed_graph_is_quick_and_valid(seed):
    topo = random_digraph(12, 0.3, seed)
    start = time.perf_counter()
    s = build("multi-ring", topo, None, SIZE)
    assert time.perf_counter() - start < 10  # about 0.3 s; a hang or a search without bound fails
    valid(s)
    assert simulate_flow(s).time_s <= simulate_flow(build("ring", topo, None, SIZE)).time_s * (1 + 1e-9)


def test_an_unnamed_one_way_torus_is_found_by_the_search():
    s = valid(build("multi-ring", plain_torus(4), None, SIZE))
    assert simulate_flow(s).gap <= NEAR


@pytest.mark.parametrize("spec", ["ring:n=6,bandwidth=400Gbps,reverse=100Gbps", "torus:dims=3x3,oneway=1"])
def test_chunks_are_respected(spec):
    topo = parse_spec(spec)
    n = len(topo.servers)
    for chunks in (n, 2 * n, 7 * n, 40 * n):
        s = valid(build("multi-ring", topo, None, SIZE, chunks=chunks))
        assert s.num_chunks == chunks == s.meta["params"]["chunks"]
        assert sum(s.meta["params"].get("shares", [chunks])) == chunks
    with pytest.raises(ArschedError, match="multiple of"):
        build("multi-ring", topo, None, SIZE, chunks=n + 1)


def test_rank_subsets_in_any_order_on_directed_networks():
    rng = np.random.default_rng(5)
    for spec in [
        "ring:n=8,bandwidth=400Gbps,reverse=100Gbps",
        "torus:dims=3x3,oneway=1",
        "torus:dims=4x4,reverse=25Gbps",
    ]:
        topo = parse_spec(spec)
        for size in (2, 3, len(topo.servers) - 1):
            ranks = [topo.servers[i] for i in rng.permutation(len(topo.servers))[:size]]
            s = valid(build("multi-ring", topo, ranks, 1e6))
            assert s.ranks == tuple(ranks)
