"""Bruck's AllGather: any number of ranks, ⌈log2 N⌉ steps, every chunk sent to every rank but
its owner once, valid on seeded random rank subsets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from arsched.algorithms import build
from arsched.collective import numeric_check, validate
from arsched.sim import simulate_flow
from arsched.topology import parse_spec


@pytest.mark.parametrize("n", [2, 3, 5, 6, 7, 8, 12])
def test_log_steps_and_one_copy_per_chunk_and_rank(n):
    s = build("bruck", parse_spec(f"star:n={n}"), None, 1e6, "allgather")
    assert s.num_steps == math.ceil(math.log2(n))
    assert len(s) == s.num_chunks * (n - 1)
    assert validate(s).ok and numeric_check(s, seed=1).ok
    assert simulate_flow(s).gap >= 1 - 1e-9


@pytest.mark.parametrize("seed", range(4))
def test_random_rank_subsets(seed):
    topo = parse_spec("torus:dims=4x4")
    rng = np.random.default_rng(seed)
    ranks = [topo.servers[i] for i in rng.choice(16, size=int(rng.integers(2, 11)), replace=False)]
    s = build("bruck", topo, ranks, 4e6, "allgather", chunks=2 * len(ranks))
    report = validate(s)
    assert report.ok, report.message
    assert numeric_check(s, seed=seed).ok
    assert simulate_flow(s).gap >= 1 - 1e-9
