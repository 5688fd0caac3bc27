"""A peer of the flow model: the same schedule in SimGrid's fluid network model (optional).

SimGrid (Casanova, Giersch, Legrand, Quinson, Suter, "Versatile, scalable, and accurate
simulation of distributed applications and platforms", JPDC 2014) is a maintained flow-level
simulator; its CM02 network model shares every link max-min fairly. Run side by side with
`simulate_flow`, it checks the flow model's times against an independent solver and sets its
speed beside a peer's (`benchmarks/bench_simgrid.py`).

What follows SimGrid: each directed link of the network is one shared SimGrid link at that
direction's bandwidth; a transfer is a SimGrid communication along exactly the schedule's path
(an explicit route per path), and SimGrid's max-min solver decides every rate and when the
last byte of each transfer leaves. Settings: `network/model:CM02` with bandwidth and latency
factors 1, `network/weight-S:0`, no TCP window bound (`network/TCP-gamma:0`), no cross-traffic;
the timing precision tightened to 1e-13 s (`surf/precision`) and the solver's to 1e-9
(`maxmin/precision`) from their defaults 1e-9 s and 1e-5.

What is ours (the flow model's semantics, carried by one SimGrid actor that drives the run):
- dependencies: the flow model's in-order connections (`derive(fifo=True)`); a transfer starts
  α after its last dependency arrived (a timer of the actor);
- latency: a transfer arrives one path latency after its last byte left, so SimGrid's links
  get zero latency and the actor adds each path's latency after the communication ends.
  SimGrid's own CM02 would pay the latency *before* sending and weigh each flow's share by the
  inverse of its path latency (TCP's RTT unfairness); both differ from the flow model, so
  neither is used;
- sizes: SimGrid counts whole bytes, so sizes and bandwidths are both scaled by one power of
  two that makes the chunk an exact integer (times are unchanged, and nothing is rounded);
- a pair of endpoints has one route in SimGrid: a second path between the same two nodes gets
  a stand-in source host (hosts compute nothing here, so only the links are shared).

The run happens in a fresh process (SimGrid keeps one engine per process), with SimGrid's log
silenced. Install with `apt-get install python3-simgrid` (Debian's build for its Python 3.11;
only that extension is loaded, not Debian's other packages), or a `simgrid` wheel in the
environment.
"""

from __future__ import annotations

import glob
import importlib.machinery
import importlib.util
import math
import multiprocessing
import os
import time
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from arsched.collective.schedule import Schedule
from arsched.defaults import DEFAULT_ALPHA
from arsched.errors import ArschedError
from arsched.sim.deps import derive
from arsched.sim.paths import compile_paths
from arsched.sim.result import check_alpha

DEBIAN = "/usr/lib/python3/dist-packages"  # where python3-simgrid puts its extension
TIMING_S = 1e-13  # SimGrid's timing precision here; the actor's timers fire within it
CONFIG = (
    "network/model:CM02",
    "network/latency-factor:1",
    "network/bandwidth-factor:1",
    "network/weight-S:0",
    "network/TCP-gamma:0",
    "network/crosstraffic:0",
    f"surf/precision:{TIMING_S:g}",
    "maxmin/precision:1e-9",
)
_START, _ARRIVE = 0, 1  # the actor's two kinds of timer


@dataclass(frozen=True)
class PeerResult:
    """The schedule's time in SimGrid, the wall-clock seconds of SimGrid's run (the actor that
    drives it included) and of building its platform beforehand."""

    time_s: float
    wall_s: float
    build_s: float


def extension() -> str | None:
    """Where SimGrid's Python extension is: a `simgrid` module of this environment, else
    Debian's build if it matches this interpreter; None when there is neither."""
    spec = importlib.util.find_spec("simgrid")
    if spec is not None and spec.origin:
        return spec.origin
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        found = sorted(glob.glob(f"{DEBIAN}/simgrid{suffix}"))
        if found:
            return found[0]
    return None


def available() -> bool:
    """Whether SimGrid's Python bindings can be loaded here."""
    return extension() is not None


def simulate_simgrid(schedule: Schedule, alpha: float = DEFAULT_ALPHA, timeout: float = 3600.0) -> PeerResult:
    """Run `schedule` in SimGrid (in a fresh process, at most `timeout` seconds) and return its
    time, with the flow model's semantics (α, in-order connections, latency after the bytes)."""
    if not available():
        raise ArschedError(
            "the SimGrid peer needs SimGrid's Python bindings: apt-get install python3-simgrid"
        )
    alpha = check_alpha(alpha)
    if len(schedule) == 0:
        return PeerResult(0.0, 0.0, 0.0)
    job = _job(schedule, alpha)
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(extension(), job, send), daemon=True)
    proc.start()
    send.close()
    try:
        if not receive.poll(timeout):
            raise ArschedError(f"SimGrid did not finish within {timeout:g} s")
        try:
            outcome = receive.recv()
        except EOFError:
            proc.join()
            raise ArschedError(
                f"SimGrid's process ended without a result (exit code {proc.exitcode})"
            ) from None
    finally:
        proc.kill()
        proc.join()
        receive.close()
    if isinstance(outcome, str):
        raise ArschedError(f"SimGrid failed: {outcome}")
    return PeerResult(*outcome)


def _job(schedule: Schedule, alpha: float) -> dict:
    """Everything the SimGrid process needs, as plain lists and numbers: the links and paths the
    schedule uses, each path's endpoints (a stand-in source for a pair's second path), the
    scaled sizes and the dependency groups."""
    s, c = schedule, schedule.topology.compiled
    cp = compile_paths(s)  # refuses a path that is not over the network's links
    used, first = np.unique(s.path_id, return_index=True)
    links = np.unique(cp.links)
    link_of = np.full(c.num_links, -1, dtype=np.int64)
    link_of[links] = np.arange(len(links))
    pairs: set[tuple[int, int]] = set()
    routes = []
    for t in first.tolist():
        pair = (int(s.src[t]), int(s.dst[t]))
        src = f"n{pair[0]}" if pair not in pairs else f"p{len(routes)}"
        pairs.add(pair)
        routes.append((src, f"n{pair[1]}", link_of[cp.links[cp.ptr[t] : cp.ptr[t + 1]]].tolist()))
    scale = 2.0 ** (52 - math.floor(math.log2(s.chunk_bytes)))  # the chunk becomes an exact integer
    route_of = np.searchsorted(used, s.path_id)
    d = derive(s, fifo=True)
    return {
        "capacity": (c.capacity[links] * scale).tolist(),
        "routes": routes,
        "route_of": route_of.tolist(),
        "latency": cp.latency.tolist(),
        "size": int(s.chunk_bytes * scale),
        "alpha": alpha,
        "member_of": d.member_of.tolist(),
        "group_left": d.size.tolist(),
        "wait_left": d.wait_count.tolist(),
        "dep_ptr": d.dep_ptr.tolist(),
        "dependents": d.dependents.tolist(),
    }


def _child(path: str, job: dict, send) -> None:  # pragma: no cover - runs in the SimGrid process
    """Load SimGrid with its log (and anything it prints) kept out of the caller's output, run,
    and send back (time, wall, build) or one sentence of what went wrong."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    try:
        send.send(_run(_load(path), job))
    except Exception as e:
        send.send(f"{type(e).__name__}: {e}")
    send.close()


def _load(path: str) -> ModuleType:  # pragma: no cover - runs in the SimGrid process
    """Import the extension at `path` as the module `simgrid`, alone (none of its neighbours)."""
    spec = importlib.util.spec_from_file_location("simgrid", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(sg: ModuleType, job: dict) -> tuple[float, float, float]:  # pragma: no cover - SimGrid process
    """Build the platform, run the driving actor, and return (time, wall, build seconds)."""
    start = time.perf_counter()
    engine = sg.Engine(["arsched", *(f"--cfg={x}" for x in CONFIG), "--log=root.thres:critical"])
    zone = sg.NetZone.create_full_zone("network")
    links = [zone.create_link(f"l{i}", bw).seal() for i, bw in enumerate(job["capacity"])]
    hosts: dict[str, object] = {}
    for src, dst, _ in job["routes"]:
        for name in (src, dst):
            if name not in hosts:
                hosts[name] = zone.create_host(name, 1.0).seal()
    for src, dst, route in job["routes"]:
        hop = [sg.LinkInRoute(links[k]) for k in route]
        zone.add_route(hosts[src].netpoint, hosts[dst].netpoint, None, None, hop, False)
    zone.seal()
    ends = [(hosts[src], hosts[dst]) for src, dst, _ in job["routes"]]
    out: dict[str, float] = {}
    sg.Actor.create("driver", next(iter(hosts.values())), _driver, sg, job, ends, out)
    build = time.perf_counter() - start
    start = time.perf_counter()
    engine.run()
    wall = time.perf_counter() - start
    if out.get("done") != len(job["route_of"]):
        raise RuntimeError(f"SimGrid finished {out.get('done', 0)} of {len(job['route_of'])} transfers")
    return out["time"], wall, build


def _driver(sg: ModuleType, job: dict, ends: list, out: dict) -> None:  # pragma: no cover - SimGrid process
    """The flow model's semantics around SimGrid's communications: start each transfer α after
    its dependencies arrived, and count it arrived one path latency after SimGrid sent its last
    byte. Timers sit in a heap; the actor waits for the next timer or communication."""
    import heapq

    route_of, latency, size, alpha = job["route_of"], job["latency"], job["size"], job["alpha"]
    member_of, group_left, wait_left = job["member_of"], job["group_left"], job["wait_left"]
    dep_ptr, dependents = job["dep_ptr"], job["dependents"]
    timers = [(alpha, _START, t) for t, w in enumerate(wait_left) if w == 0]
    heapq.heapify(timers)
    comms: list = []
    owner: list[int] = []
    done, finish = 0, 0.0
    while timers or comms:
        horizon = sg.Engine.clock + TIMING_S
        while timers and timers[0][0] <= horizon:
            at, kind, t = heapq.heappop(timers)
            if kind == _START:
                src, dst = ends[route_of[t]]
                comms.append(sg.Comm.sendto_async(src, dst, size))
                owner.append(t)
                continue
            done, finish = done + 1, max(finish, at)
            for g in member_of[t]:
                if g < 0:
                    continue
                group_left[g] -= 1
                if group_left[g] == 0:
                    for d in dependents[dep_ptr[g] : dep_ptr[g + 1]]:
                        wait_left[d] -= 1
                        if wait_left[d] == 0:
                            heapq.heappush(timers, (at + alpha, _START, d))
        if comms:
            i = (
                sg.Comm.wait_any_for(comms, timers[0][0] - sg.Engine.clock)
                if timers
                else sg.Comm.wait_any(comms)
            )
            if i >= 0:
                t = owner[i]
                comms[i], owner[i] = comms[-1], owner[-1]
                comms.pop()
                owner.pop()
                heapq.heappush(timers, (sg.Engine.clock + latency[t], _ARRIVE, t))
        elif timers:
            sg.this_actor.sleep_until(timers[0][0])
    out["done"], out["time"] = done, finish
