"""The flow model: continuous time, max-min fair link sharing (design §3.5).

A transfer becomes ready when its dependencies (design §3.3, derived in `deps`) are done; it
then pays the per-transfer overhead α, sends chunk_bytes at its max-min fair rate (shared with
every other flow on each of its links, recomputed whenever the set of sending flows changes),
and is done one path latency after its last byte left. Optionally a barrier separates steps.

Two exact methods:
- **contention-free sweep** (`sweep`): assume every flow gets its path's bottleneck bandwidth
  alone and propagate times through the dependencies in one compiled pass over the steps; then
  check, link by link, that no two sending intervals overlap. If none does, this *is* the
  max-min answer, and the dependency groups are never built.
- **event simulation** otherwise (`engine`, compiled): events are starts, ends of sending and
  completions; all events at the same instant are handled together, and the max-min rates of
  the flows connected to what changed are refilled.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from arsched.collective.schedule import Schedule
from arsched.defaults import DEFAULT_ALPHA
from arsched.errors import ArschedError, NotFaster, OutOfTime
from arsched.limits import check_simulation
from arsched.sim.deps import derive
from arsched.sim.engine import simulate_events
from arsched.sim.paths import CompiledPaths, compile_paths
from arsched.sim.result import SimResult, check_alpha, link_bytes, schedule_bound
from arsched.sim.sweep import contended, sweep_times


def simulate_flow(
    schedule: Schedule,
    alpha: float = DEFAULT_ALPHA,
    synchronous: bool = False,
    trace: bool = False,
    fifo: bool = True,
    method: str = "auto",
    deadline: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    give_up_above: float | None = None,
    max_instants: int | None = None,
) -> SimResult:
    """Simulate a schedule in the flow model (α = per-transfer overhead in seconds).

    `synchronous=True` puts a barrier between steps. The result notes which exact method ran
    (`method`: 'sweep' when no link was ever shared at once, else 'events', with its
    `event_instants` and `paths_refilled`, the work they took). `trace=True` keeps
    the exact per-link rates of the event simulation for plots (`SimResult.link_rate_trace`).
    `fifo=True` (the default) serialises each (source, destination) connection's steps, as a
    runtime's channels do (NCCL channels, MSCCL thread blocks): pipelined trees stream their
    chunks. `fifo=False` sends every transfer as soon as its data is ready, all steps of a
    connection at once, an idealisation no runtime implements (docs/architecture.md, "The
    default flow model"). `method='events'` runs the event
    simulation even where the sweep would do (both are exact, so only the cost differs); the
    default 'auto' takes the sweep whenever it is exact. With a `deadline` (a `time.monotonic()`
    value) an event simulation still running at that time stops with `OutOfTime`; it calls
    `progress(done, total)` now and then with the transfers done (for a progress bar). With
    `give_up_above` (seconds), a schedule whose busiest link needs that long for its bytes
    (before anything else is computed), or which the sweep cannot time exactly and whose
    contention-free time reaches that value, stops with `NotFaster` before its event
    simulation: both are lower bounds on the flow time (no link carries more than its
    capacity; sharing only slows a flow, and a later finish only delays what waits for it).
    With `max_instants`, an event simulation stops with `OutOfTime` after that many event
    instants: a bound on its work that, unlike a deadline, is the same on every machine (an
    instant's cost grows with the flows sharing links then, so transfers alone do not bound it).
    Either `OutOfTime` carries the larger of the two lower bounds above as `floor_s`.
    """
    s = schedule
    alpha = check_alpha(alpha)
    if method not in ("auto", "events"):
        raise ArschedError(f"unknown flow method {method!r} (expected 'auto' or 'events')")
    if max_instants is not None and not (isinstance(max_instants, (int, np.integer)) and max_instants >= 1):
        raise ArschedError(f"max_instants must be a positive integer, got {max_instants!r}")
    cp = compile_paths(s)
    bound = schedule_bound(s, alpha)
    carried = link_bytes(s, cp)
    if len(s) == 0:
        return SimResult("flow", s, 0.0, np.zeros(0), np.zeros(0), carried, bound, None, alpha)
    busiest = float((carried / s.topology.compiled.capacity).max())  # no link carries more
    if give_up_above is not None and busiest >= give_up_above:
        raise NotFaster(busiest)
    log: list | None = [] if trace else None
    until = np.inf if deadline is None else deadline
    above = np.inf if give_up_above is None else give_up_above
    events = method == "events"
    start, done, notes = flow_times(
        s, cp, alpha, fifo, synchronous, events, log, until, progress, above, busiest, max_instants
    )
    return SimResult("flow", s, float(done.max()), start, done, carried, bound, None, alpha, notes, log)


def flow_times(
    schedule: Schedule,
    cp: CompiledPaths,
    alpha: float,
    fifo: bool = True,
    synchronous: bool = False,
    events: bool = False,
    trace: list | None = None,
    deadline: float = np.inf,
    progress: Callable[[int, int], None] | None = None,
    give_up_above: float = np.inf,
    busiest: float = 0.0,
    max_instants: int | None = None,
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Each transfer's start (when it became ready) and done time, and notes on the method, from
    the schedule's compiled paths: the sweep when it is exact (and `events` is off), else the
    event simulation (with `fifo`, `synchronous`, `trace`, `deadline`, `progress`,
    `give_up_above` and `max_instants` as in `simulate_flow`; `busiest` is a lower bound on the time known
    already); the schedule has at least one transfer."""
    s = schedule
    ready, done = sweep_times(s, cp, alpha, fifo, synchronous)
    send = ready + alpha
    if not events and not contended(cp, send, send + s.chunk_bytes / cp.path_bottleneck[cp.path_id]):
        return ready, done, {"method": "sweep"}
    if (floor := max(float(done.max()), busiest)) >= give_up_above:
        raise NotFaster(floor)
    del ready, done, send
    check_simulation(len(s))  # before the dependencies, part of what it needs
    deps = derive(s, synchronous=synchronous, fifo=fifo)
    cap = s.topology.compiled.capacity
    try:
        send, done, counts = simulate_events(
            cp, deps, cap, s.chunk_bytes, alpha, trace, deadline, progress, max_instants=max_instants
        )
    except OutOfTime as e:  # with what is known of the time so far
        raise OutOfTime(str(e), floor) from None
    return send - alpha, done, {"method": "events", **counts}
