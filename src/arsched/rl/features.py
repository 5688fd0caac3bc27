"""Fixed-size, size-independent observations of a `RoundState` for the two RL levels.

Every feature is a ratio or a fraction (no node ids, no counts that grow with the network), and
the per-flow / per-tree rows are padded to fixed lengths with a validity column and action
masks, so one policy runs on topologies it never saw:

- lower level (Workload Scheduling): the first `MAX_CANDIDATES` candidate flows in greedy's
  order (its plan for the round first, then the busiest link's flows, then the longest
  remaining critical path; the rest wait for a later pick or round), each with its priority,
  direction, path length, network pressure on its links (available flows and remaining flows
  per link, relative to the busiest link), how many other candidates it would block, its
  tree's progress and whether greedy's plan holds it; plus global progress features.
- upper level (Flow-Tree Selection): one row per flow tree (at most `MAX_TREES`): progress,
  available flows, remaining critical path, pressure on its available flows' links, and the
  previous round's selection. The upper network scores every row with the same weights, so
  the padding only bounds the number of trees, it is not learned per slot.

Bump `FEATURE_VERSION` whenever a feature changes: checkpoints record it and refuse to load
under another version.
"""

from __future__ import annotations

import numpy as np

from arsched.algorithms.registry import NotApplicable
from arsched.rl.state import RoundState

FEATURE_VERSION = 2
MAX_CANDIDATES = 32
MAX_TREES = 128  # default_chunks gives at most 128 trees
FLOW_FEATURES = 9
TREE_FEATURES = 7
GLOBAL_FEATURES = 4
LOWER_DIM = MAX_CANDIDATES * FLOW_FEATURES + GLOBAL_FEATURES
UPPER_DIM = MAX_TREES * TREE_FEATURES + GLOBAL_FEATURES


def check_tree_count(state: RoundState) -> None:
    """Refuse an episode with more flow trees (chunks) than the upper level has slots for."""
    if state.num_trees > MAX_TREES:
        raise NotApplicable(
            f"hrl handles at most {MAX_TREES} flow trees (chunks), this instance has {state.num_trees}"
        )


def _link_loads(state: RoundState) -> tuple[np.ndarray, np.ndarray]:
    """Per link: available flows crossing it and not-yet-run flows crossing it, each divided
    by its maximum over the links (1 on the busiest link). Both change only when a round runs,
    so they are computed once per round."""
    e = state.engine
    key = len(e.rounds)  # the cache is emptied when the episode restarts
    if state.cache.get("loads_key") != key:
        avail = e.available.astype(np.float32) @ state.inc_f32
        remain = (~e.done).astype(np.float32) @ state.inc_f32
        loads = (avail / max(avail.max(), 1.0), remain / max(remain.max(), 1.0))
        state.cache.update(loads_key=key, loads=loads)
    return state.cache["loads"]


def _progress(state: RoundState) -> list[float]:
    e = state.engine
    n = e.num_flows
    in_round = len(state.picked) / max(len(state.picked) + len(state.candidates), 1)
    return [e.done.mean(), e.available.sum() / n, in_round, min(state.rounds / n, 1.0)]


def lower_observation(state: RoundState) -> np.ndarray:
    """The Workload Scheduling observation (`LOWER_DIM` floats)."""
    cand = state.candidates[:MAX_CANDIDATES]
    k = len(cand)
    rows = np.zeros((MAX_CANDIDATES, FLOW_FEATURES), dtype=np.float32)
    if k:
        avail, remain = _link_loads(state)
        inc = state.inc_f32[cand]
        hops = state.hops[cand]
        e = state.engine
        conflicts = (inc @ inc.T > 0).sum(1) - 1
        tree = e.flow_tree[cand]
        rows[:k, 0] = 1.0
        rows[:k, 1] = state.prio[cand] / max(state.prio.max(), 1.0)
        rows[:k, 2] = state.is_reduce[cand]
        rows[:k, 3] = hops / max(state.hops.max(), 1)
        rows[:k, 4] = (inc * remain).max(1)
        rows[:k, 5] = (inc * avail).max(1)
        rows[:k, 6] = conflicts / max(k - 1, 1)
        done = np.bincount(e.flow_tree[e.done], minlength=state.num_trees)
        rows[:k, 7] = done[tree] / state.tree_size[tree]
        rows[:k, 8] = state.plan[cand]
    glob = np.array(_progress(state), dtype=np.float32)
    return np.concatenate([rows.ravel(), glob])


def lower_mask(state: RoundState) -> np.ndarray:
    """Which of the `MAX_CANDIDATES` actions name a real candidate."""
    mask = np.zeros(MAX_CANDIDATES, dtype=bool)
    mask[: min(len(state.candidates), MAX_CANDIDATES)] = True
    return mask


def upper_observation(state: RoundState) -> np.ndarray:
    """The Flow-Tree Selection observation (`UPPER_DIM` floats)."""
    e = state.engine
    t = state.num_trees
    avail, _ = _link_loads(state)
    rows = np.zeros((MAX_TREES, TREE_FEATURES), dtype=np.float32)
    done = np.bincount(e.flow_tree[e.done], minlength=t)
    navail = np.bincount(e.flow_tree[e.available], minlength=t)
    prio_left = np.zeros(t)
    np.maximum.at(prio_left, e.flow_tree[e.available], state.prio[e.available])
    pressure = state.inc_f32[e.available] @ avail  # summed pressure on each available flow's links
    per_tree_pressure = np.bincount(e.flow_tree[e.available], weights=pressure, minlength=t)
    rows[:t, 0] = done < state.tree_size
    rows[:t, 1] = navail > 0
    rows[:t, 2] = 1.0 - done / state.tree_size
    rows[:t, 3] = navail / state.tree_size
    rows[:t, 4] = prio_left / max(state.prio.max(), 1.0)
    rows[:t, 5] = per_tree_pressure / np.maximum(navail, 1) / max(state.hops.max(), 1)
    rows[:t, 6] = state.previous
    glob = np.array(_progress(state), dtype=np.float32)
    return np.concatenate([rows.ravel(), glob])


def upper_mask(state: RoundState) -> np.ndarray:
    """MultiBinary mask, two entries per tree slot (may be 0, may be 1): a tree may be selected
    only if it has an available flow; padding slots must be 0."""
    mask = np.zeros((MAX_TREES, 2), dtype=bool)
    mask[:, 0] = True
    mask[: state.num_trees, 1] = state.tree_has_available()
    return mask.ravel()
