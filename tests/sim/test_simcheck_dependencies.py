"""Dependencies of asynchronous execution (design §3.3): read-after-write, write-after-read,
write-after-write, no dependency on a same-step reader, the synchronous barrier; ready sets of
`Readiness` checked exactly on hand-made schedules and against the literal rules at random."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from simcheck_reference import reference_deps

from arsched.collective import Transfer
from arsched.sim.deps import Readiness, derive
from schedules import make, ps_allreduce, recursive_doubling_allreduce, ring_allreduce, topo

STAR = "star:n=4"
R = ("s0", "s1", "s2", "s3")


def sched(*rows: tuple, num_chunks: int = 2):
    """A schedule (not necessarily a complete AllReduce) from (step, chunk, src, dst[, op])."""
    return make(topo(STAR), R, [Transfer(*row) for row in rows], num_chunks)


def ready(s, synchronous: bool = False) -> Readiness:
    return Readiness(derive(s, synchronous=synchronous))


def as_list(a: np.ndarray) -> list[int]:
    return [int(x) for x in a]


def test_waits_for_the_writer_of_its_source():
    # T1 sends s1's chunk 0, which T0 wrote one step earlier (read after write)
    s = sched((0, 0, "s0", "s1"), (1, 0, "s1", "s2"))
    r = ready(s)
    assert as_list(r.initial()) == [0]
    assert as_list(r.complete(np.array([0]))) == [1]


def test_waits_for_earlier_readers_of_its_destination():
    # T0 reads s1's chunk 0 in step 0; T1 writes it in step 1 (write after read)
    s = sched((0, 0, "s1", "s2"), (1, 0, "s0", "s1"))
    r = ready(s)
    assert as_list(r.initial()) == [0]
    assert as_list(r.complete(np.array([0]))) == [1]


@pytest.mark.parametrize("op", ["reduce", "copy"])
def test_waits_for_earlier_writers_of_its_destination(op):
    # T0 and T1 both write s1's chunk 0, in steps 0 and 1 (write after write)
    s = sched((0, 0, "s0", "s1"), (1, 0, "s2", "s1", op))
    r = ready(s)
    assert as_list(r.initial()) == [0]
    assert as_list(r.complete(np.array([0]))) == [1]


def test_a_same_step_reader_is_no_dependency():
    # T0 reads s1's chunk 0 in the same step as T1 writes it: it reads the start-of-step value
    s = sched((0, 0, "s1", "s2"), (0, 0, "s0", "s1"), (0, 1, "s3", "s1"))
    r = ready(s)
    assert as_list(r.initial()) == [0, 1, 2]


def test_unrelated_buffers_do_not_wait_unless_synchronous():
    s = sched((0, 0, "s0", "s1"), (1, 1, "s2", "s3"), (1, 0, "s3", "s2"))
    assert as_list(ready(s).initial()) == [0, 1, 2]
    r = ready(s, synchronous=True)
    assert as_list(r.initial()) == [0]
    assert as_list(r.complete(np.array([0]))) == [1, 2]


def test_reading_a_buffer_someone_else_also_reads_is_no_dependency():
    s = sched((0, 0, "s0", "s1"), (1, 0, "s0", "s2"))  # both read s0's chunk 0
    assert as_list(ready(s).initial()) == [0, 1]


def test_a_group_of_writers_must_all_finish():
    # s1 and s2 both reduce chunk 0 into s0 in step 0; s0 then forwards it: waits for both
    s = sched((0, 0, "s1", "s0"), (0, 0, "s2", "s0"), (1, 0, "s0", "s3"))
    r = ready(s)
    assert as_list(r.initial()) == [0, 1]
    assert as_list(r.complete(np.array([1]))) == []
    assert as_list(r.complete(np.array([0]))) == [2]


def test_latest_writer_and_readers_since():
    rows = (
        (0, 0, "s1", "s0"),  # T0 reads (s1, 0)
        (1, 0, "s2", "s1", "copy"),  # T1 writes (s1, 0): after T0 (WAR)
        (2, 0, "s1", "s2"),  # T2 reads (s1, 0) (after T1) and writes (s2, 0), read by T1
        (3, 0, "s0", "s1"),  # T3 reads (s0, 0), written by T0; writes (s1, 0): after T1, T2
        (3, 1, "s3", "s0"),  # T4 unrelated to all (chunk 1)
    )
    s = sched(*rows)
    r = ready(s)
    assert as_list(r.initial()) == [0, 4]
    assert as_list(r.complete(np.array([4]))) == []
    assert as_list(r.complete(np.array([0]))) == [1]
    assert as_list(r.complete(np.array([1]))) == [2]
    assert as_list(r.complete(np.array([2]))) == [3]


def test_completing_a_batch_returns_everything_that_became_ready_sorted():
    s = ps_allreduce(topo("star:n=5"), topo("star:n=5").servers, num_chunks=2)
    r = ready(s)
    first = as_list(r.initial())
    assert first == [i for i, t in enumerate(s) if t.step == 0]
    # a copy of chunk c waits for every reduce of chunk c (its source) and for its
    # destination's reader of chunk c; complete chunk 0's reduces first
    c0 = np.array([i for i in first if s.transfer(i).chunk == 0])
    got = as_list(r.complete(c0[::-1]))
    assert got == [i for i, t in enumerate(s) if t.step == 1 and t.chunk == 0]
    rest = np.array([i for i in first if s.transfer(i).chunk == 1])
    assert as_list(r.complete(rest)) == [i for i, t in enumerate(s) if t.step == 1 and t.chunk == 1]


def test_steps_need_not_be_contiguous():
    s = sched((5, 0, "s0", "s1"), (20, 1, "s2", "s3"), (9, 0, "s1", "s2"))
    r = ready(s)
    assert as_list(r.initial()) == [0, 1]
    assert as_list(r.complete(np.array([0]))) == [2]
    rs = ready(s, synchronous=True)  # dense steps 5 < 9 < 20
    assert as_list(rs.initial()) == [0]
    assert as_list(rs.complete(np.array([0]))) == [2]
    assert as_list(rs.complete(np.array([2]))) == [1]


def _check_against_reference(s, synchronous: bool, pick) -> None:
    """Drive Readiness, completing a picked subset of what is ready each time, and compare the
    ready sets with the literal rules of design §3.3."""
    deps = reference_deps(s, synchronous)
    r = ready(s, synchronous)
    done: set[int] = set()
    avail = as_list(r.initial())
    assert avail == [t for t in range(len(s)) if not deps[t]]
    avail_set = set(avail)
    while avail_set:
        batch = pick(sorted(avail_set))
        assert batch
        new = as_list(r.complete(np.array(batch, dtype=np.int64)))
        done |= set(batch)
        avail_set -= set(batch)
        expect = [t for t in range(len(s)) if t not in done and t not in avail_set and deps[t] <= done]
        assert new == expect
        avail_set |= set(new)
    assert done == set(range(len(s)))


@pytest.mark.parametrize("synchronous", [False, True])
@pytest.mark.parametrize(
    "build",
    [
        lambda: ring_allreduce(topo("bcube:n=3,k=1"), ("s4", "s0", "s8", "s2", "s6"), chunks_per_rank=2),
        lambda: ps_allreduce(topo("star:n=5"), topo("star:n=5").servers, num_chunks=3, ps="s2"),
        lambda: recursive_doubling_allreduce(topo("torus:dims=2x2x2"), topo("torus:dims=2x2x2").servers),
    ],
)
def test_reference_schedules_complete_all_at_once(build, synchronous):
    _check_against_reference(build(), synchronous, lambda avail: avail)


@st.composite
def random_rows(draw):
    n = draw(st.integers(1, 14))
    rows = []
    for _ in range(n):
        src, dst = draw(st.permutations(R))[:2]
        rows.append(
            Transfer(
                draw(st.integers(0, 4)),
                draw(st.integers(0, 1)),
                src,
                dst,
                draw(st.sampled_from(["reduce", "copy"])),
            )
        )
    return rows


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_rows(), st.booleans(), st.randoms(use_true_random=False))
def test_ready_sets_match_the_literal_rules(rows, synchronous, rnd):
    """Random (not necessarily valid) transfer lists, completed in random batches."""
    s = make(topo(STAR), R, rows, 2)

    def pick(avail):
        k = rnd.randint(1, len(avail))
        return sorted(rnd.sample(avail, k))

    _check_against_reference(s, synchronous, pick)
