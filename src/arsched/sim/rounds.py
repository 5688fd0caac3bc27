"""The round model: the discrete world of the hierarchical-RL paper (arXiv 2503.21013).

A directed link carries at most one flow per round. Each step of a schedule is split into
rounds: its transfers are placed, in stored order, into the first round where none of their
links is taken (first fit), so a step needs at least as many rounds as its most loaded link
and exactly that many whenever its paths do not conflict in a cycle. A round lasts
chunk_bytes / (bandwidth of its slowest used link) + the longest path latency in it + α.
Steps run one after another.

`simulate_rounds` times a whole schedule (vectorised; only steps with a loaded link are
assigned round by round). `RoundEngine` is the incremental form, for a scheduler that decides
round by round over a schedule's transfers: which are available, which conflict, execute a
conflict-free set as one round.
"""

from __future__ import annotations

import numpy as np

from arsched.collective.schedule import Schedule
from arsched.errors import ArschedError
from arsched.sim.deps import Readiness, derive
from arsched.sim.maxmin import incidence
from arsched.sim.paths import CompiledPaths, compile_paths, step_groups
from arsched.sim.result import SimResult, check_alpha, link_bytes, schedule_bound


def _first_fit(rows: np.ndarray, cp: CompiledPaths) -> np.ndarray:
    """Round of each transfer of one step: the first round where all its links are free."""
    taken: dict[int, set[int]] = {}
    out = np.empty(len(rows), dtype=np.int64)
    for k, t in enumerate(rows.tolist()):
        links = cp.links[cp.ptr[t] : cp.ptr[t + 1]].tolist()
        busy = set().union(*(taken.get(lk, ()) for lk in links))
        r = 0
        while r in busy:
            r += 1
        out[k] = r
        for lk in links:
            taken.setdefault(lk, set()).add(r)
    return out


def assign_rounds(schedule: Schedule, cp: CompiledPaths) -> tuple[np.ndarray, np.ndarray]:
    """(dense step, round within the step) of every transfer."""
    step, groups = step_groups(schedule)
    rnd = np.zeros(len(step), dtype=np.int64)
    if not len(step):
        return step, rnd
    num_links = schedule.topology.compiled.num_links
    uniq, counts = np.unique(step[cp.owner] * num_links + cp.links, return_counts=True)
    for k in np.unique(uniq[counts > 1] // num_links).tolist():  # steps with a loaded link
        rnd[groups[k]] = _first_fit(groups[k], cp)
    return step, rnd


def simulate_rounds(schedule: Schedule, alpha: float = 0.0) -> SimResult:
    """Time a schedule in the round model; the result carries the total number of rounds."""
    s = schedule
    alpha = check_alpha(alpha)
    cp = compile_paths(s)
    step, rnd = assign_rounds(s, cp)
    chunk = s.chunk_bytes
    n = len(s)
    if n == 0:
        bound = schedule_bound(s, alpha, port_model=True)
        return SimResult("rounds", s, 0.0, np.zeros(0), np.zeros(0), link_bytes(s, cp), bound, 0, alpha)
    width = int(rnd.max()) + 1
    slot, inverse = np.unique(step * width + rnd, return_inverse=True)  # (step, round) in order
    inverse = inverse.ravel()
    slowest = np.full(len(slot), np.inf)
    np.minimum.at(slowest, inverse, cp.bottleneck)
    longest = np.zeros(len(slot))
    np.maximum.at(longest, inverse, cp.latency)
    duration = chunk / slowest + longest + alpha
    slot_start = np.concatenate([[0.0], np.cumsum(duration)[:-1]])
    start = slot_start[inverse]
    end = start + chunk / cp.bottleneck + cp.latency + alpha
    total = float(duration.sum())
    bound = schedule_bound(s, alpha, port_model=True)
    return SimResult("rounds", s, total, start, end, link_bytes(s, cp), bound, len(slot), alpha)


class RoundEngine:
    """Drive the round model one round at a time over a schedule's transfers.

    Dependencies are those of asynchronous execution (design §3.3), so transfers of different
    steps may share a round once their inputs are there. `available()` lists transfers whose
    dependencies are done; `execute(ids)` runs a conflict-free set of them as one round and
    returns its duration.
    """

    def __init__(self, schedule: Schedule, alpha: float = 0.0) -> None:
        self.schedule = schedule
        self.alpha = check_alpha(alpha)
        self.paths = compile_paths(schedule)
        self._ready = Readiness(derive(schedule))
        self._available = np.zeros(len(schedule), dtype=bool)
        self._available[self._ready.initial()] = True
        self.done = np.zeros(len(schedule), dtype=bool)
        self.time = 0.0
        self.rounds = 0

    @property
    def finished(self) -> bool:
        return bool(self.done.all())

    def available(self) -> np.ndarray:
        """Transfers whose dependencies are all done and that have not run yet."""
        return np.flatnonzero(self._available)

    def links_of(self, t: int) -> np.ndarray:
        return self.paths.links[self.paths.ptr[t] : self.paths.ptr[t + 1]]

    def conflicts(self, a: int, b: int) -> bool:
        """True if transfers a and b share a directed link (they cannot share a round)."""
        return bool(np.intersect1d(self.links_of(a), self.links_of(b)).size)

    def conflict_free(self, ids: np.ndarray) -> bool:
        """True if no two of the transfers share a directed link."""
        links = incidence(np.asarray(ids, dtype=np.int64), self.paths)[1]
        return len(np.unique(links)) == len(links)

    def execute(self, ids: np.ndarray) -> float:
        """Run the transfers as one round; returns its duration. They must be available and
        conflict-free (an ArschedError says which rule was broken)."""
        ids = np.unique(np.asarray(ids, dtype=np.int64))
        if not len(ids):
            raise ArschedError("a round needs at least one transfer")
        if ids[0] < 0 or ids[-1] >= len(self.done):
            raise ArschedError(f"transfer ids must lie in 0..{len(self.done) - 1}")
        if not self._available[ids].all():
            bad = int(ids[~self._available[ids]][0])
            raise ArschedError(f"transfer {bad} is not available: its dependencies are not done or it ran")
        if not self.conflict_free(ids):
            raise ArschedError("two transfers of the round share a directed link")
        p = self.paths
        duration = float(
            self.schedule.chunk_bytes / p.bottleneck[ids].min() + p.latency[ids].max() + self.alpha
        )
        self._available[ids] = False
        self.done[ids] = True
        self._available[self._ready.complete(ids)] = True
        self.time += duration
        self.rounds += 1
        return duration
