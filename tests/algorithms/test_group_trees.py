"""group-trees: Broadcast and Reduce through racks of unequal sizes on few uplinks, as in a real
production Clos (generated here from seeds: rack sizes, uplinks and the root drawn at random).
No rank forwards more than the buffer, no rack sends out or takes in more than the buffer, and
there it beats both the chain and the double binary tree."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from arsched.algorithms import build
from arsched.algorithms.group_trees import MAX_CHUNKS, group_trees
from arsched.collective import numeric_check, validate
from arsched.sim import simulate_flow
from arsched.topology import Topology


def unequal_clos(seed: int, racks: int = 12) -> Topology:
    """Racks of 2 to 16 servers under spine switches, each rack on the first spine and on none,
    one or both of two others (100 Gb/s links), so that any two racks share a spine and every
    route is up and down, as a production Clos routes."""
    rng = np.random.default_rng(seed)
    g = nx.Graph()
    g.add_nodes_from((f"p{p}" for p in range(3)), kind="switch")
    for r in range(racks):
        g.add_node(f"a{r}", kind="switch")
        extra = rng.choice([1, 2], int(rng.integers(0, 3)), replace=False)
        g.add_edges_from((f"a{r}", f"p{p}") for p in [0, *extra])
        for h in range(int(rng.integers(2, 17))):
            g.add_node(f"h{r}_{h}", kind="server")
            g.add_edge(f"h{r}_{h}", f"a{r}")
    return Topology.from_networkx(g, name=f"unequal-clos({seed})", bandwidth=12.5e9, latency=1e-6)


@pytest.mark.parametrize("seed", range(40))
def test_no_rank_forwards_more_than_the_buffer(seed):
    """Random group sizes (ones and twos included), any root: two trees spanning every rank, and
    every rank with at most two children over both (each child takes half the chunks)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 12, int(rng.integers(1, 9)))
    n = int(sizes.sum())
    cuts = np.cumsum(sizes)[:-1]
    groups = [g.tolist() for g in np.split(rng.permutation(n), cuts)]
    root = groups[0][int(rng.integers(len(groups[0])))]
    if n < 2:
        return
    a, b = group_trees(groups, root, n)
    for parent in (a, b):
        assert parent[root] == -1 and (np.delete(parent, root) >= 0).all()
        for v in range(n):  # every rank reaches the root: no cycle
            for _ in range(n):
                v = parent[v] if v >= 0 else v
            assert v == -1
    kids = np.bincount(np.concatenate([a[a >= 0], b[b >= 0]]), minlength=n)
    assert kids.max() <= 2


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
def test_unequal_racks_on_few_uplinks(seed, collective):
    t = unequal_clos(seed)
    root = t.servers[int(np.random.default_rng(seed).integers(len(t.servers)))]
    s = build("group-trees", t, None, 256e6, collective, root)
    assert validate(s).ok and numeric_check(s).ok
    r = simulate_flow(s)
    c = t.compiled
    rack = np.full(c.num_nodes, -1)
    rack[c.link_src[c.is_server[c.link_src]]] = c.link_dst[c.is_server[c.link_src]]  # each server's switch
    src, dst = rack[s.src], rack[s.dst]
    cross = src != dst
    for end in (src, dst):  # what leaves a rack, what enters it: the buffer at most
        assert np.bincount(end[cross]).max() * s.chunk_bytes <= s.nbytes * (1 + 1e-9)
    others = [simulate_flow(build(a, t, None, 256e6, collective, root)) for a in ("ring", "dbtree")]
    assert r.time_s < min(o.time_s for o in others)


@pytest.mark.parametrize("seed", [0, 1])
def test_allreduce_over_the_group_trees(seed):
    """Reduce up both trees and broadcast back: every rack sends out and takes in at most twice
    the buffer, and at 16 MB it beats the ring, whose 2·(N − 1) steps each pay α (at 256 MB on
    these hundred ranks the ring is 1.04-1.06× the bound and the trees' fill costs more)."""
    t = unequal_clos(seed)
    s = build("group-trees", t, None, 16e6)
    assert validate(s).ok and numeric_check(s).ok
    c = t.compiled
    rack = np.full(c.num_nodes, -1)
    rack[c.link_src[c.is_server[c.link_src]]] = c.link_dst[c.is_server[c.link_src]]
    src, dst = rack[s.src], rack[s.dst]
    for end in (src, dst):
        assert np.bincount(end[src != dst]).max() * s.chunk_bytes <= 2 * s.nbytes * (1 + 1e-9)
    assert simulate_flow(s).time_s < simulate_flow(build("ring", t, None, 16e6)).time_s


def test_allreduce_pipelines_more_chunks_than_the_old_cap_at_256_mb():
    """At 256 MB the default chunk count follows `pipeline_chunks` past 256 (the cap when these
    simulations took minutes), stays within `MAX_CHUNKS`, validates, and is faster than 256."""
    t = unequal_clos(2)
    s = build("group-trees", t, None, 256e6)
    assert 256 < s.num_chunks <= MAX_CHUNKS
    assert validate(s).ok and numeric_check(s).ok
    assert simulate_flow(s).time_s < simulate_flow(build("group-trees", t, None, 256e6, chunks=256)).time_s
