"""Every collective outside the simulator: on gloo each schedule (hand-made ones and every
registered algorithm of each collective on a ring, or on its family's network) gives exactly
torch's own collective (reduce_scatter_single, all_gather_single, broadcast, reduce,
all_to_all_single) and a broken one does not; the MSCCL XML of each names its `coll` and
buffers as the runtime lays them out, gives the collective's result in any interleaving of the
independent interpreter and comes back as the same collective; hostile XML of the new kinds is
one sentence."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from functools import cache

import numpy as np
import pytest
from mscclsim import run_xml
from test_msccl import assert_round_trip

import arsched.runtime.executor as executor
from arsched.algorithms import algorithms
from arsched.algorithms import build as build_algorithm
from arsched.collective import Schedule, Transfer, save
from arsched.collective.kinds import NAMES, ROOTED
from arsched.runtime import MscclFormatError, from_xml, run_schedules, to_xml
from arsched.topology import parse_spec
from clihelp import assert_one_line_error, run
from collective.test_kinds import RANKS, TEXTBOOK, build, direct

N = len(RANKS)


def relay_alltoall():
    """AllToAll in blocks of two chunks, each block to a non-neighbour through the next rank:
    rank s + 1 holds it in scratch for a step."""
    rows = []
    for s in range(N):
        for d in range(N):
            for j in range(2):
                c = (s * N + d) * 2 + j
                hop = (s + 1) % N
                if d == s:
                    continue
                if d == hop:
                    rows.append(Transfer(0, c, RANKS[s], RANKS[d], "copy"))
                else:
                    rows += [
                        Transfer(0, c, RANKS[s], RANKS[hop], "copy"),
                        Transfer(1, c, RANKS[hop], RANKS[d], "copy"),
                    ]
    return build("alltoall", rows, num_chunks=2 * N * N)


def chain(collective: str, root: int):
    """Broadcast down the chain root, root + 1, ... or Reduce up it, one step per hop."""
    order = [RANKS[(root + i) % N] for i in range(N)]
    if collective == "reduce":
        order = order[::-1]
    op = "reduce" if collective == "reduce" else "copy"
    rows = [Transfer(t, c, order[t], order[t + 1], op) for t in range(N - 1) for c in range(N)]
    return build(collective, rows, root=RANKS[root])


CASES = {
    **{name: make for name, make in TEXTBOOK.items()},
    "alltoall-relay": relay_alltoall,
    "broadcast-chain": lambda: chain("broadcast", 1),
    "reduce-chain": lambda: chain("reduce", 3),
}
SPECS = ["ring:n=4", "torus:dims=2x2"]
# the 4-rank network of an algorithm that builds only on its own family (elsewhere not applicable)
FAMILY = {
    "bcube-native": ["bcube:n=2,k=1"],
    "torus-native": ["torus:dims=2x2"],
    "hierarchical": ["leafspine:leaves=2,spines=1,servers_per_leaf=2"],
    "rail-dbtree": ["hgx:boxes=2,gpus_per_box=2"],
}
BUILT = [
    (spec, c, a.name)
    for c in NAMES
    if c != "allreduce"
    for a in algorithms(c)
    for spec in FAMILY.get(a.name, SPECS)
]
GLOO = [key for key in BUILT if key[0] == FAMILY.get(key[2], SPECS)[0]]  # one network per algorithm


@cache
def built(spec: str, collective: str, name: str):
    """A registered algorithm's schedule of `collective` (root: the second rank)."""
    topo = parse_spec(spec)
    root = topo.servers[1] if collective in ROOTED else None
    return build_algorithm(name, topo, None, 1e6, collective=collective, root=root)


def test_every_collective_matches_torch_exactly_on_gloo(monkeypatch):
    """One set of 4 processes: each case, every registered algorithm of the other collectives
    on a ring, halving-doubling in two segments, their exports imported back, and each textbook
    schedule with its last step dropped (which torch's result must catch)."""
    schedules = [make() for make in CASES.values()] + [built(*key) for key in GLOO]
    schedules += [  # halving-doubling in pipelined segments, whatever depth its default picks here
        build_algorithm("rhd", parse_spec(SPECS[0]), None, 1e6, collective=c, stages=2)
        for c in ("allreduce", "reduce_scatter", "allgather")
    ]
    schedules += [from_xml(to_xml(s), s.topology, s.ranks, s.nbytes) for s in schedules]
    controls = [make() for make in TEXTBOOK.values()]
    plans = executor.rank_plans
    monkeypatch.setattr(
        executor, "rank_plans", lambda s: [p[:-1] for p in plans(s)] if s in controls else plans(s)
    )
    results = run_schedules(schedules + controls, nbytes=4096, repeat=1, timeout=60)
    for s, r in zip(schedules, results, strict=False):
        assert r.max_abs_error == 0.0, (s.collective, s.algorithm)
        assert r.ranks == N and r.nbytes == 4096 and r.time_s > 0 and r.torch_allreduce_time_s > 0
    for s, r in zip(controls, results[len(schedules) :], strict=True):
        assert r.max_abs_error > 0, s.collective


def schedule_of(case) -> Schedule:
    return CASES[case]() if isinstance(case, str) else built(*case)


@pytest.mark.parametrize("case", [*CASES, *BUILT])
def test_exported_program_gives_the_collective_in_any_interleaving(case):
    s = schedule_of(case)
    xml = to_xml(s)
    for seed in range(4):
        for capacity in (1, 3):
            got, want = run_xml(xml, seed, capacity, root=s.kind.root)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_a_missing_wait_is_caught_by_the_interpreter():
    """Without its waits, a relay forwards its scratch before the chunk arrives in some order."""
    xml = to_xml(relay_alltoall())
    assert 'hasdep="1"' in xml  # the relays' sends wait for their receives
    root = ET.fromstring(xml)
    for st in root.iter("step"):
        st.set("depid", "-1")
        st.set("deps", "-1")
    broken = ET.tostring(root, encoding="unicode")
    wrong = 0
    for seed in range(20):
        got, want = run_xml(broken, seed)
        wrong += not np.allclose(got, want)
    assert wrong > 0


LAYOUT = {  # coll, inplace, (i_chunks, o_chunks) per gpu, nchunksperloop for 4 gpus and c chunks
    "allreduce": ("allreduce", "1", lambda c: (c, c), lambda c: c),
    "reduce_scatter": ("reducescatter", "1", lambda c: (c, c // N), lambda c: c),
    "allgather": ("allgather", "1", lambda c: (c // N, c), lambda c: c),
    "broadcast": ("broadcast", "1", lambda c: (c, c), lambda c: c),
    "reduce": ("reduce", "1", lambda c: (c, c), lambda c: c),
    "alltoall": ("alltoall", "0", lambda c: (c // N, c // N), lambda c: c // N),
}


@pytest.mark.parametrize("case", CASES)
def test_coll_and_buffers_are_the_runtimes(case):
    """`coll` as msccl-executor-nccl's parser spells it, in place but for AllToAll, buffer
    sizes per gpu, and every step inside the buffers it names."""
    s = CASES[case]()
    coll, inplace, sizes, per_loop = LAYOUT[s.collective]
    root = ET.fromstring(to_xml(s))
    assert (root.get("coll"), root.get("inplace"), root.get("outofplace")) == (
        coll,
        inplace,
        str(1 - int(inplace)),
    )
    assert int(root.get("nchunksperloop")) == per_loop(s.num_chunks)
    for gpu in root:
        size = {"i": int(gpu.get("i_chunks")), "o": int(gpu.get("o_chunks")), "s": int(gpu.get("s_chunks"))}
        assert (size["i"], size["o"]) == sizes(s.num_chunks)
        for st in gpu.iter("step"):
            if st.get("type") != "nop":
                for key in ("src", "dst"):
                    off, cnt = int(st.get(f"{key}off")), int(st.get("cnt"))
                    assert off >= 0 and off + cnt <= size[st.get(f"{key}buf")], (case, st.attrib)
    uses_scratch = any(st.get("srcbuf") == "s" for st in root.iter("step"))
    assert uses_scratch == (case == "alltoall-relay")


@pytest.mark.parametrize("case", [*CASES, *BUILT])
def test_round_trip_gives_the_same_collective(case):
    assert_round_trip(schedule_of(case))


def test_moving_an_alltoall_block_to_itself_is_refused():
    rows = [*direct("alltoall"), Transfer(1, 0, "s0", "s1", "copy"), Transfer(2, 0, "s1", "s0", "copy")]
    with pytest.raises(MscclFormatError) as info:
        to_xml(build("alltoall", rows))
    assert "chunk 0" in str(info.value) and "\n" not in str(info.value)


def first(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def xml_of(case: str) -> str:
    return to_xml(CASES[case]())


HOSTILE = {
    "shards-do-not-divide": (
        lambda: first(xml_of("reduce_scatter"), 'nchunksperloop="4"', 'nchunksperloop="6"'),
        "multiple of 4 chunks, not 6",
    ),
    "blocks-do-not-divide": (
        lambda: first(xml_of("alltoall"), 'nchunksperloop="4"', 'nchunksperloop="6"'),
        "multiple of 4 chunks per loop, not 6",
    ),
    "past-the-shard": (  # ReduceScatter's output is one shard: one chunk here
        lambda: first(
            xml_of("reduce_scatter"),
            'type="rrc" srcbuf="i" srcoff="3" dstbuf="i"',
            'type="rrc" srcbuf="o" srcoff="3" dstbuf="o"',
        ),
        "outside the 1 chunks of buffer 'o'",
    ),
    "scratch-outside-alltoall": (
        lambda: first(xml_of("allgather"), 'type="s" srcbuf="o"', 'type="s" srcbuf="s"'),
        "outside AllToAll",
    ),
    "scratch-past-the-ids": (
        lambda: first(
            xml_of("alltoall-relay"), 'type="s" srcbuf="s" srcoff="', 'type="s" srcbuf="s" srcoff="9'
        ),
        "of buffer 's'",
    ),
    "copy-between-blocks": (
        lambda: first(
            xml_of("alltoall"), 'type="cpy" srcbuf="i" srcoff="0"', 'type="cpy" srcbuf="i" srcoff="1"'
        ),
        "keeps every chunk in its own position",
    ),
    "root-unknown": (
        lambda: first(xml_of("broadcast"), 'coll="broadcast"', 'coll="reduce"'),
        "whose root cannot be told",
    ),
    "wrong-collective": (  # a ReduceScatter read as an AllReduce: the sums reach one rank each
        lambda: first(xml_of("reduce_scatter"), 'coll="reducescatter"', 'coll="allreduce"'),
        "does not compute AllReduce",
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_xml_of_the_new_kinds_is_one_sentence(case, tmp_path, capsys):
    make, words = HOSTILE[case]
    text = make()
    with pytest.raises(MscclFormatError) as info:
        from_xml(text, TEXTBOOK["allgather"]().topology, RANKS, 1e6)
    assert words in str(info.value) and "\n" not in str(info.value), str(info.value)
    path = tmp_path / "bad.xml"
    path.write_text(text)
    code, _, err = run(capsys, "import", str(path), "-t", "star:n=5", "-o", str(tmp_path / "out.json"))
    assert_one_line_error(code, err)


def test_cli_runs_exports_and_imports_a_saved_reduce_scatter(tmp_path, capsys):
    """Three ranks on a ring: the file carries the collective through every command."""
    topo = parse_spec("ring:n=3")
    ranks = tuple(topo.servers[:3])
    rows = [
        Transfer(t, (i - t - 1) % 3, ranks[i], ranks[(i + 1) % 3], "reduce")
        for t in range(2)
        for i in range(3)
    ]
    s = Schedule.from_transfers(topo, ranks, 6000, 3, rows, collective="reduce_scatter")
    save(s, tmp_path / "rs.json")
    code, out, err = run(capsys, "run", str(tmp_path / "rs.json"), "--repeat", "1", "--json")
    assert code == 0, err
    info = json.loads(out)
    assert info["max_abs_error"] == 0 and info["ranks"] == 3 and info["nbytes"] == 6000
    code, _, err = run(capsys, "export", str(tmp_path / "rs.json"), "-o", str(tmp_path / "rs.xml"))
    assert code == 0, err
    assert 'coll="reducescatter"' in (tmp_path / "rs.xml").read_text()
    code, out, err = run(
        capsys,
        "import",
        str(tmp_path / "rs.xml"),
        "-t",
        "ring:n=3",
        "-s",
        "6000",
        "-o",
        str(tmp_path / "b.json"),
    )
    assert code == 0 and "valid ReduceScatter" in out, err
    code, out, _ = run(capsys, "validate", str(tmp_path / "b.json"))
    assert code == 0 and "ReduceScatter" in out
