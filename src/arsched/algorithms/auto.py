"""`auto`: the best schedule arsched can make for a network, a size and a model, within a budget.

Every other registered algorithm is a candidate (for another collective, `build('auto', ...,
collective=)`, every one that builds it), tried in the registry's order (the cheap textbook
schemes first, the synthesis last): built and simulated in the chosen model (by default the
flow model with in-order connections and its α, the model `simulate` uses). The fastest
simulated schedule is validated (a builder's bug is an error, never a schedule returned; the
others are not: validating a million-transfer loser cost seconds) and returned, under its own
algorithm's name, with the search in its meta (`auto`: the model, every candidate's time and
gap or why it was left out). A candidate starts only while the budget lasts or no schedule has
been found yet (a builder is not interrupted; each has its own bound on work). Once a schedule
is in hand, a candidate's simulation gets an equal share of the time left (what is left over
the candidates not yet simulated), so that one slow event simulation cannot starve the others.
Those cut short are simulated again at the end, the one with the lowest lower bound on its time
first, with all the time left and `GRACE` of the budget more (tree packing's plan for a
256-server Jellyfish takes most of the budget to build and about as long to simulate, and is
1.104× the bound at 16 MB where the others are 2.7× or more, `benchmarks/bench_auto.py`: thrown
away unsimulated for want of time, the build was wasted); one cut again is noted, not chosen.
Until one schedule has been timed, each simulation gets an equal share of what is left (of the
budget, then of the grace), those cut then get the rest, and where none ends at all (a
512-server Jellyfish: hierarchical's contended event simulation runs for many minutes) the
schedule with the lowest lower bound on its time is returned unsimulated, its meta saying so.
So the search ends within 1 + `GRACE` (twice) the budget plus one build. In the flow model a
candidate is first timed without contention (the sweep `simulate_flow` runs first anyway) after
its busiest link's bytes at that link's capacity: lower bounds on its simulated time, so one
already no faster than the best is not simulated further (`give_up_above`; a contended event
simulation can take minutes at a thousand ranks), and one whose `Floor` (a lower bound from its
shape alone: a ring's chain of 2(N − 1) transfers, a parameter server's ingress) is no faster
than the best is not even built (and one whose floor is above `GOOD_ENOUGH` of the bound is
tried after the others: a parameter server over a thousand ranks, 7,600× the bound, is then
never built). The search ends early once a schedule is within `GOOD_ENOUGH` of the bound, since
no other can then be more than that faster. A schedule with more than `CROWDED` rank pairs
sending in one step (a sharded PS over a thousand ranks: a million flows at once, minutes of
event simulation) is simulated after the others, and not at all once one of them is within
`GOOD_ENOUGH` or the time has run out. Until one schedule has been simulated, and while the
budget lasts, a built one whose busiest link alone keeps it above `GOOD_ENOUGH` of the bound is
simulated after the others too (halving-doubling on an oversubscribed Clos: many times the bound
by its busiest link, and its contended simulation the slowest of all), so that the ones
simulated first screen it. The result is deterministic unless the time runs short (the meta
then says which candidates were not tried or not simulated to their end);
synthesis times go to the log (`arsched -v`), not into the schedule, so the same inputs give
the same bytes.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from arsched.algorithms import composed
from arsched.algorithms.common import check_nbytes, check_ranks
from arsched.algorithms.registry import NotApplicable, algorithms, build, get, register
from arsched.collective.kinds import NAMES, ROOTED, TITLES
from arsched.collective.schedule import Schedule
from arsched.collective.validate import validate
from arsched.collective_bounds import collective_bound
from arsched.defaults import MODELS, default_alpha
from arsched.errors import ArschedError, NotFaster, OutOfTime
from arsched.limits import LimitError
from arsched.sim import simulate_flow, simulate_rounds
from arsched.sim.paths import compile_paths
from arsched.sim.result import link_bytes, schedule_bound
from arsched.topology.core import Topology

log = logging.getLogger(__name__)

NAME = "auto"
BUDGET_S = 60.0
GOOD_ENOUGH = 1.01  # a schedule this close to the bound ends the search
GRACE = 1.0  # of the budget, more for simulating what was built but cut short
CROWDED = 100_000  # rank pairs in one step above which a schedule is simulated after the others
SCREEN = 1e-6  # margin over the event simulation's grouping of near-simultaneous events (1e-9)
# hrl's fallback replays greedy-trees' plan, which auto builds and times as a candidate anyway
OWN = {"hrl": {"fallback": False}}
CUT = "not simulated to its end: the budget ran out"


def _candidates(names: Sequence[str] | str | None, collective: str = "allreduce") -> list[str]:
    if names is None:  # rs-ag only joins halves of the others, which auto tries whole
        return [a.name for a in algorithms(collective) if a.name not in (NAME, composed.NAME)]
    names = [x.strip() for x in names.split(",")] if isinstance(names, str) else list(names)
    for name in names:
        if name == NAME:
            raise ArschedError("auto: 'auto' cannot be one of its own candidates")
        get(name).builder(collective)  # an unknown name, or one that does not build it, is refused
    return names


@register(NAME, "the fastest schedule of every algorithm that applies, by simulation, within a time budget")
def auto(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    budget: float = BUDGET_S,
    model: str = "flow",
    alpha: float | None = None,
    fifo: bool = True,
    candidates: Sequence[str] | str | None = None,
) -> Schedule:
    """The fastest of the `candidates` (default: every other algorithm) in `model` (flow or
    rounds; `fifo` for the flow model's in-order connections; `alpha` defaults to the model's),
    trying candidates while `budget` seconds last (see the module docstring)."""
    return search(topology, ranks, nbytes, budget, model, alpha, fifo, candidates)


def _of(collective: str):
    """auto for another collective: the same search over the algorithms that build it."""

    def build_it(
        topology: Topology,
        ranks: Sequence[str] | None = None,
        nbytes: float = 1e8,
        budget: float = BUDGET_S,
        model: str = "flow",
        alpha: float | None = None,
        fifo: bool = True,
        candidates: Sequence[str] | str | None = None,
        root: str | None = None,
    ) -> Schedule:
        return search(topology, ranks, nbytes, budget, model, alpha, fifo, candidates, collective, root)

    build_it.__doc__ = f"auto for {TITLES[collective]}: the fastest of the algorithms that build it."
    return build_it


for _collective in NAMES[1:]:
    register(NAME, "", _collective)(_of(_collective))


def search(
    topology: Topology,
    ranks: Sequence[str] | None,
    nbytes: float,
    budget: float,
    model: str,
    alpha: float | None,
    fifo: bool,
    candidates: Sequence[str] | str | None,
    collective: str = "allreduce",
    root: str | None = None,
) -> Schedule:
    """auto's search for `collective` (with `root` for the rooted ones)."""
    rs = check_ranks(topology, ranks, NAME)
    nbytes = check_nbytes(nbytes, NAME)
    if model not in MODELS:
        raise ArschedError(f"auto: model must be flow or rounds, got {model!r}")
    if not (isinstance(budget, (int, float)) and budget > 0):
        raise ArschedError(f"auto: budget must be a positive number of seconds, got {budget!r}")
    a = default_alpha(model) if alpha is None else float(alpha)
    names = _candidates(candidates, collective)
    floors = {}  # seconds no schedule of the candidate can beat (`registry.Floor`, flow model)
    if model == "flow":
        floors = {n: f(topology, rs, nbytes, a) for n in names if (f := get(n).floors.get(collective))}
    if floors:  # those that cannot come within GOOD_ENOUGH go last: the others may end the search
        first = rs[0] if collective in ROOTED and root is None else root
        bound = collective_bound(topology, rs, nbytes, collective, first, a)
        names = sorted(names, key=lambda n: floors.get(n, 0.0) > GOOD_ENOUGH * bound)
    deadline = time.monotonic() + budget
    best: tuple[float, float, Schedule] | None = None  # time, gap, schedule
    tried: list[dict[str, Any]] = []
    later: list[Schedule] = []  # built; simulated once the others have been (crowded, or cut short)

    def stop() -> str | None:
        """Why no further candidate is tried, if none is."""
        if (best is not None or later) and time.monotonic() >= deadline:  # one built at least
            return "the budget ran out"
        if best is not None and best[1] <= GOOD_ENOUGH:
            return f"one within {GOOD_ENOUGH:g}× the bound came first"
        return None

    def simulate(schedule: Schedule, until: float) -> float | None:
        """Simulate and record `schedule`; if its simulation was cut at `until` (a
        `time.monotonic()` value), a lower bound on its time instead of None. In the flow model a
        schedule whose contention-free time already is no faster than the best is recorded with
        that floor and not simulated further."""
        nonlocal best
        log.info("auto: simulating %s", schedule.algorithm)
        start = time.perf_counter()
        try:
            if model == "flow":
                r = simulate_flow(
                    schedule,
                    a,
                    fifo=fifo,
                    deadline=until,
                    give_up_above=None if best is None else best[0] * (1 + SCREEN),
                )
            else:
                r = simulate_rounds(schedule, a)
        except NotFaster as e:
            gap = e.floor_s / schedule_bound(schedule, a)
            log.info("auto: %s at least %.3f× the bound, not simulated further", schedule.algorithm, gap)
            slower = f"not faster than {best[2].algorithm}"
            note = f"at least {gap:.3f}× the bound by its busiest link or without contention: {slower}"
            tried.append({"algorithm": schedule.algorithm, "note": note})
            return None
        except OutOfTime as e:
            log.info("auto: %s simulation cut after %.2f s", schedule.algorithm, time.perf_counter() - start)
            return e.floor_s
        except LimitError as e:  # its event simulation would not fit in memory
            tried.append({"algorithm": schedule.algorithm, "note": str(e)})
            return None
        log.info(
            "auto: %s %.3f× the bound, simulated in %.2f s",
            schedule.algorithm,
            r.gap,
            time.perf_counter() - start,
        )
        tried.append({"algorithm": schedule.algorithm, "time_s": r.time_s, "gap": r.gap})
        if best is None or r.time_s < best[0]:
            best = (r.time_s, r.gap, schedule)
        return None

    for i, name in enumerate(names):
        if (why := stop()) is not None:
            tried.append({"algorithm": name, "note": f"not tried: {why}"})
            continue
        if name in floors and best is not None and floors[name] >= best[0] * (1 + SCREEN):
            gap = floors[name] / (best[0] / best[1])
            log.info("auto: %s at least %.3f× the bound, not built", name, gap)
            slower = f"not faster than {best[2].algorithm}, not built"
            tried.append({"algorithm": name, "note": f"at least {gap:.3f}× the bound by its floor: {slower}"})
            continue
        log.info("auto: building %s (%d of %d)", name, i + 1, len(names))
        start = time.perf_counter()
        try:
            schedule = build(name, topology, rs, nbytes, collective, root, **OWN.get(name, {}))
        except (NotApplicable, LimitError) as e:
            tried.append({"algorithm": name, "note": str(e)})
            continue
        log.info("auto: %s built in %.2f s", name, time.perf_counter() - start)
        if _most_pairs_in_a_step(schedule) > CROWDED:
            later.append((np.inf, schedule))  # its event simulation is the costly one: the others first
            continue
        if (
            best is None
            and model == "flow"
            and time.monotonic() < deadline  # a spent budget: simulated now, with what is left
            and (busy := _busiest_link(schedule)) > GOOD_ENOUGH * schedule_bound(schedule, a)
        ):
            log.info("auto: %s kept for after the others: its busiest link alone is above the bound", name)
            later.append((busy, schedule))  # then screened against the best by `give_up_above`
            continue
        # an equal share of what is left, so that one slow simulation cannot starve the rest
        share = max(deadline - time.monotonic(), 0.0) / (len(names) - i + len(later))
        if (floor := simulate(schedule, time.monotonic() + share)) is not None:
            later.append((floor, schedule))
    # what was built and cut: the most promising first, with the time left and GRACE more
    end = max(deadline, time.monotonic() + GRACE * budget)
    queue = sorted(later, key=lambda x: x[0])
    cut: list[tuple[float, Schedule]] = []  # cut with a share of the time: tried again after
    for k, (_, schedule) in enumerate(queue):
        if best is not None and best[1] <= GOOD_ENOUGH:
            note = f"not simulated: one within {GOOD_ENOUGH:g}× the bound came first"
            tried.append({"algorithm": schedule.algorithm, "note": note})
        elif best is not None and time.monotonic() >= end:
            tried.append({"algorithm": schedule.algorithm, "note": "not simulated: the budget ran out"})
        elif best is None:  # an equal share, so that one slow simulation cannot leave none timed
            share = (end - time.monotonic()) / (len(queue) - k)
            if (floor := simulate(schedule, time.monotonic() + share)) is not None:
                cut.append((floor, schedule))
        elif simulate(schedule, end) is not None:
            tried.append({"algorithm": schedule.algorithm, "note": CUT})
    for _, schedule in sorted(cut, key=lambda x: x[0]):
        late = time.monotonic() >= end or (best is not None and best[1] <= GOOD_ENOUGH)
        if late or simulate(schedule, end) is not None:
            tried.append({"algorithm": schedule.algorithm, "note": CUT})
    if best is None and cut:  # no simulation ended in time: the lowest lower bound, said so
        floor, schedule = min(cut, key=lambda x: x[0])
        best = (floor, floor / schedule_bound(schedule, a), schedule)
        note = f"chosen unsimulated: no simulation ended within the budget; at least {best[1]:.3f}× the bound"
        tried.append({"algorithm": schedule.algorithm, "note": note})
    if best is None:
        reasons = "; ".join(f"{t['algorithm']}: {t['note']}" for t in tried)
        raise NotApplicable(f"auto: no algorithm applies to this network ({reasons})")
    chosen = best[2]
    report = validate(chosen)
    if not report.ok:  # a builder bug: never return a wrong schedule
        raise RuntimeError(f"{chosen.algorithm} built an invalid schedule: {report.message}")
    meta = dict(chosen.meta)
    meta["auto"] = {
        "chosen": chosen.algorithm,
        "model": model,
        "fifo": fifo if model == "flow" else None,
        "alpha": a,
        "budget_s": budget,
        "candidates": tried,
    }
    return dataclasses.replace(chosen, meta=meta)


def _busiest_link(schedule: Schedule) -> float:
    """Seconds the schedule's busiest link needs for its bytes: a lower bound on its flow time."""
    if not len(schedule):
        return 0.0
    return float((link_bytes(schedule, compile_paths(schedule)) / schedule.topology.compiled.capacity).max())


def _most_pairs_in_a_step(schedule: Schedule) -> int:
    """The most distinct (source, destination) pairs sending in one step: the concurrent
    connections whose max-min sharing the event simulation computes."""
    if not len(schedule):
        return 0
    nodes = schedule.topology.compiled.num_nodes
    pair = np.unique(schedule.src.astype(np.int64) * nodes + schedule.dst, return_inverse=True)[1].ravel()
    step = np.unique(schedule.step, return_inverse=True)[1].ravel()
    pairs = int(pair.max()) + 1  # both numbered densely, each below the transfers: no overflow
    return int(np.bincount(np.unique(step * pairs + pair) // pairs).max())
