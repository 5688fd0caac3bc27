"""The iteration-time model against hand computation, reserved capacity, shared = flow model."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from arsched.algorithms.ring import add_ring
from arsched.cluster import Cluster
from arsched.cluster.network import iteration_time, ring_bandwidth, ring_links, throughput
from arsched.collective.schedule import ScheduleBuilder
from arsched.sim import simulate_flow
from arsched.topology import leafspine, star

B = 12.5e9  # 100 Gb/s


def test_iteration_time_by_hand():
    # tau + 2(w-1)/w * m/b + 2(w-1) alpha, written out for w = 4, m = 100 MB, b = 10 GB/s
    t = iteration_time(0.1, 1e8, 4, 1e10, 5e-6)
    assert t == pytest.approx(0.1 + 2 * 3 / 4 * 1e8 / 1e10 + 2 * 3 * 5e-6)
    assert iteration_time(0.1, 1e8, 1, 0.0, 5e-6) == pytest.approx(0.1)  # one worker only computes
    assert np.isinf(iteration_time(0.1, 1e8, 2, 0.0, 5e-6))  # no bandwidth, no progress
    assert throughput(0.1, 1e8, 4, 1e10, 0.0) == pytest.approx(4 / (0.1 + 0.015))


def test_ring_inside_a_server_runs_at_intra_bandwidth():
    c = Cluster(star(4), gpus_per_server=8, intra_bandwidth=1e11)
    for mode in ("reserved", "shared", "ideal"):
        assert ring_bandwidth(c, [((2, 8),)], mode)[0] == 1e11
        # spanning two servers: the NIC (100 Gb/s) is the bottleneck, not NVLink
        assert ring_bandwidth(c, [((0, 4), (1, 4))], mode)[0] == pytest.approx(B)


def _two_crossing_rings():
    # leaf0 holds s0, s1; leaf1 holds s2, s3; one spine: both rings cross leaf0 -> spine0
    topo = leafspine(leaves=2, spines=1, servers_per_leaf=2, latency=0.0)
    c = Cluster(topo, gpus_per_server=1)
    idx = {s: i for i, s in enumerate(c.server_ids)}
    rings = [((idx["s0"], 1), (idx["s2"], 1)), ((idx["s1"], 1), (idx["s3"], 1))]
    return topo, c, rings


def test_shared_mode_is_maxmin_by_hand_and_equals_the_flow_model():
    topo, c, rings = _two_crossing_rings()
    b = ring_bandwidth(c, rings, "shared")
    assert b == pytest.approx([B / 2, B / 2])  # two flows on each leaf-spine link
    assert ring_bandwidth(c, rings, "ideal") == pytest.approx([B, B])
    # the flow model runs both rings at once (each a 2-rank ring of m bytes, chunks m/2)
    m, alpha = 1e8, 5e-6
    sb = ScheduleBuilder(topo, ["s0", "s2", "s1", "s3"], 2 * m, 4)
    add_ring(sb, np.array([0, 1]), 0, 1)
    add_ring(sb, np.array([2, 3]), 2, 1)
    flow = simulate_flow(sb.build(), alpha=alpha)
    assert flow.time_s == pytest.approx(iteration_time(0.0, m, 2, b[0], alpha), rel=1e-9)


def test_reserved_mode_first_come_first_reserved():
    _, c, rings = _two_crossing_rings()
    b = ring_bandwidth(c, rings, "reserved")
    # the first ring reserves the whole leaf-spine link, the second finds it full
    assert b == pytest.approx([B, 0.0])


@given(st.integers(0, 10_000), st.integers(1, 12))
def test_reserved_never_exceeds_capacity(seed, jobs):
    rng = np.random.default_rng(seed)
    c = Cluster(leafspine(leaves=3, spines=2, servers_per_leaf=3), gpus_per_server=4)
    free = np.full(c.num_servers, 4)
    rings = []
    for _ in range(jobs):
        slots = np.repeat(np.arange(c.num_servers), free)
        if len(slots) == 0:
            break
        pick = rng.choice(slots, size=min(int(rng.integers(1, 9)), len(slots)), replace=False)
        s, g = np.unique(pick, return_counts=True)
        order = rng.permutation(len(s))  # any ring order
        rings.append(tuple((int(s[i]), int(g[i])) for i in order))
        free[s] -= g
    b = ring_bandwidth(c, rings, "reserved")
    load = np.zeros(c.num_links)
    for ring, bj in zip(rings, b, strict=True):
        links, mult = ring_links(c, ring)
        load[links] += bj * mult
    assert (load <= c.capacity * (1 + 1e-9)).all()
    assert (b >= 0).all()


@given(st.integers(0, 10_000), st.integers(1, 12))
def test_all_rings_at_once_as_one_by_one(seed, jobs):
    # rings_links (one vectorised pass over a decision) against ring_links (one ring), and the
    # compiled reservation against reserving ring by ring in Python
    from arsched.cluster.network import intra_cap, rings_links

    rng = np.random.default_rng(seed)
    c = Cluster(leafspine(leaves=3, spines=2, servers_per_leaf=3), gpus_per_server=4)
    rings = []
    for _ in range(jobs):
        servers = rng.choice(c.num_servers, size=int(rng.integers(1, 5)), replace=False)  # any ring order
        rings.append(tuple((int(s), int(rng.integers(1, 5))) for s in servers))
    ptr, links, mult = rings_links(c, rings)
    residual = c.capacity.astype(float).copy()
    want = []
    for j, ring in enumerate(rings):
        one, hops = ring_links(c, ring)
        assert np.array_equal(links[ptr[j] : ptr[j + 1]], one)
        assert np.array_equal(mult[ptr[j] : ptr[j + 1]], hops)
        r = min(float((residual[one] / hops).min()) if len(one) else np.inf, intra_cap(c, ring))
        residual[one] = np.maximum(residual[one] - r * hops, 0.0)
        want.append(r)
    assert np.array_equal(ring_bandwidth(c, rings, "reserved"), want)
