"""`hierarchical`'s AllGather and ReduceScatter (`rail_first`): valid in both validators on box,
leaf and fat-tree networks, the ReduceScatter the AllGather's mirror image in time, pieces as
given or the fastest candidate (the same on every build), bad pieces refused in one sentence,
and on two HGX boxes ahead of the halves of the hierarchical AllReduce, whose box phase waits
for the rails."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.algorithms import build, rail_first
from arsched.algorithms.halves import split
from arsched.collective import numeric_check, validate
from arsched.errors import ArschedError
from arsched.sim import simulate_flow
from arsched.topology import parse_spec

SPECS = ["hgx:boxes=2", "leafspine:leaves=3,spines=2,servers_per_leaf=3", "fattree:k=4"]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("collective", ["allgather", "reduce_scatter"])
def test_valid_in_both_validators(spec, collective):
    s = build("hierarchical", parse_spec(spec), None, 16e6, collective)
    assert s.collective == collective
    assert validate(s).ok and numeric_check(s).ok
    assert simulate_flow(s).gap >= 1 - 1e-9


def test_reduce_scatter_is_the_allgather_reversed_in_time():
    t = parse_spec("hgx:boxes=2")
    ag = build("hierarchical", t, None, 16e6, "allgather", pieces=[2, 1])
    rs = build("hierarchical", t, None, 16e6, "reduce_scatter", pieces=[2, 1])
    forward = {
        (int(s), int(c), int(a), int(b)) for s, c, a, b in zip(ag.step, ag.chunk, ag.src, ag.dst, strict=True)
    }
    mirror = {
        (2 - int(s), int(c), int(b), int(a))
        for s, c, a, b in zip(rs.step, rs.chunk, rs.src, rs.dst, strict=True)
    }
    assert forward == mirror and len(forward) == len(ag) == len(rs)


def test_pieces_given_as_a_count_or_sizes():
    t = parse_spec("hgx:boxes=2")
    s = build("hierarchical", t, None, 16e6, "allgather", pieces=3)
    assert s.meta["params"]["pieces"] == [1, 1, 1] and s.num_chunks == 16 * 3 and s.num_steps == 4
    s = build("hierarchical", t, None, 16e6, "allgather", pieces=[3, 1])
    assert s.num_chunks == 16 * 4 and s.num_steps == 3


@pytest.mark.parametrize("pieces", [0, [], [2, 0], [1.5], True, "3", [300]])
def test_bad_pieces_are_one_sentence(pieces):
    with pytest.raises(ArschedError, match="pieces must be a count or a list of positive chunk counts"):
        build("hierarchical", parse_spec("hgx:boxes=2"), None, 16e6, "allgather", pieces=pieces)


def test_the_choice_is_the_same_on_every_build():
    t = parse_spec("hgx:boxes=2")
    a, b = (build("hierarchical", t, None, 256e6, "allgather") for _ in range(2))
    assert a.meta == b.meta and np.array_equal(a.step, b.step) and np.array_equal(a.dst, b.dst)


@pytest.mark.parametrize("collective", ["allgather", "reduce_scatter"])
def test_boxes_start_before_the_rails_finish(collective):
    # the halves of the hierarchical AllReduce start the box phase only after the rails
    t = parse_spec("hgx:boxes=2")
    ours = simulate_flow(build("hierarchical", t, None, 256e6, collective)).gap
    halves = dict(
        zip(("reduce_scatter", "allgather"), split(build("hierarchical", t, None, 256e6)), strict=True)
    )
    assert ours < 1.05 < simulate_flow(halves[collective]).gap


def test_the_search_keeps_the_fastest_arithmetic_pieces_it_passed():
    """More pieces shrink the fill and add α per step: the search times arithmetic sizes
    (c, ..., 1) for c = 1, 2, 3, ... while they get faster, so the default is no slower than
    any of them up to one past its own count."""
    t = parse_spec("hgx:boxes=4,gen=h100")
    chosen = build("hierarchical", t, None, 256e6, "allgather")
    assert validate(chosen).ok
    count = len(chosen.meta["params"]["pieces"])
    assert count > 2
    best = simulate_flow(chosen).time_s
    timed = [c for c in rail_first.COUNTS if c <= count] + [c for c in rail_first.COUNTS if c > count][:1]
    for c in timed:
        pieces = list(range(c, 0, -1))
        assert best <= simulate_flow(build("hierarchical", t, None, 256e6, "allgather", pieces=pieces)).time_s


def test_the_transfers_timed_grow_with_the_ranks(monkeypatch):
    t = parse_spec("hgx:boxes=2")
    monkeypatch.setattr(rail_first, "SELECT_TRANSFERS", 1)
    monkeypatch.setattr(rail_first, "SELECT_PER_RANK", 0)
    assert build("hierarchical", t, None, 256e6, "allgather").meta["params"]["pieces"] == [1]
    monkeypatch.setattr(rail_first, "SELECT_PER_RANK", 10**6)
    assert len(build("hierarchical", t, None, 256e6, "allgather").meta["params"]["pieces"]) > 1
