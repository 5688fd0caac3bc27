"""Topology spec strings: 'bcube:n=4,k=1', 'torus:dims=4x4', human units, or a file path."""

from __future__ import annotations

import re

import pytest

from arsched.errors import TopologyError
from arsched.topology import (
    FAMILIES,
    bcube,
    dcell,
    fattree,
    jellyfish,
    leafspine,
    parse_spec,
    ring,
    save,
    star,
    torus,
)
from arsched.topology.spec import SPEC_EXAMPLES


def assert_one_sentence(message: str) -> None:
    assert message.strip()
    assert "\n" not in message
    assert not re.search(r"[.!?]\s+[A-Z]", message), f"more than one sentence: {message!r}"


EXPECTED = {
    "bcube:n=4,k=1": lambda: bcube(4, 1),
    "dcell:n=4,k=1": lambda: dcell(4, 1),
    "jellyfish:switches=16,ports=4,net_ports=3,seed=1": lambda: jellyfish(16, 4, 3, seed=1),
    "fattree:k=4": lambda: fattree(4),
    "torus:dims=4x4": lambda: torus((4, 4)),
    "ring:n=8": lambda: ring(8),
    "star:n=8": lambda: star(8),
    "leafspine:leaves=4,spines=2,servers_per_leaf=4": lambda: leafspine(4, 2, 4),
}


def test_every_family_has_an_example():
    assert {e.split(":")[0] for e in SPEC_EXAMPLES} == set(FAMILIES)


@pytest.mark.parametrize("spec", SPEC_EXAMPLES)
def test_examples_build(spec):
    t = parse_spec(spec)
    assert len(t.servers) >= 2
    if spec in EXPECTED:
        assert t == EXPECTED[spec]()


def test_bandwidth_bits_to_bytes_per_level():
    t = parse_spec("fattree:k=4,bandwidth=100Gbps/200Gbps/400Gbps")
    expected = {"se": 100e9 / 8, "ea": 200e9 / 8, "ac": 400e9 / 8}
    for lk in t.links:
        tiers = "".join(sorted((lk.src[0], lk.dst[0]), key="seac".index))
        assert lk.bandwidth == expected[tiers]
    core = [lk for lk in t.links if lk.src.startswith("c") or lk.dst.startswith("c")]
    assert core and {lk.bandwidth for lk in core} == {5e10}
    assert t == fattree(4, bandwidth=[12.5e9, 25e9, 50e9])


def test_single_bandwidth_and_latency_units():
    t = parse_spec("ring:n=4,bandwidth=200Gbps,latency=5us")
    assert {lk.bandwidth for lk in t.links} == {25e9}
    assert [lk.latency for lk in t.links] == pytest.approx([5e-6] * len(t.links))
    u = parse_spec("fattree:k=4,latency=1us/2us/500ns")
    assert sorted({lk.latency for lk in u.links}) == pytest.approx([5e-7, 1e-6, 2e-6])
    assert parse_spec("star:n=3,bandwidth=1000") == star(3, bandwidth=1000.0)


# '/' separates levels, but must not split the byte unit 'GB/s' (design §3.1)
@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("ring:n=4,bandwidth=25GB/s", lambda: ring(4, bandwidth=25e9)),
        ("ring:n=4,bandwidth=100Gb/s", lambda: ring(4, bandwidth=12.5e9)),
        (
            "fattree:k=4,bandwidth=100Gbps/25GB/s/400Gb/s",
            lambda: fattree(4, bandwidth=[12.5e9, 25e9, 50e9]),
        ),
        (
            "fattree:k=4,bandwidth=25GB/s/25GB/s/50GB/s",
            lambda: fattree(4, bandwidth=[25e9, 25e9, 50e9]),
        ),
    ],
)
def test_bandwidth_in_bytes_per_second(spec, expected):
    assert parse_spec(spec) == expected()


def test_dims_and_whitespace():
    assert parse_spec("  torus:dims=2x3X4 ") == torus((2, 3, 4))
    assert parse_spec("bcube: n = 3 , k = 1") == bcube(3, 1)
    assert parse_spec("ring:n=5,") == ring(5)


def test_spec_can_be_a_file(tmp_path):
    path = tmp_path / "mine.json"
    save(star(3), path)
    assert parse_spec(str(path)) == star(3)


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        ("hypercube:n=4", "neither"),
        ("BCube:n=4,k=1", "neither"),
        ("/no/such/file.json", "neither"),
        ("bcube:n=4,k=1,m=3", "no parameter"),
        ("fattree:ports=4", "no parameter"),
        ("bcube:n=4", "needs k"),
        ("torus:", "needs dims"),
        ("leafspine:leaves=2", "needs"),
        ("bcube:n=4.5,k=1", "integer"),
        ("bcube:n=four,k=1", "integer"),
        ("bcube:n=4,k", "key=value"),
        ("bcube:n=4,k=", "key=value"),
        ("torus:dims=4x", "dims"),
        ("torus:dims=4,4", None),
        ("torus:dims=axb", "dims"),
        ("fattree:k=4,bandwidth=100Gbs", None),
        ("fattree:k=4,bandwidth=fast", None),
        ("fattree:k=4,latency=5 parsecs", None),
        ("fattree:k=4,bandwidth=100Gbps/200Gbps", "level"),
        ("fattree:k=5", None),
        ("ring:n=1", None),
        ("jellyfish:switches=4,ports=6,net_ports=5", None),
    ],
)
def test_bad_specs(spec, pattern):
    with pytest.raises(TopologyError) as info:
        parse_spec(spec)
    message = str(info.value)
    assert_one_sentence(message)
    if pattern is not None:
        assert pattern in message


@pytest.mark.parametrize("spec", ["", "  "])
def test_empty_spec_is_neither_a_family_nor_a_file(spec):
    with pytest.raises(TopologyError, match="neither"):
        parse_spec(spec)


def test_a_folder_is_named_a_folder(tmp_path):
    for spec in (".", str(tmp_path)):
        with pytest.raises(TopologyError, match=f"topology file {re.escape(spec)} is a folder, not a file"):
            parse_spec(spec)


def test_empty_spec_is_an_error():
    with pytest.raises(TopologyError) as info:
        parse_spec("")
    assert_one_sentence(str(info.value))


def test_unknown_family_message_lists_families():
    with pytest.raises(TopologyError) as info:
        parse_spec("hypercube:n=4")
    for family in FAMILIES:
        assert family in str(info.value)
