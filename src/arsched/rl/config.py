"""The training configuration of the learned scheduler: every hyper-parameter with its default,
validated once. It imports no torch, so the CLI can show the defaults in `--help` without the
`rl` extra."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field, fields
from pathlib import Path
from typing import Any

from arsched.algorithms.flowtrees import SHAPES
from arsched.errors import ArschedError

MAX_HIDDEN = 1024
MAX_LAYERS = 8


@dataclass
class TrainConfig:
    """What `arsched train` asks for. `iterations` × (training networks) × `group` episodes are
    sampled in all: every iteration draws a group of episodes on each network and takes one
    clipped policy-gradient update per network, its advantage the episode's gap relative to its
    group (see `arsched.rl.training`); 0 iterations is the warm start alone."""

    topologies: Sequence[str]
    _: KW_ONLY
    out: Path
    iterations: int = 40
    group: int = 16  # episodes per network and iteration
    seed: int = 0
    nbytes: float = 256e6  # the message size the reward is measured at
    alpha: float | None = None  # per-transfer overhead (None: the flow model's default)
    warm_start: bool = True  # first imitate the best fixed plan (rollout.best_plan)
    shared_teacher: bool = False  # several networks: imitate plans of one shared kind (training.teachers)
    teacher_shapes: tuple[str, ...] = ()  # with shared_teacher: each network's shape among these
    imitation_epochs: int = 200
    hidden: int = 32
    layers: int = 2  # message-passing rounds of the lower network
    temperature: float = 0.3  # of the rounds' distribution: below 1, sampled rounds stay nearer the mode
    explore: float = 0.02  # the exploration floor of sampled decisions (see arsched.rl.forward)
    learning_rate: float = 1e-3
    imitation_rate: float = 1e-3  # Adam's step size in the warm start
    alternate: bool = True  # sample one level per iteration, the other acting as its mode
    epochs: int = 4  # passes over each group's decisions
    distill: int = 100  # most imitation passes to make a newly found best episode the policy's (0: none)
    max_rounds: int = 64  # rounds of an episode in one update (drawn at random)
    clip: float = 0.2
    evaluate_every: int = 5  # iterations between evaluations of the deterministic policy
    extra_meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.topologies:
            raise ArschedError("training needs at least one --topology")
        if not (isinstance(self.iterations, int) and self.iterations >= 0):
            raise ArschedError(f"--iterations must be a whole number, 0 or more, got {self.iterations!r}")
        for name in ("group", "epochs", "evaluate_every", "hidden", "layers", "max_rounds"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                raise ArschedError(
                    f"--{name.replace('_', '-')} must be a positive whole number, got {value!r}"
                )
        if self.group < 2:
            raise ArschedError(
                f"--group must be at least 2 (the advantage is relative to the group), got {self.group}"
            )
        if self.hidden > MAX_HIDDEN or self.layers > MAX_LAYERS:
            raise ArschedError(f"--hidden is at most {MAX_HIDDEN} and --layers at most {MAX_LAYERS}")
        for name in ("imitation_epochs", "distill"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
                raise ArschedError(
                    f"--{name.replace('_', '-')} must be a whole number, 0 or more, got {value!r}"
                )
        rates = (self.learning_rate, self.imitation_rate, self.clip)
        if not (all(0.0 < r < 1.0 for r in rates) and 0.0 < self.temperature <= 1.0):
            raise ArschedError(
                "the learning rates and the clip range must lie in (0, 1), the temperature in (0, 1]"
            )
        if not 0.0 <= self.explore < 1.0:
            raise ArschedError(f"--explore must lie in [0, 1), got {self.explore!r}")
        unknown = [x for x in self.teacher_shapes if x not in SHAPES]
        if unknown or len(set(self.teacher_shapes)) != len(self.teacher_shapes):
            raise ArschedError(
                f"--teacher-shapes takes distinct shapes of {', '.join(SHAPES)}, "
                f"got {','.join(self.teacher_shapes)}"
            )
        if self.teacher_shapes and not self.shared_teacher:
            raise ArschedError("--teacher-shapes applies only with --shared-teacher")

    @staticmethod
    def default(name: str) -> Any:
        """The default of a field (for the CLI's `--help`)."""
        f = next(f for f in fields(TrainConfig) if f.name == name)
        return f.default

    @property
    def episodes(self) -> int:
        """Sampled episodes in all (each one flow-model simulation)."""
        return self.iterations * self.group * len(self.topologies)


@dataclass(frozen=True)
class Seeds:
    """Every random stream of a training, derived from the configured seed by one rule each, so
    that one seed reproduces a whole training (and each stream differs from the others)."""

    base: int

    def networks(self) -> int:
        """torch's initial weights."""
        return self.base

    def imitation(self) -> int:
        """The rounds each pass of the warm start fits."""
        return self.base * 7919 + 1

    def episodes(self, iteration: int, network: int) -> int:
        """The sampled episodes of one network in one iteration, and the rounds its update fits."""
        return (self.base * 1_000_003 + iteration) * 1009 + network
