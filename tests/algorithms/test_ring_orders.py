"""Ring orders (arsched.algorithms.ring_orders): snake rings, the staircase cycles of tori and
the bounded cycle search give Hamiltonian cycles over the links they promise."""

from __future__ import annotations

import time

import networkx as nx
import numpy as np
import pytest

from arsched.algorithms.ring_orders import searched_orders, snake, snake_orders, staircase_orders
from arsched.topology import parse_spec
from arsched.topology.core import Topology


def random_digraph(n: int, p: float, seed: int) -> Topology:
    """A strongly connected random directed graph of servers, bandwidths 100, 200 or 400 Gb/s."""
    rng = np.random.default_rng(seed)
    while True:
        g = nx.gnp_random_graph(n, p, seed=int(rng.integers(2**31)), directed=True)
        if nx.is_strongly_connected(g):
            break
    nx.set_node_attributes(g, "server", "kind")
    for u, v in g.edges:
        g.edges[u, v]["bandwidth"] = float(rng.choice([12.5e9, 25e9, 50e9]))
    return Topology.from_networkx(g, name=f"random{n}")


def plain_torus(a: int) -> Topology:
    """A one-way a × a torus of servers under a name arsched does not know, 100 Gb/s links."""
    g = nx.DiGraph(name="plain")
    for i in range(a):
        for j in range(a):
            g.add_node(f"s{i}_{j}", kind="server")
            g.add_edge(f"s{i}_{j}", f"s{(i + 1) % a}_{j}", bandwidth=12.5e9)
            g.add_edge(f"s{i}_{j}", f"s{i}_{(j + 1) % a}", bandwidth=12.5e9)
    return Topology.from_networkx(g)


def arcs(order: list[int]) -> set[tuple[int, int]]:
    """The hops u → v of the ring `order`, the last back to the first."""
    return set(zip(order, order[1:] + order[:1], strict=True))


def on_links(topo: Topology, orders: list[list[int]]) -> bool:
    """Whether every order visits all servers once and every hop of it is one link."""
    n = len(topo.servers)
    hops = topo.router.hop_matrix(topo.servers)
    return all(sorted(o) == list(range(n)) and all(hops[u, v] == 1 for u, v in arcs(o)) for o in orders)


@pytest.mark.parametrize(("radices", "fastest"), [([3, 4, 2], 1), ([4, 4], 0), ([2, 3, 5], 2)])
def test_snake_steps_one_digit_by_one_the_fastest_first(radices, fastest):
    order = snake(radices, fastest)
    assert sorted(order) == list(range(int(np.prod(radices))))
    digits = (np.array(order)[:, None] // np.cumprod([1, *radices[:-1]])) % radices
    steps = np.abs(np.diff(digits, axis=0))
    assert (steps.sum(axis=1) == 1).all()  # a reflected Gray order: one digit, by one
    assert (steps[: radices[fastest] - 1, fastest] == 1).all()


@pytest.mark.parametrize(
    ("spec", "count"),
    [("bcube:n=3,k=1", 2), ("bcube:n=2,k=2", 3), ("torus:dims=4x4", 4), ("torus:dims=3x4x2", 6)],
)
def test_snake_orders_are_one_ring_per_level_or_direction(spec, count):
    topo = parse_spec(spec)
    orders = snake_orders(topo, topo.servers)
    assert len(orders) == count
    assert all(sorted(o) == list(range(len(topo.servers))) for o in orders)


def test_snake_orders_only_for_all_servers_of_networks_arsched_names():
    asymmetric = parse_spec("torus:dims=4x4,reverse=25Gbps")
    assert len(snake_orders(asymmetric, asymmetric.servers)) == 4
    assert snake_orders(asymmetric, asymmetric.servers, asymmetric=False) is None
    for spec in ["torus:dims=3x3,oneway=1", "ring:n=6", "fattree:k=4"]:
        topo = parse_spec(spec)
        assert snake_orders(topo, topo.servers) is None
    topo = parse_spec("torus:dims=4x4")
    assert snake_orders(topo, topo.servers[1:]) is None


@pytest.mark.parametrize(
    "spec",
    ["torus:dims=3x3,oneway=1", "torus:dims=4x6,oneway=1", "torus:dims=2x6,oneway=1", "torus:dims=4x4"],
)
def test_staircase_cycles_split_the_links_of_a_two_dimensional_torus(spec):
    topo = parse_spec(spec)
    orders = staircase_orders(topo, topo.servers)
    assert on_links(topo, orders)
    used = [arcs(o) for o in orders]
    assert len(set().union(*used)) == sum(map(len, used)) == topo.compiled.num_links  # each link once


@pytest.mark.parametrize("spec", ["torus:dims=3x3x3,oneway=1", "torus:dims=4x4x2"])
def test_staircase_cycles_of_more_dimensions_are_disjoint_pairs_on_links(spec):
    topo = parse_spec(spec)
    orders = staircase_orders(topo, topo.servers)
    assert on_links(topo, orders)
    assert arcs(orders[0]).isdisjoint(arcs(orders[1]))


@pytest.mark.parametrize("spec", ["torus:dims=3x4,oneway=1", "torus:dims=5", "bcube:n=3,k=1"])
def test_no_staircase_cycles_on_coprime_sides_one_dimension_or_other_networks(spec):
    topo = parse_spec(spec)
    assert staircase_orders(topo, topo.servers) is None


def test_the_search_finds_disjoint_cycles_on_links_of_an_unnamed_torus():
    topo = plain_torus(4)
    orders = searched_orders(topo, topo.servers)
    assert len(orders) >= 2 and on_links(topo, orders)
    assert arcs(orders[0]).isdisjoint(arcs(orders[1]))


def test_the_cycle_search_gives_up_within_its_budget():
    topo = random_digraph(300, 0.02, 3)  # sparse: the search runs out of moves
    start = time.perf_counter()
    orders = searched_orders(topo, topo.servers)
    assert time.perf_counter() - start < 5  # about 0.3 s: the budget of moves, then it gives up
    for order in orders:
        assert sorted(order) == list(range(300))
