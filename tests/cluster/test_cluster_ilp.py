"""GADGET against the exact slot optimum (HiGHS) on random small instances."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.cluster import parse_cluster
from arsched.cluster.ilp import gadget_gain, optimum_gain
from arsched.cluster.schedulers.base import SlotState
from arsched.cluster.synthetic import synthetic
from arsched.cluster.utility import Objective
from arsched.errors import ArschedError


def random_slot(seed: int, objective: str = "jct") -> SlotState:
    """A slot of 3-6 jobs (up to 4 GPUs asked, 8 allowed) on 2-4 servers of 4 GPUs on one switch."""
    rng = np.random.default_rng(seed)
    c = parse_cluster(f"star:n={rng.integers(2, 5)},gpus=4")
    wl = synthetic(int(rng.integers(3, 7)), seed=seed, interval=5, median=300)
    wl = wl.__class__(wl.ids, wl.models, wl.arrival, wl.tau, wl.grad_bytes, wl.work,
                      np.minimum(wl.gpus, 4), np.minimum(wl.max_workers, 8), wl.name)  # fmt: skip
    left = wl.work * rng.uniform(0.1, 1.0, len(wl))
    return SlotState(float(wl.arrival.max()), 30.0, np.arange(len(wl)), left, np.zeros(len(wl)), {}, wl, c,
                     Objective(objective), 5e-6, seed)  # fmt: skip


@pytest.mark.parametrize("objective", ["jct", "excess"])
def test_gadget_at_least_half_the_slot_optimum(objective):
    ratios = []
    for seed in range(12):
        st = random_slot(seed, objective)
        opt, got = optimum_gain(st), gadget_gain(st)
        assert got <= opt * (1 + 1e-6) + 1e-12  # nothing beats the optimum: checks the ILP too
        ratios.append(got / opt if opt > 0 else 1.0)
    assert min(ratios) >= 0.5, ratios


def test_ilp_needs_a_star():
    st = random_slot(0)
    st.cluster = parse_cluster("leafspine:leaves=2,spines=1,servers_per_leaf=2,gpus=4")
    with pytest.raises(ArschedError, match="star"):
        optimum_gain(st)
