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
