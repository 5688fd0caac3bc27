"""The learned scheduler's decisions as a gymnasium environment, for agents other than ours.

`ScheduleEnv` is one `Episode` (see `arsched.rl.episode`) behind gymnasium's `reset`/`step`:
the same three kinds of decision, the same features and the same end — a schedule the
validator accepts, timed in the flow model. Every step offers a set of items and the agent
answers with **one score per item**; `action_space` is the box of that many scores for the
decision at hand (it changes from step to step, so `env.action_space.sample()` is always a
valid random action, drawn from `reset`'s seed):

- `level` 0, the chunk option: `options` holds one row per chunk count and number of pipeline
  stages (`Episode.option_features`);
  the highest score is taken;
- `level` 1, the tree of the next chunk: `trees` holds one row per shape (`tree_features`);
  the highest score is taken;
- `level` 2, a round: `flows` and `links` hold the round's available flows and the links they
  cross, `edges` the flow–link incidence (flow index, link index); the round releases every
  flow with a positive score (the highest-scored alone if none is positive), the others wait
  for a later round, as the trained policy's mode does (`forward.release`).

The reward is 0 until the last step, then minus the schedule's time in the flow model (in-order
connections, α of the constructor) over the lower bound — what `arsched train` maximises; `info`
then holds the `schedule`, `time_s` and `gap`. The environment itself draws nothing at random:
the same actions give the same schedule. Observations are variable-size, so gymnasium's vector
wrappers, which stack fixed-size spaces, do not apply, nor does `gymnasium.utils.env_checker`,
which samples an action before `reset`; agents batch episodes themselves, as
`arsched.rl.training` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from arsched.defaults import DEFAULT_ALPHA
from arsched.rl.episode import (
    FLOW_FEATURES,
    LINK_FEATURES,
    OPTION_FEATURES,
    TREE_FEATURES,
    Episode,
    RoundGraph,
)
from arsched.rl.forward import release
from arsched.rl.instance import Instance
from arsched.sim import simulate_flow
from arsched.topology.core import Topology

LEVELS = ("chunks", "tree", "round")
WIDTHS = {"options": OPTION_FEATURES, "trees": TREE_FEATURES, "flows": FLOW_FEATURES, "links": LINK_FEATURES}


def _rows(width: int) -> spaces.Sequence:
    return spaces.Sequence(spaces.Box(-np.inf, np.inf, (width,), np.float32), stack=True)


def _scores(items: int) -> spaces.Box:
    """The action space of a decision among `items` items: one score each."""
    return spaces.Box(-np.finfo(np.float32).max, np.finfo(np.float32).max, (items,), np.float32)


def _blank(level: int) -> dict[str, Any]:
    """An observation of `level` with no items (the terminal one is `_blank(2)`)."""
    rows = {name: np.zeros((0, width), dtype=np.float32) for name, width in WIDTHS.items()}
    return {"level": level, **rows, "edges": np.zeros((0, 2), dtype=np.int64)}


class ScheduleEnv(gym.Env):
    """AllReduce scheduling on one network as a gymnasium environment (see the module
    docstring): `ScheduleEnv(topology, nbytes=256e6)`, then `reset()` and `step(scores)`."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self,
        topology: Topology,
        nbytes: float = 256e6,
        ranks: Sequence[str] | None = None,
        alpha: float = DEFAULT_ALPHA,
    ) -> None:
        self.instance = Instance(topology, ranks, nbytes)
        self.alpha = float(alpha)
        self.observation_space = spaces.Dict(
            {
                "level": spaces.Discrete(len(LEVELS)),
                **{name: _rows(width) for name, width in WIDTHS.items()},
                "edges": spaces.Sequence(spaces.Box(0, np.iinfo(np.int64).max, (2,), np.int64), stack=True),
            }
        )
        self.action_space = _scores(1)
        self._episode: Episode | None = None
        self._graph: RoundGraph | None = None  # the round being decided

    def _observe(self) -> dict[str, Any]:
        ep = self._episode
        obs = _blank(0)
        if ep.chunks is None:
            obs["options"] = ep.option_features()
        elif not ep.upper_done:
            obs["level"], obs["trees"] = 1, ep.tree_features()
        else:
            self._graph = g = ep.round_graph()
            obs.update(
                level=2, flows=g.x_flow, links=g.x_link, edges=np.column_stack([g.edge_flow, g.edge_link])
            )
        self.action_space = _scores(len(obs[("options", "trees", "flows")[obs["level"]]]))
        self.action_space.seed(int(self.np_random.integers(2**31)))  # samples follow reset's seed
        return obs

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self._episode = Episode(self.instance, self.alpha)
        return self._observe(), {}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        ep = self._episode
        if ep is None or ep.finished:
            raise RuntimeError("ScheduleEnv.step needs reset() first (the episode has ended)")
        scores = np.asarray(action, dtype=np.float64).reshape(-1)
        items = self.action_space.shape[0]
        if len(scores) != items or not np.isfinite(scores).all():
            raise ValueError(f"the action must be {items} finite scores, one per item, got {len(scores)}")
        if ep.chunks is None:
            ep.choose_chunks(int(np.argmax(scores)))
        elif not ep.upper_done:
            ep.choose_tree(int(np.argmax(scores)))
        else:
            ep.play(self._graph, release(scores, None))
        if not ep.finished:
            return self._observe(), 0.0, False, False, {}
        schedule = ep.schedule()
        result = simulate_flow(schedule, self.alpha)
        info = {"schedule": schedule, "time_s": result.time_s, "gap": result.gap}
        return _blank(2), -result.gap, True, False, info
