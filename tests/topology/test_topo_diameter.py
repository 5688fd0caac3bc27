"""The server diameter within bounded work (`arsched.topology.diameter`): exact where it says so,
checked against all-pairs BFS (the router's hop matrix) on the families and on random graphs."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.errors import TopologyError
from arsched.topology import Topology, bcube, dcell, fattree, jellyfish, leafspine, ring, star, torus
from arsched.topology.diameter import Diameter, server_diameter


def all_pairs(t: Topology) -> int | None:
    m = t.router.hop_matrix(t.servers)
    return int(m.max()) if (m >= 0).all() else None


@pytest.mark.parametrize(
    "topo",
    [
        bcube(4, 1),
        bcube(3, 2),
        dcell(4, 1),
        dcell(3, 2),
        fattree(4),
        fattree(8),
        torus((4, 4)),
        torus((5, 7, 3)),
        torus((2, 2, 2)),
        ring(9),
        ring(2),
        star(8),
        leafspine(4, 2, 4),
        jellyfish(16, 4, 3, seed=1),
        jellyfish(200, 8, 5, seed=3),
    ],
    ids=lambda t: t.name,
)
def test_families_exact(topo):
    assert server_diameter(topo) == Diameter(all_pairs(topo), all_pairs(topo))


def _random_topology(rng: np.random.Generator) -> Topology:
    n = int(rng.integers(2, 12))
    servers = int(rng.integers(2, n + 1))
    nodes = [(f"n{i}", "server" if i < servers else "switch") for i in range(n)]
    p, directed = rng.uniform(0.1, 0.6), rng.random() < 0.5
    links = set()
    for a in range(n):
        for b in range(n):
            if a != b and rng.random() < p:
                links |= {(a, b)} if directed else {(a, b), (b, a)}
    return Topology("random", nodes, [(f"n{a}", f"n{b}") for a, b in sorted(links)])


def test_random_graphs_exact_or_a_true_range():
    """Directed and undirected graphs with switches and twin servers; a work of 0 and one or two
    BFS of bounding must still give a range that holds the diameter."""
    rng = np.random.default_rng(20)
    for _ in range(150):
        t = _random_topology(rng)
        truth = all_pairs(t)
        for explore, work in ((64, 10**9), (1, 10**9), (2, 0), (1, 0)):
            if truth is None:
                with pytest.raises(TopologyError, match="is not connected"):
                    server_diameter(t, explore, work)
                continue
            d = server_diameter(t, explore, work)
            assert d.low <= truth <= d.high
            assert d.exact == (d.low == d.high)
            if work:
                assert d == (truth, truth)


def test_a_fat_tree_of_16000_hosts_is_settled_by_four_searches():
    """All-pairs BFS here took 2.3 GB per matrix and minutes; the bounds need four BFS and no
    exhaustive phase."""
    assert server_diameter(fattree(40), explore=4, work=0) == Diameter(6, 6)


def test_beyond_the_work_a_torus_gets_a_range_not_a_guess():
    d = server_diameter(torus((30, 30)), explore=8, work=0)
    assert not d.exact and d.low <= 30 <= d.high
    assert server_diameter(torus((30, 30))) == Diameter(30, 30)  # within the work: exact


def test_jellyfish_servers_on_one_switch_are_searched_once():
    """Twins (the same neighbours) share their eccentricity: 3,000 switches' worth of BFS, not
    12,000 servers' (the exhaustive phase stays within the work at 3,000 switches)."""
    t = jellyfish(300, 12, 8, seed=1)  # 1,200 servers
    cost = t.compiled.num_nodes + t.compiled.num_links
    assert server_diameter(t, explore=2, work=300 * cost) == Diameter(all_pairs(t), all_pairs(t))
