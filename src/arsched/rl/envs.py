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
topologies (seeded) and builds a fresh episode on it.
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
    metadata = {"render_modes": []}  # noqa: RUF012  (gymnasium's convention)

    def __init__(
        self, topologies: Sequence[Topology], chunks: int | None = None, shaping: bool = False
    ) -> None:
        if not topologies:
            raise ValueError("an environment needs at least one topology")
        self.topologies = list(topologies)
        self.chunks = chunks
        self.shaping = shaping
        self._potential = 0
        self.state: RoundState | None = None
        self._templates: dict[int, RoundState] = {}

    def _new_state(self) -> RoundState:
        i = int(self.np_random.integers(len(self.topologies)))
        if i not in self._templates:  # building trees and incidence once per topology
            st = RoundState.create(self.topologies[i], self.chunks)
            ft.check_size(st)
            self._templates[i] = st
        state = self._templates[i].reset()
        self._potential = state.rounds_left_bound() if self.shaping else 0
        return state

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
        super().__init__(topologies, chunks, shaping)
        self.upper = upper
        self.observation_space = spaces.Box(0.0, 1.0, (ft.LOWER_DIM,), np.float32)
        self.action_space = spaces.Discrete(ft.MAX_CANDIDATES)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.state = self._new_state()
        self.state.select(self.upper(self.state))
        return ft.lower_observation(self.state), {}

    def step(self, action):
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
        super().__init__(topologies, chunks, shaping)
        self.lower = lower
        self.observation_space = spaces.Box(0.0, 1.0, (ft.UPPER_DIM,), np.float32)
        self.action_space = spaces.MultiBinary(ft.MAX_TREES)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.state = self._new_state()
        return ft.upper_observation(self.state), {}

    def step(self, action):
        st = self.state
        st.select(np.asarray(action, dtype=bool))
        while not st.pick(self.lower(st)):
            pass
        return ft.upper_observation(st), self._round_reward(), st.finished, False, {"rounds": st.rounds}

    def action_masks(self) -> np.ndarray:
        return ft.upper_mask(self.state)
