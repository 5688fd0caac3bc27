"""The training configuration of the hierarchical scheduler: every hyper-parameter with its
default, validated once. It imports no torch, so the CLI can show the defaults in `--help`
without the `rl` extra."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field, fields
from pathlib import Path
from typing import Any

from arsched.errors import ArschedError

LEVELS = ("lower", "upper")
NET_ARCH = (64, 64)


@dataclass
class TrainConfig:
    """What `arsched train` asks for; `steps` counts environment steps of both levels.

    Upper-level steps are whole rounds (the lower network fills each), so they get
    `upper_share` of the step budget. `shaping` is recorded in the checkpoint's metadata only.
    """

    topologies: Sequence[str]
    _: KW_ONLY
    out: Path
    steps: int = 20_000
    seed: int = 0
    phases: int = 4  # alternating lower, upper, lower, ...
    upper_share: float = 0.25
    warm_start: bool = True  # first imitate greedy-trees
    chunks: int | None = None  # None: the count greedy-trees picks
    net_arch: tuple[int, ...] = NET_ARCH
    resume: bool = False
    # MaskablePPO
    learning_rate: float = 3e-4
    gamma: float = 0.995
    ent_coef: float = 0.0
    n_epochs: int = 4
    lower_n_steps: int = 512
    lower_batch_size: int = 128
    upper_n_steps: int = 128
    upper_batch_size: int = 64
    shaping: bool = False
    # imitation (warm start and self-imitation)
    imitation_iters: int = 6000
    imitation_lr: float = 1e-3
    imitation_batch: int = 512
    self_imitation: int = 16  # explored episodes per topology after each PPO phase (0: off)
    explore: float = 0.05  # chance that an explored episode samples a flow pick
    extra_meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.steps <= 0 or self.phases <= 0 or self.self_imitation < 0:
            raise ArschedError("--steps and --phases must be positive, --self-imitation not negative")
        if not 0.0 < self.explore <= 1.0:
            raise ArschedError(f"--explore must be a probability in (0, 1], got {self.explore}")
        if not 0.0 < self.upper_share < 1.0:
            raise ArschedError(
                f"the upper level's share of the steps must be in (0, 1), got {self.upper_share}"
            )
        if not self.net_arch or min(self.net_arch) <= 0:
            arch = ",".join(map(str, self.net_arch))
            raise ArschedError(f"--net-arch must be positive layer widths joined by ',', got {arch!r}")

    @staticmethod
    def default(name: str) -> Any:
        """The default of a field (for the CLI's `--help`)."""
        f = next(f for f in fields(TrainConfig) if f.name == name)
        return f.default

    def ppo_settings(self, level: str) -> dict[str, int]:
        """MaskablePPO's rollout length and minibatch size for a level."""
        if level == "lower":
            return {"n_steps": self.lower_n_steps, "batch_size": self.lower_batch_size}
        return {"n_steps": self.upper_n_steps, "batch_size": self.upper_batch_size}

    def phase_steps(self, phase: int) -> int:
        """Timesteps of a phase: the level's share of `steps`, split over its phases."""
        level = LEVELS[phase % 2]
        count = math.ceil(self.phases / 2) if level == "lower" else self.phases // 2
        share = 1.0 - self.upper_share if level == "lower" else self.upper_share
        return max(int(self.steps * share) // max(count, 1), 1)


@dataclass(frozen=True)
class Seeds:
    """Every random stream of a training, derived from the configured seed by one rule each, so
    that one seed reproduces a whole training (and each stream differs from the others)."""

    base: int

    def ppo(self, level: int) -> int:
        """MaskablePPO of level `level` (its network, rollouts and environment resets)."""
        return self.base + level

    def imitation(self, phase: int, level: int) -> int:
        """Minibatches of the imitation fit after phase `phase` (0: the warm start)."""
        return self.base + phase + level

    def exploration(self, phase: int) -> int:
        """The explored episodes of self-imitation after phase `phase`."""
        return self.base * 7919 + phase

    @staticmethod
    def episode(exploration: int, state: int, episode: int) -> int:
        """torch's seed for explored episode `episode` on training state `state`."""
        return exploration * 1_000_003 + state * 1009 + episode
