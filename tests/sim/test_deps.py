"""Dependencies of asynchronous execution (sim.deps): each rule of design §3.3 on a hand-made
schedule (writer of the source, earlier readers and writers of the destination, no dependency
on a same-step reader, the barrier of synchronous=True), and Readiness against the semantic
predecessor sets computed independently, on reference schedules and on random ones."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from simref import ps_allreduce, recursive_doubling_allreduce, ring_allreduce, semantic_preds, topo

from arsched.collective import Schedule, Transfer
from arsched.sim.deps import Readiness, derive

STAR = "star:n=5"


def sched(rows, num_chunks: int = 2) -> Schedule:
    """A schedule on star(5) from (step, chunk, src, dst, op) rows, default paths."""
    t = topo(STAR)
    return Schedule.from_transfers(t, t.servers, 1e6, num_chunks, [Transfer(*r) for r in rows])


def ready_sets(schedule, synchronous: bool = False, order=None):
    """Drive Readiness by completing one ready transfer at a time (lowest first, or `order`);
    return [(completed, newly ready)] after the initial set."""
    r = Readiness(derive(schedule, synchronous))
    initial = r.initial().tolist()
    trace = []
    ready = set(initial)
    for t in order if order is not None else []:
        assert t in ready
        ready.discard(t)
        new = r.complete(np.array([t])).tolist()
        trace.append((t, new))
        ready |= set(new)
    return initial, trace


def test_waits_for_the_writer_of_its_source():
    # T1 reads s0's chunk 0, which T0 wrote in an earlier step
    s = sched([(0, 0, "s1", "s0", "reduce"), (1, 0, "s0", "s2", "reduce")])
    initial, trace = ready_sets(s, order=[0, 1])
    assert initial == [0]
    assert trace == [(0, [1]), (1, [])]


def test_waits_for_earlier_readers_of_its_destination():
    # write-after-read: T1 overwrites s0's chunk 0, which T0 read in step 0
    s = sched([(0, 0, "s0", "s1", "reduce"), (2, 0, "s2", "s0", "copy")])
    initial, trace = ready_sets(s, order=[0, 1])
    assert initial == [0]
    assert trace == [(0, [1]), (1, [])]


def test_waits_for_earlier_writers_of_its_destination():
    s = sched([(0, 0, "s1", "s0", "reduce"), (1, 0, "s2", "s0", "reduce")])
    initial, trace = ready_sets(s, order=[0, 1])
    assert initial == [0]
    assert trace == [(0, [1]), (1, [])]


def test_same_step_reader_creates_no_dependency():
    # T0 reads s0's chunk 0 while T1 writes it in the same step: both read start-of-step data
    s = sched([(0, 0, "s0", "s1", "reduce"), (0, 0, "s2", "s0", "reduce")])
    initial, _ = ready_sets(s)
    assert initial == [0, 1]
    d = derive(s)
    assert d.wait_count.tolist() == [0, 0]


def test_unrelated_buffers_do_not_wait_even_steps_apart():
    s = sched([(0, 0, "s0", "s1", "reduce"), (5, 1, "s2", "s3", "reduce"), (7, 0, "s3", "s4", "copy")])
    initial, _ = ready_sets(s)
    assert initial == [0, 1, 2]


def test_synchronous_adds_a_barrier_between_steps():
    rows = [(0, 0, "s0", "s1", "reduce"), (0, 1, "s1", "s2", "reduce"), (5, 1, "s3", "s4", "reduce")]
    rows += [(9, 0, "s4", "s3", "reduce")]
    s = sched(rows)
    initial, trace = ready_sets(s, synchronous=True, order=[1, 0, 2, 3])
    # steps are 0, 5, 9 (dense 0, 1, 2): step 5 waits for all of step 0, step 9 for step 5
    assert initial == [0, 1]
    assert trace == [(1, []), (0, [2]), (2, [3]), (3, [])]
    # the same schedule asynchronously: nothing depends on anything
    assert ready_sets(s)[0] == [0, 1, 2, 3]


def test_waits_for_every_writer_of_a_step():
    # two reduces into s0's chunk 0 in step 0; T2 reads it in step 1
    s = sched([(0, 0, "s1", "s0", "reduce"), (0, 0, "s2", "s0", "reduce"), (1, 0, "s0", "s3", "copy")])
    initial, trace = ready_sets(s, order=[1, 0, 2])
    assert initial == [0, 1]
    assert trace == [(1, []), (0, [2]), (2, [])]


def test_waits_for_readers_of_every_step_since_the_last_write():
    # s0's chunk 0 is read in steps 0 and 1, then overwritten in step 2
    rows = [(0, 0, "s0", "s1", "reduce"), (1, 0, "s0", "s2", "reduce"), (2, 0, "s3", "s0", "copy")]
    s = sched(rows)
    initial, trace = ready_sets(s, order=[1, 0, 2])
    assert initial == [0, 1]
    assert trace == [(1, []), (0, [2]), (2, [])]


def test_readers_before_an_intervening_write_are_covered_by_that_write():
    # step 0 reads s0.c0; step 1 writes it (after that read); step 1 also reads it (same step as
    # the write, start-of-step data); step 2 writes it again: waits for the step-1 writer and
    # the step-1 reader
    rows = [
        (0, 0, "s0", "s1", "reduce"),  # T0 reader, step 0
        (1, 0, "s2", "s0", "reduce"),  # T1 writer, step 1: waits T0 (write-after-read)
        (1, 0, "s0", "s3", "reduce"),  # T2 reader, step 1: no earlier writer of s0.c0
        (2, 0, "s4", "s0", "reduce"),  # T3 writer, step 2: waits T1 and T2
    ]
    s = sched(rows)
    initial, trace = ready_sets(s, order=[0, 1, 2, 3])
    assert initial == [0, 2]
    assert trace == [(0, [1]), (1, []), (2, [3]), (3, [])]


def test_member_of_groups_and_sizes():
    s = sched([(0, 0, "s1", "s0", "reduce"), (0, 0, "s2", "s0", "reduce"), (1, 0, "s0", "s3", "copy")])
    d = derive(s)
    assert d.member_of.shape == (3, 2)
    # the two step-0 writers of s0.c0 form one write group
    assert d.member_of[0, 0] == d.member_of[1, 0] != d.member_of[2, 0]
    assert d.size[d.member_of[0, 0]] == 2
    assert d.wait_count.tolist() == [0, 0, 1]
    ds = derive(s, synchronous=True)
    assert ds.member_of.shape == (3, 3)
    assert ds.wait_count.tolist() == [0, 0, 2]


def test_empty_batches_and_no_transfers():
    s = sched([(0, 0, "s1", "s0", "reduce")])
    r = Readiness(derive(s))
    assert r.complete(np.zeros(0, dtype=np.int64)).tolist() == []
    empty = Schedule.from_transfers(topo(STAR), topo(STAR).servers, 1e6, 1, [])
    assert Readiness(derive(empty)).initial().tolist() == []


# ---- against the semantic predecessor sets ----------------------------------------------------


def check_against_oracle(schedule, synchronous: bool, seed: int) -> None:
    """Complete random batches of ready transfers; Readiness must report exactly the
    transfers whose every semantic predecessor is done."""
    preds = semantic_preds(schedule, synchronous)
    n = len(schedule)
    rng = np.random.default_rng(seed)
    r = Readiness(derive(schedule, synchronous))
    done: set[int] = set()
    ready = {t for t in range(n) if not preds[t]}
    assert r.initial().tolist() == sorted(ready)
    while ready:
        batch = sorted(rng.choice(sorted(ready), size=int(rng.integers(1, len(ready) + 1)), replace=False))
        done |= set(batch)
        now_ready = {t for t in range(n) if t not in done and preds[t] <= done}
        new = r.complete(np.array(batch, dtype=np.int64)).tolist()
        assert new == sorted(now_ready - (ready - set(batch)))
        ready = now_ready
    assert len(done) == n


@pytest.mark.parametrize("synchronous", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_readiness_matches_semantics_on_reference_schedules(synchronous, seed):
    rng = np.random.default_rng(seed)
    t = topo("bcube:n=3,k=1")
    ranks = tuple(str(x) for x in rng.permutation(np.array(t.servers))[: 4 + seed])
    for s in (
        ring_allreduce(t, ranks, chunks_per_rank=1 + seed % 2),
        ps_allreduce(t, ranks, num_chunks=2, ps=ranks[-1]),
        recursive_doubling_allreduce(t, ranks[:4], num_chunks=2),
    ):
        check_against_oracle(s, synchronous, seed)


@st.composite
def random_rows(draw):
    """Arbitrary transfers (not necessarily an AllReduce): derive works on any schedule."""
    n = draw(st.integers(1, 25))
    servers = [f"s{i}" for i in range(5)]
    rows = []
    for _ in range(n):
        src, dst = draw(st.permutations(servers))[:2]
        rows.append(
            (
                draw(st.integers(0, 6)),
                draw(st.integers(0, 2)),
                src,
                dst,
                draw(st.sampled_from(["reduce", "copy"])),
            )
        )
    return rows


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_rows(), st.booleans(), st.integers(0, 1000))
def test_property_readiness_matches_semantics_on_random_schedules(rows, synchronous, seed):
    check_against_oracle(sched(rows, num_chunks=3), synchronous, seed)
