"""The sweep's set-up in linear time (`sim.grouping`, `sim.sweep`): counting sorts against
numpy's stable sorts (dense keys, sparse keys, keys out of range), groups numbered as
`np.unique` numbers them, the overlap check against every pair of intervals on every link, and
the sweep's times independent of the order transfers are stored in and of how sparse their
step numbers and chunks are."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simcases import allreduce_schedules

from arsched.sim import simulate_flow
from arsched.sim.grouping import dense, group_by, stable_order
from arsched.sim.paths import CompiledPaths, compile_paths
from arsched.sim.sweep import contended, sweep_times
from schedules import ring_allreduce, topo

keys = st.lists(st.integers(0, 6), min_size=0, max_size=60)


@given(st.data())
def test_stable_order_sorts_like_numpy(data):
    n = data.draw(st.integers(0, 60))
    cols = []
    for _ in range(data.draw(st.integers(1, 3))):
        buckets = data.draw(st.sampled_from([1, 3, 7, 10**7]))  # 10**7: far more buckets than keys
        cols.append(
            (np.array(data.draw(st.lists(st.integers(0, buckets - 1), min_size=n, max_size=n))), buckets)
        )
    expected = np.lexsort([v for v, _ in cols]) if n else np.zeros(0, dtype=np.int64)
    np.testing.assert_array_equal(stable_order(cols, n), expected)


def test_keys_outside_their_buckets_are_sorted_by_numpy():
    values = np.array([3, -1, 9, 0, -1, 2])
    np.testing.assert_array_equal(stable_order([(values, 4)], 6), np.argsort(values, kind="stable"))


@given(st.lists(st.integers(-3, 10**9), max_size=50))
def test_dense_numbers_as_unique_does(values):
    arr = np.array(values, dtype=np.int64)
    number, count = dense(arr)
    uniq, inverse = np.unique(arr, return_inverse=True)
    assert count == len(uniq)
    np.testing.assert_array_equal(number, inverse.ravel())


@given(keys, st.data())
def test_groups_are_numbered_in_key_order(major, data):
    n = len(major)
    minor = np.array(data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)), dtype=np.int64)
    major = np.array(major, dtype=np.int64)
    of, first = group_by(major, minor, stable_order([(minor, 5), (major, 7)], n))
    _, inverse = np.unique(major * 5 + minor, return_inverse=True)
    np.testing.assert_array_equal(of, inverse.ravel())
    np.testing.assert_array_equal(of[first], np.arange(len(first)))  # each group's first member


def _pairwise_overlap(cp: CompiledPaths, start: np.ndarray, stop: np.ndarray) -> bool:
    """Two intervals on one link overlap: the definition, pair by pair."""
    on_link: dict[int, list[int]] = {}
    for t, p in enumerate(cp.path_id.tolist()):
        for lk in cp.path_links[cp.path_ptr[p] : cp.path_ptr[p + 1]].tolist():
            on_link.setdefault(lk, []).append(t)
    return any(
        start[a] < stop[b] and start[b] < stop[a] for ts in on_link.values() for a in ts for b in ts if a < b
    )


@settings(max_examples=200)
@given(st.data())
def test_overlap_check_equals_every_pair(data):
    num_paths = data.draw(st.integers(1, 4))
    path_links = [
        data.draw(st.lists(st.integers(0, 4), min_size=1, max_size=3, unique=True)) for _ in range(num_paths)
    ]
    n = data.draw(st.integers(0, 12))
    path_id = np.array(
        data.draw(st.lists(st.integers(0, num_paths - 1), min_size=n, max_size=n)), dtype=np.int64
    )
    start = np.array(data.draw(st.lists(st.integers(0, 20), min_size=n, max_size=n)), dtype=float)
    length = np.array(data.draw(st.lists(st.integers(1, 6), min_size=n, max_size=n)), dtype=float)
    ptr = np.concatenate([[0], np.cumsum([len(x) for x in path_links])]).astype(np.int64)
    cp = CompiledPaths(
        path_id,
        ptr,
        np.array([lk for x in path_links for lk in x], dtype=np.int64),
        np.zeros(num_paths),
        np.ones(num_paths),
    )
    assert contended(cp, start, start + length) == _pairwise_overlap(cp, start, start + length)


@settings(max_examples=40, deadline=None)
@given(allreduce_schedules(), st.randoms(use_true_random=False), st.booleans(), st.booleans())
def test_sweep_times_do_not_depend_on_storage_order_or_numbering(s, rnd, fifo, synchronous):
    """Transfers stored in any order, steps numbered sparsely and more chunks than used: the
    same times, transfer by transfer."""
    cp = compile_paths(s)
    ready, done = sweep_times(s, cp, 5e-6, fifo, synchronous)
    perm = np.array(rnd.sample(range(len(s)), len(s)), dtype=np.int64)
    moved = dataclasses.replace(
        s,
        step=s.step[perm] * 1_000_003 + 7,
        chunk=s.chunk[perm],
        src=s.src[perm],
        dst=s.dst[perm],
        op=s.op[perm],
        path_id=s.path_id[perm],
    )
    ready2, done2 = sweep_times(moved, compile_paths(moved), 5e-6, fifo, synchronous)
    np.testing.assert_array_equal(ready2, ready[perm])
    np.testing.assert_array_equal(done2, done[perm])


@pytest.mark.parametrize("fifo", [False, True])
def test_a_large_quiet_ring_takes_the_sweep_and_equals_the_events(fifo):
    t = topo("fattree:k=4")
    s = ring_allreduce(t, t.servers, 4e6)
    sweep = simulate_flow(s, 5e-6, fifo=fifo)
    events = simulate_flow(s, 5e-6, fifo=fifo, method="events")
    assert sweep.notes["method"] == "sweep"
    np.testing.assert_allclose(sweep.end, events.end, rtol=1e-9)
