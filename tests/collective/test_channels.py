"""`Schedule.channels`: several in-order connections per rank pair, step s on channel s mod
channels. Kept by both file formats (absent for one, so older files load and one-channel files
keep their bytes), refused in one sentence when out of range, and in the flow model a second
channel lets a pair's next step start while its last one still sends (closed forms)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from arsched.algorithms import build
from arsched.collective import Schedule, Transfer, dumps, loads, validate
from arsched.collective.columnar import load_columnar, save_columnar
from arsched.errors import ScheduleFormatError
from arsched.sim import simulate_flow
from arsched.sim.deps import Readiness, derive
from arsched.topology import parse_spec, ring


def two_steps(channels: int, nbytes: float = 2e6, bw: float = 1e9, lat: float = 1e-6) -> Schedule:
    """Chunks 0 and 1 of a 2-ring's AllReduce sent s0 -> s1 in steps 0 and 1 (one connection),
    and copied back one step later each."""
    topo = ring(2, bandwidth=bw, latency=lat)
    rows = [Transfer(0, 0, "s0", "s1"), Transfer(1, 1, "s0", "s1")]
    rows += [Transfer(1, 0, "s1", "s0", "copy"), Transfer(2, 1, "s1", "s0", "copy")]
    s = Schedule.from_transfers(topo, topo.servers, nbytes, 2, rows)
    return dataclasses.replace(s, channels=channels)


def test_step_s_goes_on_channel_s_mod_channels():
    one, two = two_steps(1), two_steps(2)
    assert validate(two).ok
    assert sorted(Readiness(derive(one, fifo=True)).initial().tolist()) == [0]
    # on two channels s0 -> s1's step 1 waits for nothing: its chunk is its own
    assert sorted(Readiness(derive(two, fifo=True)).initial().tolist()) == [0, 1]
    key, size = two.connections()
    assert size == 2 * 2 * 2 and len(set(key[:2].tolist())) == 2 and key[1] != key[0]


@pytest.mark.parametrize("method", ["auto", "events"])
@pytest.mark.parametrize("chunk", [1e3, 1e6])
def test_a_second_channel_overlaps_the_overhead_and_shares_the_link(method, chunk):
    """One channel: each step waits for the connection's last, a pipeline of three steps, each
    α + chunk / bw + latency. Two: both sends start after one α and share the link, and so do
    both copies back once both chunks are in. Faster where α outweighs a chunk (1 kB), slower
    where the shared link delays the first chunk (1 MB): why builders choose by simulation."""
    bw, lat, alpha = 1e9, 1e-6, 5e-6
    one = simulate_flow(two_steps(1, 2 * chunk, bw, lat), alpha, method=method).time_s
    assert one == pytest.approx(3 * (alpha + chunk / bw + lat), rel=1e-9)
    two = simulate_flow(two_steps(2, 2 * chunk, bw, lat), alpha, method=method).time_s
    assert two == pytest.approx(2 * (alpha + 2 * chunk / bw + lat), rel=1e-9)
    assert (two < one) == (chunk / bw < alpha)


def test_both_file_formats_keep_the_channels_and_leave_one_out(tmp_path):
    s = build("hierarchical", parse_spec("hgx:boxes=2,gpus_per_box=2"), None, 1e6, channels=2, stages=3)
    assert s.channels == 2 and validate(s).ok
    assert json.loads(dumps(s))["channels"] == 2 and loads(dumps(s)).channels == 2
    save_columnar(s, tmp_path / "s.npz")
    assert load_columnar(tmp_path / "s.npz").channels == 2
    one = build("hierarchical", parse_spec("hgx:boxes=2,gpus_per_box=2"), None, 1e6, channels=1, stages=3)
    assert "channels" not in json.loads(dumps(one)) and loads(dumps(one)).channels == 1
    np.testing.assert_array_equal(loads(dumps(one)).step, s.step)  # the same transfers


@pytest.mark.parametrize("bad", [0, 33, -1, 2.0, "2", True, None])
def test_a_channel_count_out_of_range_is_one_sentence(bad):
    obj = json.loads(dumps(two_steps(1)))
    obj["channels"] = bad
    with pytest.raises(ScheduleFormatError, match="channels") as info:
        loads(json.dumps(obj))
    assert "\n" not in str(info.value)
    if not isinstance(bad, str) and bad is not None:
        with pytest.raises(ScheduleFormatError, match="channels per rank pair"):
            dataclasses.replace(two_steps(1), channels=bad)
