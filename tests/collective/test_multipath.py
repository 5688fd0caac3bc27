"""A connection striped over its equal-cost routes (`Router.link_paths(salt=)`,
`ScheduleBuilder(multipath=)`, `routes.striped_usage`), and the GPU-fabric schemes that use it:
on a dual-plane fabric (every NIC a port per plane) and above oversubscribed spines they keep
the speed a single-plane fabric of the same NIC rate gives them; where striping adds no capacity
(spines above one NIC port) the schedules are those of one route per pair."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.algorithms import build
from arsched.algorithms.routes import route, striped_usage
from arsched.collective import validate
from arsched.collective.schedule import ScheduleBuilder, ScheduleFormatError
from arsched.sim import simulate_flow
from arsched.topology import parse_spec

DUAL = "hgx:boxes=2,gpus_per_box=2,planes=2"  # ranks s0 s1 (box 0), s2 s3 (box 1)


def node_pairs(topo, a: str, b: str) -> tuple[np.ndarray, np.ndarray]:
    c = topo.compiled
    return np.array([c.index[a]]), np.array([c.index[b]])


def test_salts_walk_a_nics_ports():
    topo = parse_spec(DUAL)
    src, dst = node_pairs(topo, "s0", "s2")
    planes = []
    for salt in range(4):
        _, links = topo.router.link_paths(src, dst, spread=True, salt=np.array([salt]))
        planes.append(topo.compiled.node_ids[topo.compiled.link_dst[links[1]]])  # the leaf after the NIC
    assert planes[0] != planes[1] and planes[:2] == planes[2:]
    assert {p[-2:] for p in planes} == {"p0", "p1"}


def test_a_pairs_transfers_take_its_routes_in_turn():
    topo = parse_spec(DUAL)
    b = ScheduleBuilder(topo, None, 1e6, 8, "x", spread=True, multipath=4)
    b.add_rank_arrays(0, np.arange(3), np.zeros(3, dtype=int), np.full(3, 2))
    b.add(1, 3, "s0", "s2")
    b.add_rank_arrays(2, np.arange(4, 8), np.array([0, 0, 0, 1]), np.array([2, 1, 1, 3]))
    s = b.build()
    leaf = [
        s.paths[p][2] for p, src, dst in zip(s.path_id, s.src, s.dst, strict=True) if (src, dst) == (0, 2)
    ]
    assert len(leaf) == 5 and len(set(leaf)) == 2
    assert all(leaf[i] != leaf[i + 1] for i in range(4))  # in turn, across calls and `add`
    inside = {s.paths[p] for p, src, dst in zip(s.path_id, s.src, s.dst, strict=True) if (src, dst) == (0, 1)}
    assert len(inside) == 1  # one route through the NVSwitch
    assert list(b.ways(np.array([0, 0, 1]), np.array([2, 1, 3]))) == [2, 1, 2]


@pytest.mark.parametrize(
    "spec, ways",
    [
        ("hgx:boxes=4,gpus_per_box=2,su=2", 1),  # spines above one port: nothing to gain
        ("hgx:boxes=4,gpus_per_box=2,su=2,oversub=2", 2),  # a spine link below the NIC's rate
        ("hgx:boxes=4,gpus_per_box=2,fabric=clos,planes=2", 4),  # two ports, two spines per plane
    ],
)
def test_striping_only_where_it_adds_capacity(spec, ways):
    topo = parse_spec(spec)
    n = len(topo.servers)
    src, dst = np.nonzero(~np.eye(n, dtype=bool))
    plain = ScheduleBuilder(topo, None, 1e6, 1, "x", spread=True)
    striped = ScheduleBuilder(topo, None, 1e6, 1, "x", spread=True, multipath=4)
    rail = np.array([0]), np.array([n - 2])  # GPU 0 of the first and of the last box
    assert ScheduleBuilder(topo, None, 1e6, 1, "x", spread=True, multipath=4).ways(*rail)[0] == ways
    for builder in (plain, striped):
        builder.add_rank_arrays(0, 0, src, dst)
    first = plain.build()
    again = striped.build()
    if ways == 1:  # the same routes and path table as one route per pair
        assert first.paths == again.paths and (first.path_id == again.path_id).all()
    usage = striped_usage(topo, topo.servers, route(topo, topo.servers, src, dst), 4)
    hops = route(topo, topo.servers, src, dst).hops
    assert np.allclose(usage.sum(axis=1), hops)  # each pair's bytes cross its hops, shared out
    assert usage.max() == 1.0 and (ways == 1 or usage.data.min() == 1 / ways)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2"])
def test_bad_multipath_is_refused(bad):
    with pytest.raises(ScheduleFormatError, match="multipath"):
        ScheduleBuilder(parse_spec(DUAL), None, 1e6, 1, "x", spread=True, multipath=bad)


SCHEMES = [
    ("allreduce", "hierarchical"),
    ("allgather", "hierarchical"),
    ("reduce_scatter", "hierarchical"),
    ("broadcast", "rail-dbtree"),
    ("reduce", "rail-dbtree"),
]


@pytest.mark.parametrize("seed", range(3))
def test_gpu_schemes_keep_their_speed_on_two_planes(seed):
    """Seeded fabrics: a dual-plane NIC (two ports of half the rate) costs the GPU-fabric schemes
    at most 2 % over one port of the full rate (one route per pair: about twice)."""
    rng = np.random.default_rng(seed)
    boxes, gpus = int(rng.integers(2, 6)), int(rng.choice([2, 4]))
    fabric = str(rng.choice(["rail", "clos"]))
    spec = f"hgx:boxes={boxes},gpus_per_box={gpus},fabric={fabric}"
    for collective, name in SCHEMES:
        times = []
        for planes in (1, 2):
            s = build(name, parse_spec(f"{spec},planes={planes}"), None, 64e6, collective=collective)
            assert validate(s).ok, f"{name} {collective} on {spec},planes={planes}"
            times.append(simulate_flow(s).time_s)
        assert times[1] <= 1.02 * times[0], f"{name} {collective} on {spec}: {times}"


def test_one_route_per_pair_is_a_choice():
    """hierarchical(stripes=1) keeps one route per pair: on two planes about twice the time."""
    topo = parse_spec("hgx:boxes=2,gpus_per_box=4,planes=2")
    one, striped = (build("hierarchical", topo, None, 64e6, stripes=k) for k in (1, 4))
    assert one.meta["params"]["stripes"] == 1 and len(one.paths) < len(striped.paths)
    assert simulate_flow(one).time_s > 1.5 * simulate_flow(striped).time_s


@pytest.mark.parametrize(
    "spec, may",
    [
        ("fattree:k=4", False),  # every switch link as fast as a server's: the first link binds
        ("leafspine:leaves=3,spines=2,servers_per_leaf=2,bandwidth=100Gbps/400Gbps", False),
        ("torus:dims=3x3", False),  # servers only: they never spread
        ("leafspine:leaves=3,spines=2,servers_per_leaf=2,bandwidth=100Gbps/50Gbps", True),
        (DUAL, True),
    ],
)
def test_which_networks_may_stripe(spec, may):
    topo = parse_spec(spec)
    assert topo.router.may_stripe is may
    if not may:  # then no pair is striped, whatever it asks for
        n = len(topo.servers)
        src, dst = np.nonzero(~np.eye(n, dtype=bool))
        b = ScheduleBuilder(topo, None, 1e6, 1, "x", spread=True, multipath=4)
        assert (b.ways(src, dst) == 1).all()
