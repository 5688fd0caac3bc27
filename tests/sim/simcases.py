"""Hypothesis strategies for the simulator tests: random valid AllReduce schedules (ring,
parameter server, recursive doubling from tests/schedules.py) with random rank subsets and
orders, sizes, chunk counts and routes on small topologies of every family; and schedules that
use every directed link at most once per step on uniform links."""

from __future__ import annotations

from hypothesis import strategies as st

from arsched.topology import ring, star, torus
from schedules import bfs_route, ps_allreduce, recursive_doubling_allreduce, ring_allreduce, topo

SPECS = (
    "ring:n=6",
    "star:n=6",
    "bcube:n=3,k=1,bandwidth=100Gbps/40Gbps,latency=1us/3us",
    "bcube:n=2,k=2",
    "torus:dims=3x3",
    "torus:dims=2x2x2,latency=0s",
    "fattree:k=4",
    "fattree:k=4,bandwidth=100Gbps/100Gbps/400Gbps",
    "jellyfish:switches=8,ports=4,net_ports=3,seed=2",
    "dcell:n=2,k=1",
)


@st.composite
def allreduce_schedules(draw, specs=SPECS, max_ranks: int = 8):
    t = topo(draw(st.sampled_from(specs)))
    alg = draw(st.sampled_from(["ring", "ps", "rd"]))
    if alg == "rd":
        n = draw(st.sampled_from([k for k in (2, 4, 8) if k <= min(len(t.servers), max_ranks)]))
    else:
        n = draw(st.integers(2, min(len(t.servers), max_ranks)))
    ranks = tuple(draw(st.permutations(t.servers))[:n])
    nbytes = draw(st.sampled_from([1e3, 4096.0, 1e5, 3.3e6, 3.3e7, 1e8]))
    route = bfs_route(t) if draw(st.booleans()) else None
    if alg == "ring":
        return ring_allreduce(t, ranks, nbytes, draw(st.integers(1, 2)), route=route)
    if alg == "ps":
        ps = draw(st.sampled_from(ranks))
        return ps_allreduce(t, ranks, nbytes, draw(st.integers(1, 3)), ps=ps, route=route)
    return recursive_doubling_allreduce(t, ranks, nbytes, draw(st.integers(1, 2)), route=route)


@st.composite
def disjoint_schedules(draw):
    """Schedules whose every step uses each directed link at most once, on uniform links: rings
    in (rotated, possibly reversed) order on rings, one-chunk rings and recursive doubling on
    stars, recursive doubling on the 2x2x2 torus (a cube: partners are neighbours) and on
    BCube(2,2), a ring in order on BCube(4,1), and a parameter server for two ranks."""
    bw = draw(st.sampled_from([1e9, 12.5e9]))
    lat = draw(st.sampled_from([0.0, 1e-6, 3e-6]))
    nbytes = draw(st.sampled_from([1e3, 1e4, 2e6, 5e7]))
    kind = draw(
        st.sampled_from(["ring-ring", "ring-star", "rd-star", "rd-cube", "rd-bcube", "ring-bcube", "ps2"])
    )
    if kind == "ring-ring":
        n = draw(st.integers(2, 9))
        order = list(ring(n).servers)
        k = draw(st.integers(0, n - 1))
        order = order[k:] + order[:k]
        if draw(st.booleans()):
            order.reverse()
        return ring_allreduce(ring(n, bw, lat), order, nbytes)
    if kind in ("ring-star", "rd-star"):
        t = star(draw(st.integers(4, 8)), bw, lat)
        order = draw(st.permutations(t.servers))
        if kind == "ring-star":
            return ring_allreduce(t, tuple(order[: draw(st.integers(2, len(order)))]), nbytes)
        return recursive_doubling_allreduce(t, tuple(order[: draw(st.sampled_from([2, 4]))]), nbytes)
    if kind == "rd-cube":
        t = torus((2, 2, 2), bw, lat)
        return recursive_doubling_allreduce(t, t.servers, nbytes)
    spec, build = {
        "rd-bcube": ("bcube:n=2,k=2", recursive_doubling_allreduce),
        "ring-bcube": ("bcube:n=4,k=1", ring_allreduce),
        "ps2": ("star:n=2", ps_allreduce),
    }[kind]
    return build(topo(spec), topo(spec).servers, nbytes)
