"""MSCCL XML export on the GPU fabrics and directed networks of issue 21: tree-packing and ring
on two HGX and two MI250 boxes, a one-way ring and torus and an asymmetric ring export, compute
the sum in any interleaving, come back as valid schedules and export to the same bytes. On the
rail fabrics each thread block carries one rail's traffic, each rail has channels of its own,
and the rails survive the round trip; a schedule with more chunks than MSCCL's 256 steps per
thread block allow is refused in one sentence (build it for a smaller size) and fits when built with fewer."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict

import numpy as np
import pytest
from mscclsim import run_xml
from test_msccl import schedule_for  # cached: the same schedules as the checks above
from test_msccl import test_exported_program_computes_the_sum_in_any_interleaving as sums
from test_msccl import test_exported_structure_is_what_the_runtime_requires as structure
from test_msccl import test_round_trip as round_trip

from arsched.algorithms import build
from arsched.collective import validate
from arsched.runtime import MscclFormatError, from_xml, to_xml
from arsched.topology import parse_spec

FABRICS = ["hgx:boxes=2", "mi250:boxes=2"]
DIRECTED = ["ring:n=8,oneway=1", "torus:dims=3x3,oneway=1", "ring:n=8,bandwidth=400Gbps,reverse=100Gbps"]
CASES = [(spec, name) for spec in FABRICS + DIRECTED for name in ("tree-packing", "ring")]


def rails(path: tuple[str, ...]) -> frozenset[int]:
    """The rails (NIC indices within a box) a path crosses: NIC nodes are 'nic{box}_{rail}'."""
    return frozenset(int(m[2]) for n in path if (m := re.fullmatch(r"nic(\d+)_(\d+)", n)))


def rails_per_connection(s) -> dict[tuple[int, int], set[frozenset[int]]]:
    """Per (source rank, destination rank) that leaves its box: the rail sets of its transfers."""
    out = defaultdict(set)
    for i in range(len(s)):
        used = rails(s.paths[s.path_id[i]])
        if used:
            out[int(s.src[i]), int(s.dst[i])].add(used)
    return dict(out)


@pytest.mark.parametrize(("spec", "name"), CASES)
def test_export_round_trip_sum_and_structure_on_new_fabrics(spec, name):
    round_trip(spec, name)  # valid, same transfers per connection, steps only earlier, same bytes
    sums(spec, name)  # the sum in random interleavings
    structure(spec, name)  # what the MSCCL runtime requires


@pytest.mark.parametrize(("spec", "name"), [(f, n) for f, n in CASES if f in FABRICS])
def test_each_thread_block_carries_one_rail(spec, name):
    s = schedule_for(spec, name)
    per_connection = rails_per_connection(s)
    assert per_connection  # the schedule crosses boxes
    # one rail per connection, so one per thread block (the export gives a connection its own)
    assert all(len(sets) == 1 and len(next(iter(sets))) == 1 for sets in per_connection.values())
    root = ET.fromstring(to_xml(s))
    for gpu in root:
        peers = [(tb.get("send"), tb.get("recv"), tb.get("chan")) for tb in gpu]
        assert len(peers) == len(set(peers))
    # the runtime routes a connection itself; the imported schedule's routes keep the rails
    back = from_xml(to_xml(s), s.topology, s.ranks, s.nbytes)
    assert rails_per_connection(back) == per_connection
    if name == "tree-packing":  # tree packing spreads its chunks over the rails
        nics = {int(m[1]) for n in s.topology.switches if (m := re.fullmatch(r"nic\d+_(\d+)", n))}
        used = set().union(*(r for sets in per_connection.values() for r in sets))
        # every chunk's tree crosses the boxes; with fewer chunks than rails (1 MB: 15 chunks,
        # 16 rails) a tree crossing once per chunk is the least traffic and leaves a rail idle
        assert used <= nics and len(used) >= min(len(nics), s.num_chunks)


def test_a_runtime_sized_tree_packing_fits_in_msccl_thread_blocks():
    topo = parse_spec("ring:n=8,oneway=1")
    many = build("tree-packing", topo, None, 256e6, levels=False)  # its pipeline: thousands of chunks
    with pytest.raises(MscclFormatError, match="fewer chunks"):
        to_xml(many)
    few = build("tree-packing", topo, None, 256e6, units=4, stages=2)
    back = from_xml(to_xml(few), topo, few.ranks, few.nbytes)
    assert validate(back).ok and back.num_chunks == 8


@pytest.mark.parametrize(
    ("spec", "name"), [("dcell:n=3,k=1", "tree-packing"), ("hgx:boxes=2,gpus_per_box=4", "hierarchical")]
)
def test_a_schedule_built_for_a_smaller_size_is_what_msccl_runs(spec, name):
    """At 256 MB, balanced tree packing and the hierarchical pipeline take more steps per thread
    block than MSCCL allows, and the refusal says to build for a smaller size; their 16 MB
    schedules export and sum in any interleaving (MSCCL slices every chunk of a program over
    a larger buffer, so that file serves 256 MB too)."""
    topo = parse_spec(spec)
    with pytest.raises(MscclFormatError, match="for a smaller size"):
        to_xml(build(name, topo, None, 256e6))
    got, want = run_xml(to_xml(build(name, topo, None, 16e6)), seed=0)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def channels_of(xml: str) -> dict[tuple[int, int], int]:
    """Per (sender, receiver): the channel of its send thread block (and of its receive block,
    which must be the same)."""
    sends, recvs = {}, {}
    for gpu in ET.fromstring(xml):
        g = int(gpu.get("id"))
        for tb in gpu:
            if tb.get("send") != "-1":
                sends[g, int(tb.get("send"))] = int(tb.get("chan"))
            if tb.get("recv") != "-1":
                recvs[int(tb.get("recv")), g] = int(tb.get("chan"))
    assert sends == recvs
    return sends


def test_each_rail_has_channels_of_its_own():
    """Between boxes a connection is on channel 1 + its sender's rail (the NIC its route leaves
    by: GPU j of a box uses NIC j), inside a box on channel 0, and the program still sums."""
    s = build("hierarchical", parse_spec("hgx:boxes=2"), None, 1e6)
    xml = to_xml(s)
    chan = channels_of(xml)
    per_connection = rails_per_connection(s)
    node = [s.topology.compiled.index[r] for r in s.ranks]
    for (a, b), ch in chan.items():
        crossed = per_connection.get((node[a], node[b]))  # None: inside the box
        assert (ch == 0) if crossed is None else crossed == {frozenset({ch - 1})}
    assert len(set(chan.values())) == 9 and int(ET.fromstring(xml).get("nchannels")) == 9
    sums("hgx:boxes=2", "hierarchical")


def test_a_rail_past_32_thread_blocks_takes_the_next_channel_of_its_own():
    """40 boxes of 2 GPUs, rails exchanging directly: 39 rail peers per GPU, more than MSCCL's 32
    thread blocks per channel, so each rail takes a second channel three further on."""
    s = build("hierarchical", parse_spec("hgx:boxes=40,gpus_per_box=2"), None, 1e6, rail="direct")
    xml = to_xml(s)
    chan = channels_of(xml)
    for (a, b), ch in chan.items():
        kind = 0 if a // 2 == b // 2 else 1 + a % 2  # GPU j of box d is rank 2·d + j
        assert ch % 3 == kind
    for gpu in ET.fromstring(xml):
        for way in ("send", "recv"):
            blocks = [tb.get("chan") for tb in gpu if tb.get(way) != "-1"]
            assert max(blocks.count(c) for c in set(blocks)) <= 32
    assert max(chan.values()) >= 3  # some rail went past its first channel
    back = from_xml(xml, s.topology, s.ranks, s.nbytes)
    assert validate(back).ok and to_xml(back) == xml


def test_rails_that_would_need_more_than_32_channels_share_them():
    from arsched.runtime.msccl_export import _channels

    n = 40
    src = np.repeat(np.arange(n), n - 1)
    dst = np.array([b for a in range(n) for b in range(n) if b != a])
    rail = np.full(len(src), 19)  # class 19 of 20: a second channel would be 39
    plain = _channels(src, dst, np.zeros_like(rail), 1)
    assert plain.max() == 2  # the ranks' 39 peers each way need three channels
    assert (_channels(src, dst, rail, 20) == plain).all()  # 19, 39: past 32 channels, so the plain numbering
    few = np.arange(len(src)) < 31  # rank 0's first 31 peers only: one channel of class 19
    assert set(_channels(src[few], dst[few], rail[few], 20).tolist()) == {19}


def test_a_schedule_on_two_channels_exports_a_thread_block_per_channel():
    """Step s on channel s mod 2: a rank pair that talks in both parities has a thread block on
    each (more blocks than on one channel), and the program still sums in any interleaving."""
    topo = parse_spec("hgx:boxes=2,gpus_per_box=2")
    s = build("hierarchical", topo, None, 1e6, channels=2, stages=3)
    one = build("hierarchical", topo, None, 1e6, channels=1, stages=3)
    xml = to_xml(s)
    blocks = [len(gpu) for gpu in ET.fromstring(xml)]
    assert all(b > c for b, c in zip(blocks, (len(gpu) for gpu in ET.fromstring(to_xml(one))), strict=True))
    for gpu in ET.fromstring(xml):
        peers = [(tb.get("send"), tb.get("recv"), tb.get("chan")) for tb in gpu]
        assert len(peers) == len(set(peers))
    for seed in range(3):
        got, want = run_xml(xml, seed)
        np.testing.assert_allclose(got, want)
    assert validate(from_xml(xml, s.topology, s.ranks, s.nbytes)).ok
