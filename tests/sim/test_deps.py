"""Dependencies of asynchronous execution (sim.deps, design §3.3): each rule on a hand-made
schedule (read after write, write after read, write after write, no dependency on a same-step
reader or on another reader, every writer of a group, the synchronous barrier, sparse steps),
and the ready sets of `Readiness` against the reference's predecessor sets on reference
schedules and on random transfer lists, completed in random batches."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from simref import semantic_preds

from arsched.collective import Schedule, Transfer
from arsched.sim.deps import Readiness, derive
from schedules import make, ps_allreduce, recursive_doubling_allreduce, ring_allreduce, topo

STAR = "star:n=5"
SERVERS = ("s0", "s1", "s2", "s3", "s4")


def sched(*rows: tuple, num_chunks: int = 2) -> Schedule:
    """A schedule (not necessarily a complete AllReduce) on star(5) from (step, chunk, src, dst[,
    op]) rows, default paths."""
    return make(topo(STAR), SERVERS, [Transfer(*row) for row in rows], num_chunks)


def ready(s: Schedule, synchronous: bool = False) -> Readiness:
    return Readiness(derive(s, synchronous=synchronous))


def trace(s: Schedule, order: list[int], synchronous: bool = False) -> tuple[list[int], list]:
    """Complete one ready transfer at a time in `order`: (initial, [(completed, newly ready)])."""
    r = ready(s, synchronous)
    initial = r.initial().tolist()
    avail = set(initial)
    out = []
    for t in order:
        assert t in avail
        avail.discard(t)
        new = r.complete(np.array([t])).tolist()
        out.append((t, new))
        avail |= set(new)
    return initial, out


def test_waits_for_the_writer_of_its_source():
    # T1 sends s1's chunk 0, which T0 wrote one step earlier (read after write)
    s = sched((0, 0, "s0", "s1"), (1, 0, "s1", "s2"))
    assert trace(s, [0, 1]) == ([0], [(0, [1]), (1, [])])


def test_waits_for_earlier_readers_of_its_destination():
    # T0 reads s1's chunk 0 in step 0; T1 overwrites it in step 2 (write after read)
    s = sched((0, 0, "s1", "s2"), (2, 0, "s0", "s1", "copy"))
    assert trace(s, [0, 1]) == ([0], [(0, [1]), (1, [])])


@pytest.mark.parametrize("op", ["reduce", "copy"])
def test_waits_for_earlier_writers_of_its_destination(op):
    # T0 and T1 both write s1's chunk 0, in steps 0 and 1 (write after write)
    s = sched((0, 0, "s0", "s1"), (1, 0, "s2", "s1", op))
    assert trace(s, [0, 1]) == ([0], [(0, [1]), (1, [])])


def test_a_same_step_reader_is_no_dependency():
    # T0 reads s1's chunk 0 in the same step as T1 and T2 write it: it reads start-of-step data
    s = sched((0, 0, "s1", "s2"), (0, 0, "s0", "s1"), (0, 1, "s3", "s1"))
    assert ready(s).initial().tolist() == [0, 1, 2]
    assert derive(s).wait_count.tolist() == [0, 0, 0]


def test_reading_a_buffer_someone_else_also_reads_is_no_dependency():
    s = sched((0, 0, "s0", "s1"), (1, 0, "s0", "s2"))  # both read s0's chunk 0
    assert ready(s).initial().tolist() == [0, 1]


def test_unrelated_buffers_do_not_wait_even_steps_apart():
    s = sched((0, 0, "s0", "s1"), (5, 1, "s2", "s3"), (7, 0, "s3", "s4", "copy"))
    assert ready(s).initial().tolist() == [0, 1, 2]


def test_synchronous_adds_a_barrier_between_steps():
    s = sched((0, 0, "s0", "s1"), (0, 1, "s1", "s2"), (5, 1, "s3", "s4"), (9, 0, "s4", "s3"))
    # steps are 0, 5, 9 (dense 0, 1, 2): step 5 waits for all of step 0, step 9 for step 5
    assert trace(s, [1, 0, 2, 3], synchronous=True) == ([0, 1], [(1, []), (0, [2]), (2, [3]), (3, [])])
    # the same schedule asynchronously: nothing depends on anything
    assert ready(s).initial().tolist() == [0, 1, 2, 3]


def test_steps_need_not_be_contiguous_or_stored_in_order():
    s = sched((5, 0, "s0", "s1"), (20, 1, "s2", "s3"), (9, 0, "s1", "s2"))
    assert trace(s, [0, 2, 1]) == ([0, 1], [(0, [2]), (2, []), (1, [])])
    # with barriers: dense steps 5 < 9 < 20
    assert trace(s, [0, 2, 1], synchronous=True) == ([0], [(0, [2]), (2, [1]), (1, [])])


def test_a_group_of_writers_must_all_finish():
    # s1 and s2 both reduce chunk 0 into s0 in step 0; s0 then forwards it: waits for both
    s = sched((0, 0, "s1", "s0"), (0, 0, "s2", "s0"), (1, 0, "s0", "s3", "copy"))
    assert trace(s, [1, 0, 2]) == ([0, 1], [(1, []), (0, [2]), (2, [])])


def test_waits_for_readers_of_every_step_since_the_last_write():
    # s0's chunk 0 is read in steps 0 and 1, then overwritten in step 2
    s = sched((0, 0, "s0", "s1"), (1, 0, "s0", "s2"), (2, 0, "s3", "s0", "copy"))
    assert trace(s, [1, 0, 2]) == ([0, 1], [(1, []), (0, [2]), (2, [])])


def test_readers_before_an_intervening_write_are_covered_by_that_write():
    # step 0 reads s0.c0; step 1 writes it (after that read); step 1 also reads it (same step as
    # the write, start-of-step data); step 2 writes it again: waits for the step-1 writer and
    # the step-1 reader
    s = sched(
        (0, 0, "s0", "s1"),  # T0 reader, step 0
        (1, 0, "s2", "s0"),  # T1 writer, step 1: waits T0 (write after read)
        (1, 0, "s0", "s3"),  # T2 reader, step 1: no earlier writer of s0.c0
        (2, 0, "s4", "s0"),  # T3 writer, step 2: waits T1 and T2
    )
    assert trace(s, [0, 1, 2, 3]) == ([0, 2], [(0, [1]), (1, []), (2, [3]), (3, [])])


def test_latest_writer_and_readers_since():
    s = sched(
        (0, 0, "s1", "s0"),  # T0 reads (s1, 0)
        (1, 0, "s2", "s1", "copy"),  # T1 writes (s1, 0): after T0 (write after read)
        (2, 0, "s1", "s2"),  # T2 reads (s1, 0) (after T1) and writes (s2, 0), read by T1
        (3, 0, "s0", "s1"),  # T3 reads (s0, 0), written by T0; writes (s1, 0): after T1, T2
        (3, 1, "s3", "s0"),  # T4 unrelated to all (chunk 1)
    )
    assert trace(s, [4, 0, 1, 2, 3]) == ([0, 4], [(4, []), (0, [1]), (1, [2]), (2, [3]), (3, [])])


def test_member_of_groups_and_sizes():
    s = sched((0, 0, "s1", "s0"), (0, 0, "s2", "s0"), (1, 0, "s0", "s3", "copy"))
    d = derive(s)
    assert d.member_of.shape == (3, 2)
    # the two step-0 writers of s0.c0 form one write group
    assert d.member_of[0, 0] == d.member_of[1, 0] != d.member_of[2, 0]
    assert d.size[d.member_of[0, 0]] == 2
    assert d.wait_count.tolist() == [0, 0, 1]
    ds = derive(s, synchronous=True)
    assert ds.member_of.shape == (3, 3)
    assert ds.wait_count.tolist() == [0, 0, 2]


def test_completing_a_batch_returns_everything_that_became_ready_sorted():
    s = ps_allreduce(topo(STAR), SERVERS, num_chunks=2)
    r = ready(s)
    first = r.initial().tolist()
    assert first == [i for i, t in enumerate(s.transfers) if t.step == 0]
    # a copy of chunk c waits for every reduce of chunk c (its source) and for its
    # destination's reader of chunk c; complete chunk 0's reduces first, in reverse
    c0 = np.array([i for i in first if s.transfer(i).chunk == 0])
    assert r.complete(c0[::-1]).tolist() == [
        i for i, t in enumerate(s.transfers) if t.step == 1 and t.chunk == 0
    ]
    rest = np.array([i for i in first if s.transfer(i).chunk == 1])
    assert r.complete(rest).tolist() == [i for i, t in enumerate(s.transfers) if t.step == 1 and t.chunk == 1]


def test_empty_batches_and_no_transfers():
    r = ready(sched((0, 0, "s1", "s0")))
    assert r.complete(np.zeros(0, dtype=np.int64)).tolist() == []
    assert ready(sched()).initial().tolist() == []


# ---- against the reference's predecessor sets ---------------------------------------------------


def check_against_reference(s: Schedule, synchronous: bool, pick) -> None:
    """Drive Readiness, completing a picked batch of what is ready each time: it must report
    exactly the transfers whose every predecessor (design §3.3, from the reference) is done."""
    preds = semantic_preds(s, synchronous)
    n = len(s)
    r = ready(s, synchronous)
    done: set[int] = set()
    avail = {t for t in range(n) if not preds[t]}
    assert r.initial().tolist() == sorted(avail)
    while avail:
        batch = pick(sorted(avail))
        assert batch
        done |= set(batch)
        now_ready = {t for t in range(n) if t not in done and preds[t] <= done}
        new = r.complete(np.array(batch, dtype=np.int64)).tolist()
        assert new == sorted(now_ready - (avail - set(batch)))
        avail = now_ready
    assert done == set(range(n))


def _random_batches(seed: int):
    rng = np.random.default_rng(seed)
    return lambda avail: sorted(rng.choice(avail, size=int(rng.integers(1, len(avail) + 1)), replace=False))


def _reference_schedules(seed: int) -> list[Schedule]:
    t = topo("bcube:n=3,k=1")
    ranks = tuple(str(x) for x in np.random.default_rng(seed).permutation(np.array(t.servers))[: 4 + seed])
    return [
        ring_allreduce(t, ranks, chunks_per_rank=1 + seed % 2),
        ps_allreduce(t, ranks, num_chunks=2 + seed % 2, ps=ranks[-1]),
        recursive_doubling_allreduce(t, ranks[:4], num_chunks=2),
        recursive_doubling_allreduce(topo("torus:dims=2x2x2"), topo("torus:dims=2x2x2").servers),
    ]


@pytest.mark.parametrize("synchronous", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_readiness_matches_the_reference_on_reference_schedules(synchronous, seed):
    for s in _reference_schedules(seed):
        check_against_reference(s, synchronous, _random_batches(seed))
        check_against_reference(s, synchronous, lambda avail: avail)  # everything ready at once


@st.composite
def random_rows(draw):
    """Arbitrary transfers (not necessarily an AllReduce): derive works on any schedule."""
    rows = []
    for _ in range(draw(st.integers(1, 25))):
        src, dst = draw(st.permutations(SERVERS))[:2]
        op = draw(st.sampled_from(["reduce", "copy"]))
        rows.append((draw(st.integers(0, 6)), draw(st.integers(0, 2)), src, dst, op))
    return rows


@given(random_rows(), st.booleans(), st.integers(0, 1000))
def test_property_readiness_matches_the_reference_on_random_schedules(rows, synchronous, seed):
    check_against_reference(sched(*rows, num_chunks=3), synchronous, _random_batches(seed))
