"""The Topology object: validation, read access, equality and the compiled form."""

from __future__ import annotations

import math

import numpy as np
import pytest

from arsched.errors import ArschedError, TopologyError
from arsched.topology import (
    DEFAULT_BANDWIDTH,
    DEFAULT_LATENCY,
    SERVER,
    SWITCH,
    Link,
    Topology,
    bcube,
    ring,
    star,
)

NODES = [("a", SERVER), ("b", SERVER), ("w", SWITCH)]


def make(nodes=NODES, links=(("a", "w"), ("w", "a"), ("b", "w"), ("w", "b")), name="t"):
    return Topology(name, nodes, links)


def test_defaults():
    assert DEFAULT_BANDWIDTH == 100e9 / 8
    assert DEFAULT_LATENCY == 1e-6
    assert Link("a", "b") == Link("a", "b", 12.5e9, 1e-6)


def test_read_access():
    t = make()
    assert t.nodes == ("a", "b", "w")
    assert t.servers == ("a", "b")
    assert t.switches == ("w",)
    assert t.kind("a") == SERVER and t.kind("w") == SWITCH
    assert "a" in t and "zz" not in t
    assert t.has_link("a", "w") and not t.has_link("a", "b")
    assert t.link("a", "w") == Link("a", "w")
    assert t.links[0] == Link("a", "w", DEFAULT_BANDWIDTH, DEFAULT_LATENCY)
    assert t.ports("w") == 2 and t.ports("a") == 1
    assert "servers=2" in repr(t) and "switches=1" in repr(t)
    with pytest.raises(TopologyError):
        t.kind("zz")
    with pytest.raises(TopologyError):
        t.link("a", "b")


def test_links_accept_tuples_and_links():
    t = Topology("t", NODES, [("a", "w", 5.0), Link("w", "a", 5.0), ("b", "w", 1.0, 0.0)])
    assert t.links == (Link("a", "w", 5.0), Link("w", "a", 5.0), Link("b", "w", 1.0, 0.0))


def test_from_cables_makes_two_links_per_cable():
    t = Topology.from_cables("c", ["a", "b"], ["w"], [("a", "w", 3.0, 1e-3), ("b", "w", 4.0, 0)])
    assert set(t.links) == {
        Link("a", "w", 3.0, 1e-3),
        Link("w", "a", 3.0, 1e-3),
        Link("b", "w", 4.0, 0),
        Link("w", "b", 4.0, 0),
    }


def test_equality_and_hash():
    assert make() == make()
    assert hash(make()) == hash(make())
    assert make() != make(name="other")
    assert make() != make(links=(("a", "w"), ("w", "a")))
    assert make() != make(links=(("a", "w"), ("w", "a"), ("b", "w"), ("w", "b", 1.0)))
    assert make() != "t"
    assert ring(4) == ring(4) and ring(4) != ring(5)


# ---- validation ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("nodes", "links", "pattern"),
    [
        ([*NODES, ("a", SWITCH)], [], "twice"),  # duplicate node
        ([("a", SERVER), ("b", "router")], [], "kind"),  # unknown kind
        ([("a", SERVER), ("b", "Server")], [], "kind"),
        ([("a", SERVER), ("", SERVER)], [], "string"),
        ([("a", SERVER), (3, SERVER)], [], "string"),
        (NODES, [("a", "a")], "self-loop"),
        (NODES, [("a", "w"), ("a", "w")], "twice"),  # duplicate link
        (NODES, [("a", "w", 0.0)], "bandwidth"),
        (NODES, [("a", "w", -1.0)], "bandwidth"),
        (NODES, [("a", "w", math.nan)], "bandwidth"),
        (NODES, [("a", "w", math.inf)], "bandwidth"),
        (NODES, [("a", "w", "fast")], "bandwidth"),
        (NODES, [("a", "w", 1.0, -1e-6)], "latency"),
        (NODES, [("a", "w", 1.0, math.nan)], "latency"),
        (NODES, [("a", "x")], "unknown node"),  # link to an unknown node
        (NODES, [("x", "a")], "unknown node"),
        ([("w", SWITCH), ("v", SWITCH)], [("w", "v")], "no server"),
        ([], [], "no server"),
    ],
)
def test_constructor_errors(nodes, links, pattern):
    with pytest.raises(TopologyError, match=pattern) as info:
        Topology("bad", nodes, links)
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, ArschedError)


def test_reverse_link_is_not_a_duplicate():
    t = Topology("t", NODES, [("a", "w"), ("w", "a")])
    assert len(t.links) == 2


def test_links_may_be_a_generator():
    t = Topology("t", iter(NODES), (Link(u, v) for u, v in [("a", "w"), ("w", "a")]))
    assert len(t.links) == 2 and len(t.nodes) == 3


def test_server_only_and_isolated_nodes_are_allowed():
    t = Topology("bare", [("a", SERVER)], [])
    assert t.servers == ("a",) and t.links == ()
    assert t.compiled.num_links == 0


# ---- compiled form ---------------------------------------------------------------------------
def test_compiled_small():
    t = Topology(
        "t",
        NODES,
        [Link("a", "w", 1.0, 0.5), Link("w", "a", 2.0, 0.25), Link("b", "w", 3.0, 0.0)],
    )
    c = t.compiled
    assert c is t.compiled
    assert c.node_ids == ("a", "b", "w")
    assert c.index == {"a": 0, "b": 1, "w": 2}
    assert c.is_server.tolist() == [True, True, False]
    assert c.link_src.tolist() == [0, 2, 1]
    assert c.link_dst.tolist() == [2, 0, 2]
    assert c.capacity.tolist() == [1.0, 2.0, 3.0]
    assert c.latency.tolist() == [0.5, 0.25, 0.0]
    assert c.capacity.dtype == np.float64 and c.latency.dtype == np.float64
    assert np.issubdtype(c.link_src.dtype, np.integer)
    assert c.num_nodes == 3 and c.num_links == 3
    assert c.link_index(0, 2) == 0 and c.link_index(2, 0) == 1 and c.link_index(1, 2) == 2
    assert c.link_index(2, 1) == -1 and c.link_index(0, 1) == -1
    assert c.adjacency.shape == (3, 3)
    assert c.path_links(("b", "w", "a")).tolist() == [2, 1]


def test_to_networkx_and_back_keeps_nodes_and_links():
    # networkx lists a DiGraph's edges by source node, so the link order (and with it the
    # compiled link numbering) may change; the nodes, their order and the link set do not
    for t in (star(4), ring(3), make()):
        back = Topology.from_networkx(t.to_networkx())
        assert back.name == t.name
        assert back.nodes == t.nodes
        assert back.servers == t.servers
        assert set(back.links) == set(t.links)


def test_ports_of_unknown_node_is_a_topology_error():
    with pytest.raises(TopologyError):
        make().ports("zz")


def test_string_bandwidth_is_refused_not_split_into_digits():
    with pytest.raises(TopologyError):
        bcube(2, 1, bandwidth="12")


def test_scalar_only_families_refuse_level_lists():
    with pytest.raises(TopologyError):
        ring(4, bandwidth=[1.0, 2.0])
    with pytest.raises(TopologyError):
        star(4, bandwidth=[1.0, 2.0])
