"""`auto`: the fastest schedule among the algorithms that apply, by simulation in the default
model, on networks no algorithm was tuned for (seeded Jellyfish, odd tori, a one-way ring, a
heterogeneous leaf-spine); its search is recorded, deterministic, and bounded by its budget."""

from __future__ import annotations

import json
import time

import networkx as nx
import pytest

from arsched.algorithms import NotApplicable, build, get
from arsched.algorithms.auto import _most_pairs_in_a_step
from arsched.collective import save, validate
from arsched.defaults import DEFAULT_ALPHA
from arsched.errors import ArschedError, NotFaster, OutOfTime
from arsched.sim import simulate_flow, simulate_rounds
from arsched.topology import Topology, parse_spec, star
from clihelp import assert_one_line_error, run

QUICK = ["ps", "sharded-ps", "ring", "multi-ring", "dbtree", "rhd", "bcube-native", "torus-native"]


def one_way_ring(n: int, seed: int) -> Topology:
    g = nx.DiGraph()
    g.add_nodes_from((f"s{i}", {"kind": "server"}) for i in range(n))
    g.add_edges_from((f"s{i}", f"s{(i + 1) % n}", {"bandwidth": 1e10 * (1 + seed % 3)}) for i in range(n))
    return Topology.from_networkx(g, name=f"one-way-ring({n})")


NETWORKS = [
    lambda: parse_spec("jellyfish:switches=9,ports=4,net_ports=3,seed=11"),
    lambda: parse_spec("torus:dims=5x3"),
    lambda: parse_spec("leafspine:leaves=3,spines=2,servers_per_leaf=3,bandwidth=100Gbps/400Gbps"),
    lambda: one_way_ring(7, seed=2),
]


@pytest.mark.parametrize("make", NETWORKS)
@pytest.mark.parametrize("model", ["flow", "rounds"])
def test_auto_is_the_fastest_candidate_it_tried(make, model):
    topo = make()
    s = build("auto", topo, None, 64e6, model=model, candidates=QUICK)
    assert validate(s).ok
    search = s.meta["auto"]
    assert search["chosen"] == s.algorithm and search["model"] == model
    sim = simulate_flow if model == "flow" else simulate_rounds
    mine = sim(s).time_s
    tried = [c for c in search["candidates"] if "time_s" in c]
    assert tried and {c["algorithm"] for c in search["candidates"]} == set(QUICK)
    for c in tried:  # each candidate rebuilt and simulated on its own
        other = sim(build(c["algorithm"], topo, None, 64e6)).time_s
        assert other == pytest.approx(c["time_s"], rel=1e-12) and mine <= other * (1 + 1e-12)
    for c in search["candidates"]:
        if "time_s" in c or c["note"].startswith("not tried"):
            continue
        if "by its floor" in c["note"]:  # not built: its floor is no faster than the chosen one
            other = build(c["algorithm"], topo, None, 64e6)
            floor = get(c["algorithm"]).floors["allreduce"](topo, other.ranks, 64e6, DEFAULT_ALPHA)
            assert model == "flow" and mine <= floor * (1 + 1e-6) <= sim(other).time_s * (1 + 1e-6)
        elif c["note"].startswith("at least"):  # screened by its busiest link or its time alone
            other = build(c["algorithm"], topo, None, 64e6)
            r = sim(other)
            assert model == "flow" and r.time_s >= mine
            floors = [float((r.link_bytes / topo.compiled.capacity).max())]  # its busiest link's
            try:  # above that, its time without contention, where the sweep cannot time it
                simulate_flow(other, give_up_above=floors[0] * (1 + 1e-9))
            except NotFaster as e:
                floors.append(e.floor_s)
            assert all(f <= r.time_s for f in floors)
            assert any(c["note"].startswith(f"at least {f / r.bound_s:.3f}×") for f in floors)
        else:  # the builder's own reason
            with pytest.raises(NotApplicable, match=c["note"][:20]):
                build(c["algorithm"], topo, None, 64e6)


def test_every_algorithm_is_a_candidate_by_default_and_the_search_ends_near_the_bound():
    s = build("auto", parse_spec("ring:n=6"), None, 256e6)
    names = [c["algorithm"] for c in s.meta["auto"]["candidates"]]
    assert "auto" not in names and "tree-packing" in names and "ring" in names
    gaps = [c["gap"] for c in s.meta["auto"]["candidates"] if "gap" in c]
    assert min(gaps) <= 1.01  # a ring graph: multi-ring's two directions reach the bound
    assert any("within 1.01" in c.get("note", "") for c in s.meta["auto"]["candidates"])


def test_the_same_inputs_give_the_same_bytes(tmp_path):
    topo = parse_spec("torus:dims=3x4")
    for i in range(2):
        save(build("auto", topo, None, 1e6, candidates=QUICK), tmp_path / f"{i}.json")
    assert (tmp_path / "0.json").read_bytes() == (tmp_path / "1.json").read_bytes()


def test_a_spent_budget_still_gives_the_first_schedule():
    s = build(
        "auto", parse_spec("torus:dims=3x3"), None, 1e6, budget=1e-9, candidates=["rhd", "ring", "dbtree"]
    )
    assert s.algorithm == "rhd" and validate(s).ok
    notes = [c.get("note", "") for c in s.meta["auto"]["candidates"]]
    assert notes[:2] == ["not tried: the budget ran out"] * 2  # ring, dbtree; rhd: no time to time it
    assert notes[-1].startswith("chosen unsimulated")


def test_bad_parameters():
    topo = star(4)
    for kwargs, words in (
        ({"budget": 0}, "budget"),
        ({"model": "packets"}, "model"),
        ({"candidates": ["auto"]}, "own candidates"),
        ({"candidates": "ring,nope"}, "unknown algorithm 'nope'"),
    ):
        with pytest.raises(ArschedError, match=words):
            build("auto", topo, None, 1e6, **kwargs)
    with pytest.raises(NotApplicable, match="no algorithm applies"):
        build("auto", topo, None, 1e6, candidates=["bcube-native", "torus-native"])
    with pytest.raises(NotApplicable):
        build("auto", topo, ["s0"], 1e6)


def test_cli_says_what_auto_chose(capsys, tmp_path):
    out = tmp_path / "a.json"
    code, text, _ = run(
        capsys, "schedule", "-t", "torus:dims=3x3", "-a", "auto", "-s", "64MB", "-o", str(out)
    )
    assert code == 0
    chosen = json.loads(out.read_text())["meta"]["auto"]["chosen"]
    assert f"auto chose {chosen}:" in text
    args = ("-t", "torus:dims=3x3", "-a", "auto", "-s", "64MB", "--budget", "1e-9", "-o", str(out))
    code, text, _ = run(capsys, "schedule", *args)  # its event simulations cut at once
    assert code == 0 and "by its lower bound: no simulation ended within the budget" in " ".join(text.split())
    code, _, err = run(capsys, "schedule", "-t", "ring:n=4", "-a", "ring", "--budget", "5", "-o", str(out))
    assert_one_line_error(code, err)


def test_crowded_schedules_are_simulated_last_and_skipped_after_a_good_one(monkeypatch):
    """A sharded PS (every pair in one step) waits for the others; halving-doubling reaches the
    bound on a fat-tree first, so the crowded one is never simulated. With no crowding limit the
    sharded PS, first in order and as good, is chosen."""
    import arsched.algorithms.auto as auto

    topo = parse_spec("fattree:k=4")
    plain = build("auto", topo, None, 256e6, candidates="sharded-ps,rhd")
    assert plain.algorithm == "sharded-ps"
    n = len(topo.servers)
    monkeypatch.setattr(auto, "CROWDED", n * (n - 1) - 1)  # sharded-ps: n(n − 1) pairs; rhd: n
    s = build("auto", topo, None, 256e6, candidates="sharded-ps,rhd")
    assert validate(s).ok and s.algorithm == "rhd"
    notes = {c["algorithm"]: c.get("note", "") for c in s.meta["auto"]["candidates"]}
    assert notes["sharded-ps"].startswith("not simulated: one within")


@pytest.mark.parametrize("cuts", [1, 2])
def test_a_simulation_cut_short_is_retried_at_the_end_then_noted(monkeypatch, cuts):
    """Once a schedule is in hand, each later simulation gets a share of the time left (the
    event simulation of a crowded schedule can take minutes); one cut short is simulated again
    after the others, and if cut again it is noted, never chosen."""
    import arsched.algorithms.auto as auto

    real = auto.simulate_flow
    calls = []

    def cut(schedule, *args, deadline=None, give_up_above=None, **kwargs):  # no screening here
        calls.append((schedule.algorithm, deadline))
        if schedule.algorithm == "ring" and sum(c[0] == "ring" for c in calls) <= cuts:
            raise OutOfTime("flow simulation stopped at its deadline")
        return real(schedule, *args, deadline=deadline, **kwargs)

    monkeypatch.setattr(auto, "simulate_flow", cut)
    monkeypatch.delitem(get("ring").floors, "allreduce")  # its floor would send it last
    monkeypatch.setattr(auto, "_busiest_link", lambda schedule: 0.0)  # none kept for later by it
    s = build("auto", parse_spec("torus:dims=3x3"), None, 1e6, candidates=["dbtree", "ring", "rhd"])
    assert validate(s).ok
    assert [c[0] for c in calls] == ["dbtree", "ring", "rhd", "ring"]
    assert all(d is not None for _, d in calls)  # the first too: nothing runs unbounded
    assert calls[1][1] < calls[3][1]  # a share first, then all that is left
    ring = next(c for c in s.meta["auto"]["candidates"] if c["algorithm"] == "ring")
    if cuts == 2:
        assert s.algorithm != "ring" and ring == {
            "algorithm": "ring",
            "note": "not simulated to its end: the budget ran out",
        }
    else:
        assert ring["time_s"] == pytest.approx(
            simulate_flow(build("ring", parse_spec("torus:dims=3x3"), None, 1e6)).time_s
        )


def test_cut_simulations_are_retried_most_promising_first_past_the_budget(monkeypatch):
    """What was built but cut short is simulated again lowest lower bound first (not in build
    order), and still once the budget is spent: `GRACE` of it more, not a wasted build."""
    import arsched.algorithms.auto as auto

    real = auto.simulate_flow
    calls = []
    budget = 0.3
    floors = {"ring": 2e-3, "rhd": 1e-3}

    def cut(schedule, *args, deadline=None, give_up_above=None, **kwargs):
        calls.append((schedule.algorithm, deadline, time.monotonic()))
        if schedule.algorithm in floors and sum(c[0] == schedule.algorithm for c in calls) == 1:
            time.sleep(budget / 2)  # the two cut ones spend the whole budget
            raise OutOfTime("flow simulation stopped at its deadline", floors[schedule.algorithm])
        return real(schedule, *args, deadline=deadline, **kwargs)

    monkeypatch.setattr(auto, "simulate_flow", cut)
    monkeypatch.delitem(get("ring").floors, "allreduce")
    monkeypatch.setattr(auto, "_busiest_link", lambda schedule: 0.0)  # none kept for later by it
    topo = parse_spec("torus:dims=3x3")
    s = build("auto", topo, None, 1e6, budget=budget, candidates=["dbtree", "ring", "rhd"])
    assert validate(s).ok
    assert [c[0] for c in calls] == ["dbtree", "ring", "rhd", "rhd", "ring"]
    start = calls[0][2]
    assert calls[3][2] > start + budget  # retried past the budget ...
    assert calls[3][1] >= calls[3][2] + auto.GRACE * budget * 0.99  # ... with GRACE more
    times = {c["algorithm"]: c.get("time_s") for c in s.meta["auto"]["candidates"]}
    assert times["rhd"] == pytest.approx(simulate_flow(build("rhd", topo, None, 1e6)).time_s)


def test_a_first_simulation_that_would_not_end_is_cut_and_the_search_stays_in_its_bound(monkeypatch):
    """Before any schedule is timed, a simulation still gets only a share of the time (the first
    one on a 512-server Jellyfish ran for many minutes): cut, the others are timed, and the
    search ends within (1 + GRACE) of its budget."""
    import arsched.algorithms.auto as auto

    real = auto.simulate_flow
    budget = 0.4

    def endless(schedule, *args, deadline=None, **kwargs):
        if schedule.algorithm == "dbtree":
            assert deadline is not None
            time.sleep(max(deadline - time.monotonic(), 0.0))
            raise OutOfTime("flow simulation stopped at its deadline", 1e-6)
        return real(schedule, *args, deadline=deadline, **kwargs)

    monkeypatch.setattr(auto, "simulate_flow", endless)
    monkeypatch.setattr(auto, "_busiest_link", lambda schedule: 0.0)  # none kept for later by it
    start = time.monotonic()
    s = build("auto", parse_spec("torus:dims=3x3"), None, 1e6, budget=budget, candidates=["dbtree", "rhd"])
    assert time.monotonic() - start < (1 + auto.GRACE) * budget + 2.0  # plus the builds
    assert validate(s).ok and s.algorithm == "rhd"
    notes = {c["algorithm"]: c.get("note", "") for c in s.meta["auto"]["candidates"]}
    assert notes["dbtree"] == auto.CUT


def test_where_no_simulation_ends_the_lowest_lower_bound_is_chosen_and_said(monkeypatch):
    import arsched.algorithms.auto as auto

    floors = {"dbtree": 3e-3, "ring": 2e-3, "rhd": 1e-3}
    deadlines = []

    def cut(schedule, *args, deadline=None, **kwargs):
        deadlines.append(deadline)
        raise OutOfTime("flow simulation stopped at its deadline", floors[schedule.algorithm])

    monkeypatch.setattr(auto, "simulate_flow", cut)
    monkeypatch.delitem(get("ring").floors, "allreduce")
    monkeypatch.setattr(auto, "_busiest_link", lambda schedule: 0.0)
    s = build("auto", parse_spec("torus:dims=3x3"), None, 1e6, budget=0.05, candidates=list(floors))
    assert validate(s).ok and s.algorithm == "rhd"
    assert None not in deadlines
    note = s.meta["auto"]["candidates"][-1]
    assert note["algorithm"] == "rhd" and note["note"].startswith("chosen unsimulated")


FLOORED = ["ring", "multi-ring", "ps"]


@pytest.mark.parametrize(
    "make",
    [
        *NETWORKS,
        lambda: parse_spec("hgx:boxes=2"),
        lambda: parse_spec("ring:n=6,reverse=100Gbps"),
        lambda: star(5),
    ],
)
@pytest.mark.parametrize("nbytes", [1e4, 16e6])
def test_floors_are_lower_bounds_of_the_flow_model(make, nbytes):
    """A floor, computed without building, never exceeds the built schedule's time, on directed,
    asymmetric, GPU and switched networks, at sizes where α or bandwidth dominates."""
    topo = make()
    for name in FLOORED:
        s = build(name, topo, None, nbytes)
        floor = get(name).floors["allreduce"](topo, s.ranks, nbytes, DEFAULT_ALPHA)
        assert 0 < floor <= simulate_flow(s).time_s * (1 + 1e-9), name


def test_a_candidate_whose_floor_is_no_faster_is_not_built(monkeypatch):
    """On 128 ranks at 16 MB a ring's 254 chained transfers and a parameter server's ingress are
    slower than halving-doubling by their floors alone: neither is built (the parameter server,
    first in line but far from the bound by its floor, waits for halving-doubling)."""
    import arsched.algorithms.ps as ps
    import arsched.algorithms.ring as ring

    def refuse(*args, **kwargs):
        raise AssertionError("built")

    monkeypatch.setattr(ps, "_ps", refuse)
    monkeypatch.setattr(ring, "add_ring", refuse)
    s = build("auto", parse_spec("fattree:k=8"), None, 16e6, candidates="ps,rhd,ring")
    assert validate(s).ok and s.algorithm == "rhd"
    notes = {c["algorithm"]: c.get("note", "") for c in s.meta["auto"]["candidates"]}
    assert "by its floor" in notes["ps"] and "by its floor" in notes["ring"]


def test_a_simulation_over_the_memory_limit_is_noted_not_fatal(monkeypatch):
    """A candidate whose event simulation would not fit in memory is listed with the reason; the
    search goes on with the others."""
    import arsched.algorithms.auto as auto
    from arsched.limits import LimitError

    real = auto.simulate_flow

    def refuse(schedule, *args, **kwargs):
        if schedule.algorithm == "dbtree":
            raise LimitError("the event simulation of 9 transfers, needing about 9 kB of memory: too many")
        return real(schedule, *args, **kwargs)

    monkeypatch.setattr(auto, "simulate_flow", refuse)
    s = build("auto", parse_spec("torus:dims=3x3"), None, 1e6, candidates=["dbtree", "rhd"])
    assert validate(s).ok and s.algorithm == "rhd"
    notes = {c["algorithm"]: c.get("note", "") for c in s.meta["auto"]["candidates"]}
    assert notes["dbtree"].startswith("the event simulation of 9 transfers")


@pytest.mark.parametrize("name", ["sharded-ps", "rhd", "dbtree", "hierarchical"])
def test_the_most_pairs_in_a_step_are_counted_pair_by_pair(name):
    """The busiest step's distinct (source, destination) pairs, against a set per step."""
    s = build(name, parse_spec("fattree:k=4"), None, 64e6)
    pairs: dict[int, set] = {}
    for step, src, dst in zip(s.step.tolist(), s.src.tolist(), s.dst.tolist(), strict=True):
        pairs.setdefault(step, set()).add((src, dst))
    assert _most_pairs_in_a_step(s) == max(len(p) for p in pairs.values())


def test_a_first_schedule_far_from_the_bound_is_simulated_after_the_others(monkeypatch):
    """Halving-doubling on a 4×4 torus is several times the bound by its busiest link alone: built
    first, it waits while the native scheme is simulated, which comes within GOOD_ENOUGH and ends
    the search, so its own (contended) simulation never runs."""
    import arsched.algorithms.auto as auto

    real = auto.simulate_flow
    simulated = []

    def record(schedule, *args, **kwargs):
        simulated.append(schedule.algorithm)
        return real(schedule, *args, **kwargs)

    monkeypatch.setattr(auto, "simulate_flow", record)
    s = build("auto", parse_spec("torus:dims=4x4"), None, 256e6, candidates=["rhd", "torus-native"])
    assert s.algorithm == "torus-native" and simulated == ["torus-native"]
    rhd = next(c for c in s.meta["auto"]["candidates"] if c["algorithm"] == "rhd")
    assert rhd == {
        "algorithm": "rhd",
        "note": f"not simulated: one within {auto.GOOD_ENOUGH:g}× the bound came first",
    }
