"""dbtree's Broadcast and Reduce: the trees' shape (leaves at even positions, at most two children
per rank over both trees, logarithmic depth), the flow model's closed form on one switch, and
what they are for: on hundreds of ranks a chain pays α at every hop."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.algorithms import build
from arsched.algorithms.dbtree import leaf_parity_tree, rooted_trees
from arsched.algorithms.trees import tree_depths
from arsched.collective import numeric_check, validate
from arsched.errors import ArschedError
from arsched.sim import simulate_flow
from arsched.topology import parse_spec


def _children(parent: np.ndarray) -> np.ndarray:
    return np.bincount(parent[parent >= 0], minlength=len(parent))


@pytest.mark.parametrize("m", range(1, 70))
def test_leaf_parity_tree_keeps_its_leaves_at_even_positions(m):
    parent = leaf_parity_tree(m)
    assert (parent < 0).sum() == 1
    depth = tree_depths(parent)  # raises on a cycle
    assert depth.max() <= int(np.ceil(np.log2(m + 1)))
    kids = _children(parent)
    assert kids.max() <= 2
    assert np.array_equal(np.flatnonzero(kids > 0), np.arange(1, m, 2))  # inner: the odd positions


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 9, 16, 17, 100, 129, 848])
def test_no_rank_has_more_than_two_children_over_both_trees(n):
    """The busiest rank forwards the whole buffer (two children of half the chunks), whatever n;
    the root feeds only the two tops."""
    a, b = rooted_trees(n)
    for parent in (a, b):
        assert parent[0] == -1 and (parent[1:] >= 0).all()
        tree_depths(parent)
    kids = _children(a) + _children(b)
    assert kids[0] <= 2 and kids[1:].max() <= 2


@pytest.mark.parametrize("n", [5, 9, 17, 24])
@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
def test_closed_form_on_one_switch(n, collective):
    """No latency, no α: every hop of a half-chunk at half a link's rate takes T/c, so c chunks
    per tree over d hops end at (c + d − 1)·T/c."""
    t = parse_spec(f"star:n={n},latency=0")
    s = build("dbtree", t, None, 256e6, collective, t.servers[n // 2], chunks=64)
    assert validate(s).ok and numeric_check(s).ok
    d = max(int(tree_depths(p).max()) for p in rooted_trees(n))
    assert simulate_flow(s, 0.0).gap == pytest.approx((32 + d - 1) / 32, rel=1e-9)


@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
def test_beats_the_chain_on_hundreds_of_ranks(collective):
    """A 128-host fat-tree at 16 MB: the chain's 127 hops each cost α, the trees' 8 do not."""
    t = parse_spec("fattree:k=8")
    tree = build("dbtree", t, None, 16e6, collective)
    assert validate(tree).ok
    chain = simulate_flow(build("ring", t, None, 16e6, collective))
    assert simulate_flow(tree).time_s < 0.6 * chain.time_s


def test_chunks_must_be_even():
    with pytest.raises(ArschedError, match="dbtree"):
        build("dbtree", parse_spec("star:n=5"), None, 1e6, "broadcast", chunks=3)
