"""The validator and the numeric check against design §3.3: every kind of broken schedule is
rejected with the right kind, transfer and words; hand-written correct schedules are accepted on
every family; the start-of-step read rule; property tests with random ranks and mutations."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from arsched.collective import (
    InvalidScheduleError,
    Schedule,
    Transfer,
    ValidationReport,
    numeric_check,
    validate,
)
from arsched.errors import ArschedError
from schedules import (
    bfs_route,
    make,
    ps_allreduce,
    ps_transfers,
    recursive_doubling_allreduce,
    reference_violation,
    ring_allreduce,
    ring_transfers,
    topo,
)

STAR4 = "star:n=4"
R4 = ("s0", "s1", "s2", "s3")
R3 = ("s0", "s1", "s2")


def broadcast(step: int, root: str, dsts, chunk: int = 0) -> list[Transfer]:
    """The copies of `root`'s buffer of `chunk` to every rank of `dsts`, all in `step`."""
    return [Transfer(step, chunk, root, d, "copy") for d in dsts]


def names(message: str, *nodes: str) -> bool:
    """True if every node id appears in the message as a whole word (s1 is not s10)."""
    return all(re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", message) for n in nodes)


def tail(message: str) -> str:
    """The words after the 'transfer i (...): ' prefix."""
    return message.split("): ", 1)[-1]


def schedule(transfers, ranks=R4, num_chunks=2, spec=STAR4, nbytes=1e6) -> Schedule:
    return make(topo(spec), ranks, transfers, num_chunks, nbytes)


def assert_rejected(s: Schedule, kind: str, transfer: int | None, *words: str) -> ValidationReport:
    rep = validate(s)
    assert rep.ok is False
    assert not rep
    assert rep.kind == kind, rep.message
    assert rep.transfer == transfer, rep.message
    assert "\n" not in rep.message
    assert names(rep.message, *words), rep.message
    with pytest.raises(InvalidScheduleError, match=re.escape(rep.message)):
        rep.raise_if_invalid()
    return rep


# ---- 1. every kind of broken schedule --------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "ranks", "num_chunks", "nbytes", "words"),
    [
        ("no-ranks", (), 2, 1e6, ()),
        ("duplicate-rank", ("s0", "s1", "s2", "s1"), 2, 1e6, ("s1",)),
        ("unknown-rank", ("s0", "s1", "s9"), 2, 1e6, ("s9",)),
        ("not-a-server", ("s0", "w0", "s1"), 2, 1e6, ("w0",)),
        ("bad-chunks", R4, 0, 1e6, ("num_chunks",)),
        ("bad-chunks", R4, -3, 1e6, ("-3",)),
        ("bad-bytes", R4, 2, 0.0, ("bytes",)),
        ("bad-bytes", R4, 2, -5.0, ("bytes",)),
        ("bad-bytes", R4, 2, math.nan, ("bytes",)),
        ("bad-bytes", R4, 2, math.inf, ("bytes",)),
    ],
)
def test_header_problems(kind, ranks, num_chunks, nbytes, words):
    transfers = ps_transfers(R3, 1)
    s = schedule(transfers, ranks=ranks, num_chunks=num_chunks, nbytes=nbytes)
    rep = assert_rejected(s, kind, None, *words)
    # the numeric check reports the same static problem
    num = numeric_check(s)
    assert (num.ok, num.kind, num.message) == (False, kind, rep.message)


def _row_cases():
    base = ps_transfers(R4, 2)  # 12 transfers, index 3 is s2 -> s0 chunk 1 (reduce, step 0)
    t3 = base[3]
    assert (t3.step, t3.chunk, t3.src, t3.dst, t3.op) == (0, 1, "s2", "s0", "reduce")
    base3 = ps_transfers(R3, 2)  # 8 transfers, index 3 is s2 -> s0 chunk 1
    cases = {
        "negative step": ("bad-step", R4, base, replace(t3, step=-1), ("step -1",)),
        "chunk too large": ("bad-chunk", R4, base, replace(t3, chunk=2), ("chunk 2", "0..1")),
        "negative chunk": ("bad-chunk", R4, base, replace(t3, chunk=-1), ("chunk -1", "0..1")),
        "src not a rank": ("not-a-rank", R3, base3, replace(base3[3], src="s3"), ("s3",)),
        "dst not a rank": ("not-a-rank", R3, base3, replace(base3[3], dst="s3"), ("s3",)),
        "self transfer": ("self-transfer", R4, base, replace(t3, dst="s2"), ("same rank",)),
        "path to the wrong node": (
            "bad-path",
            R4,
            base,
            replace(t3, path=("s2", "w0", "s1")),
            ("s2 -> w0 -> s1",),
        ),
        "path from the wrong node": (
            "bad-path",
            R4,
            base,
            replace(t3, path=("s1", "w0", "s0")),
            ("s1 -> w0 -> s0",),
        ),
        "link that does not exist": ("missing-link", R4, base, replace(t3, path=("s2", "s0")), ("s2->s0",)),
        "unknown node on the path": (
            "missing-link",
            R4,
            base,
            replace(t3, path=("s2", "zz9", "s0")),
            ("zz9",),
        ),
        "path visits a node twice": (
            "missing-link",
            R4,
            base,
            replace(t3, path=("s2", "w0", "s1", "w0", "s0")),
            ("w0",),
        ),
    }
    return [pytest.param(*v, id=k) for k, v in cases.items()]


@pytest.mark.parametrize(("kind", "ranks", "base", "bad", "words"), _row_cases())
def test_row_problems_name_the_transfer(kind, ranks, base, bad, words):
    transfers = list(base)
    transfers[3] = bad
    s = schedule(transfers, ranks=ranks)
    rep = assert_rejected(s, kind, 3)
    assert rep.message.startswith(
        f"transfer 3 (step {bad.step}, chunk {bad.chunk}, {bad.op} {bad.src}->{bad.dst})"
    )
    assert names(tail(rep.message), *words), rep.message
    num = numeric_check(s)
    assert (num.ok, num.kind, num.transfer, num.message) == (False, kind, 3, rep.message)


def test_first_violation_in_stored_order_is_reported():
    transfers = ps_transfers(R4, 2)
    transfers[6] = replace(transfers[6], chunk=7)  # bad-chunk, later in storage
    transfers[4] = replace(transfers[4], path=(transfers[4].src, transfers[4].dst))  # missing-link
    assert_rejected(schedule(transfers), "missing-link", 4)


def test_double_copy_in_one_step():
    transfers = ps_transfers(R4, 2)
    first = transfers[6]
    assert (first.step, first.op, first.dst, first.chunk) == (1, "copy", "s1", 0)
    transfers.insert(9, first)  # a second copy into s1's chunk 0 in step 1
    assert_rejected(schedule(transfers), "double-copy", 9)


def test_double_copy_points_to_a_second_copy_with_two_buffers():
    transfers = ps_transfers(R4, 2)
    transfers += [transfers[6], transfers[7]]  # second copies into (s1, 0) and (s1, 1): rows 12, 13
    assert_rejected(schedule(transfers), "double-copy", 12)


@pytest.mark.parametrize("reduce_first", [False, True])
def test_copy_and_reduce_in_one_step(reduce_first):
    transfers = ps_transfers(R4, 2)
    copy_row = 6  # step 1: copy s0 -> s1 chunk 0
    extra = Transfer(1, 0, "s2", "s1", "reduce")
    if reduce_first:
        transfers.insert(copy_row, extra)
        reduce_row, copy_row = copy_row, copy_row + 1
    else:
        transfers.insert(9, extra)
        reduce_row = 9
    rep = validate(schedule(transfers))
    assert (rep.ok, rep.kind) == (False, "copy-and-reduce"), rep.message
    assert rep.transfer in (copy_row, reduce_row)
    assert names(rep.message, "s1")


def test_double_count_duplicate_reduce_in_one_step():
    transfers = ps_transfers(R4, 2)
    transfers.insert(2, transfers[0])  # s1 adds its chunk 0 into s0 twice in step 0
    s = schedule(transfers)
    rep = assert_rejected(s, "double-count", 2, "s1")
    assert not names(tail(rep.message), "s2") and not names(tail(rep.message), "s3")


def test_double_count_overlapping_partial_sums_in_one_step():
    # s1 holds s0+s1 after step 0; in step 1 s1 and s0 both reduce into s2: s0 arrives twice
    transfers = [
        Transfer(0, 0, "s0", "s1"),
        Transfer(1, 0, "s1", "s2"),
        Transfer(1, 0, "s0", "s2"),
        *broadcast(2, "s2", ("s0", "s1")),
    ]
    rep = assert_rejected(schedule(transfers, ranks=R3, num_chunks=1), "double-count", 2, "s0")
    assert names(tail(rep.message), "s0")
    assert not names(tail(rep.message), "s1") and not names(tail(rep.message), "s2")


def test_double_count_across_steps():
    transfers = [
        Transfer(0, 0, "s1", "s0"),
        Transfer(1, 0, "s1", "s0"),  # s1 still holds only its own data: added a second time
        Transfer(1, 0, "s2", "s0"),
        *broadcast(2, "s0", ("s1", "s2")),
    ]
    rep = assert_rejected(schedule(transfers, ranks=R3, num_chunks=1), "double-count", 1, "s1")
    assert names(tail(rep.message), "s1") and not names(tail(rep.message), "s2")


@pytest.mark.parametrize("where", ["one step", "across steps", "overlap"])
def test_numeric_check_sees_double_counts(where):
    if where == "one step":
        transfers = ps_transfers(R4, 2)
        transfers.insert(2, transfers[0])
        s = schedule(transfers)
    elif where == "across steps":
        transfers = [*ps_transfers(R4, 2), Transfer(2, 1, "s3", "s0")]
        s = schedule(transfers)
    else:
        transfers = [Transfer(0, 0, "s0", "s1"), Transfer(1, 0, "s1", "s2"), Transfer(1, 0, "s0", "s2")]
        transfers += broadcast(2, "s2", ("s0", "s1"))
        s = schedule(transfers, ranks=R3, num_chunks=1)
    assert reference_violation(s.ranks, s.num_chunks, s.transfers) == "double-count"
    for seed in (0, 1):
        rep = numeric_check(s, seed=seed)
        assert (rep.ok, rep.kind) == (False, "wrong-sum"), rep.message


def test_validate_rejects_a_double_count_in_a_later_step():
    # a complete PS followed by one more reduce: the sum is wrong, so it must not be "valid"
    s = schedule([*ps_transfers(R4, 2), Transfer(2, 1, "s3", "s0")])
    assert not numeric_check(s).ok
    assert_rejected(s, "double-count", 12, "s0", "s1", "s2", "s3")


def test_incomplete_names_rank_and_chunk():
    transfers = ps_transfers(R4, 2)
    last = transfers.pop()  # copy s0 -> s3 chunk 1
    assert (last.dst, last.chunk) == ("s3", 1)
    s = schedule(transfers)
    rep = assert_rejected(s, "incomplete", None, "s3")
    assert "chunk 1" in rep.message
    assert "1 of 4" in rep.message
    assert names(rep.message.split("missing")[1], "s0", "s1", "s2")
    num = numeric_check(s)
    assert (num.ok, num.kind, num.transfer) == (False, "wrong-sum", None)
    assert names(num.message, "s3") and "chunk 1" in num.message


def test_no_transfers_is_incomplete_for_two_ranks_and_valid_for_one():
    assert validate(schedule([], ranks=("s0", "s1"))).kind == "incomplete"
    assert not numeric_check(schedule([], ranks=("s0", "s1"))).ok
    one = schedule([], ranks=("s2",))
    assert validate(one).ok and numeric_check(one).ok


def test_double_count_with_more_than_64_ranks_names_the_rank():
    spec = "star:n=70"
    ranks = tuple(f"s{i}" for i in range(70))
    transfers = ps_transfers(ranks, 1)
    transfers.insert(5, Transfer(0, 0, "s66", "s0"))  # the original s66 -> s0 moves to row 66
    s = make(topo(spec), ranks, transfers, 1)
    rep = assert_rejected(s, "double-count", 66, "s66")
    assert names(tail(rep.message), "s66")
    assert not names(tail(rep.message), "s0") and not names(tail(rep.message), "s65")


# ---- 2. correct schedules are accepted --------------------------------------------------------------

FAMILIES = [
    "ring:n=6",
    "star:n=5",
    "bcube:n=3,k=1",
    "bcube:n=2,k=2",
    "fattree:k=4",
    "torus:dims=3x3",
    "torus:dims=2x2x3",
    "dcell:n=2,k=1",
    "dcell:n=3,k=1",
    "jellyfish:switches=8,ports=4,net_ports=3,seed=1",
    "leafspine:leaves=2,spines=2,servers_per_leaf=3",
]


def random_ranks(servers, seed: int, low: int = 2, high: int | None = None) -> tuple[str, ...]:
    rng = np.random.default_rng(seed)
    k = int(rng.integers(low, min(len(servers), high or len(servers)) + 1))
    return tuple(str(x) for x in rng.permutation(np.array(servers))[:k])


def assert_valid(s: Schedule, steps: int) -> None:
    rep = validate(s)
    assert rep.ok, rep.message
    assert rep.kind is None and rep.transfer is None
    assert (rep.num_transfers, rep.num_steps) == (len(s), steps)
    assert f"{s.num_ranks} ranks, {s.num_chunks} chunks, {len(s)} transfers in {steps} steps" in rep.message
    num = numeric_check(s)
    assert num.ok, num.message
    assert reference_violation(s.ranks, s.num_chunks, s.transfers) is None


@pytest.mark.parametrize("spec", FAMILIES)
@pytest.mark.parametrize("seed", [0, 1])
def test_reference_schedules_are_valid(spec, seed):
    t = topo(spec)
    ranks = random_ranks(t.servers, seed)
    n = len(ranks)
    route = bfs_route(t) if seed else None
    ring = ring_allreduce(t, ranks, chunks_per_rank=1 + seed, route=route)
    assert len(ring) == 2 * n * (n - 1) * (1 + seed)
    assert_valid(ring, 2 * (n - 1))
    ps = ps_allreduce(t, ranks, num_chunks=2, ps=ranks[-1], route=route)
    assert len(ps) == 2 * 2 * (n - 1)
    assert_valid(ps, 2)
    for k in (2, 4, 8):
        if k <= len(t.servers):
            rd = recursive_doubling_allreduce(
                t, random_ranks(t.servers, seed, k, k), num_chunks=2, route=route
            )
            assert_valid(rd, k.bit_length() - 1)


def test_full_rank_sets_and_more_than_64_ranks():
    for spec in ("bcube:n=4,k=1", "dcell:n=4,k=1", "torus:dims=4x4", "fattree:k=4"):
        t = topo(spec)
        assert_valid(ring_allreduce(t, t.servers), 2 * (len(t.servers) - 1))
    t = topo("star:n=70")
    assert_valid(ps_allreduce(t, t.servers[::-1]), 2)
    assert_valid(ring_allreduce(t, t.servers), 2 * 69)


def test_stored_order_and_step_numbers_do_not_matter():
    t = topo("bcube:n=3,k=1")
    ranks = random_ranks(t.servers, 5)
    transfers = ring_transfers(ranks, 2)
    rng = np.random.default_rng(3)
    shuffled = [transfers[i] for i in rng.permutation(len(transfers))]
    gapped = [replace(x, step=10 * x.step + 7) for x in shuffled]
    for tr in (shuffled, gapped):
        s = make(t, ranks, tr, 2 * len(ranks))
        assert_valid(s, 2 * (len(ranks) - 1))


# ---- the start-of-step read rule ----------------------------------------------------------------


@pytest.mark.parametrize("order", [0, 1])
def test_copy_swap_reads_the_start_of_the_step(order):
    """Valid only because reads see the start of the step: in step 1 s0 and s1 swap their
    buffers by copy (s1 gets the full sum, s0 gets s1's own data back), and step 2 repairs s0.
    Were the copy into s0 seen by the copy out of s0, s1 would end with only its own data."""
    swap = [Transfer(1, 0, "s1", "s0", "copy"), Transfer(1, 0, "s0", "s1", "copy")]
    transfers = [
        Transfer(0, 0, "s1", "s0"),
        *(swap if order else swap[::-1]),
        Transfer(2, 0, "s1", "s0", "copy"),
    ]
    s = schedule(transfers, ranks=("s0", "s1"), num_chunks=1)
    assert_valid(s, 3)


@pytest.mark.parametrize("order", [0, 1])
def test_reduce_swap_does_not_double_count(order):
    """s0 and s1 add into each other in the same step: each adds the other's *own* data.
    If one read saw the other's write, the sender's data would come back a second time."""
    swap = [Transfer(0, c, "s0", "s1") for c in range(3)] + [Transfer(0, c, "s1", "s0") for c in range(3)]
    s = schedule(swap if order else swap[::-1], ranks=("s0", "s1"), num_chunks=3)
    assert_valid(s, 1)


def test_chained_reduces_in_one_step_forward_old_data():
    """s0 -> s1 and s1 -> s2 in the same step: s2 receives s1's data only (not s0 + s1), so
    adding s0 into s2 in the next step is no double count."""
    transfers = [
        Transfer(0, 0, "s1", "s2"),
        Transfer(0, 0, "s0", "s1"),
        Transfer(1, 0, "s0", "s2"),
        *broadcast(2, "s2", ("s0", "s1")),
    ]
    assert_valid(schedule(transfers, ranks=R3, num_chunks=1), 3)


def test_disjoint_reduces_into_one_buffer_in_one_step_are_allowed():
    # a tree: s1 gathers s2+s3 in step 0, then s1 (s1+s2+s3) and s4 (own) reduce into s0 together
    ranks = ("s0", "s1", "s2", "s3", "s4")
    transfers = [
        Transfer(0, 0, "s2", "s1"),
        Transfer(0, 0, "s3", "s1"),
        Transfer(1, 0, "s1", "s0"),
        Transfer(1, 0, "s4", "s0"),
        *broadcast(2, "s0", ranks[1:]),
    ]
    assert_valid(schedule(transfers, ranks=ranks, num_chunks=1, spec="star:n=5"), 3)


def test_report_and_error_types():
    ok = validate(ring_allreduce(topo("ring:n=4"), ("s0", "s1", "s2", "s3")))
    assert bool(ok) is True
    ok.raise_if_invalid()
    bad = validate(schedule([], ranks=("s0", "s1")))
    assert bool(bad) is False
    with pytest.raises(InvalidScheduleError) as e:
        bad.raise_if_invalid()
    assert isinstance(e.value, ArschedError) and isinstance(e.value, ValueError)


# ---- 3. properties ------------------------------------------------------------------------------

SMALL = [
    "ring:n=5",
    "ring:n=8",
    "star:n=6",
    "bcube:n=2,k=1",
    "bcube:n=3,k=1",
    "torus:dims=3x3",
    "torus:dims=2x2x2",
    "fattree:k=4",
    "dcell:n=2,k=1",
    "leafspine:leaves=2,spines=1,servers_per_leaf=3",
]


@st.composite
def cases(draw):
    spec = draw(st.sampled_from(SMALL))
    t = topo(spec)
    order = draw(st.permutations(t.servers))
    ranks = tuple(order[: draw(st.integers(2, min(8, len(order))))])
    algo = draw(st.sampled_from(["ring", "ps"]))
    chunks = draw(st.integers(1, 2))
    route = bfs_route(t) if draw(st.booleans()) else None
    if algo == "ring":
        transfers, num_chunks = ring_transfers(ranks, chunks, route), len(ranks) * chunks
    else:
        ps = draw(st.sampled_from(ranks))
        transfers, num_chunks = ps_transfers(ranks, chunks + 1, ps, route), chunks + 1
    return t, ranks, transfers, num_chunks


@given(cases())
def test_property_reference_schedules_validate(case):
    t, ranks, transfers, num_chunks = case
    s = make(t, ranks, transfers, num_chunks)
    assert validate(s).ok, validate(s).message
    assert numeric_check(s).ok


def mutate(transfers, num_chunks, kind: str, i: int, c: int):
    """One mutation that breaks an AllReduce whose every transfer is needed (ring, PS)."""
    out = list(transfers)
    i %= len(out)
    if kind == "drop":
        del out[i]
        return out, "incomplete"
    if kind == "duplicate-reduce":
        reduces = [k for k, x in enumerate(out) if x.op == "reduce"]
        i = reduces[i % len(reduces)]
        out.insert(i + 1, out[i])
        return out, "double-count"
    new = (out[i].chunk + 1 + c % (num_chunks - 1)) % num_chunks
    out[i] = replace(out[i], chunk=new)
    return out, None


@given(
    cases(),
    st.sampled_from(["drop", "duplicate-reduce", "change-chunk"]),
    st.integers(0, 10_000),
    st.integers(0, 100),
)
def test_property_mutations_are_rejected_by_both_checks(case, kind, i, c):
    t, ranks, transfers, num_chunks = case
    if kind == "change-chunk" and num_chunks < 2:
        kind = "drop"
    mutated, _ = mutate(transfers, num_chunks, kind, i, c)
    s = make(t, ranks, mutated, num_chunks)
    ref = reference_violation(ranks, num_chunks, mutated)
    assert ref is not None
    v, n = validate(s), numeric_check(s)
    assert v.ok is False, v.message
    assert n.ok is False, n.message
    assert v.ok == n.ok == (ref is None)


@settings(max_examples=15, phases=[Phase.generate])
@given(cases(), st.sampled_from(["drop", "duplicate-reduce", "late-reduce"]), st.integers(0, 10_000))
def test_property_mutation_kinds_agree_with_the_reference(case, kind, i):
    """The validator names the same violation as the reference interpreter; a reduce replayed
    after the schedule finished (a later-step double count) is rejected too."""
    t, ranks, transfers, num_chunks = case
    if kind == "late-reduce":
        reduces = [x for x in transfers if x.op == "reduce"]
        last = max(x.step for x in transfers)
        mutated, expected = [*transfers, replace(reduces[i % len(reduces)], step=last + 1)], "double-count"
    else:
        mutated, expected = mutate(transfers, num_chunks, kind, i, 0)
    assert reference_violation(ranks, num_chunks, mutated) == expected
    s = make(t, ranks, mutated, num_chunks)
    v = validate(s)
    assert (v.ok, v.kind) == (False, expected), v.message
    assert numeric_check(s).ok is False


@pytest.mark.parametrize("cut", [0, 3, 7])
def test_more_chunks_than_transfers_hold_only_the_touched_ones(cut):
    """A schedule claiming 10^18 chunks is checked without a state per chunk, and says exactly
    what it says when the count is small: the first buffer short of data, rank-major, whether a
    chunk some transfer touches or one none does (chunk 2 here, which only its rank holds)."""
    transfers = ps_transfers(R4, 2)
    del transfers[cut]
    small = schedule(transfers, num_chunks=len(transfers))  # every chunk held in the state
    for num_chunks in (len(transfers) + 1, 10**18):
        huge = schedule(transfers, num_chunks=num_chunks)
        for check in (validate, numeric_check):
            a, b = check(small), check(huge)
            assert (a.ok, a.kind, a.transfer, a.message) == (b.ok, b.kind, b.transfer, b.message)


def test_a_chunk_no_transfer_touches_is_named():
    rep = validate(schedule(ps_transfers(R4, 2), num_chunks=10**18))  # complete on chunks 0 and 1
    assert (rep.ok, rep.kind) == (False, "incomplete")
    assert tail(rep.message) == tail(
        "at the end rank s0 holds chunk 2 summed over 1 of 4 ranks (missing s1, s2, s3)"
    )
    num = numeric_check(schedule(ps_transfers(R4, 2), num_chunks=10**18))
    assert (
        (num.ok, num.kind) == (False, "wrong-sum") and "rank s0" in num.message and "chunk 2" in num.message
    )


def test_one_rank_with_10_18_chunks_is_valid_at_no_cost():
    one = schedule([], ranks=("s2",), num_chunks=10**18)
    assert validate(one).ok and numeric_check(one).ok
    assert "1 ranks, 1000000000000000000 chunks" in validate(one).message
