"""The GPU-cluster families `hgx` and `mi250`: their shape, bandwidths and latencies per level,
their bounds against closed forms derived by hand, and one sentence for every bad parameter.

Expected counts and bounds come from the designs (gpubox.py and gpufabric.py document them),
never from the code under test: for an AllReduce of M bytes over N ranks the bound is
2 (M/N) |S ∩ ranks| / egress(S) at the binding cut S, which is named in each test.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from arsched.bounds import allgather_cut, allreduce_bound
from arsched.errors import TopologyError
from arsched.limits import ENV
from arsched.topology import SERVER, SWITCH, hgx, mi250, parse_spec
from clihelp import assert_one_line_error, run

GB = 1e9
M = 256e6


def bound_of(spec: str) -> float:
    return allreduce_bound(parse_spec(spec), nbytes=M)


def closed_form(n: int, inside: int, egress: float) -> float:
    """The AllReduce bound of M bytes over n ranks when S holds `inside` ranks behind `egress`."""
    return 2 * (M / n) * inside / egress


# ---- shape -------------------------------------------------------------------------------------
def test_ranks_are_the_gpus_and_everything_else_is_a_switch():
    t = parse_spec("hgx:boxes=2")
    assert t.servers == tuple(f"s{i}" for i in range(16))
    kinds = Counter(t.kind(n) for n in t.nodes)
    # 2 NVSwitches, 16 NICs, one leaf per rail (8), 2 spines
    assert kinds == {SERVER: 16, SWITCH: 2 + 16 + 8 + 2}
    # 16 NVLink + 16 PCIe + 16 NIC-leaf + 8 leaves x 2 spines cables, two links each
    assert len(t.links) == 2 * (16 + 16 + 16 + 16)
    assert {t.kind(n) for n in ("nvs0", "nic1_7", "leaf0_3", "spine1")} == {SWITCH}


def test_rail_fabric_puts_gpu_i_of_every_box_on_leaf_i():
    t = parse_spec("hgx:boxes=3,gen=h100")
    for b in range(3):
        for g in range(8):
            gpu, nic = f"s{8 * b + g}", f"nic{b}_{g}"
            assert t.link(gpu, f"nvs{b}").bandwidth == 450 * GB
            assert t.link(gpu, nic).bandwidth == 63 * GB
            assert t.link(nic, f"leaf0_{g}").bandwidth == 400e9 / 8
            assert t.ports(nic) == 2  # its GPU and its rail's leaf, nothing else


def test_forestcoll_two_box_a100():
    """2 boxes of 8 A100 on NVSwitch, 8 rail NICs, even rails on one IB switch, odd on another."""
    t = parse_spec("hgx:boxes=2,leaves=2,spines=0")
    assert len(t.switches) == 2 + 16 + 2 and len(t.links) == 2 * (16 + 16 + 16)
    for b in range(2):
        for r in range(8):
            assert t.has_link(f"nic{b}_{r}", f"leaf0_{r % 2}")
            assert t.link(f"nic{b}_{r}", f"leaf0_{r % 2}").bandwidth == 25 * GB


def test_named_bandwidths_override_the_generation():
    t = parse_spec("hgx:boxes=2,gen=h100,nvlink=900GB/s,pcie=32GB/s,nic=800Gbps")
    assert t.link("nvs1", "s9").bandwidth == 900 * GB and t.link("s9", "nic1_1").bandwidth == 32 * GB
    assert t.link("leaf0_1", "nic1_1").bandwidth == 100 * GB
    m = parse_spec("mi250:boxes=2,xgmi=25GB/s,nic=200Gbps")
    assert m.link("s0", "s1").bandwidth == 4 * 25 * GB and m.link("nic0_0", "leaf0_0").bandwidth == 25 * GB


def test_latency_per_level_defaults_and_override():
    t = parse_spec("hgx:boxes=2,spines=1")
    assert t.link("s0", "nvs0").latency == pytest.approx(0.3e-6)
    assert t.link("s0", "nic0_0").latency == pytest.approx(0.5e-6)
    assert t.link("nic0_0", "leaf0_0").latency == pytest.approx(0.8e-6)
    assert t.link("leaf0_0", "spine0").latency == pytest.approx(0.5e-6)
    t = parse_spec("hgx:boxes=2,spines=1,latency=1us/2us/3us/4us")
    assert [t.link(*pair).latency for pair in (("s0", "nvs0"), ("s0", "nic0_0"))] == pytest.approx(
        [1e-6, 2e-6]
    )
    assert t.link("nic0_0", "leaf0_0").latency == pytest.approx(3e-6)
    assert t.link("spine0", "leaf0_0").latency == pytest.approx(4e-6)
    assert parse_spec("mi250:boxes=1").link("s0", "s1").latency == pytest.approx(0.6e-6)


def test_oversubscription_and_spines_split_a_leafs_downlink():
    # a leaf of a full unit of 2 boxes has 2 NIC ports of 25 GB/s; oversub 4 over 2 spines
    t = parse_spec("hgx:boxes=4,su=2,oversub=4:1")
    assert t.link("leaf1_5", "spine0").bandwidth == 2 * 25 * GB / (4 * 2)
    assert t.has_link("nic3_5", "leaf1_5") and not t.has_link("nic3_5", "leaf0_5")
    assert parse_spec("hgx:boxes=4,su=2,oversub=4") == t


def test_clos_and_dual_plane():
    t = parse_spec("hgx:boxes=4,fabric=clos")  # racks of 2 boxes on one ToR each, 2 spines
    assert {n for n in t.switches if n.startswith("tor")} == {"tor0", "tor1"}
    assert t.has_link("nic3_7", "tor1") and t.link("nic3_7", "tor1").bandwidth == 25 * GB
    assert t.link("tor0", "spine1").bandwidth == 2 * 8 * 25 * GB / 2
    d = parse_spec("hgx:boxes=4,fabric=clos,planes=2")  # every NIC's two ports on two ToRs
    for p in range(2):
        assert d.link("nic0_0", f"tor0p{p}").bandwidth == 12.5 * GB
        assert d.has_link(f"tor1p{p}", f"spine0p{p}") and not d.has_link(f"tor1p{p}", f"spine0p{1 - p}")


def test_nics_shared_by_gpus():
    t = hgx(2, rails=4)  # GPUs 2r and 2r+1 share NIC r
    assert t.has_link("s2", "nic0_1") and t.has_link("s3", "nic0_1") and not t.has_link("s4", "nic0_1")
    assert parse_spec("mi250:boxes=2,rails=8").has_link("s17", "nic1_0")


def test_mi250_box_is_the_published_xgmi_mesh():
    t = mi250(1)
    assert len(t.servers) == 16 and not t.switches
    links = {(lk.src, lk.dst): lk.bandwidth / (50 * GB) for lk in t.links}
    for g in range(16):
        out = [n for (a, _), n in links.items() if a == f"s{g}"]
        assert sum(out) == 7  # seven xGMI links per GCD
        assert links[(f"s{g}", f"s{g ^ 1}")] == 4  # the two GCDs of a module share four
    assert len(links) == 2 * 28
    assert links[("s0", "s4")] == 2 and links[("s2", "s9")] == 1 and ("s0", "s2") not in links


def test_one_box_has_no_fabric():
    t = parse_spec("hgx:boxes=1,gen=h100,fabric=clos")
    assert t.switches == ("nvs0",) and len(t.links) == 16


# ---- bounds against closed forms ---------------------------------------------------------------
@pytest.mark.parametrize(("gen", "nvlink"), [("a100", 300 * GB), ("h100", 450 * GB)])
def test_single_box_bound_is_the_nvswitch_star(gen, nvlink):
    """All GPUs but one, with the NVSwitch, behind one NVLink: 2 M (N-1) / (N B)."""
    assert bound_of(f"hgx:boxes=1,gen={gen}") == pytest.approx(2 * M * 7 / (8 * nvlink), rel=1e-9)


def test_two_box_a100_bound():
    """All but one GPU and its NIC: 15 ranks behind that GPU's NVLink and NIC (300 + 25 GB/s);
    one box behind its 8 NICs (8/200) binds less."""
    for spec in ("hgx:boxes=2", "hgx:boxes=2,leaves=2,spines=0"):
        assert bound_of(spec) == pytest.approx(closed_form(16, 15, 325 * GB), rel=1e-9)


def test_four_box_clos_bound_is_one_box_behind_its_nics():
    """Three boxes behind the 8 NICs of the fourth (200 GB/s): 24/200 > 31/325."""
    assert bound_of("hgx:boxes=4,fabric=clos") == pytest.approx(closed_form(32, 24, 200 * GB), rel=1e-9)


def test_oversubscribed_rail_bound_is_one_unit_behind_its_uplinks():
    """su=2, oversub 4: a unit's 8 leaves have 2 x 25 / 4 GB/s of uplink each: 16 ranks / 100 GB/s."""
    cut = allgather_cut(parse_spec("hgx:boxes=4,su=2,oversub=4"))
    assert cut.ranks_inside == 16 and cut.egress == pytest.approx(100 * GB)
    assert bound_of("hgx:boxes=4,su=2,oversub=4") == pytest.approx(closed_form(32, 16, 100 * GB), rel=1e-9)


def test_mi250_bounds():
    """One box: 14 GCDs behind the 6 xGMI links of the remaining module (300 GB/s); two boxes:
    also behind that module's two NICs (+ 2 x 16 GB/s)."""
    assert bound_of("mi250:boxes=1") == pytest.approx(closed_form(16, 14, 300 * GB), rel=1e-9)
    assert bound_of("mi250:boxes=2") == pytest.approx(closed_form(32, 30, 332 * GB), rel=1e-9)


# ---- bad parameters: one sentence --------------------------------------------------------------
BAD = [
    ("hgx:gen=h100", "hgx needs boxes"),
    ("hgx:boxes=0", "hgx needs boxes >= 1, got boxes=0"),
    ("hgx:boxes=2,gen=b200", "gen must be a100 or h100"),
    ("hgx:boxes=2,fabric=torus", "fabric must be rail or clos"),
    ("hgx:boxes=2,gpus_per_box=1", "hgx needs gpus_per_box >= 2"),
    ("hgx:boxes=2,rails=3", "rails=3 NICs must divide the 8 GPUs"),
    ("hgx:boxes=2,rails=0", "hgx needs rails >= 1"),
    ("hgx:boxes=2,leaves=9", "1 <= leaves <= rails=8"),
    ("hgx:boxes=2,fabric=clos,leaves=2", "leaves=2 applies to fabric=rail"),
    ("hgx:boxes=40,su=20,spines=0", "spines=0 leaves the 2 units of su=20 boxes unconnected"),
    ("hgx:boxes=2,oversub=0.5", "oversub (a leaf's downlink over uplink capacity) must be"),
    ("hgx:boxes=2,oversub=nan", "must be a finite number >= 1"),
    ("hgx:boxes=2,oversub=3:0", "oversub must be a number such as 2 or 3:1"),
    ("hgx:boxes=2,nic=0Gbps", "nic must be a bandwidth > 0"),
    ("hgx:boxes=2,nvlink=fast", "cannot read a bandwidth"),
    ("hgx:boxes=2,planes=0", "hgx needs planes >= 1"),
    ("hgx:boxes=2,latency=1us/2us", "has 4 link level(s) but 2 latency values"),
    ("mi250:boxes=2,gen=a100", "mi250 has no parameter 'gen'"),
    ("mi250:boxes=2,rails=3", "rails=3 NICs must divide the 16 GPUs"),
]


@pytest.mark.parametrize(("spec", "words"), BAD)
def test_bad_parameters_are_one_sentence(capsys, spec, words):
    code, _, err = run(capsys, "topology", spec)
    assert_one_line_error(code, err)
    assert words in err, err


def test_python_builders_check_their_arguments():
    with pytest.raises(TopologyError, match="nvlink must be a bandwidth > 0"):
        hgx(2, nvlink=float("inf"))
    with pytest.raises(TopologyError, match="xgmi must be a bandwidth > 0"):
        mi250(2, xgmi=10**400)
    with pytest.raises(TopologyError, match="hgx needs boxes >= 1"):
        hgx(True)


def test_huge_cluster_is_refused_at_once(capsys, monkeypatch):
    monkeypatch.setenv(ENV, "64GB")
    t0 = time.perf_counter()
    code, _, err = run(capsys, "topology", "hgx:boxes=100000000,gen=h100")
    assert time.perf_counter() - t0 < 1.0
    assert_one_line_error(code, err)
    assert "hgx-h100(100000000x8,rail) would have 800,000,000 servers" in err and "64 GB" in err, err
    code, _, err = run(capsys, "topology", "mi250:boxes=1000000000000000000000000000000000000")
    assert_one_line_error(code, err)
    assert "more than 1e+30 servers" in err, err
