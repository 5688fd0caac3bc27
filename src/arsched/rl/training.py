"""Alternating MaskablePPO training of the two levels (one trains while the other is frozen).

1. Warm start (`warm_start`): both networks first imitate `greedy-trees` (every tree selected;
   the first candidate, i.e. the highest-priority flow, picked) on the training topologies, by
   maximum likelihood of greedy's actions, so RL starts from the heuristic instead of from a
   random policy.
2. PPO phases alternate lower, upper, lower, ...: MaskablePPO trains one level in its
   environment while the other level's network acts deterministically and is not updated.
3. Self-imitation (`self_imitation` k > 0, after each PPO phase): k episodes per training
   topology follow the deterministic policies except that each lower-level decision is, with
   probability `explore`, 2 × or 3 × that (cycling over the episodes), sampled from the lower
   network; both networks are then fitted (maximum likelihood, until every demonstrated
   decision is the mode or `imitation_iters` steps) to the decisions of the episode with the
   fewest rounds, the deterministic one included, so the deterministic policy replays the best
   schedule its own exploration found (self-imitation learning, Oh et al., ICML 2018).
   Departures are sparse because a replay can fit only so many arbitrary picks: dense sampling
   finds shorter episodes that the fit cannot reproduce. Sampled tree selections (128 bits a
   round) cannot be fitted where trees look alike, so the upper level is not explored. PPO
   alone moves the deterministic policy slowly from the imitation start; this step is what
   turns exploration into fewer rounds (benchmarks/bench_rl.py measures both).
4. After each phase both policies run deterministically on every training topology; the score
   is the mean of rounds / greedy-trees rounds. A phase that makes the score worse is rolled
   back (the checkpoint always holds the best pair so far) and logged as rejected.

Every phase ends with an atomic checkpoint and a line in `log.csv` (and a log record);
`resume=True` continues after the last finished phase. `train` reads top to bottom: set up,
warm start, then per phase a PPO update and a self-imitation update, each evaluated and logged.
"""

from __future__ import annotations

import copy
import csv
import io
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback

from arsched.errors import ArschedError
from arsched.fileio import write_atomic
from arsched.rl import checkpoint
from arsched.rl import features as ft
from arsched.rl.config import LEVELS, Seeds, TrainConfig
from arsched.rl.distributions import HrlPolicy
from arsched.rl.envs import TreeSelectEnv, WorkloadEnv
from arsched.rl.policy import Actor, policy_kwargs
from arsched.rl.state import RoundState, all_trees, first_candidate, run_episode
from arsched.topology import parse_spec

__all__ = [
    "MODE_LOGP",
    "ProgressHook",
    "TrainConfig",
    "best_sampled_episodes",
    "evaluate",
    "imitate",
    "train",
]

log = logging.getLogger(__name__)

MODE_LOGP = math.log(0.55)  # above this, a demonstrated action (every bit of a tree choice) is the mode
LOG_FIELDS = [
    "phase",
    "level",
    "timesteps",
    "wall_s",
    "score",
    "rounds",
    "greedy_rounds",
    "accepted",
    "explored_rounds",  # self-imitation: the best explored episode's rounds, which it fits
]

ProgressHook = Callable[[str, int, int], None]
"""Called with (what runs now, environment steps done, steps in total) when a PPO phase starts
and after each of its steps."""


def evaluate(policies: dict, states: Sequence[RoundState]) -> list[int]:
    """Rounds of the deterministic policies on each episode (the states are reset first)."""
    upper, lower = Actor(policies["upper"], "upper"), Actor(policies["lower"], "lower")
    return [run_episode(s.reset(), upper, lower).rounds for s in states]


def greedy_demonstrations(states: Sequence[RoundState]) -> dict[str, tuple[np.ndarray, ...]]:
    """(observations, masks, actions) of greedy-trees at both levels on every state."""
    data: dict[str, list[list]] = {lv: [[], [], []] for lv in LEVELS}
    for s in states:
        s.reset()
        while not s.finished:
            ok = s.tree_has_available()
            choice = np.zeros(ft.MAX_TREES, dtype=np.float32)
            choice[: s.num_trees] = ok
            for buf, x in zip(
                data["upper"], (ft.upper_observation(s), ft.upper_mask(s), choice), strict=True
            ):
                buf.append(x)
            s.select(all_trees(s))
            while True:
                if len(s.candidates) > 1:
                    for buf, x in zip(
                        data["lower"], (ft.lower_observation(s), ft.lower_mask(s), 0), strict=True
                    ):
                        buf.append(x)
                if s.pick(first_candidate(s)):
                    break
    return {lv: tuple(np.array(b) for b in bufs) for lv, bufs in data.items()}


def best_sampled_episodes(
    policies: dict, states: Sequence[RoundState], samples: int, seed: int, explore: float = 1.0
) -> tuple[dict[str, tuple[np.ndarray, ...]], list[int]]:
    """Per state, the network decisions of the episode with the fewest rounds among the
    deterministic one and `samples` explored ones (torch seeded from `seed`), as
    demonstrations; and those episodes' rounds. Explored episode i samples each lower-level
    decision with probability `explore` × (1, 2 or 3, cycling with i) and takes the mode
    otherwise (the upper level acts deterministically): sparser departures are easier to fit,
    denser ones find more."""
    data: dict[str, list] = {lv: [] for lv in LEVELS}
    rounds = []
    for j, s in enumerate(states):
        best = None
        for i in range(samples + 1):
            torch.manual_seed(Seeds.episode(seed, j, i))
            rec: dict[str, list] = {lv: [] for lv in LEVELS}
            actors = [
                Actor(policies[lv], lv, sample=explore * ((i - 1) % 3 + 1), record=rec[lv])
                if i > 0 and lv == "lower"
                else Actor(policies[lv], lv, record=rec[lv])
                for lv in ("upper", "lower")
            ]
            run_episode(s.reset(), *actors)
            if best is None or s.rounds < best[0]:
                best = (s.rounds, rec)
        rounds.append(best[0])
        for lv in LEVELS:
            data[lv] += best[1][lv]
    return {lv: tuple(np.array(col) for col in zip(*data[lv], strict=True)) for lv in LEVELS}, rounds


def imitate(
    policy, data: tuple[np.ndarray, ...], seed: int, iters: int = 1000, batch: int = 512, lr: float = 1e-3
) -> float:
    """Maximum-likelihood fit of a policy to demonstrations (its own Adam, so PPO's optimiser
    state is untouched), until every demonstrated action is the policy's mode (each has
    probability above `MODE_LOGP`'s, checked on all of them every 25 steps: then the
    deterministic policy replays the demonstration exactly, where a good mean likelihood still
    lets one decision of thousands go astray) or `iters` steps. Minibatches are drawn uniformly
    (torch generator seeded with `seed`). Returns the smallest log-likelihood of a demonstrated
    action."""
    if not data or not len(data[0]):  # no decision to learn from (every choice was forced)
        return 0.0
    obs, masks, actions = (torch.as_tensor(x) for x in data)
    gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(policy.parameters(), lr=lr)
    policy.set_training_mode(True)
    size = min(batch, len(obs))
    for it in range(iters + 1):
        if it % 25 == 0 or it == iters:
            with torch.no_grad():
                _, logp, _ = policy.evaluate_actions(obs, actions, action_masks=masks.numpy())
            worst = float(logp.min())
            if worst > MODE_LOGP or it == iters:
                break
        idx = torch.randint(len(obs), (size,), generator=gen)
        _, logp, _ = policy.evaluate_actions(obs[idx], actions[idx], action_masks=masks[idx].numpy())
        optimizer.zero_grad()
        (-logp.mean()).backward()
        optimizer.step()
    policy.set_training_mode(False)
    return worst


# ---- a training in progress ----------------------------------------------------------------------


class _PolicyOf:
    """The other level's policy acting deterministically: an environment's frozen partner. The
    policy belongs to the other level's model, which needs its own environment first, so it is
    looked up in `models` when the environment first calls it (after the models exist)."""

    def __init__(self, models: dict[str, MaskablePPO], level: str) -> None:
        self.models, self.level = models, level
        self.actor: Actor | None = None

    def __call__(self, state: RoundState):
        if self.actor is None:
            self.actor = Actor(self.models[self.level].policy, self.level)
        return self.actor(state)


@dataclass
class _Training:
    """What every phase reads and updates: the episodes, the models, the metadata and log."""

    cfg: TrainConfig
    seeds: Seeds
    states: list[RoundState]
    greedy: list[int]  # greedy-trees' rounds per training topology
    models: dict[str, MaskablePPO]
    meta: dict
    log_rows: list[dict]
    t0: float  # perf_counter at the start of the training, earlier phases included

    @property
    def out(self) -> Path:
        return Path(self.cfg.out)

    @property
    def policies(self) -> dict:
        return {lv: self.models[lv].policy for lv in LEVELS}

    def score(self, rounds: list[int]) -> float:
        """Mean of rounds / greedy-trees' rounds over the training topologies (lower is better)."""
        return float(np.mean(np.array(rounds) / np.array(self.greedy)))


class _Steps(BaseCallback):
    """Counts PPO's environment steps for the progress hook."""

    def __init__(self, hook: ProgressHook | None, total: int) -> None:
        super().__init__()
        self.hook, self.total, self.done, self.what = hook, total, 0, "training hrl"

    def start(self, what: str) -> None:
        self.what = what
        if self.hook is not None:
            self.hook(what, self.done, self.total)

    def _on_step(self) -> bool:
        self.done += 1
        if self.hook is not None:
            self.hook(self.what, self.done, self.total)
        return True


def train(cfg: TrainConfig, progress: ProgressHook | None = None) -> dict:
    """Train, checkpointing into `cfg.out` after every phase; returns the final metadata."""
    run = _setup(cfg)
    if run.meta["phases_done"] == 0 and not run.log_rows:
        _warm_start(run)
    steps = _Steps(progress, sum(cfg.phase_steps(p) for p in range(run.meta["phases_done"], cfg.phases)))
    for phase in range(run.meta["phases_done"], cfg.phases):
        level, n, rounds, accepted = _ppo_update(run, phase, steps)
        explored: list[int] = []
        if cfg.self_imitation > 0:
            _log_phase(run, phase + 1, level, n, rounds, accepted)
            rounds, accepted, explored = _self_imitation_update(run, phase)
            level, n = "self-imitation", 0
        run.meta["phases_done"] = phase + 1
        _log_phase(run, phase + 1, level, n, rounds, accepted, explored)
    return run.meta


def _setup(cfg: TrainConfig) -> _Training:
    """Episodes and greedy's rounds on every training topology, both models, and the metadata
    (continued from the checkpoint with `resume`)."""
    torch.set_num_threads(1)
    seeds = Seeds(cfg.seed)
    topologies = [parse_spec(s) for s in cfg.topologies]
    states = [RoundState.create(t, cfg.chunks) for t in topologies]
    for s in states:
        ft.check_tree_count(s)
    greedy = [run_episode(s.reset(), all_trees, first_candidate).rounds for s in states]
    models: dict[str, MaskablePPO] = {}
    envs = {
        "lower": WorkloadEnv(topologies, upper=_PolicyOf(models, "upper"), chunks=cfg.chunks),
        "upper": TreeSelectEnv(topologies, lower=_PolicyOf(models, "lower"), chunks=cfg.chunks),
    }
    for i, lv in enumerate(LEVELS):
        models[lv] = MaskablePPO(
            HrlPolicy,
            envs[lv],
            learning_rate=cfg.learning_rate,
            n_epochs=cfg.n_epochs,
            gamma=cfg.gamma,
            ent_coef=cfg.ent_coef,
            seed=seeds.ppo(i),
            device="cpu",
            policy_kwargs=policy_kwargs(lv, cfg.net_arch),
            **cfg.ppo_settings(lv),
        )
    meta = _new_meta(cfg, greedy)
    log_rows: list[dict] = []
    out = Path(cfg.out)
    if cfg.resume and (out / checkpoint.META).is_file():
        meta, log_rows = _resume(out, cfg, models, meta)
    elif cfg.resume:
        raise ArschedError(f"cannot resume: {out} holds no checkpoint")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter() - meta["train_seconds"]
    return _Training(cfg, seeds, states, greedy, models, meta, log_rows, t0)


def _new_meta(cfg: TrainConfig, greedy: list[int]) -> dict:
    return {
        "topologies": list(cfg.topologies),
        "chunks": cfg.chunks,
        "seed": cfg.seed,
        "steps": cfg.steps,
        "phases": cfg.phases,
        "upper_share": cfg.upper_share,
        "warm_start": cfg.warm_start,
        "shaping": cfg.shaping,
        "self_imitation": cfg.self_imitation,
        "explore": cfg.explore,
        "gamma": cfg.gamma,
        "ent_coef": cfg.ent_coef,
        "net_arch": list(cfg.net_arch),
        "greedy_rounds": greedy,
        "phases_done": 0,
        "train_seconds": 0.0,
        **cfg.extra_meta,
    }


def _warm_start(run: _Training) -> None:
    """Phase 0: imitate greedy-trees (with `warm_start`), then evaluate and log the start."""
    cfg = run.cfg
    if cfg.warm_start:
        demos = greedy_demonstrations(run.states)
        for i, lv in enumerate(LEVELS):
            _fit(run, lv, demos[lv], run.seeds.imitation(0, i))
    _log_phase(run, 0, "imitation" if cfg.warm_start else "init", 0, evaluate(run.policies, run.states), True)


def _ppo_update(run: _Training, phase: int, steps: _Steps) -> tuple[str, int, list[int], bool]:
    """One PPO phase of the level whose turn it is: (level, timesteps, rounds, accepted)."""
    level = LEVELS[phase % 2]
    steps.start(f"phase {phase + 1}/{run.cfg.phases}: {level} level")
    snapshot = {level: copy.deepcopy(run.models[level].policy.state_dict())}
    n = run.cfg.phase_steps(phase)
    run.models[level].learn(n, callback=steps, reset_num_timesteps=False)
    rounds, accepted = _evaluate_or_roll_back(run, snapshot)
    return level, n, rounds, accepted


def _self_imitation_update(run: _Training, phase: int) -> tuple[list[int], bool, list[int]]:
    """Fit both networks to the best of the explored episodes: (rounds, accepted, the best
    explored episodes' rounds)."""
    snapshot = {lv: copy.deepcopy(run.models[lv].policy.state_dict()) for lv in LEVELS}
    cfg = run.cfg
    demos, explored = best_sampled_episodes(
        run.policies, run.states, cfg.self_imitation, run.seeds.exploration(phase), cfg.explore
    )
    for i, lv in enumerate(LEVELS):
        _fit(run, lv, demos[lv], run.seeds.imitation(phase, i))
    rounds, accepted = _evaluate_or_roll_back(run, snapshot)
    return rounds, accepted, explored


def _fit(run: _Training, level: str, data: tuple[np.ndarray, ...], seed: int) -> None:
    cfg = run.cfg
    imitate(run.models[level].policy, data, seed, cfg.imitation_iters, cfg.imitation_batch, cfg.imitation_lr)


def _evaluate_or_roll_back(run: _Training, snapshot: dict[str, dict]) -> tuple[list[int], bool]:
    """Rounds of the deterministic policies, and whether the score is no worse than the best so
    far; if it is worse, the levels in `snapshot` get their weights from before back."""
    rounds = evaluate(run.policies, run.states)
    accepted = run.score(rounds) <= run.meta["best_score"]
    if not accepted:
        for lv, weights in snapshot.items():
            run.models[lv].policy.load_state_dict(weights)
    return rounds, accepted


def _log_phase(
    run: _Training,
    phase: int,
    level: str,
    timesteps: int,
    rounds: list[int],
    accepted: bool,
    explored: Sequence[int] = (),
) -> None:
    """Record a finished phase: metadata, checkpoint, a line of log.csv and a log record."""
    meta = run.meta
    meta["train_seconds"] = round(time.perf_counter() - run.t0, 3)
    score = run.score(rounds)
    run.log_rows.append(
        {
            "phase": phase,
            "level": level,
            "timesteps": timesteps,
            "wall_s": meta["train_seconds"],
            "score": f"{score:.4f}",
            "rounds": " ".join(map(str, rounds)),
            "greedy_rounds": " ".join(map(str, run.greedy)),
            "accepted": int(accepted),
            "explored_rounds": " ".join(map(str, explored)),
        }
    )
    if accepted:
        meta.update(best_score=score, rounds=rounds)
    policies = run.policies
    checkpoint.save(run.out, policies, {lv: policies[lv].optimizer for lv in LEVELS}, meta)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=LOG_FIELDS)
    writer.writeheader()
    writer.writerows(run.log_rows)
    write_atomic(run.out / "log.csv", buf.getvalue())
    log.info(
        "phase %d (%s): score %.4f, rounds %s, %s",
        phase,
        level,
        score,
        " ".join(map(str, rounds)),
        "accepted" if accepted else "rolled back",
    )


def _resume(out: Path, cfg: TrainConfig, models: dict, meta: dict) -> tuple[dict, list[dict]]:
    old = checkpoint.read_meta(out)
    if old.get("topologies") != list(cfg.topologies) or old.get("net_arch") != list(cfg.net_arch):
        raise ArschedError(f"cannot resume {out}: it was trained on other topologies or another network")
    policies, _ = checkpoint.load_policies(out)
    optim = checkpoint.load_optimizer_states(out)
    for lv in LEVELS:
        models[lv].policy.load_state_dict(policies[lv].state_dict())
        if optim is not None:
            models[lv].policy.optimizer.load_state_dict(optim[lv])
    log_path = out / "log.csv"
    rows = list(csv.DictReader(log_path.open())) if log_path.is_file() else []
    return {
        **meta,
        **{k: old[k] for k in ("phases_done", "train_seconds", "best_score", "rounds") if k in old},
    }, rows
