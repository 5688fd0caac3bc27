"""The schedule IR: Transfer rows stored column-wise, the builder, default routes, bad input."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arsched.collective import COPY, OPS, REDUCE, Schedule, ScheduleBuilder, Transfer, load, validate
from arsched.errors import ArschedError, ScheduleFormatError
from schedules import ps_transfers, ring_transfers, topo

ROOT = Path(__file__).resolve().parents[2]


def rows(s: Schedule) -> list[tuple]:
    return [(t.step, t.chunk, t.src, t.dst, t.op, t.path) for t in s]


def test_transfer_defaults_and_op_codes():
    t = Transfer(3, 1, "s0", "s1")
    assert (t.op, t.path) == ("reduce", ())
    assert OPS[REDUCE] == "reduce" and OPS[COPY] == "copy"


def test_from_transfers_stores_columns_and_gives_rows_back():
    t = topo("bcube:n=3,k=1")
    given_path = ("s0", "w1_0", "s3")
    transfers = [
        Transfer(0, 2, "s0", "s3", "reduce", given_path),
        Transfer(0, 1, "s4", "s0", "copy"),
        Transfer(5, 0, "s3", "s4", "reduce"),
        Transfer(2, 2, "s0", "s3", "copy", given_path),
    ]
    s = Schedule.from_transfers(t, ["s0", "s3", "s4"], 3000, 3, transfers, algorithm="mine", meta={"x": 1})
    assert len(s) == 4 and s.num_ranks == 3 and s.num_steps == 3
    assert s.chunk_bytes == 1000
    assert (s.algorithm, s.meta) == ("mine", {"x": 1})
    ids = t.compiled.node_ids
    assert s.step.tolist() == [0, 0, 5, 2] and s.chunk.tolist() == [2, 1, 0, 2]
    assert [ids[i] for i in s.src] == ["s0", "s4", "s3", "s0"]
    assert [ids[i] for i in s.dst] == ["s3", "s0", "s4", "s3"]
    assert s.op.tolist() == [REDUCE, COPY, REDUCE, COPY]
    # explicit paths are kept verbatim, missing ones take the topology's default route
    expected = [given_path, t.path("s4", "s0"), t.path("s3", "s4"), given_path]
    assert [s.transfer(i).path for i in range(4)] == expected
    assert s.transfers == list(s) == [s.transfer(i) for i in range(4)]
    assert s.transfer(1) == Transfer(0, 1, "s4", "s0", "copy", expected[1])
    # the path table holds each distinct path once
    assert len(s.paths) == 3 and s.path_id[0] == s.path_id[3]
    assert "mine" in repr(s) and t.name in repr(s)


def test_rank_maps():
    t = topo("star:n=5")
    s = Schedule.from_transfers(t, ["s3", "s1", "zz"], 10, 1, [])
    idx = t.compiled.index
    assert s.rank_nodes.tolist() == [idx["s3"], idx["s1"], -1]
    of = s.rank_of_node
    assert of[idx["s3"]] == 0 and of[idx["s1"]] == 1
    assert (np.delete(of, [idx["s3"], idx["s1"]]) == -1).all()
    assert len(s) == 0 and s.num_steps == 0


def test_dict_transfers_are_accepted():
    t = topo("star:n=3")
    d = [{"step": 0, "chunk": 0, "src": "s1", "dst": "s0"}, {"step": 1, "chunk": 0, "src": "s0", "dst": "s1"}]
    d[1]["op"] = "copy"
    d[1]["path"] = ["s0", "w0", "s1"]
    s = Schedule.from_transfers(t, ["s0", "s1"], 8, 1, d)
    assert rows(s) == [
        (0, 0, "s1", "s0", "reduce", ("s1", "w0", "s0")),
        (1, 0, "s0", "s1", "copy", tuple(d[1]["path"])),
    ]
    assert validate(s).ok


@pytest.mark.parametrize(
    ("transfer", "words"),
    [
        ({"step": 0, "chunk": 0, "src": "s1"}, ["transfer 1", "'dst'"]),
        (Transfer(0, 0, "s1", "nowhere"), ["transfer 1", "'nowhere'", "star(3)"]),
        (Transfer(0, 0, "sx", "s0"), ["transfer 1", "'sx'"]),
        (Transfer(0, 0, "s1", "s0", "add"), ["transfer 1", "'add'", "'reduce'", "'copy'"]),
        (Transfer("x", 0, "s1", "s0"), ["transfer 1", "step"]),
        (Transfer(0, None, "s1", "s0"), ["transfer 1", "chunk"]),
    ],
)
def test_bad_transfers_raise_one_sentence(transfer, words):
    t = topo("star:n=3")
    good = Transfer(0, 0, "s2", "s0")
    with pytest.raises(ScheduleFormatError) as e:
        Schedule.from_transfers(t, ["s0", "s1", "s2"], 8, 1, [good, transfer])
    msg = str(e.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg
    assert isinstance(e.value, ArschedError) and isinstance(e.value, ValueError)


def test_non_integer_step_is_not_truncated():
    with pytest.raises(ScheduleFormatError):
        Schedule.from_transfers(topo("star:n=3"), ["s0", "s1"], 8, 1, [Transfer(1.5, 0, "s1", "s0")])


def test_bad_sizes_raise():
    with pytest.raises(ScheduleFormatError, match="numbers"):
        ScheduleBuilder(topo("star:n=3"), None, "lots", 4)


def test_direct_construction_checks_columns():
    t = topo("star:n=3")
    z = np.zeros(2, dtype=np.int64)
    paths = (("s1", "w0", "s0"),)
    ok = Schedule(t, ("s0", "s1"), 8.0, 1, z, z, [1, 1], [0, 0], z, z, paths)
    assert len(ok) == 2 and ok.step.dtype == np.int64 and ok.op.dtype == np.int8
    with pytest.raises(ScheduleFormatError, match="differ in length"):
        Schedule(t, ("s0",), 8.0, 1, z, z[:1], z, z, z, z, paths)
    with pytest.raises(ScheduleFormatError, match="path table"):
        Schedule(t, ("s0",), 8.0, 1, z, z, z, z, z, [0, 1], paths)
    with pytest.raises(ScheduleFormatError, match="op code"):
        Schedule(t, ("s0",), 8.0, 1, z, z, z, z, [0, 2], z, paths)


def test_builder_defaults_to_all_servers_and_keeps_call_order():
    t = topo("ring:n=4")
    b = ScheduleBuilder(t, None, 40, 4, algorithm="x")
    assert b.ranks == t.servers
    b.add(0, 0, "s0", "s1")
    b.add_rank_arrays(1, np.array([1, 2]), np.array([1, 2]), np.array([2, 3]), op="copy")
    b.add(2, 3, "s3", "s0", "copy", path=["s3", "s0"])
    s = b.build()
    assert rows(s) == [
        (0, 0, "s0", "s1", "reduce", ("s0", "s1")),
        (1, 1, "s1", "s2", "copy", ("s1", "s2")),
        (1, 2, "s2", "s3", "copy", ("s2", "s3")),
        (2, 3, "s3", "s0", "copy", ("s3", "s0")),
    ]


@pytest.mark.parametrize("spec", ["bcube:n=3,k=1", "dcell:n=2,k=1", "fattree:k=4"])
def test_vectorised_builder_matches_row_by_row(spec):
    """The example's add_rank_arrays ring equals the hand-written ring built from Transfers."""
    example = runpy.run_path(str(ROOT / "examples" / "ring_schedule.py"))
    t = topo(spec)
    fast = example["ring_allreduce"](t, nbytes=1e6)
    slow = Schedule.from_transfers(t, t.servers, 1e6, len(t.servers), ring_transfers(t.servers))
    assert rows(fast) == rows(slow)
    assert validate(fast).ok


@settings(max_examples=30)
@given(st.data())
def test_vectorised_default_routes_are_the_topology_routes(data):
    t = topo(
        data.draw(
            st.sampled_from(
                ["bcube:n=3,k=1", "torus:dims=3x3", "leafspine:leaves=3,spines=2,servers_per_leaf=2"]
            )
        )
    )
    n = len(t.servers)
    ranks = tuple(data.draw(st.permutations(t.servers)))
    b = ScheduleBuilder(t, ranks, 1.0, 2)
    pairs = st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), min_size=1, max_size=12)
    for step in range(data.draw(st.integers(1, 4))):
        p = np.array(data.draw(pairs))
        b.add_rank_arrays(step, 0, p[:, 0], p[:, 1])
    s = b.build()
    for x in s:
        expected = (x.src, x.dst) if x.src == x.dst else t.path(x.src, x.dst)
        assert x.path == expected


def test_example_script_writes_a_valid_schedule(tmp_path, monkeypatch, capsys):
    out = tmp_path / "ring.json"
    monkeypatch.setattr(sys, "argv", ["ring_schedule.py", str(out), "torus:dims=3x3"])
    runpy.run_path(str(ROOT / "examples" / "ring_schedule.py"), run_name="__main__")
    printed = capsys.readouterr().out
    assert "valid AllReduce" in printed and f"wrote {out}" in printed
    s = load(out)
    assert (s.algorithm, s.num_ranks, len(s)) == ("ring", 9, 2 * 9 * 8)
    assert validate(s).ok


def test_ps_transfers_shape():
    tr = ps_transfers(("a", "b", "c"), 2, ps="b")
    assert [(x.step, x.chunk, x.src, x.dst, x.op) for x in tr] == [
        (0, 0, "a", "b", "reduce"),
        (0, 1, "a", "b", "reduce"),
        (0, 0, "c", "b", "reduce"),
        (0, 1, "c", "b", "reduce"),
        (1, 0, "b", "a", "copy"),
        (1, 1, "b", "a", "copy"),
        (1, 0, "b", "c", "copy"),
        (1, 1, "b", "c", "copy"),
    ]


@pytest.mark.parametrize(
    "spec", ["fattree:k=4", "fattree:k=6", "leafspine:leaves=3,spines=3,servers_per_leaf=2"]
)
def test_spread_routes_are_fewest_hop_and_use_every_equal_cost_uplink(spec):
    """Spread routes (one routing call for many pairs, or one pair at a time through `add`) are
    the router's spread routes: as short as the default ones, and all-to-all traffic reaches every
    top-level switch where the default routes meet at the lowest-index one."""
    t = topo(spec)
    n = len(t.servers)
    src, dst = np.nonzero(~np.eye(n, dtype=bool))
    spread = ScheduleBuilder(t, None, 1.0, 1, spread=True)
    spread.add_rank_arrays(0, 0, src, dst)
    one_by_one = ScheduleBuilder(t, None, 1.0, 1, spread=True)
    for s, d in zip(src.tolist(), dst.tolist(), strict=True):
        one_by_one.add(0, 0, t.servers[s], t.servers[d])
    plain = ScheduleBuilder(t, None, 1.0, 1)
    plain.add_rank_arrays(0, 0, src, dst)
    a, b, c = spread.build(), one_by_one.build(), plain.build()
    assert rows(a) == rows(b)
    assert [len(x.path) for x in a] == [len(x.path) for x in c]
    c_ = t.compiled
    for x in a:
        for u, v in zip(x.path, x.path[1:], strict=False):
            assert c_.index[v] in c_.link_dst[c_.link_src == c_.index[u]]  # every hop is a link
    top = {v for v in t.nodes if v.startswith(("c", "spine"))}
    assert top == {v for x in a for v in x.path if v in top}  # every top switch carries a pair
    assert len({v for x in c for v in x.path if v in top}) < len(top)


@pytest.mark.parametrize("spec", ["bcube:n=3,k=1", "torus:dims=3x4", "dcell:n=2,k=1"])
def test_spread_routes_change_nothing_without_switch_ties(spec):
    """Servers relay on their lowest-index route either way, so server-centric networks whose
    switches have one way down give byte-identical schedules."""
    t = topo(spec)
    n = len(t.servers)
    src, dst = np.nonzero(~np.eye(n, dtype=bool))
    built = []
    for spread in (False, True):
        b = ScheduleBuilder(t, None, 1.0, 1, spread=spread)
        b.add_rank_arrays(0, 0, src, dst)
        built.append(rows(b.build()))
    assert built[0] == built[1]
