"""Halving-doubling in pipelined segments (`rhd`'s `stages`): every depth proves its collective
on networks of several families, sizes and link kinds (odd rank counts that fold, directed and
heterogeneous links), moves the same bytes as one segment, and the default depth is never
slower than one segment and much faster where the levels cross different links (GPU boxes)."""

from __future__ import annotations

import functools

import pytest

from arsched.algorithms import build
from arsched.algorithms.fastest import fastest
from arsched.collective import numeric_check, validate
from arsched.errors import ArschedError
from arsched.limits import LimitError
from arsched.sim import simulate_flow
from arsched.topology import parse_spec

COLLECTIVES = ["allreduce", "reduce_scatter", "allgather"]
SPECS = [
    "star:n=6",
    "torus:dims=3x3",
    "ring:n=6,bandwidth=400Gbps,reverse=100Gbps",
    "jellyfish:switches=8,ports=5,net_ports=3,seed=7",
    "hgx:boxes=2",
]


def proven(s, collective):
    assert s.collective == collective
    report = validate(s)
    assert report.ok, report.message
    assert numeric_check(s).ok
    return s


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("stages", [2, 3])
def test_every_depth_proves_its_collective_with_the_same_bytes(spec, collective, stages):
    t = parse_spec(spec)
    one = proven(build("rhd", t, None, 1e7, collective, stages=1), collective)
    s = proven(build("rhd", t, None, 1e7, collective, stages=stages), collective)
    assert s.meta["params"]["stages"] == stages
    assert s.num_chunks == stages * one.num_chunks
    assert len(s) * s.chunk_bytes == pytest.approx(len(one) * one.chunk_bytes)
    assert one.num_steps < s.num_steps <= stages * one.num_steps  # a level (or fold): `stages` steps


@pytest.mark.parametrize("spec", [*SPECS, "dcell:n=2,k=1", "bcube:n=3,k=1"])
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_the_chosen_depth_is_never_slower_than_one_segment(spec, collective):
    t = parse_spec(spec)
    for nbytes in (256e6, 4e6):
        chosen = proven(build("rhd", t, None, nbytes, collective), collective)
        one = build("rhd", t, None, nbytes, collective, stages=1)
        assert simulate_flow(chosen).time_s <= simulate_flow(one).time_s * (1 + 1e-12)


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_segments_overlap_the_box_and_the_rail_levels(collective):
    """On two 8-GPU boxes the near exchanges cross NVSwitch and the far ones a NIC: unpipelined,
    each waits for the level before it; in segments both links keep busy."""
    t = parse_spec("hgx:boxes=2")
    chosen = proven(build("rhd", t, None, 256e6, collective), collective)
    one = build("rhd", t, None, 256e6, collective, stages=1)
    assert chosen.meta["params"]["stages"] > 1
    assert simulate_flow(chosen).time_s < 0.85 * simulate_flow(one).time_s


@pytest.mark.parametrize("spec", ["fattree:k=4", "star:n=8"])
def test_no_segments_where_every_level_crosses_the_same_bottleneck(spec):
    for collective in COLLECTIVES:
        assert build("rhd", parse_spec(spec), None, 256e6, collective).meta["params"]["stages"] == 1


def test_bad_depths_are_refused_in_one_sentence():
    t = parse_spec("star:n=4")
    for stages in (0, 65, 1.5, "2"):
        with pytest.raises(ArschedError, match="stages must be an integer from 1 to 64"):
            build("rhd", t, None, 1e6, stages=stages)
    with pytest.raises(ArschedError, match="chunks must be a positive multiple of 12"):
        build("rhd", t, None, 1e6, "reduce_scatter", chunks=8, stages=3)
    with pytest.raises(ArschedError, match="alpha must be a non-negative"):
        build("rhd", t, None, 1e6, alpha=-1.0)


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_a_given_chunk_count_is_kept_and_cut_only_into_segments_that_divide_it(collective):
    t = parse_spec("hgx:boxes=2")
    unit = build("rhd", t, None, 256e6, collective, stages=1).num_chunks
    s = proven(build("rhd", t, None, 256e6, collective, chunks=4 * unit), collective)
    assert s.num_chunks == 4 * unit
    assert s.meta["params"]["stages"] in (1, 2, 4)


def test_a_candidate_too_large_to_build_is_left_out():
    """`fastest` skips a candidate whose builder refuses it for the memory limit (rhd's deeper
    segments at scale) and keeps timing the others."""
    t = parse_spec("hgx:boxes=2")
    first = build("rhd", t, None, 256e6, "reduce_scatter", stages=1)

    def too_large():
        raise LimitError("over the limit")

    two = functools.partial(build, "rhd", t, None, 256e6, "reduce_scatter", stages=2)
    chosen = fastest(first, [too_large, two], [len(first), 2 * len(first)], 5e-6, 10**7, 10**5)
    assert chosen.meta["params"]["stages"] == 2
    assert simulate_flow(chosen).time_s < simulate_flow(first).time_s
