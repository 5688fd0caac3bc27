"""The ReduceScatter and AllGather halves of AllReduce schedules (`halves`, `halved`) and tree
packing's balanced-steps halves: each half proves its collective in both validators, the two
partition the AllReduce's transfers (so each moves half its bytes, on the same links), and an
AllReduce without that structure is refused in one sentence."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.algorithms import NotApplicable, build
from arsched.algorithms.halved import HALVED
from arsched.algorithms.halves import split
from arsched.collective import numeric_check, validate
from arsched.collective.schedule import Schedule, Transfer
from arsched.errors import ArschedError
from arsched.sim import simulate_flow
from arsched.topology import parse_spec

FAMILY_NETWORKS = {
    "multi-ring": ["torus:dims=3x3", "ring:n=6,bandwidth=400Gbps,reverse=100Gbps", "torus:dims=3x3,oneway=1"],
    "bcube-native": ["bcube:n=3,k=1"],
    "torus-native": ["torus:dims=3x4", "torus:dims=3x3,bandwidth=100Gbps,reverse=50Gbps"],
}
CASES = [(name, spec) for name, specs in FAMILY_NETWORKS.items() for spec in specs]


def valid(s, collective):
    assert s.collective == collective and s.root is None
    report = validate(s)
    assert report.ok, report.message
    assert numeric_check(s).ok
    assert simulate_flow(s).gap >= 1 - 1e-9


def test_every_halved_family_is_tested():
    assert set(FAMILY_NETWORKS) == set(HALVED)


@pytest.mark.parametrize(("name", "spec"), CASES)
def test_halves_are_the_collectives_and_split_the_allreduce(name, spec):
    t = parse_spec(spec)
    whole = build(name, t, None, 64e6)
    rs, ag = split(whole)
    valid(rs, "reduce_scatter")
    valid(ag, "allgather")
    assert len(rs) + len(ag) == len(whole)
    both = simulate_flow(rs).link_bytes + simulate_flow(ag).link_bytes
    np.testing.assert_allclose(both, simulate_flow(whole).link_bytes)
    for half, collective in ((rs, "reduce_scatter"), (ag, "allgather")):
        built = build(name, t, None, 64e6, collective)
        assert (built.step == half.step).all() and (built.chunk == half.chunk).all()
        assert built.meta["half_of"] == "allreduce"


@pytest.mark.parametrize("collective", ["reduce_scatter", "allgather"])
def test_the_family_halves_meet_their_bound_where_the_allreduce_does(collective):
    # BCube's dimension-ordered AllReduce attains BCube's bound; so does each half its own
    s = build("bcube-native", parse_spec("bcube:n=4,k=1"), None, 256e6, collective)
    assert simulate_flow(s).gap < 1.01


def _allreduce(transfers, n, chunks):
    t = parse_spec(f"star:n={n}")
    rows = [Transfer(step, chunk, t.servers[a], t.servers[b], op) for step, chunk, a, b, op in transfers]
    return Schedule.from_transfers(t, t.servers, 1e6, chunks, rows)


COPY_FIRST = [(0, 0, 0, 1, "copy"), (1, 0, 1, 0, "reduce")]
NO_COPY = [(0, 0, 0, 1, "reduce"), (0, 0, 1, 0, "reduce")]
# chunk 0: ranks 1 and 2 both end its reduces with the sum; 2 copies it on without receiving a copy
TWO_HOLDERS = [
    *[(0, 0, 0, 1, "reduce"), (0, 0, 0, 2, "reduce"), (1, 0, 2, 1, "reduce")],
    *[(2, 0, 1, 0, "copy"), (3, 0, 2, 0, "copy")],
    *[(0, 1, 0, 2, "reduce"), (1, 1, 1, 2, "reduce"), (2, 1, 2, 0, "copy"), (2, 1, 2, 1, "copy")],
    *[(0, 2, 1, 0, "reduce"), (1, 2, 2, 0, "reduce"), (2, 2, 0, 1, "copy"), (2, 2, 0, 2, "copy")],
]


@pytest.mark.parametrize(
    ("rows", "n", "words"),
    [
        (COPY_FIRST, 2, "copies a chunk before its last reduce"),
        (NO_COPY, 2, "does not copy every chunk out of one rank"),
        (TWO_HOLDERS, 3, "does not copy every chunk from its owner to every rank"),
    ],
)
def test_an_allreduce_without_halves_is_refused_in_one_sentence(rows, n, words):
    with pytest.raises(NotApplicable, match=words):
        split(_allreduce(rows, n, 1 + max(r[1] for r in rows)))


def test_owners_of_unequal_shares_are_refused():
    # a parameter server owns every chunk
    with pytest.raises(NotApplicable, match="unequal numbers of chunks"):
        split(build("ps", parse_spec("star:n=4"), None, 1e6))


@pytest.mark.parametrize("collective", ["reduce_scatter", "allgather"])
def test_tree_packing_weighs_the_halves_of_its_balanced_steps(collective):
    t = parse_spec("dcell:n=3,k=1")
    forced = build("tree-packing", t, None, 16e6, collective, levels=True)
    valid(forced, collective)
    assert forced.meta["params"]["levels"] and forced.num_chunks % 12 == 0
    # where the pipeline is far from the bound (DCell at 256 MB), the faster balanced half is kept
    chosen = build("tree-packing", t, None, 256e6, collective)
    assert chosen.meta["params"].get("levels") is True
    pipelined = build("tree-packing", t, None, 256e6, collective, levels=False)
    assert simulate_flow(chosen).gap < simulate_flow(pipelined).gap
    with pytest.raises(ArschedError, match="levels replace"):
        build("tree-packing", t, None, 16e6, collective, levels=True, stages=4)
