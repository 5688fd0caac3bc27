"""Greedy marginal-gain allocators: GADGET, an Optimus-style one blind to topology, and GADGET's
allocation with random placement (ablation).

GADGET (Yu et al., INFOCOM'22), each slot, from an empty cluster: every job's next move is to
grow from w to the next worker count w' (powers of two up to its bound, and its request); the
move with the largest marginal utility per GPU, (v(w') - v(w)) / (w' - w), is embedded and
committed, then the job's next move is queued; stop when no move gains. The embedding tries the
job's previous GPUs (no restart), one server (best fit), then the fewest servers under one ToR,
then the fewest servers anywhere, and reserves on every link the ring crosses the largest rate
the residual capacity allows; the embedding with the best value wins. Gains are estimated with
the server's uplink bandwidth and checked after embedding (lazy greedy: a move whose real gain
fell below the next one is queued again).
"""

from __future__ import annotations

import heapq

import numpy as np

from arsched.cluster.network import Placement, intra_cap, ring_links, throughput
from arsched.cluster.placement import fewest_servers, one_server, random_gpus, take
from arsched.cluster.schedulers.base import Decision, Scheduler, SlotState

BLANK = -1e30  # value of a paused job for the completion-time allocator


class _Greedy:
    """One slot of a marginal-gain allocation (state kept across moves)."""

    def __init__(self, state: SlotState, aware: bool, completion: bool) -> None:
        self.s = state
        self.aware = aware  # plans with ToRs and link reservations (GADGET) or not (Optimus)
        self.completion = completion  # value = -remaining time (Optimus) instead of the objective
        wl, c = state.workload, state.cluster
        self.free = np.full(c.num_servers, c.gpus_per_server, dtype=np.int64)
        self.residual = c.capacity.astype(float).copy()
        self.w: dict[int, int] = {}
        self.b: dict[int, float] = {}
        self.place: dict[int, Placement] = {}
        self.resv: dict[int, tuple[np.ndarray, np.ndarray, float]] = {}
        self.order: dict[int, int] = {}
        a = state.active
        self.cap = np.minimum(wl.max_workers, c.num_gpus)
        self.ref = wl.gpus / wl.tau
        self.age = state.now - wl.arrival
        self.spread_bw = float(c.nic.min())
        pow2 = 2 ** np.arange(int(np.log2(max(int(self.cap[a].max()), 1))) + 1)
        self.cand = np.concatenate([np.broadcast_to(pow2, (len(a), len(pow2))), wl.gpus[a, None]], axis=1)

    def value(self, js: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        s, wl = self.s, self.s.workload
        rate = throughput(wl.tau[js], wl.grad_bytes[js], w, b, s.alpha)
        if self.completion:
            with np.errstate(divide="ignore"):
                return np.where(rate > 0, -s.remaining[js] / np.maximum(rate, 1e-300), BLANK)
        return s.objective.slot_value(
            rate, w, s.remaining[js], self.age[js], self.ref[js], wl.duration[js], wl.gpus[js], s.dt
        )

    def estimate_b(self, w: np.ndarray) -> np.ndarray:
        c = self.s.cluster
        return np.where(w <= c.gpus_per_server, c.intra_bandwidth, min(self.spread_bw, c.intra_bandwidth))

    def moves(self, rows: np.ndarray) -> list[tuple[float, int, int, int]]:
        """The best next move of each job (by row of the active array), vectorised."""
        a = self.s.active[rows]
        cand = self.cand[rows]
        cur = np.array([self.w.get(int(j), 0) for j in a])
        cur_b = np.array([self.b.get(int(j), np.inf) for j in a])
        ok = (cand > cur[:, None]) & (cand <= self.cap[a, None])
        base = self.value(a, cur, cur_b)
        val = self.value(np.repeat(a, cand.shape[1]).reshape(cand.shape), cand, self.estimate_b(cand))
        gain = np.where(ok, (val - base[:, None]) / np.maximum(cand - cur[:, None], 1), -np.inf)
        best = gain.argmax(axis=1)
        g = gain[np.arange(len(a)), best]
        return [(-float(g[i]), int(a[i]), int(cur[i]), int(cand[i, best[i]])) for i in np.flatnonzero(g > 0)]

    def _reserve(self, p: Placement) -> tuple[np.ndarray, np.ndarray, float]:
        links, mult = ring_links(self.s.cluster, p)
        r = float((self.residual[links] / mult).min()) if len(links) else np.inf
        return links, mult, min(r, intra_cap(self.s.cluster, p))

    def _release(self, j: int) -> None:
        if j in self.place:
            take(self.free, self.place[j], +1)
            links, mult, r = self.resv[j]
            if len(links):
                self.residual[links] += r * mult

    def _acquire(self, j: int, p: Placement, resv: tuple[np.ndarray, np.ndarray, float]) -> None:
        take(self.free, p)
        links, mult, r = resv
        if len(links):
            self.residual[links] = np.maximum(self.residual[links] - r * mult, 0.0)
        self.place[j], self.resv[j], self.b[j] = p, resv, r

    def embed(self, j: int, need: int) -> tuple[Placement, tuple, float] | None:
        """The best ring for `need` GPUs (the job's own GPUs already released)."""
        c = self.s.cluster
        options: list[Placement | None] = []
        prev = self.s.previous.get(j)
        if prev is not None and sum(g for _, g in prev) == need and all(self.free[s] >= g for s, g in prev):
            options.append(prev)
        options.append(one_server(self.free, need))
        if self.aware:
            options += [fewest_servers(self.free, need, c.group), fewest_servers(self.free, need)]
        else:
            options.append(fewest_servers(self.free, need))
        best = None
        for p in options:
            if p is None:
                continue
            resv = self._reserve(p) if self.aware else (np.zeros(0, dtype=np.int64), np.zeros(0), np.inf)
            b = resv[2] if self.aware else float(self.estimate_b(np.array(need)))
            v = float(self.value(np.array([j]), np.array([need]), np.array([b]))[0])
            if best is None or v > best[2] + 1e-12:
                best = (p, resv, v)
            if p is prev or len(p) == 1:
                break  # no restart, or a single server: nothing beats it
        return best

    def run(self) -> Decision:
        heap = self.moves(np.arange(len(self.s.active)))
        heapq.heapify(heap)
        rows = {int(j): i for i, j in enumerate(self.s.active)}
        checked: set[tuple[int, int]] = set()
        step = 0
        while heap:
            neg, j, cur, target = heapq.heappop(heap)
            if self.w.get(j, 0) != cur or neg >= 0:
                continue
            old = (self.place.get(j), self.resv.get(j), self.b.get(j))
            self._release(j)
            got = self.embed(j, target)
            base = float(
                self.value(np.array([j]), np.array([cur]), np.array([np.inf if old[2] is None else old[2]]))[
                    0
                ]
            )
            gain = (got[2] - base) / (target - cur) if got else -np.inf
            nxt = -heap[0][0] if heap else -np.inf
            if got is None or gain <= 0 or (gain < nxt - 1e-12 and (j, target) not in checked):
                if old[0] is not None:
                    self._acquire(j, old[0], old[1])
                if got is not None and gain > 0:
                    checked.add((j, target))
                    heapq.heappush(heap, (-gain, j, cur, target))
                continue
            self._acquire(j, got[0], got[1])
            self.w[j] = target
            self.order[j] = step
            step += 1
            for mv in self.moves(np.array([rows[j]])):
                heapq.heappush(heap, mv)
        return [(j, self.place[j]) for j in sorted(self.order, key=self.order.__getitem__)]


class GADGET(Scheduler):
    name = "gadget"
    about = "GADGET: greedy marginal utility per GPU, ring embedding with link reservation, elastic"

    def decide(self, state: SlotState) -> Decision:
        return _Greedy(state, aware=True, completion=False).run() if len(state.active) else []


class Optimus(Scheduler):
    name = "optimus"
    about = "Optimus-style: marginal cut in remaining time per GPU, fewest servers, blind to links"

    def decide(self, state: SlotState) -> Decision:
        return _Greedy(state, aware=False, completion=True).run() if len(state.active) else []


class RandomPlacement(Scheduler):
    name = "random"
    about = "ablation: GADGET's worker counts placed on random free GPUs"

    def decide(self, state: SlotState) -> Decision:
        plan = GADGET().decide(state)
        rng = np.random.default_rng([state.seed, int(state.now * 1000)])
        free = np.full(state.cluster.num_servers, state.cluster.gpus_per_server, dtype=np.int64)
        out: Decision = []
        for j, p in plan:
            q = state.previous.get(j)
            need = sum(g for _, g in p)
            if q is None or sum(g for _, g in q) != need or any(free[s] < g for s, g in q):
                q = random_gpus(free, need, rng)
            take(free, q)
            out.append((j, q))
        return out
