"""Directed rings and tori from specs: `oneway=1` keeps the + direction of every dimension,
`reverse=` gives the − direction its own bandwidth; names say which was built, bad values are
one sentence, and the plain forms build what they always did."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from test_topo_spec import assert_one_sentence

from arsched.bounds import allreduce_bound
from arsched.errors import TopologyError
from arsched.topology import Topology, parse_spec, ring, torus
from arsched.topology.core import DEFAULT_BANDWIDTH, DEFAULT_LATENCY
from clihelp import assert_one_line_error, run


def coords(name: str, dims: tuple[int, ...]) -> np.ndarray:
    return np.array(np.unravel_index(int(name[1:]), dims))


def steps(t: Topology, dims: tuple[int, ...]) -> list[tuple[int, int]]:
    """(dimension, step mod size) of every link: which way each link goes."""
    out = []
    for lk in t.links:
        diff = (coords(lk.dst, dims) - coords(lk.src, dims)) % np.array(dims)
        (axis,) = np.flatnonzero(diff)
        out.append((int(axis), int(diff[axis])))
    return out


@pytest.mark.parametrize("dims", [(8,), (3, 3), (2, 3), (4, 1, 3), (3, 3, 3)])
def test_a_one_way_torus_has_every_server_send_one_way_per_dimension(dims):
    size = "x".join(map(str, dims))
    one_d = len(dims) == 1
    t = parse_spec(f"ring:n={dims[0]},oneway=1" if one_d else f"torus:dims={size},oneway=1")
    assert t.name == (f"ring({size},oneway)" if one_d else f"torus({size},oneway)")
    ways = steps(t, dims)
    assert all(step == 1 for _, step in ways)  # the + direction only
    n = int(np.prod(dims))
    assert len(t.links) == n * sum(d >= 2 for d in dims)  # one out-link per server and dimension
    assert nx.is_strongly_connected(t.to_networkx())
    both = torus(dims)  # the two-way torus has every one-way link
    assert {(lk.src, lk.dst) for lk in t.links} <= {(lk.src, lk.dst) for lk in both.links}
    pairs = {(lk.src, lk.dst) for lk in t.links}
    for (axis, _), lk in zip(ways, t.links, strict=True):
        # a size-2 dimension's two links are both + steps; a longer one has no way back
        assert ((lk.dst, lk.src) in pairs) == (dims[axis] == 2)


def test_a_one_way_ring_has_half_the_bandwidth_of_a_two_way_one():
    # the single-server cut has one link in, not two: the AllReduce bound doubles
    one, two = ring(8, oneway=True), ring(8)
    assert allreduce_bound(one) == pytest.approx(2 * allreduce_bound(two), rel=1e-12)


def test_an_asymmetric_ring_has_its_reverse_bandwidth_one_way():
    t = parse_spec("ring:n=8,bandwidth=400Gbps,reverse=100Gbps")
    assert t.name == "ring(8,reverse=100Gbps)"
    for (axis, step), lk in zip(steps(t, (8,)), t.links, strict=True):
        assert axis == 0 and lk.latency == DEFAULT_LATENCY
        assert lk.bandwidth == (400e9 / 8 if step == 1 else 100e9 / 8)
    assert len(t.links) == 16
    assert allreduce_bound(t) < allreduce_bound(ring(8, bandwidth=400e9 / 8, oneway=True))


def test_a_torus_takes_a_reverse_bandwidth_per_dimension():
    t = parse_spec("torus:dims=2x4,bandwidth=100Gbps/200Gbps,reverse=50Gbps/10Gbps")
    assert t.name == "torus(2x4,reverse=50Gbps/10Gbps)"
    want = {(0, 1): 100e9, (1, 1): 200e9, (1, 3): 10e9}  # a size-2 dimension: 0 -> 1 forward, 1 -> 0 back
    for (axis, step), lk in zip(steps(t, (2, 4)), t.links, strict=True):
        back = axis == 0 and coords(lk.src, (2, 4))[0] == 1
        assert lk.bandwidth == (50e9 / 8 if back else want[axis, step] / 8)
    assert parse_spec("torus:dims=3x3,reverse=25Gbps").name == "torus(3x3,reverse=25Gbps)"


@pytest.mark.parametrize(
    ("spec", "same"),
    [
        ("ring:n=8,reverse=100Gbps", lambda: ring(8)),  # reverse equal to bandwidth: the plain ring
        ("torus:dims=3x4,oneway=0", lambda: torus((3, 4))),
        (
            "torus:dims=3x4,bandwidth=1Gbps/2Gbps,reverse=1Gbps/2Gbps",
            lambda: torus((3, 4), [1e9 / 8, 2e9 / 8]),
        ),
        ("ring:n=5,oneway=no", lambda: ring(5)),
    ],
)
def test_the_symmetric_forms_are_the_plain_networks(spec, same):
    t, plain = parse_spec(spec), same()
    assert t == plain and t.links == plain.links  # the same links in the same order


def test_the_plain_ring_keeps_its_links_in_their_order():
    cables = [("s0", "s1"), ("s1", "s2"), ("s2", "s3"), ("s3", "s0")]
    want = Topology.from_cables(
        "ring(4)",
        ["s0", "s1", "s2", "s3"],
        [],
        [(u, v, DEFAULT_BANDWIDTH, DEFAULT_LATENCY) for u, v in cables],
    )
    assert ring(4).links == want.links and ring(4).name == "ring(4)"


@pytest.mark.parametrize(
    ("spec", "expect"),
    [
        ("ring:n=8,oneway=2", "oneway must be 1 or 0"),
        ("torus:dims=3x3,oneway=maybe", "oneway must be 1 or 0"),
        ("ring:n=8,oneway=1,reverse=10Gbps", "cannot be combined"),
        ("ring:n=8,reverse=0Gbps", "reverse bandwidth must be a finite number"),
        ("ring:n=8,reverse=1e-320GB/s", "at least 2.23e-308"),
        ("ring:n=8,reverse=fast", "cannot read a bandwidth 'fast'"),
        ("ring:n=8,reverse=1Gbps/2Gbps", "has 1 link level(s) but 2 reverse bandwidth values"),
        ("torus:dims=3x3,reverse=1Gbps/2Gbps/3Gbps", "has 2 link level(s) but 3 reverse bandwidth values"),
    ],
)
def test_bad_directed_values_are_one_sentence(spec, expect):
    with pytest.raises(TopologyError, match=expect.replace("(", r"\(").replace(")", r"\)")) as info:
        parse_spec(spec)
    assert_one_sentence(str(info.value))


@pytest.mark.parametrize(
    "call",
    [
        lambda: ring(8, oneway=3),
        lambda: torus((3, 3), oneway="yes"),
        lambda: ring(8, reverse=float("nan")),
        lambda: torus((3, 3), reverse=[1e9, -1.0]),
        lambda: torus((3, 3), oneway=True, reverse=1e9),
    ],
)
def test_bad_directed_values_from_python_are_one_sentence(call):
    with pytest.raises(TopologyError) as info:
        call()
    assert_one_sentence(str(info.value))


def test_a_huge_one_way_torus_is_refused_before_it_is_built():
    with pytest.raises(TopologyError, match=r"torus\(100000x100000x100,oneway\) would have"):
        parse_spec("torus:dims=100000x100000x100,oneway=1")


def test_the_cli_builds_and_refuses_directed_specs(capsys):
    code, out, _ = run(capsys, "topology", "--json", "torus:dims=3x3,oneway=1")
    assert code == 0 and '"torus(3x3,oneway)"' in out
    assert_one_line_error(*run(capsys, "topology", "ring:n=8,oneway=1,reverse=1Gbps")[::2])
