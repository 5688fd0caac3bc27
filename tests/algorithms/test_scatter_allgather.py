"""`scatter-allgather`: Broadcast as a scatter and a direct all-gather, Reduce as its mirror, on
trees two hops deep: valid on any network (directed links too), and near the bound where the
network is one non-blocking switch, where binary trees and chains pay for their depth."""

from __future__ import annotations

import pytest

from arsched.algorithms import build
from arsched.algorithms.scatter_allgather import default_chunks, pieces
from arsched.collective import validate
from arsched.collective.validate import numeric_check
from arsched.sim import simulate_flow
from arsched.topology import parse_spec


@pytest.mark.parametrize(
    "spec", ["star:n=6", "fattree:k=4", "torus:dims=3x3,oneway=1", "hgx:boxes=2,gpus_per_box=2"]
)
@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
def test_valid_from_any_root(spec, collective):
    t = parse_spec(spec)
    for root in (t.servers[0], t.servers[-1]):
        s = build("scatter-allgather", t, None, 16e6, collective, root)
        assert validate(s).ok and numeric_check(s).ok and s.root == root


def test_every_piece_goes_through_its_owner_two_hops_from_the_root():
    t = parse_spec("star:n=5")
    trees, members = pieces(t, tuple(t.servers), 2)
    assert list(members) == [2, 3, 4, 0, 1] and len(trees) == 4
    for q, parent in enumerate(trees, start=1):
        assert parent[0] == -1 and parent[q] == 0 and all(parent[i] == q for i in range(5) if i not in (0, q))


@pytest.mark.parametrize("spec", ["star:n=8", "fattree:k=4"])
def test_near_the_bound_on_one_switch(spec):
    """Without α, p chunks per piece leave at most about two rounds of T/p exposed; with it, the
    default beats the binary trees and the chains, whose depth costs a chunk's time per hop."""
    t = parse_spec(spec)
    n = len(t.servers)
    for p in (2, 8, 32):
        s = build("scatter-allgather", t, None, 256e6, "broadcast", chunks=p * (n - 1))
        assert simulate_flow(s, 0.0).gap <= 1 + 2 / p
    ours = simulate_flow(build("scatter-allgather", t, None, 256e6, "broadcast")).gap
    assert default_chunks(t, tuple(t.servers), 256e6) % (n - 1) == 0
    for other in ("dbtree", "ring"):
        assert ours < simulate_flow(build(other, t, None, 256e6, "broadcast")).gap
