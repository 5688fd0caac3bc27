"""The bucketed free-GPU index gives the plain scans' answers, and GADGET decides the same with it."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.cluster import parse_cluster
from arsched.cluster.placement import FreeGPUs, fewest_servers, one_server
from arsched.cluster.schedulers import SlotState, get_scheduler
from arsched.cluster.schedulers import gadget as gadget_mod
from arsched.cluster.synthetic import synthetic
from arsched.cluster.utility import Objective


def test_free_index_best_fit_equals_the_scan():
    rng = np.random.default_rng(0)
    idx = FreeGPUs(12, 8)
    held = []
    for _ in range(400):
        need = int(rng.integers(1, 10))
        assert idx.one_server(need) == one_server(idx.free, need)
        assert idx.total == idx.free.sum() and idx.count == idx.free.tolist()
        if held and rng.random() < 0.4:
            idx.take(held.pop(int(rng.integers(len(held)))), +1)
        elif (p := fewest_servers(idx.free, need)) is not None:
            idx.take(p)
            held.append(p)


class _ScanGPUs(FreeGPUs):
    """The straightforward reference: best fit by scanning every server."""

    def one_server(self, need):
        return one_server(self.free, need)


class _Eager(gadget_mod.MarginalAllocator):
    """The straightforward reference embedding: every option built with the plain scans, tried
    in order until the previous ring or a one-server ring."""

    def options(self, j, need):
        prev = self.s.previous.get(j)
        opts = []
        if prev is not None and sum(g for _, g in prev) == need and all(self.free[s] >= g for s, g in prev):
            opts.append(prev)
        opts.append(one_server(self.free, need))
        group = self.s.cluster.group if self.aware else None
        opts += [fewest_servers(self.free, need, group), fewest_servers(self.free, need)]
        out = []
        for p in filter(None, opts):
            out.append(p)
            if p is prev or len(p) == 1:
                break
        return out


@pytest.mark.parametrize("objective", ["jct", "fair"])
def test_gadget_decides_as_with_plain_scans(monkeypatch, objective):
    for seed in range(6):
        rng = np.random.default_rng(seed)
        c = parse_cluster(f"leafspine:leaves={rng.integers(2, 4)},spines=2,servers_per_leaf=4,gpus=4")
        wl = synthetic(int(rng.integers(5, 30)), seed=seed, interval=5, elastic=2)
        a = np.arange(len(wl))
        left = wl.work * rng.uniform(0.1, 1, len(wl))
        prev = {0: ((0, 2), (1, 1))} if wl.max_workers[0] >= 3 else {}
        st = SlotState(float(wl.arrival.max()), 60.0, a, left, np.zeros(len(wl)), prev, wl, c,
                       Objective(objective), 5e-6, 0)  # fmt: skip
        fast = get_scheduler("gadget").decide(st)
        optimus = get_scheduler("optimus").decide(st)
        with monkeypatch.context() as m:
            m.setattr(gadget_mod, "FreeGPUs", _ScanGPUs)
            assert get_scheduler("gadget").decide(st) == fast
            assert _Eager(st, aware=True, completion=False).run() == fast
            assert _Eager(st, aware=False, completion=True).run() == optimus


def test_random_rings_have_their_sizes_and_fit():
    from arsched.cluster.placement import random_rings

    sizes = [3, 1, 8, 5, 7]
    rings = random_rings(sizes, 6, 4, np.random.default_rng(3))
    assert [sum(g for _, g in p) for p in rings] == sizes
    used = np.zeros(6, dtype=int)
    for p in rings:
        assert [s for s, _ in p] == sorted({s for s, _ in p})  # a ring visits servers in order, once
        for s, g in p:
            used[s] += g
    assert (used <= 4).all() and used.sum() == sum(sizes)
    assert rings != random_rings(sizes, 6, 4, np.random.default_rng(4))  # the seed matters


def test_free_index_from_counts_with_groups_equals_the_scans():
    # started from given counts, moved by take and set: best fit, the ToR ring and the totals
    # are those of the plain functions on the same free array
    from arsched.cluster.placement import in_group, spread

    rng = np.random.default_rng(1)
    group = np.repeat(np.arange(4), 3)
    idx = FreeGPUs(12, 8, rng.integers(0, 9, 12), group)
    held = []
    for _ in range(400):
        need = int(rng.integers(1, 20))
        assert idx.one_server(need) == one_server(idx.free, need)
        assert idx.in_group(need) == in_group(idx.free, need, group)
        if need <= idx.total:
            assert idx.spread(need) == spread(idx.free, need)
        assert idx.total == idx.free.sum() and idx.count == idx.free.tolist()
        assert idx.room == np.bincount(group, weights=idx.free).astype(int).tolist()
        if rng.random() < 0.3:
            idx.set(int(rng.integers(12)), int(rng.integers(0, 9)))
        elif held and rng.random() < 0.4:
            p = held.pop(int(rng.integers(len(held))))
            if all(idx.count[s] + g <= 8 for s, g in p):
                idx.take(p, +1)
        elif (p := fewest_servers(idx.free, need, group)) is not None:
            idx.take(p)
            held.append(p)


class _AvailScan(gadget_mod.MarginalAllocator):
    """Checks every embedding's options against the free-minus-claimed scan they replace, and
    every embedding against the best of all its options (embed skips them for one server)."""

    calls = 0

    def embed(self, j, need):
        got = super().embed(j, need)
        want = self._best(j, need, self.s.previous.get(j), self.options(j, need))
        assert (got is None) == (want is None)
        if got is not None:
            assert got[0] == want[0] and got[2] == want[2] and got[1][2] == want[1][2]
            assert np.array_equal(got[1][0], want[1][0]) and np.array_equal(got[1][1], want[1][1])
        return got

    def options(self, j, need):
        got = super().options(j, need)
        prev, count = self.s.previous.get(j), self.gpus.count
        kept = prev is not None and sum(g for _, g in prev) == need and all(count[s] >= g for s, g in prev)
        if self.claims and j not in self.claims and not kept:
            avail = np.maximum(self.free - self.claimed, 0)
            if avail.sum() >= need:
                want = self._fresh(avail, int(avail.sum()), need, one_server(avail, need))
                assert got == want
                _AvailScan.calls += 1
        return got


def test_unclaimed_index_equals_the_scan_while_jobs_hold_claims():
    from arsched.cluster import SimConfig, simulate

    wl = synthetic(120, seed=3, interval=5, elastic=2)
    c = parse_cluster("leafspine:leaves=2,spines=2,servers_per_leaf=4,gpus=4")

    class Checked(gadget_mod.GADGET):
        def decide(self, state):
            return _AvailScan(state, aware=True, completion=False).run() if len(state.active) else []

    want = simulate(wl, c, get_scheduler("gadget"), SimConfig(restart=30.0))
    got = simulate(wl, c, Checked(), SimConfig(restart=30.0))
    assert _AvailScan.calls > 100 and np.array_equal(got.jct, want.jct)
