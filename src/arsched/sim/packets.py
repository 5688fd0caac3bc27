"""A packet-level cross-check of the flow model: a schedule run in ns-3 (optional dependency).

The network becomes ns-3 nodes (servers and switches alike, IPv4 with global shortest-path
routing) joined by point-to-point links at each direction's bandwidth and the link's latency,
9,000-byte MTU. Every (source, destination) rank pair that a schedule uses gets one TCP
connection, opened before the clock starts; a transfer is queued on its connection α after its
dependencies are done (the flow model's in-order dependencies, `derive(fifo=True)`), and is
done when its last byte has arrived (TCP keeps a connection's bytes in order, so the receiver
counts them off transfer by transfer). The time is the last transfer's arrival. What the flow
model leaves out and this does not: packet headers, store-and-forward serialisation at every
hop, TCP's slow start, acknowledgements and congestion control, queueing in switch buffers.

Assumptions (ours): NewReno TCP, ns-3's default 100-packet drop-tail queues, 16 MB socket
buffers, an ACK per segment; routes are ns-3's shortest paths, so compare on networks whose
shortest paths are unique (a star, a two-level tree), where they are the schedule's. The
driver (`ns3_driver.cpp`) is compiled by cppyy at the first use, and every run happens in a
fresh process: ns-3 keeps its nodes for the life of a process.

Install with `pip install ns3` (about 70 MB; `arsched[packets]`).
"""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from arsched.collective.schedule import Schedule
from arsched.defaults import DEFAULT_ALPHA
from arsched.errors import ArschedError
from arsched.sim.deps import derive

DRIVER = Path(__file__).with_name("ns3_driver.cpp")
CONNECT_S = 1e-3  # connections open before this time; the schedule's clock starts here
MAX_CONNECTIONS = 64_000  # one listening port each


@dataclass(frozen=True)
class PacketResult:
    """The schedule's time in ns-3 and the wall-clock seconds ns-3 took."""

    time_s: float
    wall_s: float


def available() -> bool:
    """Whether the ns-3 Python wheel can be imported here."""
    import importlib.util

    return importlib.util.find_spec("ns") is not None


def simulate_packets(
    schedule: Schedule, alpha: float = DEFAULT_ALPHA, timeout: float = 3600.0
) -> PacketResult:
    """Run `schedule` in ns-3 (in a fresh process, at most `timeout` seconds) and return its time."""
    if not available():
        raise ArschedError("the packet-level simulation needs ns-3's Python wheel: pip install ns3")
    c = schedule.topology.compiled
    back = np.asarray(c.adjacency[c.link_dst, c.link_src]).ravel() - 1
    if (back < 0).any() or not np.allclose(c.latency[back], c.latency):
        raise ArschedError(f"{schedule.topology.name}: ns-3's links need both directions, at one latency")
    job = _job(schedule, alpha, back)
    pairs = len(job["connections"])
    if pairs > MAX_CONNECTIONS:
        raise ArschedError(f"the schedule uses {pairs:,} rank pairs; ns-3 runs at most {MAX_CONNECTIONS:,}")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        try:
            time_s, wall_s = pool.apply_async(_run, (job,)).get(timeout)
        except multiprocessing.TimeoutError:
            raise ArschedError(f"ns-3 did not finish within {timeout:g} s") from None
    return PacketResult(time_s, wall_s)


def _job(schedule: Schedule, alpha: float, back: np.ndarray) -> dict:
    """Everything the ns-3 process needs, as plain lists and numbers; `back[k]` is link k's
    reverse link."""
    s, c = schedule, schedule.topology.compiled
    one = np.flatnonzero(c.link_src < c.link_dst)  # each cable once, by its lower end
    cables = list(
        zip(
            c.link_src[one].tolist(),
            c.link_dst[one].tolist(),
            c.capacity[one].tolist(),
            c.capacity[back[one]].tolist(),
            c.latency[one].tolist(),
            strict=True,
        )
    )
    conns: dict[tuple[int, int], int] = {}
    conn_of = [
        conns.setdefault((a, b), len(conns)) for a, b in zip(s.src.tolist(), s.dst.tolist(), strict=True)
    ]
    d = derive(s, fifo=True)
    return {
        "nodes": c.num_nodes,
        "cables": cables,
        "connections": list(conns),
        "conn_of": conn_of,
        "bytes": float(max(1.0, np.ceil(s.chunk_bytes))),  # whole bytes on the wire
        "wait_count": d.wait_count.tolist(),
        "width": int(d.member_of.shape[1]),
        "member_of": d.member_of.ravel().tolist(),
        "group_size": d.size.tolist(),
        "dep_ptr": d.dep_ptr.tolist(),
        "dependents": d.dependents.tolist(),
        "alpha": float(alpha),
    }


def _run(job: dict) -> tuple[float, float]:  # pragma: no cover - runs in the ns-3 process
    """Build the network and the connections in ns-3, run, and return (time, wall seconds)."""
    import time

    # cling reports symbols it could not materialise on the C++ side's stderr, harmlessly: keep
    # that out of the caller's output (errors still come back as exceptions)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    import cppyy
    from ns import ns

    cppyy.cppdef(DRIVER.read_text())
    for name, value in (("SegmentSize", 8948), ("SndBufSize", 1 << 24), ("RcvBufSize", 1 << 24)):
        ns.Config.SetDefault(f"ns3::TcpSocket::{name}", ns.UintegerValue(value))
    ns.Config.SetDefault("ns3::TcpSocket::DelAckCount", ns.UintegerValue(1))
    r = cppyy.gbl.arschedns.Run()
    r.AddNodes(job["nodes"])
    for i, (u, v, up, down, latency) in enumerate(job["cables"]):
        r.AddCable(u, v, f"{up * 8:.0f}bps", f"{down * 8:.0f}bps", f"{latency * 1e9:.0f}ns", i)
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()
    for a, b in job["connections"]:
        r.csrc.push_back(a)
        r.cdst.push_back(b)
    for name, values in (
        ("conn_of", job["conn_of"]),
        ("wait_left", job["wait_count"]),
        ("member_of", job["member_of"]),
        ("group_left", job["group_size"]),
        ("dep_ptr", job["dep_ptr"]),
        ("deps", job["dependents"]),
    ):
        vector = getattr(r, name)
        for x in values:
            vector.push_back(x)
    n = len(job["conn_of"])
    for _ in range(n):
        r.bytes.push_back(job["bytes"])
        r.start_at.push_back(-1.0)
        r.done_at.push_back(-1.0)
    r.width = job["width"]
    r.alpha = job["alpha"]
    r.Connect(len(job["connections"]), CONNECT_S)
    start = time.perf_counter()
    ns.Simulator.Run()
    wall = time.perf_counter() - start
    if r.done_count != n:
        raise RuntimeError(f"ns-3 finished {r.done_count} of {n} transfers")
    finish = max(r.done_at)
    ns.Simulator.Destroy()
    return finish - CONNECT_S, wall
