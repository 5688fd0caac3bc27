"""MSCCL XML export on the GPU fabrics and directed networks of issue 21: tree-packing and ring
on two HGX and two MI250 boxes, a one-way ring and torus and an asymmetric ring export, compute
the sum in any interleaving, come back as valid schedules and export to the same bytes. On the
rail fabrics each thread block carries one rail's traffic, and the rails survive the round trip;
a schedule with more chunks than MSCCL's 256 steps per thread block allow is refused in one
sentence and fits when built with fewer."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict

import pytest
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
    many = build("tree-packing", topo, None, 256e6)  # its pipeline: thousands of chunks
    with pytest.raises(MscclFormatError, match="fewer chunks"):
        to_xml(many)
    few = build("tree-packing", topo, None, 256e6, units=4, stages=2)
    back = from_xml(to_xml(few), topo, few.ranks, few.nbytes)
    assert validate(back).ok and back.num_chunks == 8
