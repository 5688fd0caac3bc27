"""The two Gymnasium environments of the hierarchical scheduler, on one shared `RoundState`.

- `WorkloadEnv` (lower level): one step picks one candidate flow (Discrete over the padded
  candidate list, `action_masks()` for MaskablePPO); when no candidate is left the round runs,
  the reward is −1 and the frozen upper policy selects the next round's trees.
- `TreeSelectEnv` (upper level): one step is one round: a multi-hot choice of trees
  (MultiBinary, `action_masks()` two entries per tree: MaskablePPO's Bernoulli masks); the
  frozen lower policy then fills the round; reward −1.

The return of an episode is minus its number of rounds. With `shaping=True` each round also
earns the drop of `RoundState.rounds_left_bound` (potential-based shaping with potential minus
that bound, exact for γ = 1: the return becomes bound at the start minus rounds, so the best
policies are unchanged, but a round that shortens the critical path or relieves the busiest
link is rewarded at once instead of at the end of the episode). An action outside the
mask (only a policy that ignores the mask sends one) is taken as candidate 0 / as "no
preference", so every episode still ends in a valid schedule. Each reset draws one of the
topologies (seeded) and builds a fresh episode on it. The frozen partner (the other level's
policy, or greedy's rule by default) is given to the constructor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from arsched.rl import features as ft
from arsched.rl.state import RoundState, all_trees, first_candidate
from arsched.topology.core import Topology

Upper = Callable[[RoundState], np.ndarray]
Lower = Callable[[RoundState], int]


class _Base(gym.Env):
    """What both levels share: the topologies, one episode's state, the reward per round."""

    metadata = {"render_modes": []}  # noqa: RUF012  (gymnasium's convention)

    def __init__(
        self,
        topologies: Sequence[Topology],
        chunks: int | None,
        shaping: bool,
        observation_space: spaces.Box,
        action_space: spaces.Space,
    ) -> None:
        if not topologies:
            raise ValueError("an environment needs at least one topology")
        self.topologies = list(topologies)
        self.chunks = chunks
        self.shaping = shaping
        self.observation_space = observation_space
        self.action_space = action_space
        self._potential = 0
        self.state: RoundState | None = None
        self._templates: dict[int, RoundState] = {}

    def _new_state(self, seed: int | None) -> RoundState:
        """A fresh episode on one of the topologies, drawn with the environment's generator."""
        super().reset(seed=seed)
        i = int(self.np_random.integers(len(self.topologies)))
        if i not in self._templates:  # building trees and incidence once per topology
            st = RoundState.create(self.topologies[i], self.chunks)
            ft.check_tree_count(st)
            self._templates[i] = st
        self.state = self._templates[i].reset()
        self._potential = self.state.rounds_left_bound() if self.shaping else 0
        return self.state

    def _round_reward(self) -> float:
        """−1 for the round just run, plus the shaping term if on."""
        if not self.shaping:
            return -1.0
        before, self._potential = self._potential, self.state.rounds_left_bound()
        return -1.0 + before - self._potential


class WorkloadEnv(_Base):
    """Lower level: pick flows one at a time; `upper` (frozen) selects each round's trees."""

    def __init__(
        self,
        topologies: Sequence[Topology],
        upper: Upper = all_trees,
        chunks: int | None = None,
        shaping: bool = False,
    ) -> None:
        obs = spaces.Box(0.0, 1.0, (ft.LOWER_DIM,), np.float32)
        super().__init__(topologies, chunks, shaping, obs, spaces.Discrete(ft.MAX_CANDIDATES))
        self.upper = upper

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        state = self._new_state(seed)
        state.select(self.upper(state))
        return ft.lower_observation(state), {}

    def step(self, action):
        """Pick candidate `action`; one outside the mask (beyond the candidates) picks candidate 0."""
        st = self.state
        a = int(action)
        closed = st.pick(a if 0 <= a < min(len(st.candidates), ft.MAX_CANDIDATES) else 0)
        reward = self._round_reward() if closed else 0.0
        if closed and not st.finished:
            st.select(self.upper(st))
        return ft.lower_observation(st), reward, st.finished, False, {"rounds": st.rounds}

    def action_masks(self) -> np.ndarray:
        return ft.lower_mask(self.state)


class TreeSelectEnv(_Base):
    """Upper level: select trees once per round; `lower` (frozen) fills the round."""

    def __init__(
        self,
        topologies: Sequence[Topology],
        lower: Lower = first_candidate,
        chunks: int | None = None,
        shaping: bool = False,
    ) -> None:
        obs = spaces.Box(0.0, 1.0, (ft.UPPER_DIM,), np.float32)
        super().__init__(topologies, chunks, shaping, obs, spaces.MultiBinary(ft.MAX_TREES))
        self.lower = lower

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        return ft.upper_observation(self._new_state(seed)), {}

    def step(self, action):
        """Run one round on the trees marked in `action`. Marks on trees the mask excludes are
        dropped; a choice that leaves no tree means "no preference" (every selectable tree)."""
        st = self.state
        st.select(np.asarray(action, dtype=bool))
        while not st.pick(self.lower(st)):
            pass
        return ft.upper_observation(st), self._round_reward(), st.finished, False, {"rounds": st.rounds}

    def action_masks(self) -> np.ndarray:
        return ft.upper_mask(self.state)
