"""The packet-level cross-check (`sim.packets`, ns-3): optional, skipped where the ns3 wheel is
not installed (`pip install ns3`). A ring on a star: TCP over packets is slower than the fluid
flow model (headers, serialisation at the switch, slow start), and not by much."""

from __future__ import annotations

import pytest

from arsched.algorithms import build
from arsched.errors import ArschedError
from arsched.sim import packets, simulate_flow
from arsched.topology import parse_spec

needs_ns3 = pytest.mark.skipif(not packets.available(), reason="the ns3 wheel is not installed")


@needs_ns3
@pytest.mark.parametrize("algorithm", ["ring", "ps"])
def test_the_flow_model_is_a_little_optimistic_against_packets(algorithm):
    s = build(algorithm, parse_spec("star:n=4"), None, 1e6)
    p = packets.simulate_packets(s)
    ratio = simulate_flow(s).time_s / p.time_s
    assert 0.75 <= ratio <= 1.0


def test_what_ns3_cannot_run_is_one_sentence(monkeypatch):
    s = build("ring", parse_spec("ring:n=4,oneway=1"), None, 1e6)  # links one way only
    if packets.available():
        with pytest.raises(ArschedError, match="both directions"):
            packets.simulate_packets(s)
    monkeypatch.setattr(packets, "available", lambda: False)
    with pytest.raises(ArschedError, match="pip install ns3"):
        packets.simulate_packets(s)
