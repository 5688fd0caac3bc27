"""Every collective's pre- and post-condition (`collective.kinds`) through the validators and the
file formats: textbook schedules pass, broken ones are named, and the symbolic validator agrees
with a plain-Python reference interpreter written here from docs/formats.md."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arsched.collective import Schedule, Transfer, dumps, load, loads, numeric_check, save, validate
from arsched.collective.kinds import NAMES, ROOTED
from arsched.topology import star

TOPO = star(5)
RANKS = tuple(TOPO.servers[:4])


def build(collective, transfers, ranks=RANKS, num_chunks=None, root=None) -> Schedule:
    n = len(ranks)
    chunks = num_chunks or (n * n if collective == "alltoall" else n)
    return Schedule.from_transfers(TOPO, ranks, 1e6, chunks, transfers, collective=collective, root=root)


def ring_reduce_scatter(ranks=RANKS, start=0) -> list[Transfer]:
    """Step t: rank i adds its partial sum of chunk (i - t - 1) mod n into rank i + 1's; rank c
    ends with the whole sum of chunk c."""
    n = len(ranks)
    return [
        Transfer(start + t, (i - t - 1) % n, ranks[i], ranks[(i + 1) % n], "reduce")
        for t in range(n - 1)
        for i in range(n)
    ]


def ring_allgather(ranks=RANKS, start=0) -> list[Transfer]:
    """Step t: rank i copies chunk (i - t) mod n to rank i + 1."""
    n = len(ranks)
    return [
        Transfer(start + t, (i - t) % n, ranks[i], ranks[(i + 1) % n], "copy")
        for t in range(n - 1)
        for i in range(n)
    ]


def direct(collective, ranks=RANKS, root=None) -> list[Transfer]:
    """Everything in one step: the root's copies, the reduces into the root, or every block of an
    AllToAll straight to its destination."""
    n = len(ranks)
    if collective == "broadcast":
        return [Transfer(0, c, root, r, "copy") for c in range(n) for r in ranks if r != root]
    if collective == "reduce":
        return [Transfer(0, c, r, root, "reduce") for c in range(n) for r in ranks if r != root]
    return [Transfer(0, s * n + d, ranks[s], ranks[d], "copy") for s in range(n) for d in range(n) if s != d]


TEXTBOOK = {
    "reduce_scatter": lambda: build("reduce_scatter", ring_reduce_scatter()),
    "allgather": lambda: build("allgather", ring_allgather()),
    "allreduce": lambda: build("allreduce", ring_reduce_scatter() + ring_allgather(start=len(RANKS) - 1)),
    "broadcast": lambda: build("broadcast", direct("broadcast", root=RANKS[2]), root=RANKS[2]),
    "reduce": lambda: build("reduce", direct("reduce", root=RANKS[1]), root=RANKS[1]),
    "alltoall": lambda: build("alltoall", direct("alltoall")),
}


def reference(s: Schedule) -> bool:
    """The collective computed by plain sets: buffers hold a Counter of whose data they carry
    ('x' for data nobody provided); a step reads at its start; a double count, two copies into
    one buffer or a copy beside a reduce fails; at the end every goal is met exactly."""
    n, k, root = s.num_ranks, s.num_chunks, s.kind.root
    shard = k // n if s.collective in ("reduce_scatter", "allgather") else 0
    everyone = Counter(range(n))

    def source(c):  # the one rank whose data chunk c must carry, where the goal is one rank's
        if s.collective == "allgather":
            return c // shard
        if s.collective == "alltoall":
            return c // (k // (n * n)) // n
        return root

    def start(r, c):
        if s.collective in ("allgather", "broadcast", "alltoall"):
            return Counter([r]) if source(c) == r else Counter("x")
        return Counter([r])

    def goal(r, c):
        if s.collective == "allreduce":
            return everyone
        if s.collective == "reduce_scatter":
            return everyone if c // shard == r else None
        if s.collective == "reduce":
            return everyone if r == root else None
        if s.collective == "alltoall" and c // (k // (n * n)) % n != r:
            return None
        return Counter([source(c)])

    rank = {name: i for i, name in enumerate(s.ranks)}
    state = {(r, c): start(r, c) for r in range(n) for c in range(k)}
    rows = sorted(s, key=lambda t: t.step)
    for step in sorted({t.step for t in rows}):
        here = [t for t in rows if t.step == step]
        payload = [Counter(state[rank[t.src], t.chunk]) for t in here]
        copies = Counter((rank[t.dst], t.chunk) for t in here if t.op == "copy")
        reduces = {(rank[t.dst], t.chunk) for t in here if t.op == "reduce"}
        if any(v > 1 for v in copies.values()) or set(copies) & reduces:
            return False
        for t, p in zip(here, payload, strict=True):
            if t.op == "reduce":
                state[rank[t.dst], t.chunk] = state[rank[t.dst], t.chunk] + p
                if any(v > 1 for key, v in state[rank[t.dst], t.chunk].items() if key != "x"):
                    return False
        for t, p in zip(here, payload, strict=True):
            if t.op == "copy":
                state[rank[t.dst], t.chunk] = p
    for (r, c), held in state.items():
        want = goal(r, c)
        if want is not None and +Counter({key: 1 for key in held}) != want:
            return False
    return True


@pytest.mark.parametrize("name", TEXTBOOK)
def test_textbook_schedules_are_valid_and_every_transfer_is_needed(name):
    s = TEXTBOOK[name]()
    assert s.collective == name
    report = validate(s)
    assert report.ok, report.message
    assert report.message.startswith(f"valid {s.kind.title}:")
    assert numeric_check(s).ok
    assert reference(s)
    for i in range(len(s)):
        rows = [t for j, t in enumerate(s) if j != i]
        broken = build(name, rows, num_chunks=s.num_chunks, root=s.root)
        v = validate(broken)
        assert v.kind == "incomplete", (i, v.message)
        assert not numeric_check(broken).ok
        assert not reference(broken)


def test_a_shortfall_is_named_in_words():
    ag = build("allgather", ring_allgather()[:-1])  # the last copy: s3 -> s0 of chunk 1
    assert validate(ag).message == "at the end rank s0 holds chunk 1 with data that no rank provided " + (
        "(a buffer that started with nothing usable)"
    )
    rs = build("reduce_scatter", ring_reduce_scatter()[1:])
    assert "summed over 3 of 4 ranks" in validate(rs).message
    a2a = build("alltoall", [t for t in direct("alltoall") if t.chunk != 1])  # block s0 -> s1
    assert validate(a2a).message == "at the end rank s1 holds chunk 1 with data that no rank provided " + (
        "(a buffer that started with nothing usable)"
    )


def test_unusable_data_added_twice_is_no_double_count_and_poisons_what_it_reaches():
    twice = [
        Transfer(0, 1, "s0", "s2", "reduce"),
        Transfer(0, 1, "s3", "s2", "reduce"),
        *ring_allgather(start=1),
    ]
    assert validate(build("allgather", twice)).ok  # the ring overwrites s2's chunk 1 later
    poisoned = build("allgather", [Transfer(0, 1, "s0", "s1", "reduce"), *ring_allgather(start=1)])
    v = validate(poisoned)
    assert v.kind == "incomplete"
    assert "no rank provided" in v.message
    assert not numeric_check(poisoned).ok
    assert not reference(poisoned)


@pytest.mark.parametrize(
    ("collective", "chunks", "root", "kind", "words"),
    [
        ("reduce_scatter", 6, None, "bad-collective", "multiple of 4 chunks, not 6"),
        ("allgather", 2, None, "bad-collective", "multiple of 4 chunks"),
        ("alltoall", 8, None, "bad-collective", "multiple of 16 chunks, not 8"),
        ("broadcast", 4, None, "bad-collective", "broadcast needs a root rank"),
        ("allreduce", 4, "s0", "bad-collective", "allreduce takes no root"),
        ("reduce", 4, "s4", "bad-root", "the root s4 is not one of the ranks"),
        ("gather", 4, None, "bad-collective", "'gather' is not one of allreduce"),
    ],
)
def test_shapes_a_collective_cannot_take_are_refused(collective, chunks, root, kind, words):
    s = build(collective, [], num_chunks=chunks, root=root)
    for report in (validate(s), numeric_check(s)):
        assert report.kind == kind
        assert words in report.message


@pytest.mark.parametrize("name", TEXTBOOK)
def test_both_file_formats_keep_the_collective_and_root(name, tmp_path):
    s = TEXTBOOK[name]()
    save(s, tmp_path / "s.npz")
    for back in (loads(dumps(s)), load(tmp_path / "s.npz")):
        assert (back.collective, back.root) == (s.collective, s.root)
        assert validate(back).ok
    assert ('"root"' in dumps(s)) == (name in ROOTED)


def test_alltoall_chunks_are_pieces_of_one_ranks_buffer():
    s = build("alltoall", direct("alltoall"), num_chunks=16)
    assert s.chunk_bytes == s.nbytes / 4  # a rank's buffer is its n blocks
    assert TEXTBOOK["allgather"]().chunk_bytes == 1e6 / 4


def test_chunks_no_transfer_touches_in_a_huge_alltoall():
    """More chunks than transfers: the validator holds only the touched ones, and the first
    untouched chunk that must move is the first piece of a block between two ranks."""
    k = 10**15
    ranks = RANKS[:2]
    empty = build("alltoall", [], ranks=ranks, num_chunks=4 * k)
    assert validate(empty).message.startswith(f"at the end rank s1 holds chunk {k} ")
    one = build("alltoall", [Transfer(0, k, "s0", "s1", "copy")], ranks=ranks, num_chunks=4 * k)
    assert f"chunk {k + 1} " in validate(one).message
    assert validate(build("alltoall", [], ranks=ranks[:1], num_chunks=3 * k)).ok


@st.composite
def random_cases(draw):
    name = draw(st.sampled_from(NAMES))
    n = draw(st.integers(1, 3))
    ranks = RANKS[:n]
    chunks = n * n if name == "alltoall" else n * draw(st.integers(1, 2))
    root = ranks[draw(st.integers(0, n - 1))] if name in ROOTED else None
    rows = draw(
        st.lists(
            st.tuples(
                st.integers(0, 3), st.integers(0, chunks - 1), st.sampled_from(ranks), st.sampled_from(ranks)
            )
            .filter(lambda r: r[2] != r[3])
            .map(lambda r: Transfer(r[0], r[1], r[2], r[3], "copy")),
            max_size=12,
        )
        if n > 1
        else st.just([])
    )
    ops = draw(st.lists(st.sampled_from(["copy", "reduce"]), min_size=len(rows), max_size=len(rows)))
    rows = [Transfer(t.step, t.chunk, t.src, t.dst, op) for t, op in zip(rows, ops, strict=True)]
    return build(name, rows, ranks=ranks, num_chunks=chunks, root=root)


@settings(max_examples=300, deadline=None)
@given(random_cases())
def test_property_the_validator_agrees_with_the_reference(s):
    assert validate(s).ok == reference(s), validate(s).message
    if validate(s).ok:
        assert numeric_check(s).ok


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(list(TEXTBOOK)), st.integers(0, 10**6))
def test_property_textbook_schedules_in_any_rank_order(name, seed):
    order = tuple(np.random.default_rng(seed).permutation(RANKS))
    s = TEXTBOOK[name]()
    shuffled = Schedule.from_transfers(
        TOPO, order, s.nbytes, s.num_chunks, list(s), collective=name, root=s.root
    )
    assert validate(shuffled).ok == reference(shuffled)


def test_export_and_runs_take_every_collective():
    """The MSCCL export names the collective and comes back as it; a run's checks pass (the
    runs themselves: tests/runtime/test_runtime_collectives.py)."""
    from arsched.runtime.executor import _check
    from arsched.runtime.msccl_export import to_xml
    from arsched.runtime.msccl_import import from_xml

    for name, make in TEXTBOOK.items():
        s = make()
        back = from_xml(to_xml(s), s.topology, s.ranks, s.nbytes)
        assert (back.collective, back.root) == (name, s.root)
        assert _check([s], "gloo", 1, 1.0) == len(RANKS)
