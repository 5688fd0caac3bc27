"""MSCCL XML export and import: the exported program computes the sum under any interleaving
(an independent interpreter), has the structure the MSCCL runtime requires, and comes back as
the same schedule; foreign XML (fused steps, no minBytes) imports; malformed XML is one sentence."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from collections import defaultdict
from functools import cache

import numpy as np
import pytest
from mscclsim import run_xml

from arsched.algorithms import NotApplicable, algorithms, build
from arsched.collective import load, save, validate
from arsched.runtime import MscclFormatError, from_xml, save_xml, to_xml
from arsched.topology import parse_spec
from clihelp import assert_one_line_error, run

SPECS = ["ring:n=4", "star:n=4", "bcube:n=2,k=1", "torus:dims=2x2"]
CASES = [(spec, a.name) for spec in SPECS for a in algorithms() if a.name != "auto"]  # auto: one of these
ALGO_ATTRS = [
    "name",
    "proto",
    "nchannels",
    "nchunksperloop",
    "ngpus",
    "coll",
    "inplace",
    "outofplace",
    "minBytes",
    "maxBytes",
    "redop",
]
STEP_ATTRS = ["s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep"]


@cache
def schedule_for(spec: str, name: str):
    """The algorithm's schedule on one channel per rank pair: MSCCL XML does not say which of a
    pair's channels were one schedule channel, so only a one-channel schedule comes back with
    its connections' order (several channels: `test_msccl_fabrics`)."""
    try:
        return dataclasses.replace(build(name, parse_spec(spec), None, 1e6), channels=1)
    except NotApplicable as e:
        pytest.skip(str(e))


def connections(s) -> dict[tuple[str, str], list[tuple[int, str]]]:
    """Per (src, dst): the (chunk, op) sequence in (step, stored) order."""
    out = defaultdict(list)
    for i in np.lexsort((np.arange(len(s)), s.step)):
        t = s.transfer(int(i))
        out[(t.src, t.dst)].append((t.chunk, t.op))
    return dict(out)


def assert_round_trip(s):
    """Export, import back: a valid schedule of the same collective, root, ranks, chunks, size
    and name, with the same transfers per rank and peer in the same order, that exports to the
    same bytes again. Returns it."""
    xml = to_xml(s)
    back = from_xml(xml, s.topology, s.ranks, s.nbytes)
    assert validate(back).ok
    keys = ("collective", "root", "ranks", "num_chunks", "nbytes", "algorithm")
    assert [getattr(back, k) for k in keys] == [getattr(s, k) for k in keys]
    assert connections(back) == connections(s)
    assert to_xml(back) == xml
    return back


@pytest.mark.parametrize(("spec", "name"), CASES)
def test_round_trip(spec, name):
    s = schedule_for(spec, name)
    back = assert_round_trip(s)
    # steps only move earlier where the original had slack: each transfer's step <= its dense step
    dense = {}
    for t, st in zip(s, np.unique(s.step, return_inverse=True)[1].ravel(), strict=True):
        dense[(t.chunk, t.src, t.dst, t.op)] = max(dense.get((t.chunk, t.src, t.dst, t.op), 0), int(st))
    assert all(t.step <= dense[(t.chunk, t.src, t.dst, t.op)] for t in back)


@pytest.mark.parametrize(("spec", "name"), CASES)
def test_exported_program_computes_the_sum_in_any_interleaving(spec, name):
    s = schedule_for(spec, name)
    xml = to_xml(s)
    for seed in range(2):
        got, want = run_xml(xml, seed, capacity=1)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("spec", "name"), CASES)
def test_exported_structure_is_what_the_runtime_requires(spec, name):
    s = schedule_for(spec, name)
    root = ET.fromstring(to_xml(s))
    assert root.tag == "algo" and all(root.get(a) is not None for a in ALGO_ATTRS)
    assert (root.get("coll"), int(root.get("ngpus")), int(root.get("nchunksperloop"))) == (
        "allreduce",
        s.num_ranks,
        s.num_chunks,
    )
    sends, recvs = defaultdict(int), defaultdict(int)
    for gpu in root:
        g = int(gpu.get("id"))
        tbs = {int(tb.get("id")): tb for tb in gpu}
        assert sorted(tbs) == list(range(len(tbs)))  # contiguous ids
        links = [(int(tb.get("send")), int(tb.get("chan"))) for tb in gpu if tb.get("send") != "-1"]
        links += [(-2 - int(tb.get("recv")), int(tb.get("chan"))) for tb in gpu if tb.get("recv") != "-1"]
        assert len(links) == len(set(links))  # one thread block per connection
        targets = set()
        for tb in gpu:
            peers = {int(tb.get("send")), int(tb.get("recv"))}
            assert g not in peers and peers <= set(range(-1, s.num_ranks))
            steps = list(tb)
            assert len(steps) <= 256
            for k, st in enumerate(steps):
                assert all(st.get(a) is not None for a in STEP_ATTRS) and int(st.get("s")) == k
                depid, deps = int(st.get("depid")), int(st.get("deps"))
                if depid >= 0:
                    assert depid != int(tb.get("id")) and 0 <= deps < len(tbs[depid])
                    targets.add((depid, deps))
                if st.get("type") == "s":
                    sends[(g, int(tb.get("send")))] += 1
                elif st.get("type") in ("r", "rrc"):
                    recvs[(int(tb.get("recv")), g)] += 1
        marked = {(int(tb.get("id")), int(st.get("s"))) for tb in gpu for st in tb if st.get("hasdep") == "1"}
        assert marked == targets
    assert sends == recvs and sum(sends.values()) == len(s)


def test_ring_and_ps_keep_their_steps_exactly():
    topo = parse_spec("ring:n=5")
    for name, steps in (("ring", 2 * (5 - 1)), ("ps", 2)):
        s = build(name, topo, None, 1e6)
        back = from_xml(to_xml(s), topo, s.ranks, s.nbytes)
        assert back.num_steps == steps
        key = sorted((t.step, t.chunk, t.src, t.dst, t.op) for t in back)
        assert key == sorted((t.step, t.chunk, t.src, t.dst, t.op) for t in s)


def test_rank_order_and_paths_follow_the_given_ranks():
    topo = parse_spec("ring:n=6")
    ranks = ("s4", "s1", "s3")
    s = build("ring", topo, ranks, 1e6)
    back = from_xml(to_xml(s), topo, ranks, s.nbytes)
    assert back.ranks == ranks and validate(back).ok
    assert all(t.path == topo.path(t.src, t.dst) for t in back)


def test_more_than_32_peers_spread_over_channels():
    topo = parse_spec("star:n=40")
    s = build("ps", topo, None, 1e6)  # the root sends to and receives from 39 peers
    xml = to_xml(s)
    root = ET.fromstring(xml)
    assert root.get("nchannels") == "2"
    for gpu in root:
        for way in ("send", "recv"):
            per_channel = defaultdict(int)
            for tb in gpu:
                if tb.get(way) != "-1":
                    per_channel[tb.get("chan")] += 1
            assert max(per_channel.values()) <= 32
    back = from_xml(xml, topo, s.ranks, s.nbytes)
    assert connections(back) == connections(s) and to_xml(back) == xml
    for seed in range(2):
        got, want = run_xml(xml, seed)
        np.testing.assert_allclose(got, want)


def test_too_many_thread_blocks_is_refused():
    s = build("ps", parse_spec("star:n=110"), None, 1e6)  # the root: 2 x 109 thread blocks
    with pytest.raises(MscclFormatError, match="216"):
        to_xml(s)


def test_too_many_steps_for_one_thread_block_is_refused():
    s = build("ring", parse_spec("ring:n=2"), None, 1e6, chunks=2 * 130)  # 260 sends to one peer
    with pytest.raises(MscclFormatError, match="fewer chunks"):
        to_xml(s)
    assert to_xml(build("ring", parse_spec("ring:n=2"), None, 1e6, chunks=2 * 120))


def test_output_is_deterministic_and_atomic(tmp_path):
    s = build("rhd", parse_spec("torus:dims=2x2"), None, 1e6)
    a, b = tmp_path / "a.xml", tmp_path / "b.xml"
    save_xml(s, a)
    save_xml(build("rhd", parse_spec("torus:dims=2x2"), None, 1e6), b)
    assert a.read_bytes() == b.read_bytes() == to_xml(s).encode()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# A 3-gpu ring written by hand in the style of msccl-tools output: one thread block per gpu,
# fused steps (rrcs, rcs), no minBytes/maxBytes/outofplace. Chunk c: gpu c sends it, gpu c+1
# adds and forwards, gpu c+2 adds, keeps and forwards the sum, gpu c keeps and forwards it,
# gpu c+1 keeps it.
def foreign_ring(forward: str) -> str:
    steps = ["s", forward, "rrcs", "rcs", "r"]
    head = 'name="hand_ring" proto="LL" nchannels="1" nchunksperloop="3" ngpus="3" coll="allreduce"'
    lines = [f'<algo {head} inplace="1">']
    for g in range(3):
        chunks = [g, (g - 1) % 3, (g - 2) % 3, g, (g - 1) % 3]
        lines.append(f'<gpu id="{g}" i_chunks="3" o_chunks="0" s_chunks="0">')
        lines.append(f'<tb id="0" send="{(g + 1) % 3}" recv="{(g - 1) % 3}" chan="0">')
        for k, (kind, c) in enumerate(zip(steps, chunks, strict=True)):
            lines.append(
                f'<step s="{k}" type="{kind}" srcbuf="i" srcoff="{c}" dstbuf="i" dstoff="{c}" cnt="1" '
                'depid="-1" deps="-1" hasdep="0"/>'
            )
        lines.append("</tb></gpu>")
    return "\n".join([*lines, "</algo>"])


@pytest.mark.parametrize("forward", ["rrcs", "rrs"])  # the first adder may keep the partial sum or not
def test_foreign_xml_with_fused_steps_imports_as_the_ring(forward):
    topo = parse_spec("ring:n=3")
    back = from_xml(foreign_ring(forward), topo, None, 3e6)
    assert back.algorithm == "hand_ring" and validate(back).ok
    expected = set()
    for c in range(3):
        s = [f"s{(c + k) % 3}" for k in range(3)]
        expected |= {(0, c, s[0], s[1], "reduce"), (1, c, s[1], s[2], "reduce")}
        expected |= {(2, c, s[2], s[0], "copy"), (3, c, s[0], s[1], "copy")}
    assert {(t.step, t.chunk, t.src, t.dst, t.op) for t in back} == expected


def step(
    s: int, kind: str, off: int, dep: tuple[int, int] = (-1, -1), hasdep: int = 0, dst: str = "i"
) -> str:
    cnt = 0 if kind == "nop" else 2
    return (
        f'<step s="{s}" type="{kind}" srcbuf="i" srcoff="{off}" dstbuf="{dst}" dstoff="{off}" cnt="{cnt}" '
        f'depid="{dep[0]}" deps="{dep[1]}" hasdep="{hasdep}"/>'
    )


def test_waits_on_nops_and_counts_of_two_chunks():
    # gpu 0 sends chunks 0-1 in one step (cnt=2) to gpu 1, which adds them in a thread block
    # that first waits (nop) for a local copy onto itself (a no-op in place); then the sums
    # come back once gpu 0 has sent (its receive waits for its send).
    xml = f"""<algo name="pair" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2"
      coll="allreduce" inplace="1" outofplace="0" minBytes="0" maxBytes="1000">
     <gpu id="0" i_chunks="2" o_chunks="2" s_chunks="0">
      <tb id="0" send="1" recv="-1" chan="0">{step(0, "s", 0, hasdep=1)}</tb>
      <tb id="1" send="-1" recv="1" chan="0">{step(0, "r", 0, (0, 0))}</tb>
     </gpu>
     <gpu id="1" i_chunks="2" o_chunks="2" s_chunks="0">
      <tb id="0" send="-1" recv="0" chan="0">{step(0, "nop", -1, (1, 0))}{step(1, "rrc", 0, hasdep=1)}</tb>
      <tb id="1" send="0" recv="-1" chan="0">
        {step(0, "cpy", 0, hasdep=1, dst="o")}{step(1, "s", 0, (0, 1))}</tb>
     </gpu></algo>"""
    back = from_xml(xml, parse_spec("ring:n=2"), None, 8.0)
    got = sorted((t.step, t.chunk, t.src, t.dst, t.op) for t in back)
    reduces = [(0, c, "s0", "s1", "reduce") for c in range(2)]
    assert got == reduces + [(1, c, "s1", "s0", "copy") for c in range(2)]


def ring_xml() -> str:
    return to_xml(build("ring", parse_spec("ring:n=3"), None, 1e6))


def first(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


MALFORMED = {
    "not-xml": (lambda x: "this is not <xml", "not well-formed XML"),
    "missing-attribute": (lambda x: first(x, ' deps="-1"', ""), "no 'deps' attribute"),
    "bad-number": (lambda x: first(x, 'srcoff="0"', 'srcoff="zero"'), "not an integer"),
    "unknown-type": (lambda x: first(x, 'type="s"', 'type="send"'), "unknown type 'send'"),
    "peer-out-of-range": (lambda x: first(x, 'send="1"', 'send="7"'), "send=7"),
    "chunk-out-of-range": (
        lambda x: first(x, 'srcoff="0" dstbuf="i" dstoff="0"', 'srcoff="9" dstbuf="i" dstoff="9"'),
        "outside",
    ),
    "scratch": (lambda x: first(x, 'srcbuf="i"', 'srcbuf="s"'), "scratch buffer"),
    "unknown-coll": (lambda x: first(x, 'coll="allreduce"', 'coll="gather"'), "'gather' algorithm"),
    "unmatched-send": (lambda x: first(x, 'type="rrc"', 'type="nop"'), "receives"),
    "race": (
        lambda x: x.replace('depid="0" deps="0"', 'depid="-1" deps="-1"').replace(
            'depid="1" deps="0"', 'depid="-1" deps="-1"'
        ),
        "race",
    ),
    "wrong-root": (lambda x: "<algorithm/>", "starts with <algo>"),
    "nchunksperloop-past-int64": (
        lambda x: first(x, 'nchunksperloop="3"', 'nchunksperloop="10000000000000000000"'),
        "outside the int64 range",
    ),
    "entity-expansion": (
        lambda x: (
            '<!DOCTYPE algo [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;">]>'
            + first(x, '<algo name="', '<algo name="&b;')
        ),
        "declares a DTD",
    ),
    "external-entity": (
        lambda x: (
            '<!DOCTYPE algo [<!ENTITY e SYSTEM "file:///etc/hostname">]>'
            + first(x, '<algo name="', '<algo name="&e;')
        ),
        "declares a DTD",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_xml_is_one_sentence_and_exit_2(case, tmp_path, capsys):
    mutate, words = MALFORMED[case]
    text = mutate(ring_xml())
    with pytest.raises(MscclFormatError) as info:
        from_xml(text, parse_spec("ring:n=3"), None, 1e6)
    assert words in str(info.value) and "\n" not in str(info.value)
    path = tmp_path / "bad.xml"
    path.write_text(text)
    code, _, err = run(capsys, "import", str(path), "-t", "ring:n=3", "-o", str(tmp_path / "out.json"))
    assert_one_line_error(code, err)
    assert not (tmp_path / "out.json").exists()


def test_a_wait_cycle_is_a_deadlock():
    # gpu 0's first receive (thread block 0) waits for the last send of its thread block 1,
    # which itself waits for a later receive of thread block 0
    root = ET.fromstring(ring_xml())
    tb0, tb1 = root[0][0], root[0][1]
    assert tb0.get("recv") != "-1" and tb1.get("send") != "-1"
    tb0[0].set("depid", "1")
    tb0[0].set("deps", str(len(tb1) - 1))
    with pytest.raises(MscclFormatError) as info:
        from_xml(ET.tostring(root, encoding="unicode"), parse_spec("ring:n=3"), None, 1e6)
    assert "cycle" in str(info.value)


def test_cli_export_and_import_round_trip(tmp_path, capsys):
    s = build("rhd", parse_spec("torus:dims=2x2"), None, 1e6)
    save(s, tmp_path / "s.json")
    code, _, err = run(
        capsys, "export", str(tmp_path / "s.json"), "--format", "msccl-xml", "--out", str(tmp_path / "s.xml")
    )
    assert code == 0, err
    assert (tmp_path / "s.xml").read_text() == to_xml(s)
    code, out, err = run(
        capsys,
        "import",
        str(tmp_path / "s.xml"),
        "-t",
        "torus:dims=2x2",
        "--size",
        "1MB",
        "-o",
        str(tmp_path / "b.json"),
    )
    assert code == 0, err
    code, out, _ = run(capsys, "validate", str(tmp_path / "b.json"))
    assert code == 0 and out.startswith("OK")
    code, _, err = run(
        capsys, "export", str(tmp_path / "s.json"), "--format", "nccl", "--out", str(tmp_path / "x.xml")
    )
    assert_one_line_error(code, err)
    code, _, err = run(
        capsys, "export", str(tmp_path / "s.json"), "--proto", "Fast", "--out", str(tmp_path / "x.xml")
    )
    assert_one_line_error(code, err)


def test_readme_section_runs_as_written(tmp_path, monkeypatch, capsys):
    """The README's runtime block, in order; `arsched run` is left to test_executor (it spawns)."""
    import re
    import shlex
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = re.search(r"## Real execution and MSCCL XML\n\n```bash\n(.*?)```", readme, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    lines = [x.split("  #")[0].strip() for x in block.splitlines()]
    assert any(line.startswith("arsched run") for line in lines)
    for line in lines:
        argv = shlex.split(line)
        if argv[1] != "run":
            code, _, err = run(capsys, *argv[1:])
            assert code == 0, (line, err)
    assert to_xml(load(tmp_path / "back.json")) == (tmp_path / "rhd.xml").read_text()
