"""Transfers grouped by integer keys in linear time: stable counting sorts and runs of equal keys.

The simulators' set-up groups every transfer by (buffer, step) and by (connection, step); on a
4,096-rank ring that is 33 million transfers, where comparison sorts (`np.unique`,
`np.argsort`) took most of a simulation's time. Keys here are small non-negative integers
(ranks, chunks, steps, nodes), so a counting sort per key, least significant first, orders
them in O(transfers + buckets); a key with far more buckets than entries falls back to numpy's
stable sort, which gives the same order.
"""

from __future__ import annotations

import numba
import numpy as np

_SPARSE = 4  # a key with more than this many buckets per entry (plus a constant) is sorted by numpy


@numba.njit(cache=True)
def _counting_pass(perm, key, buckets):  # pragma: no cover - compiled
    """`perm` reordered stably by key[perm]."""
    count = np.zeros(buckets + 1, dtype=np.int64)
    for i in range(len(perm)):
        count[key[perm[i]] + 1] += 1
    for b in range(buckets):
        count[b + 1] += count[b]
    out = np.empty_like(perm)
    for i in range(len(perm)):
        k = key[perm[i]]
        out[count[k]] = perm[i]
        count[k] += 1
    return out


def stable_order(keys: list[tuple[np.ndarray, int]], n: int) -> np.ndarray:
    """The permutation that sorts entries 0..n−1 by several non-negative integer keys, given
    least significant first as (values, number of buckets), ties in index order. Values outside
    0..buckets−1 are sorted by numpy too (never written out of bounds)."""
    perm = np.arange(n, dtype=np.int64)
    for values, buckets in keys:
        if n == 0:
            break
        if values.min() >= 0 and values.max() < buckets and buckets <= _SPARSE * n + 1024:
            perm = _counting_pass(perm, values, int(buckets))
        else:
            perm = perm[np.argsort(values[perm], kind="stable")]
    return perm


@numba.njit(cache=True)
def _runs(perm, major, minor):  # pragma: no cover - compiled
    """Group number of every entry (runs of equal (major, minor) along `perm`), and each group's
    first entry."""
    n = len(perm)
    of = np.empty(n, dtype=np.int64)
    first = np.empty(n, dtype=np.int64)
    g = -1
    for i in range(n):
        t = perm[i]
        if i == 0 or major[t] != major[perm[i - 1]] or minor[t] != minor[perm[i - 1]]:
            g += 1
            first[g] = t
        of[t] = g
    return of, first[: g + 1]


def group_by(major: np.ndarray, minor: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Groups of equal (major, minor), numbered in sorted (major, minor) order — as
    `np.unique`'s inverse of the combined key would number them: each entry's group and each
    group's first entry. `order` sorts the entries by (major, minor)."""
    if not len(order):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return _runs(order, major, minor)


def dense(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Non-negative integers renumbered 0..K−1 in increasing order (as `np.unique`'s inverse),
    and K."""
    if not len(values):
        return np.zeros(0, dtype=np.int64), 0
    top = int(values.max())
    if values.min() < 0 or top > _SPARSE * len(values) + 1024:
        uniq, inverse = np.unique(values, return_inverse=True)
        return inverse.ravel().astype(np.int64), len(uniq)
    present = np.zeros(top + 1, dtype=np.int64)
    present[values] = 1
    number = np.cumsum(present) - 1
    return number[values], int(number[-1]) + 1
