"""GADGET against the exact slot optimum (HiGHS) on random small instances."""

from __future__ import annotations

import pytest

from arsched.cluster import parse_cluster
from arsched.cluster.ilp import gadget_gain, optimum_gain, random_instance
from arsched.errors import ArschedError


@pytest.mark.parametrize("objective", ["jct", "excess"])
def test_gadget_at_least_half_the_slot_optimum(objective):
    ratios = []
    for seed in range(12):
        st = random_instance(seed, objective)
        opt, got = optimum_gain(st), gadget_gain(st)
        assert got <= opt * (1 + 1e-6) + 1e-12  # nothing beats the optimum: checks the ILP too
        ratios.append(got / opt if opt > 0 else 1.0)
    assert min(ratios) >= 0.5, ratios


def test_ilp_needs_a_star():
    st = random_instance(0)
    st.cluster = parse_cluster("leafspine:leaves=2,spines=1,servers_per_leaf=2,gpus=4")
    with pytest.raises(ArschedError, match="star"):
        optimum_gain(st)
