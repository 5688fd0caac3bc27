"""Topology files: JSON, GraphML and host lists, and conversion from user networkx graphs."""

from __future__ import annotations

import json

import networkx as nx
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
    dcell,
    fattree,
    from_dict,
    hostlist,
    jellyfish,
    leafspine,
    load,
    ring,
    save,
    star,
    to_dict,
    torus,
)

EXAMPLES = [
    bcube(3, 1, bandwidth=[1e9, 2e9]),
    dcell(2, 1, latency=[1e-6, 3e-6]),
    fattree(4, bandwidth=[12.5e9, 25e9, 50e9]),
    torus((3, 2, 2)),
    ring(5, bandwidth=7.5, latency=0.0),
    star(4),
    leafspine(2, 2, 3),
    jellyfish(8, 5, 3, seed=2),
]
IDS = [t.name for t in EXAMPLES]


def link_set(t: Topology) -> set[tuple[str, str, float, float]]:
    return {(lk.src, lk.dst, lk.bandwidth, lk.latency) for lk in t.links}


def kinds(t: Topology) -> dict[str, str]:
    return {n: t.kind(n) for n in t.nodes}


# ---- JSON ------------------------------------------------------------------------------------
@pytest.mark.parametrize("topo", EXAMPLES, ids=IDS)
def test_dict_round_trip(topo):
    d = to_dict(topo)
    assert d["name"] == topo.name
    assert [n["id"] for n in d["nodes"]] == list(topo.nodes)
    assert len(d["links"]) == len(topo.links)
    assert from_dict(d) == topo


@pytest.mark.parametrize("topo", EXAMPLES, ids=IDS)
def test_json_file_round_trip(topo, tmp_path):
    path = tmp_path / "topo.json"
    save(topo, path)
    assert load(path) == topo
    assert json.loads(path.read_text()) == to_dict(topo)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topo.json"]


def test_json_schedule_wrapper_is_accepted(tmp_path):
    topo = ring(4)
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps({"format": "arsched.schedule/1", "topology": to_dict(topo)}))
    assert load(path) == topo


def test_save_overwrites_atomically(tmp_path):
    path = tmp_path / "t.json"
    save(ring(4), path)
    save(star(3), path)
    assert load(path) == star(3)
    save(star(3), tmp_path / "t.graphml")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.graphml", "t.json"]


def test_save_failure_leaves_no_file(tmp_path):
    with pytest.raises(TopologyError):
        save(ring(4), tmp_path / "t.yaml")
    missing_dir = tmp_path / "nope" / "t.json"
    with pytest.raises(ArschedError, match="does not exist"):
        save(ring(4), missing_dir)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "",
        "[1, 2",
        '"just a string"',
        "[]",
        "{}",
        '{"nodes": [], "links": 3}',
        '{"nodes": [{"id": "a"}], "links": []}',
        '{"nodes": [{"id": "a", "kind": "server"}], "links": [{"src": "a", "dst": "a"}]}',
        '{"nodes": [{"id": "a", "kind": "server"}, {"id": "b", "kind": "server"}], '
        '"links": [{"src": "a", "dst": "b", "bandwidth": "fast", "latency": 0}]}',
        '{"nodes": [{"id": "a", "kind": "router"}], "links": []}',
        '{"nodes": [{"id": "a", "kind": "switch"}], "links": []}',
        '{"nodes": [{"id": "a", "kind": "server"}], "links": [], "spread_order": "a"}',
        '{"nodes": [{"id": "a", "kind": "server"}], "links": [], "spread_order": [1]}',
        '{"nodes": [{"id": "a", "kind": "server"}], "links": [], "spread_order": ["b"]}',
    ],
)
def test_malformed_json(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(TopologyError) as info:
        load(path)
    assert "\n" not in str(info.value)


def test_invalid_utf8_json(tmp_path):
    path = tmp_path / "bad.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(TopologyError):
        load(path)


@pytest.mark.parametrize("obj", [None, [], "x", {"nodes": []}, {"links": []}, {"nodes": [1]}])
def test_from_dict_malformed(obj):
    with pytest.raises(TopologyError):
        from_dict(obj)


def test_load_missing_file_and_unknown_extension(tmp_path):
    with pytest.raises(TopologyError, match="does not exist"):
        load(tmp_path / "missing.json")
    odd = tmp_path / "topo.yaml"
    odd.write_text("nodes: []\n")
    with pytest.raises(TopologyError, match="format"):
        load(odd)
    with pytest.raises(TopologyError):
        load(tmp_path)  # a directory is not a file


def test_save_unknown_extension(tmp_path):
    with pytest.raises(TopologyError):
        save(ring(3), tmp_path / "topo.txt")
    with pytest.raises(TopologyError):
        save(ring(3), tmp_path / "topo")
    assert list(tmp_path.iterdir()) == []


# ---- GraphML ---------------------------------------------------------------------------------
@pytest.mark.parametrize("topo", EXAMPLES, ids=IDS)
@pytest.mark.parametrize("suffix", [".graphml", ".xml"])
def test_graphml_round_trip(topo, tmp_path, suffix):
    path = tmp_path / f"topo{suffix}"
    save(topo, path)
    back = load(path)
    assert back.name == topo.name
    assert set(back.nodes) == set(topo.nodes)
    assert kinds(back) == kinds(topo)
    assert link_set(back) == link_set(topo)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_graphml_without_attributes_takes_load_defaults(tmp_path):
    g = nx.Graph()
    g.add_node("h0", kind=SERVER)
    g.add_node("h1", kind=SERVER)
    g.add_node("sw", kind=SWITCH)
    g.add_edge("h0", "sw")
    g.add_edge("h1", "sw", bandwidth=3.0)
    path = tmp_path / "mine.graphml"
    nx.write_graphml(g, path)
    t = load(path, bandwidth=5.0, latency=2e-6)
    assert t.name == "mine"
    assert t.link("h0", "sw") == Link("h0", "sw", 5.0, 2e-6)
    assert t.link("sw", "h0") == Link("sw", "h0", 5.0, 2e-6)
    assert t.link("h1", "sw").bandwidth == 3.0
    assert t.link("sw", "h1").bandwidth == 3.0
    # a per-level list does not apply to a graph; the defaults are used instead
    u = load(path, bandwidth=[1.0, 2.0])
    assert u.link("h0", "sw").bandwidth == DEFAULT_BANDWIDTH


def test_malformed_graphml(tmp_path):
    path = tmp_path / "bad.graphml"
    path.write_text("<graphml><graph><node id='a'/>")
    with pytest.raises(TopologyError):
        load(path)
    g = nx.Graph()
    g.add_edge("a", "b")
    nx.write_graphml(g, path)
    with pytest.raises(TopologyError, match="kind"):
        load(path)


@pytest.mark.parametrize(
    "dtd",
    [
        '<!DOCTYPE graphml [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]>',
        '<!DOCTYPE graphml [<!ENTITY e SYSTEM "file:///etc/hostname">]>',
    ],
    ids=["entity-expansion", "external-entity"],
)
def test_graphml_with_a_dtd_is_refused(tmp_path, dtd):
    g = nx.Graph()
    g.add_nodes_from(["a", "b"], kind=SERVER)
    g.add_edge("a", "b")
    path = tmp_path / "good.graphml"
    nx.write_graphml(g, path)
    assert len(load(path).links) == 2
    text = path.read_text().split("\n", 1)
    path.write_text(text[0] + "\n" + dtd + "\n" + text[1])
    with pytest.raises(TopologyError, match="declares a DTD"):
        load(path)


def test_graphml_bandwidth_that_is_not_a_number(tmp_path):
    g = nx.Graph(name="lab")
    g.add_nodes_from(["a", "b"], kind=SERVER)
    g.add_edge("a", "b", bandwidth="fast")
    nx.write_graphml(g, tmp_path / "fast.graphml")
    with pytest.raises(
        TopologyError, match="bandwidth of edge 'a'-'b' of graph 'lab' is 'fast', which is not a number"
    ):
        load(tmp_path / "fast.graphml")


def test_link_ends_and_bandwidth_totals_are_checked():
    with pytest.raises(TopologyError, match="unknown node"):
        from_dict(
            {
                "nodes": [{"id": "a", "kind": "server"}],
                "links": [{"src": [], "dst": "a", "bandwidth": 1, "latency": 0}],
            }
        )
    nodes = [("a", SERVER), ("b", SERVER)]
    with pytest.raises(TopologyError, match="add up to more than a float holds"):
        Topology("t", nodes, [("a", "b", 1.7e308, 0.0), ("b", "a", 1.7e308, 0.0)])
    with pytest.raises(TopologyError, match="bandwidth"):
        Topology("t", nodes, [("a", "b", 10**400, 0.0)])


# ---- networkx --------------------------------------------------------------------------------
def test_from_networkx_undirected_user_graph():
    g = nx.Graph(name="lab")
    for i in range(3):
        g.add_node(i, kind=SERVER)
    g.add_node("tor", kind=SWITCH)
    g.add_edge(0, "tor", bandwidth=10.0)
    g.add_edge(1, "tor", bandwidth=20.0, latency=5e-6)
    g.add_edge(2, "tor")
    t = Topology.from_networkx(g)
    assert t.name == "lab"
    assert t.servers == ("0", "1", "2")
    assert t.switches == ("tor",)
    assert len(t.links) == 2 * g.number_of_edges()
    assert t.link("0", "tor") == Link("0", "tor", 10.0, DEFAULT_LATENCY)
    assert t.link("tor", "0") == Link("tor", "0", 10.0, DEFAULT_LATENCY)
    assert t.link("tor", "1") == Link("tor", "1", 20.0, 5e-6)
    assert t.link("2", "tor").bandwidth == DEFAULT_BANDWIDTH
    assert t.path("0", "2") == ("0", "tor", "2")
    assert Topology.from_networkx(g, name="other", bandwidth=1.0).link("2", "tor").bandwidth == 1.0
    assert Topology.from_networkx(g, name="other").name == "other"


def test_from_networkx_directed_graph_gives_one_link_per_edge():
    g = nx.DiGraph()
    g.add_nodes_from(["a", "b"], kind=SERVER)
    g.add_edge("a", "b", bandwidth=2.0)
    t = Topology.from_networkx(g)
    assert t.name == "graph"
    assert t.links == (Link("a", "b", 2.0, DEFAULT_LATENCY),)
    assert not t.has_link("b", "a")
    with pytest.raises(TopologyError):
        t.path("b", "a")


def test_from_networkx_missing_or_bad_kind():
    g = nx.Graph()
    g.add_node("a", kind=SERVER)
    g.add_node("b")
    g.add_edge("a", "b")
    with pytest.raises(TopologyError, match="kind"):
        Topology.from_networkx(g)
    g.nodes["b"]["kind"] = "router"
    with pytest.raises(TopologyError, match="kind"):
        Topology.from_networkx(g)


def test_from_networkx_bad_bandwidth():
    g = nx.Graph()
    g.add_nodes_from(["a", "b"], kind=SERVER)
    g.add_edge("a", "b", bandwidth=0)
    with pytest.raises(TopologyError, match="bandwidth"):
        Topology.from_networkx(g)


@pytest.mark.parametrize("topo", EXAMPLES, ids=IDS)
def test_to_networkx_attributes(topo):
    g = topo.to_networkx()
    assert g.is_directed()
    assert g.graph["name"] == topo.name
    for lk in topo.links:
        assert g.edges[lk.src, lk.dst] == {"bandwidth": lk.bandwidth, "latency": lk.latency}
    assert Topology.from_networkx(g).compiled.num_links == len(topo.links)


# ---- host lists ------------------------------------------------------------------------------
def rows(*specs: str) -> list[dict[str, str]]:
    out = []
    for spec in specs:
        ip, dsw, psw, asw = spec.split(",")
        out.append({"ip": ip, "DSW": dsw, "PSW": psw, "ASW": asw})
    return out


def test_hostlist_small():
    t = hostlist(rows("h1,D,P1,A1", "h2,D,P1,A1", "h3,D,P2,A2", "h3,D,P1,A2"), name="tiny")
    assert t.servers == ("h1", "h2", "h3")
    assert set(t.switches) == {"asw_A1", "asw_A2", "psw_P1", "psw_P2", "dsw_D"}
    # cables: 3 host-ASW, A1-P1, A2-P2, A2-P1, P1-D, P2-D
    assert len(t.links) == 2 * 8
    assert t.path("h1", "h2") == ("h1", "asw_A1", "h2")
    assert len(t.path("h1", "h3")) == 5


@pytest.mark.parametrize(
    "bad",
    [
        rows("h1,D,P,A1", "h1,D,P,A2"),  # a host under two ToRs
        rows("h1,D,P,A1"),  # one host
        rows("h1,D,P,A1", "h2,D,,A1"),  # empty field
        [{"ip": "h1", "DSW": "D", "PSW": "P"}, {"ip": "h2", "DSW": "D", "PSW": "P", "ASW": "A"}],
    ],
)
def test_hostlist_bad_rows(bad):
    with pytest.raises(TopologyError):
        hostlist(bad)


def test_hostlist_csv_missing_column(tmp_path):
    path = tmp_path / "hosts.csv"
    path.write_text("ip,DSW,PSW\nh1,D,P\nh2,D,P\n")
    with pytest.raises(TopologyError, match="ASW"):
        load(path)
    path.write_text("")
    with pytest.raises(TopologyError):
        load(path)


def test_hostlist_csv_round_trip_through_json(tmp_path):
    path = tmp_path / "hosts.csv"
    path.write_text("ip,DSW,PSW,ASW\nh1,D,P,A\nh2,D,P,A\nh3,D,P,B\n")
    t = load(path, bandwidth=[1.0, 2.0, 3.0])
    assert t.name == "hosts"
    save(t, tmp_path / "hosts.json")
    assert load(tmp_path / "hosts.json") == t


def test_a_gpu_clusters_spread_order_survives_a_round_trip(tmp_path):
    """A GPU cluster's rail-major spread order is saved with it, so the loaded network routes as
    the built one; other topologies write no such key (their files are unchanged)."""
    from arsched.topology import parse_spec

    topo = parse_spec("hgx:boxes=3,gpus_per_box=2,su=2,spines=2")
    path = tmp_path / "hgx.json"
    save(topo, path)
    again = load(path)
    assert again.spread_order == topo.spread_order != ()
    assert (again.spread_key == topo.spread_key).all()
    assert "spread_order" not in to_dict(fattree(4))
