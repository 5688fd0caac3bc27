"""Every algorithm of every collective other than AllReduce (ring, direct, pairwise, rhd, the
halves of the AllReduce families, tree packing) and the composed AllReduce, on networks of
several families, sizes no constant was tuned on (seeded random rank subsets, odd counts),
directed and heterogeneous links: each schedule proves its collective in both validators, is
never faster than its bound, and the CLI builds and compares them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arsched.algorithms import NotApplicable, algorithms, build, get
from arsched.algorithms.composed import refine
from arsched.collective import load, numeric_check, validate
from arsched.collective.kinds import NAMES, ROOTED
from arsched.errors import ArschedError
from arsched.sim import simulate_flow, simulate_rounds
from arsched.topology import parse_spec
from clihelp import assert_one_line_error, run

OTHERS = [c for c in NAMES if c != "allreduce"]
SPECS = [
    "star:n=5",
    "fattree:k=4",
    "bcube:n=3,k=1",
    "dcell:n=2,k=1",
    "torus:dims=3x3",
    "torus:dims=3x3,oneway=1",
    "ring:n=6,bandwidth=400Gbps,reverse=100Gbps",
    "leafspine:leaves=3,spines=2,servers_per_leaf=3",
]
PAIRS = [(a.name, c) for c in OTHERS for a in algorithms(c)]
FAMILY = {
    "bcube-native",
    "torus-native",
    "hierarchical",
    "rail-dbtree",
}  # one family's design: elsewhere not applicable


def build_or_skip(name, *args):
    """The schedule, or None where a family's own design meets another network (its sentence
    checked)."""
    try:
        return build(name, *args)
    except NotApplicable as e:
        assert name in FAMILY and str(e).startswith(name), str(e)
        return None


def check(s, collective):
    assert s.collective == collective
    v = validate(s)
    assert v.ok, v.message
    assert numeric_check(s).ok
    for r in (simulate_flow(s), simulate_rounds(s)):
        assert r.gap >= 1 - 1e-9, (s.algorithm, collective, r.model, r.gap)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize(("name", "collective"), PAIRS)
def test_every_algorithm_of_every_collective_is_valid(spec, name, collective):
    s = build_or_skip(name, parse_spec(spec), None, 16e6, collective)
    if s is not None:
        check(s, collective)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(PAIRS), st.integers(2, 9), st.integers(0, 10**6))
def test_random_rank_subsets_and_roots(pair, n, seed):
    name, collective = pair
    t = parse_spec("fattree:k=4")
    rng = np.random.default_rng(seed)
    ranks = list(rng.choice(t.servers, n, replace=False))
    root = ranks[int(rng.integers(n))] if collective in ROOTED else None
    s = build_or_skip(name, t, ranks, 1e6, collective, root)
    if s is not None:
        assert s.root == root
        check(s, collective)


def test_halves_of_different_chunk_counts_are_refined_to_a_common_one():
    """Tree packing picks its own chunk count: rs-ag cuts both halves to their least common
    multiple, every shard's bytes where they were, so that the AllGather forwards the pieces
    the ReduceScatter summed."""
    t = parse_spec("dcell:n=2,k=1")
    first = build("tree-packing", t, None, 16e6, "reduce_scatter")
    s = build("rs-ag", t, None, 16e6, reduce_scatter="tree-packing", allgather="ring")
    assert first.num_chunks != len(t.servers)  # the ring's own count: the halves differ
    assert s.num_chunks == math.lcm(first.num_chunks, len(t.servers))
    check(s, "allreduce")
    refined = refine(first, 3 * first.num_chunks)
    check(refined, "reduce_scatter")
    assert len(refined) == 3 * len(first)


@pytest.mark.parametrize("n", [3, 5, 6, 7, 12])
@pytest.mark.parametrize("collective", ["reduce_scatter", "allgather"])
def test_rhd_folds_the_ranks_beyond_a_power_of_two(n, collective):
    s = build("rhd", parse_spec(f"star:n={n}"), None, 1e6, collective, stages=1)
    assert s.num_steps == (n.bit_length() - 1) + 2
    check(s, collective)


@pytest.mark.parametrize("rs", ["ring", "rhd", "direct"])
@pytest.mark.parametrize("ag", ["ring", "rhd", "direct"])
def test_any_reduce_scatter_then_any_allgather_is_an_allreduce(rs, ag):
    t = parse_spec("fattree:k=4")
    s = build("rs-ag", t, None, 64e6, reduce_scatter=rs, allgather=ag, chunks=32)
    check(s, "allreduce")
    first = build(rs, t, None, 64e6, "reduce_scatter", chunks=32)
    assert s.step.max() == first.step.max() + build(ag, t, None, 64e6, "allgather", chunks=32).step.max() + 1


def test_auto_picks_the_fastest_builder_of_the_collective():
    t = parse_spec("bcube:n=3,k=1")
    s = build("auto", t, None, 64e6, "allgather", budget=30)
    gaps = {c["algorithm"]: c["gap"] for c in s.meta["auto"]["candidates"] if "gap" in c}
    assert s.collective == "allgather" and s.algorithm == min(gaps, key=gaps.get)
    assert simulate_flow(s).gap == pytest.approx(min(gaps.values()))
    b = build("auto", t, None, 64e6, "reduce", t.servers[4], budget=30)
    assert (b.collective, b.root) == ("reduce", t.servers[4])
    with pytest.raises(NotApplicable, match="dbtree does not build AllToAll"):
        build("auto", t, None, 1e6, "alltoall", candidates="direct,dbtree")


def test_pipelined_chains_approach_the_bound_on_one_switch():
    """A chain pipelines its chunks: at 256 MB on a star it is within a few per cent of the
    max-flow bound, where sending the buffer to each rank in turn (direct) is N − 1 times it."""
    t = parse_spec("star:n=6")
    chain = simulate_flow(build("ring", t, None, 256e6, "broadcast", "s2"))
    one_by_one = simulate_flow(build("direct", t, None, 256e6, "broadcast", "s2"))
    assert chain.gap < 1.1
    assert one_by_one.gap == pytest.approx(5.0, rel=1e-3)


def test_the_registry_says_who_builds_what():
    assert {a.name for a in algorithms("broadcast")} == {
        "ring",
        "dbtree",
        "group-trees",
        "rail-dbtree",
        "scatter-allgather",
        "direct",
        "tree-packing",
        "auto",
    }
    assert {a.name for a in algorithms("alltoall")} == {"direct", "pairwise", "mcf", "auto"}
    assert "pairwise" not in {a.name for a in algorithms()}  # AllReduce's list
    with pytest.raises(
        NotApplicable,
        match="dbtree does not build AllGather; algorithms that do: rhd, ring, multi-ring, bcube-native, "
        "torus-native, hierarchical, tree-packing, direct",
    ):
        get("dbtree").builder("allgather")
    with pytest.raises(ArschedError, match="ring's AllGather takes no root"):
        build("ring", parse_spec("star:n=4"), None, 1e6, "allgather", "s1")
    with pytest.raises(ArschedError, match="the root 's9' is not one of the ranks"):
        build("direct", parse_spec("star:n=4"), None, 1e6, "reduce", "s9")


def test_cli_builds_and_compares_other_collectives(capsys, tmp_path):
    out_file = tmp_path / "b.json"
    code, out, _ = run(
        capsys,
        "schedule",
        "-t",
        "star:n=5",
        "-a",
        "ring",
        "-c",
        "broadcast",
        "--root",
        "s3",
        "-o",
        str(out_file),
    )
    assert code == 0 and "valid Broadcast" in out
    s = load(out_file)
    assert (s.collective, s.root) == ("broadcast", "s3")
    code, out, _ = run(capsys, "compare", "-t", "star:n=4", "-c", "alltoall", "-s", "1MB")
    assert code == 0
    assert "AllToAll, star(4)" in out and "pairwise" in out and "direct" in out
    code, out, _ = run(capsys, "algorithms")
    assert code == 0 and "pairwise" in out
    assert_one_line_error(*run(capsys, "compare", "-t", "star:n=4", "-c", "gather")[::2])
    assert_one_line_error(
        *run(
            capsys,
            "schedule",
            "-t",
            "star:n=4",
            "-a",
            "dbtree",
            "-c",
            "allgather",
            "-o",
            str(tmp_path / "x.json"),
        )[::2]
    )
