"""Marginal-gain allocators: GADGET, an Optimus-style one blind to topology, and GADGET's
allocation with random placement (ablation).

GADGET (Yu et al., INFOCOM'22), each slot, from an empty cluster: every job's next move is to
grow from w to the next worker count w' (powers of two up to its bound, and its request; a job
whose bound is its request, as every job at elastic 1, the default, has its request as its only
size, so that both allocators are then as rigid as the baselines); the
move with the largest marginal utility per GPU, (v(w') - v(w)) / (w' - w), is embedded and
committed, then the job's next move is queued; stop when no move gains. The embedding tries the
job's previous GPUs (no restart), one server (best fit), then the fewest servers under one ToR,
then the fewest servers anywhere, and reserves on every link the ring crosses the largest rate
the residual capacity allows; the embedding with the best value wins. Gains are estimated with
the server's uplink bandwidth and checked after embedding (lazy evaluation: a move whose real
gain fell below the next one's estimate is queued again).

Anti-starvation (our addition; GADGET's paper has none): under the completion-time utility
1/(1 + exp(JCT/D - 2)) a job that has waited long is worth almost nothing whatever it gets, so
pure marginal-utility allocation may never run it (past JCT ~ 30 D its marginal gain is below
floating-point resolution: a 16-GPU job on a 16-GPU cluster would never start). A job older
than STARVE_FACTOR x D (at least STARVE_SLOTS slots; D its compute-only duration) has spent its
utility under every objective's spirit, and what is left is to finish it: such starving jobs are
embedded before the marginal-gain moves, oldest arrival first, at their requested size (or their
previous ring, if larger), from the empty cluster. The oldest always fits and keeps running until
it finishes, so every job finishes; later moves may still grow them like any other job.

Restart costs (ours; the paper's model has none): a job that has run before loses c seconds
(`SlotState.restart`) on any ring other than its previous one. A ring is valued at the job's
average rate from now to its finish, restart included: r' = R / (R/r + c) for R work left at
rate r. So the completion-time utility sees JCT + c, and a job running at rate r0 is moved or
resized to rate r1 only if the time that saves over its remaining run exceeds the cost,
R/r0 - R/r1 > c (with every other objective, only if the value at r' beats the value of staying;
the cost is spread over the remaining run, not charged to one slot, because a larger ring keeps
its speed in the slots after). A paused job that ran before pays c on every ring (it restarts
wherever it resumes). Since the greedy starts from an empty cluster, a job committed early could
take a running job's GPUs and force it to move; so while restarts cost, a new ring uses the GPUs
other running jobs held last slot only where it fits nowhere else. A job displaced that way is
re-embedded with its cost counted, but the displacing job's gain does not count it. The
Optimus-style allocator shares the greedy, the worker bounds and both rules above.
"""

from __future__ import annotations

import heapq
import logging
import math
from dataclasses import replace

import numpy as np

from arsched.cluster.network import NO_LINKS, Placement, intra_cap, ring_links, throughput
from arsched.cluster.placement import FreeGPUs, in_group, one_server, random_rings, spread, take
from arsched.cluster.schedulers.base import Decision, Scheduler, SlotState

BLANK = -1e30  # value of a paused job for the completion-time allocator
MIN_GAIN = 1e-12  # a move must gain more than this per GPU (crumbs of bandwidth gain ~0)
STARVE_FACTOR = 10.0  # JCT past 10 D: the sigmoid utility is below e^-8, the job's value is spent
STARVE_SLOTS = 3  # ... but never fewer slots than this

log = logging.getLogger(__name__)


class MarginalAllocator:
    """One slot of a marginal-gain allocation (state kept across moves): `run()` returns the
    decision; `value`, `cand`, `v0`, `v` and `place`/`resv` expose the slot's values, candidate
    sizes and chosen rings to the exact optimum in `arsched.cluster.ilp`.

    `aware`: plan with ToRs and link reservations (GADGET) or not (Optimus); `completion`: value
    a job by minus its remaining time (Optimus) instead of the objective's slot value.

    Values of every (job, candidate size) at the estimated bandwidth are computed once, in one
    vectorised call; a move's real value is recomputed only when its embedding's bandwidth
    differs from the estimate.
    """

    def __init__(self, state: SlotState, aware: bool, completion: bool) -> None:
        self.s = state
        self.aware = aware  # plans with ToRs and link reservations (GADGET) or not (Optimus)
        self.completion = completion  # value = -remaining time (Optimus) instead of the objective
        wl, c = state.workload, state.cluster
        group = c.group if aware else None
        self.gpus = FreeGPUs(c.num_servers, c.gpus_per_server, group=group)
        self.free = self.gpus.free
        self.residual = c.capacity.astype(float).copy()
        self.w: dict[int, int] = {}
        self.v: dict[int, float] = {}
        self.place: dict[int, Placement] = {}
        self.resv: dict[int, tuple[np.ndarray, np.ndarray, float]] = {}
        self.order: dict[int, int] = {}
        a = state.active
        restart = state.restart[a] if state.restart is not None else np.zeros(len(a))
        self.cost = np.where(state.attained[a] > 0, restart, 0.0).tolist()  # lost if its GPUs change
        self.row = dict(zip(a.tolist(), range(len(a)), strict=True))
        self.prev_w = [0] * len(a)
        for j, p in state.previous.items():
            self.prev_w[self.row[j]] = sum(g for _, g in p)
        self.spread_bw = min(float(c.nic.min()), c.intra_bandwidth)
        cap = np.minimum(wl.max_workers[a], c.num_gpus)
        pow2 = 2 ** np.arange(int(np.log2(max(int(cap.max()), 1))) + 1)
        cand = np.concatenate([np.broadcast_to(pow2, (len(a), len(pow2))), wl.gpus[a, None]], axis=1)
        cand = np.where(cand <= cap[:, None], cand, 0)
        cand[wl.max_workers[a] <= wl.gpus[a], :-1] = 0  # a rigid job (elastic 1) has one size: its request
        cand.sort(axis=1)
        est_b = np.where(cand <= c.gpus_per_server, c.intra_bandwidth, self.spread_bw)
        # the table assumes a job keeps its previous ring at its previous size and moves otherwise
        lost = np.where(cand == np.array(self.prev_w)[:, None], 0.0, np.array(self.cost)[:, None])
        table = self.value(np.broadcast_to(a[:, None], cand.shape), np.maximum(cand, 1), est_b, lost)
        v0 = self.value(a, np.zeros(len(a)), np.full(len(a), np.inf))
        self.v0 = v0.tolist()
        with np.errstate(divide="ignore", invalid="ignore"):  # each first move from nothing (next_move)
            first = (table - v0[:, None]) / cand
        self._first = np.where((cand > 0) & ~np.isnan(first), first, -np.inf)  # a NaN gain never wins
        self._first_cand = cand
        # sizes, values and estimated b without the padding zeros (a sorted row's prefix), all jobs'
        # in three flat lists: job row i's are [_lo[i], _hi[i]) (no list per job to build)
        keep = cand > 0
        count = keep.sum(axis=1)
        ends = np.cumsum(count)
        self._lo, self._hi = (ends - count).tolist(), ends.tolist()
        self._cand, self._table, self._est = cand[keep].tolist(), table[keep].tolist(), est_b[keep].tolist()
        # GPUs that running jobs held last slot, kept from other jobs while a ring fits elsewhere
        self.claims = {j: p for j, p in state.previous.items() if self.cost[self.row[j]] > 0}
        self.claimed = np.zeros(c.num_servers, dtype=np.int64)
        for p in self.claims.values():
            take(self.claimed, p, +1)
        self._claimed = self.claimed.tolist()  # the same, for Python loops
        # the free GPUs no running job claims, kept current for rings of jobs without a claim
        unclaimed = self.free - self.claimed
        self.open = FreeGPUs(c.num_servers, c.gpus_per_server, unclaimed, group) if self.claims else None
        # one job's value in plain floats (`_value_one`): the completion-time and JCT values
        plain = completion or state.objective.name == "jct"
        self._scalar = type(self).value is MarginalAllocator.value and plain

    @property
    def cand(self) -> list[list[int]]:
        """Each active job's candidate sizes, ascending (row i: `state.active[i]`)."""
        return [self._cand[lo:hi] for lo, hi in zip(self._lo, self._hi, strict=True)]

    def value(
        self, js: np.ndarray, w: np.ndarray, b: np.ndarray, lost: np.ndarray | float = 0.0
    ) -> np.ndarray:
        """Value of running jobs `js` on w workers at bottleneck b after `lost` seconds of restart
        (valued at the average rate to the finish, see the module docstring)."""
        s, wl = self.s, self.s.workload
        rate = throughput(wl.tau[js], wl.grad_bytes[js], w, b, s.alpha)
        with np.errstate(divide="ignore"):
            rate = np.where(lost > 0, s.remaining[js] / (s.remaining[js] / rate + lost), rate)
        if self.completion:
            with np.errstate(divide="ignore"):
                return np.where(rate > 0, -s.remaining[js] / np.maximum(rate, 1e-300), BLANK)
        age, ref = s.now - wl.arrival[js], wl.gpus[js] / wl.tau[js]
        return s.objective.slot_value(rate, w, s.remaining[js], age, ref, wl.duration[js], wl.gpus[js], s.dt)

    def _value_one(self, j: int, w: int, b: float, lost: float) -> float:
        """`value` of one job, float for float the same (np.exp on a float64 gives the vectorised
        exp's result; the rest is IEEE arithmetic in the same order), without numpy's per-call cost."""
        s, wl = self.s, self.s.workload
        if not (self._scalar and w >= 1 and b >= 0):
            return float(self.value(np.array([j]), np.array([w]), np.array([b]), lost)[0])
        wf = float(w)
        if w > 1 and b == 0:  # a ring with no bandwidth never finishes an iteration
            rate = 0.0
        else:
            comm = 2 * (wf - 1) / wf * float(wl.grad_bytes[j]) / b + 2 * (wf - 1) * s.alpha if w > 1 else 0.0
            rate = wf / (float(wl.tau[j]) + comm)
        left = float(s.remaining[j])
        if lost > 0 and rate > 0:  # (at rate 0 value() gets 0 or NaN here: no progress either way)
            rate = left / (left / rate + lost)
        if self.completion:
            return -left / max(rate, 1e-300) if rate > 0 else BLANK
        jct = s.now - float(wl.arrival[j]) + (left / max(rate, 1e-300) if rate > 0 else np.inf)
        return float(1.0 / (1.0 + np.exp(min(jct / float(wl.duration[j]) - 2.0, 700.0))))

    def next_move(self, j: int) -> tuple[float, int, int, int] | None:
        """The job's best growth from its current size: (-gain per GPU, job, from, to)."""
        i = self.row[j]
        cur = self.w.get(j, 0)
        base = self.v.get(j, self.v0[i])
        best_g, best_w = MIN_GAIN, 0
        cand, table = self._cand, self._table
        for k in range(self._lo[i], self._hi[i]):
            if (w := cand[k]) > cur and (g := (table[k] - base) / (w - cur)) > best_g:
                best_g, best_w = g, w
        return (-best_g, j, cur, best_w) if best_w else None

    def first_moves(self) -> list[tuple[float, int, int, int]]:
        """`next_move` of every job, the jobs not yet placed in one vectorised pass (the first
        best gain per GPU from nothing: the same move and the same float as its scan)."""
        a = self.s.active
        k = self._first.argmax(axis=1)
        g = self._first[np.arange(len(a)), k]
        fresh = np.ones(len(a), dtype=bool)
        fresh[[self.row[j] for j in self.w]] = False
        go = fresh & (g > MIN_GAIN)
        moves = list(zip((-g[go]).tolist(), a[go].tolist(), [0] * int(go.sum()),
                         self._first_cand[go, k[go]].tolist(), strict=True))  # fmt: skip
        placed = [mv for j in self.w if (mv := self.next_move(j)) is not None]
        return moves + placed

    def _reserve(self, p: Placement) -> tuple[np.ndarray, np.ndarray, float]:
        if len(p) == 1:  # inside one server: no link to reserve
            return NO_LINKS, NO_LINKS, self.s.cluster.intra_bandwidth if p[0][1] > 1 else np.inf
        links, mult = ring_links(self.s.cluster, p)
        r = float((self.residual[links] / mult).min()) if len(links) else np.inf
        return links, mult, min(r, intra_cap(self.s.cluster, p))

    def _release(self, j: int) -> None:
        if j in self.place:
            self.gpus.take(self.place[j], +1)
            self._reopen(self.place[j])
            links, mult, r = self.resv[j]
            if len(links):
                self.residual[links] += r * mult

    def _acquire(self, j: int, p: Placement, resv: tuple[np.ndarray, np.ndarray, float]) -> None:
        self.gpus.take(p)
        links, mult, r = resv
        if len(links):
            self.residual[links] = np.maximum(self.residual[links] - r * mult, 0.0)
        self.place[j], self.resv[j] = p, resv
        if self.claims.get(j) == p:  # back on its own GPUs: no longer to be kept from others
            take(self.claimed, self.claims.pop(j))
            take(self._claimed, p)
        self._reopen(p)

    def _reopen(self, p: Placement) -> None:
        """Bring the unclaimed free GPUs of p's servers up to date."""
        if self.open is not None:
            count, claimed = self.gpus.count, self._claimed
            for s, _ in p:
                self.open.set(s, max(count[s] - claimed[s], 0))

    def _value_at(self, j: int, need: int, b: float, moved: bool) -> float:
        i = self.row[j]
        k = self._cand.index(need, self._lo[i], self._hi[i])
        lost = self.cost[i] if moved else 0.0
        as_table = moved != (need == self.prev_w[i]) or not self.cost[i]  # the table assumed this restart
        if as_table and (need == 1 or b == self._est[k]):  # one worker: any b is the estimate's
            return self._table[k]
        return self._value_one(j, need, b, lost)

    def options(self, j: int, need: int) -> tuple[Placement, ...]:
        """Rings to try, best first: the job's previous GPUs (no restart), else one server (best
        fit), else the fewest servers under one ToR (GADGET) and anywhere; later ones are built
        only when an earlier one is missing. While restarts cost, GPUs that other running jobs
        held last slot are used only when the ring fits nowhere else (see the module docstring)."""
        prev, count = self.s.previous.get(j), self.gpus.count
        if prev is not None and self.prev_w[self.row[j]] == need and all(count[s] >= g for s, g in prev):
            return (prev,)
        if self.claims and j not in self.claims:
            total = self.open.total
            if total >= need:
                return self._fresh(self.open.free, total, need, self.open.one_server(need), self.open)
        elif self.claims:
            avail = np.maximum(self.free - self.claimed, 0)
            for s, g in self.claims.get(j, ()):
                avail[s] = min(avail[s] + g, count[s])
            if avail.sum() >= need:
                return self._fresh(avail, int(avail.sum()), need, one_server(avail, need))
        return self._fresh(self.free, self.gpus.total, need, self.gpus.one_server(need), self.gpus)

    def _fresh(
        self, free: np.ndarray, total: int, need: int, single: Placement | None, index: FreeGPUs | None = None
    ) -> tuple[Placement, ...]:
        """New rings on the `free` GPUs (`total` of them; `index`: their FreeGPUs, if kept): `single`
        (one server) if there is one."""
        if single is not None:
            return (single,)
        if total < need:
            return ()
        anywhere = index.spread(need) if index is not None else spread(free, need)
        if not self.aware:
            inside = None
        elif index is not None:
            inside = index.in_group(need)
        else:
            inside = in_group(free, need, self.s.cluster.group)
        return (inside, anywhere) if inside is not None else (anywhere,)  # no group fits: one ring

    def embed(self, j: int, need: int) -> tuple[Placement, tuple, float] | None:
        """The best ring for `need` GPUs (the job's own GPUs already released) and its value."""
        c = self.s.cluster
        prev = self.s.previous.get(j)
        if prev is None and need <= c.gpus_per_server:  # options() would be one server, if one fits
            if not self.claims:
                single = self.gpus.one_server(need)
            elif j not in self.claims and self.open.total >= need:
                single = self.open.one_server(need)
            else:
                single = None
            if single is not None:
                b = c.intra_bandwidth if need > 1 or not self.aware else np.inf
                resv = (NO_LINKS, NO_LINKS, b if self.aware else np.inf)
                return single, resv, self._value_at(j, need, b, True)
        return self._best(j, need, prev, self.options(j, need))

    def _best(
        self, j: int, need: int, prev: Placement | None, options: tuple[Placement, ...]
    ) -> tuple[Placement, tuple, float] | None:
        """The best of the rings `options` for job j on `need` GPUs, with its reservation and value."""
        c = self.s.cluster
        best = None
        for p in options:
            if self.aware:
                resv = self._reserve(p)
                b = resv[2]
            else:
                resv = (NO_LINKS, NO_LINKS, np.inf)
                b = c.intra_bandwidth if len(p) == 1 else self.spread_bw
            v = self._value_at(j, need, b, p != prev)
            if best is None or v > best[2] + 1e-12:
                best = (p, resv, v)
        return best

    def starving(self) -> np.ndarray:
        """Active jobs older than STARVE_FACTOR x D (and STARVE_SLOTS slots), by arrival."""
        a = self.s.active
        return a[self.s.now - self.s.workload.arrival[a] >= starve_age(self.s, a)]

    def rescue(self) -> int:
        """Embed the starving jobs first (see the module docstring); returns how many were placed."""
        step = 0
        for j in self.starving().tolist():
            if not self.gpus.total:  # a full cluster: no later job fits either
                break
            need = max(int(self.s.workload.gpus[j]), self.prev_w[self.row[j]])
            if need > self.gpus.total:  # no ring of that size fits (embed would find none)
                continue
            got = self.embed(j, need)
            if got is None or not got[1][2] > 0:  # no room, or a ring with no bandwidth left
                continue
            self._acquire(j, got[0], got[1])
            self.w[j], self.v[j], self.order[j] = need, got[2], step
            step += 1
            log.debug("t=%g s: starving job %d placed first on %d GPUs", self.s.now, j, need)
        return step

    def run(self) -> Decision:
        """The slot's decision: starving jobs first, then the best marginal move per GPU until
        none gains; placements in the order they were committed."""
        step = self.rescue()
        heap = self.first_moves()
        heapq.heapify(heap)
        checked: set[tuple[int, int]] = set()
        pop, push, w, v, place, gpus = heapq.heappop, heapq.heappush, self.w, self.v, self.place, self.gpus
        while heap and gpus.total:  # every move needs a free GPU: none left, none succeeds
            _, j, cur, target = pop(heap)
            if w.get(j, 0) != cur or (not cur and target > gpus.total):  # stale, or no ring fits
                continue
            old = place.get(j)
            if old is not None:
                old_resv = self.resv[j]
                self._release(j)
            got = self.embed(j, target)
            if got is not None:
                gain = (got[2] - (v[j] if cur else self.v0[self.row[j]])) / (target - cur)
                nxt = -heap[0][0] if heap else -math.inf
            if got is None or gain <= MIN_GAIN or (gain < nxt - 1e-12 and (j, target) not in checked):
                if old is not None:
                    self._acquire(j, old, old_resv)
                if got is not None and gain > 0:
                    checked.add((j, target))
                    push(heap, (-gain, j, cur, target))
                continue
            self._acquire(j, got[0], got[1])
            w[j], v[j] = target, got[2]
            self.order[j] = step
            step += 1
            mv = self.next_move(j)
            if mv is not None:
                push(heap, mv)
        return [(j, self.place[j]) for j in sorted(self.order, key=self.order.__getitem__)]


def starve_age(state: SlotState, jobs: np.ndarray) -> np.ndarray:
    """The age at which each job starts starving: STARVE_FACTOR x D, at least STARVE_SLOTS slots."""
    return np.maximum(STARVE_FACTOR * state.workload.duration[jobs], STARVE_SLOTS * state.dt)


class Replanner(Scheduler):
    """An allocator that plans from an empty cluster with the anti-starvation rule (GADGET,
    Optimus, Pollux). Its re-allocation events (events engine) are the instants an active job
    turns starving; between those, arrivals and completions, only ages and remaining work change,
    and re-planning then changed nothing at elastic 1 and little at elastic 2 (measured:
    `benchmarks/bench_cluster.py --only engines`); `SimConfig.reallocate` re-plans periodically
    as well."""

    def wake(self, state: SlotState, decision: Decision) -> float:
        a = state.active
        due = state.workload.arrival[a] + starve_age(state, a)
        due = due[due > state.now]
        return float(due.min()) if len(due) else np.inf


class GADGET(Replanner):
    name = "gadget"
    about = "GADGET: largest marginal utility per GPU first, ring embedding with link reservation, elastic"

    def decide(self, state: SlotState) -> Decision:
        return MarginalAllocator(state, aware=True, completion=False).run() if len(state.active) else []


class Optimus(Replanner):
    name = "optimus"
    about = "Optimus-style: marginal cut in remaining time per GPU, fewest servers, blind to links"

    def decide(self, state: SlotState) -> Decision:
        return MarginalAllocator(state, aware=False, completion=True).run() if len(state.active) else []


class RandomPlacement(Scheduler):
    name = "random"
    about = "ablation: GADGET's worker counts on random free GPUs, drawn afresh every slot"
    uses_seed = True

    def decide(self, state: SlotState) -> Decision:
        """GADGET's plan for the slot from an empty cluster (its worker counts and order; the
        random rings of the last slot are no placement GADGET would keep), then every ring on
        random GPUs."""
        plan = GADGET().decide(replace(state, previous={}))
        rng = np.random.default_rng([state.seed, round(state.now * 1000)])
        c = state.cluster
        rings = random_rings([sum(g for _, g in p) for _, p in plan], c.num_servers, c.gpus_per_server, rng)
        return [(j, q) for (j, _), q in zip(plan, rings, strict=True)]
