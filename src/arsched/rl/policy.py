"""The two policy networks and running them: as frozen partners during training, and to build a
schedule at inference (deterministic, or best of k seeded samples)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from gymnasium import spaces

from arsched.collective.schedule import Schedule
from arsched.rl import features as ft
from arsched.rl.config import NET_ARCH
from arsched.rl.distributions import HrlPolicy, TreeRowsExtractor
from arsched.rl.state import RoundState, run_episode
from arsched.topology.core import Topology


def level_spaces(level: str) -> tuple[spaces.Box, spaces.Space]:
    """Observation and action space of a level (the environments use the same)."""
    if level == "lower":
        return spaces.Box(0.0, 1.0, (ft.LOWER_DIM,), np.float32), spaces.Discrete(ft.MAX_CANDIDATES)
    return spaces.Box(0.0, 1.0, (ft.UPPER_DIM,), np.float32), spaces.MultiBinary(ft.MAX_TREES)


def policy_kwargs(level: str, net_arch: Sequence[int] = NET_ARCH) -> dict:
    """The lower level: an MLP of `net_arch` over the candidate rows. The upper level: the
    tree-shared network (an MLP of `net_arch` per tree row, a shared scoring layer; see
    `arsched.rl.distributions`), so its weights do not depend on the number of trees."""
    if level == "lower":
        return {"net_arch": list(net_arch)}
    return {
        "net_arch": {"pi": [], "vf": []},
        "features_extractor_class": TreeRowsExtractor,
        "features_extractor_kwargs": {
            "rows": ft.MAX_TREES,
            "row_features": ft.TREE_FEATURES,
            "hidden": tuple(net_arch),
        },
    }


def make_policy(level: str, net_arch: Sequence[int] = NET_ARCH) -> HrlPolicy:
    """An untrained policy network of the level (weights are loaded into it)."""
    obs, act = level_spaces(level)
    return HrlPolicy(obs, act, lambda _: 0.0, **policy_kwargs(level, net_arch))


class Actor:
    """A policy as a function of the round state: `upper(state) -> bool per tree` or
    `lower(state) -> candidate index`; deterministic (the mode) unless `sample`, which is the
    probability that a decision is sampled from the policy instead (True: every decision;
    torch's generator draws). With a `record` list, every network decision is appended to it
    as (observation, mask, action)."""

    def __init__(
        self, policy: HrlPolicy, level: str, sample: float = False, record: list | None = None
    ) -> None:
        self.policy, self.level, self.sample, self.record = policy, level, float(sample), record

    def __call__(self, state: RoundState):
        if self.level == "lower":
            if len(state.candidates) == 1:  # one choice: no network call
                return 0
            obs, mask = ft.lower_observation(state), ft.lower_mask(state)
        else:
            obs, mask = ft.upper_observation(state), ft.upper_mask(state)
        with torch.no_grad():  # the masked logits directly: several times faster than sb3's predict
            latent = self.policy.mlp_extractor.forward_actor(
                self.policy.extract_features(torch.as_tensor(obs)[None])
            )
            logits = self.policy.action_net(latent)[0]
        logits = logits.masked_fill(~torch.as_tensor(mask), -torch.inf)
        if self.level == "upper":
            logits = logits.view(-1, 2)
        if self.sample >= 1.0 or (self.sample > 0.0 and float(torch.rand(())) < self.sample):
            action = torch.distributions.Categorical(logits=logits).sample().numpy()
        else:
            action = logits.argmax(-1).numpy()
        if self.record is not None:
            self.record.append((obs, mask, action))
        if self.level == "lower":
            return int(action)
        return action[: state.num_trees].astype(bool)


def schedule_with(
    topology: Topology,
    policies: dict[str, HrlPolicy],
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    chunks: int | None = None,
    samples: int = 1,
    seed: int = 0,
    meta: dict | None = None,
) -> tuple[Schedule, dict]:
    """Run the policies to a schedule. With `samples` k > 1, the deterministic episode and k − 1
    sampled ones (torch seeded with `seed`) are run and the one with the fewest rounds is kept
    (best-of-k: a search at inference, reported as such). Returns the schedule and a summary."""
    state = RoundState.create(topology, chunks, nbytes, "hrl", ranks)
    ft.check_tree_count(state)
    best, tried = None, []
    for i in range(max(samples, 1)):
        sample = i > 0
        if sample:
            torch.manual_seed(seed * 100_003 + i)
        upper, lower = (Actor(policies[lv], lv, sample) for lv in ("upper", "lower"))
        run_episode(state.reset(), upper, lower)
        tried.append(state.rounds)
        if best is None or state.rounds < best[0]:
            best = (state.rounds, state.engine.schedule(meta))
    return best[1], {"rounds": best[0], "deterministic_rounds": tried[0], "samples": len(tried)}
