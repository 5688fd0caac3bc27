"""Alternating MaskablePPO training of the two levels (one trains while the other is frozen).

1. Warm start (default on, `warm_start=False` to train from scratch): both networks first
   imitate `greedy-trees` (every tree selected; the first candidate, i.e. the highest-priority
   flow, picked) on the training topologies, by maximum likelihood of greedy's actions. RL then
   starts from the heuristic instead of from a random policy.
2. Phases alternate lower, upper, lower, ...: MaskablePPO trains one level in its environment
   while the other level's network acts deterministically and is not updated.
3. Self-imitation (`self_imitation` k > 0, after each PPO phase): k episodes per training
   topology follow the deterministic policies except that each lower-level decision is, with
   probability `explore` (0.05), 2 × or 3 × that (cycling over the episodes), sampled from
   the lower network; both networks are then fitted
   (maximum likelihood, until every demonstrated decision is the mode or `imitation_iters`
   steps) to the decisions of the episode with the fewest rounds, the deterministic one
   included, so the deterministic policy replays the best schedule its own exploration found
   (the idea of self-imitation learning, Oh et al., ICML 2018). Sparse departures are what
   make the replay work: in our trials, fully sampled episodes (and 15 % departures on
   DCell(5,1)) found fewer rounds than greedy, but their many arbitrary picks could not all
   be fitted and the replay drifted back to greedy's rounds; with 7 % the replay kept 125 of
   greedy's 126 on DCell(5,1), but no episode beat greedy on DCell(4,1), where 15 % found 85
   of its 86 (hence the cycle). Sampled tree selections (128 bits a round) cannot be fitted
   where trees look alike, so the upper level is not explored here. PPO from the imitation
   start did not move the deterministic policy within minutes; this step does. Its lines in
   the log say what it contributed, apart from PPO's, and what the exploration found.
4. After each phase both policies run deterministically on every training topology; the score
   is the mean of rounds / greedy-trees rounds. A phase that makes the score worse is rolled
   back (the checkpoint always holds the best pair so far) and logged as rejected.

Every phase ends with an atomic checkpoint and a line in `log.csv`; `resume=True` continues
after the last finished phase. Upper-level steps are whole rounds (the lower network fills
each), so they get `upper_share` of the step budget.
"""

from __future__ import annotations

import copy
import csv
import io
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback

from arsched.errors import ArschedError
from arsched.fileio import write_atomic
from arsched.rl import checkpoint
from arsched.rl import features as ft
from arsched.rl.distributions import HrlPolicy
from arsched.rl.envs import TreeSelectEnv, WorkloadEnv
from arsched.rl.policy import LEVELS, NET_ARCH, Actor, policy_kwargs
from arsched.rl.state import RoundState, all_trees, first_candidate, run_episode
from arsched.topology import parse_spec

PPO_SETTINGS = {
    "lower": {"n_steps": 512, "batch_size": 128},
    "upper": {"n_steps": 128, "batch_size": 64},
}
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


@dataclass
class TrainConfig:
    """What `arsched train` asks for; `steps` counts environment steps of both levels."""

    topologies: Sequence[str]
    steps: int
    out: Path
    seed: int = 0
    phases: int = 4
    upper_share: float = 0.25
    warm_start: bool = True
    chunks: int | None = None
    net_arch: tuple[int, ...] = NET_ARCH
    resume: bool = False
    learning_rate: float = 3e-4
    gamma: float = 0.995
    ent_coef: float = 0.0
    n_epochs: int = 4
    shaping: bool = False
    imitation_iters: int = 6000
    self_imitation: int = 16
    explore: float = 0.05
    extra_meta: dict = field(default_factory=dict)

    def phase_steps(self, phase: int) -> int:
        """Timesteps of a phase: the level's share of `steps`, split over its phases."""
        level = LEVELS[phase % 2]
        count = math.ceil(self.phases / 2) if level == "lower" else self.phases // 2
        share = 1.0 - self.upper_share if level == "lower" else self.upper_share
        return max(int(self.steps * share) // max(count, 1), 1)


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
            torch.manual_seed(seed * 1_000_003 + j * 1009 + i)
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


def imitate(policy, data: tuple[np.ndarray, ...], seed: int, iters: int = 1000, batch: int = 512) -> float:
    """Maximum-likelihood fit of a policy to demonstrations (its own Adam, so PPO's optimiser
    state is untouched), until every demonstrated action is the policy's mode (each has
    probability above `MODE_LOGP`'s, checked on all of them every 25 steps: then the
    deterministic policy replays the demonstration exactly, where a good mean likelihood still
    lets one decision of thousands go astray) or `iters` steps. Returns the smallest
    log-likelihood of a demonstrated action. (Drawing half of each batch from the decisions
    not yet the mode fitted worse: 327 of 3,017 left on DCell(4,1), against 2 with uniform
    batches.)"""
    if not data or not len(data[0]):  # no decision to learn from (every choice was forced)
        return 0.0
    obs, masks, actions = (torch.as_tensor(x) for x in data)
    gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
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


class _Progress(BaseCallback):
    def __init__(self, advance) -> None:
        super().__init__()
        self.advance = advance

    def _on_step(self) -> bool:
        self.advance()
        return True


def train(cfg: TrainConfig, progress: bool = True) -> dict:
    """Train, checkpointing into `cfg.out` after every phase; returns the final metadata."""
    torch.set_num_threads(1)
    if cfg.steps <= 0 or cfg.phases <= 0:
        raise ArschedError("--steps and --phases must be positive")
    if not 0.0 < cfg.upper_share < 1.0:
        raise ArschedError(f"the upper level's share of the steps must be in (0, 1), got {cfg.upper_share}")
    topologies = [parse_spec(s) for s in cfg.topologies]
    states = [RoundState.create(t, cfg.chunks) for t in topologies]
    for s in states:
        ft.check_size(s)
    greedy = [run_episode(s.reset(), all_trees, first_candidate).rounds for s in states]

    envs = {
        "lower": WorkloadEnv(topologies, chunks=cfg.chunks),
        "upper": TreeSelectEnv(topologies, chunks=cfg.chunks),
    }
    models = {
        lv: MaskablePPO(
            HrlPolicy,
            envs[lv],
            learning_rate=cfg.learning_rate,
            n_epochs=cfg.n_epochs,
            gamma=cfg.gamma,
            ent_coef=cfg.ent_coef,
            seed=cfg.seed + i,
            device="cpu",
            policy_kwargs=policy_kwargs(lv, cfg.net_arch),
            **PPO_SETTINGS[lv],
        )
        for i, lv in enumerate(LEVELS)
    }
    policies = {lv: models[lv].policy for lv in LEVELS}
    envs["lower"].upper = Actor(policies["upper"], "upper")
    envs["upper"].lower = Actor(policies["lower"], "lower")

    meta = {
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
    log_rows: list[dict] = []
    out = Path(cfg.out)
    if cfg.resume and (out / checkpoint.META).is_file():
        meta, log_rows = _resume(out, cfg, models, meta)
    elif cfg.resume:
        raise ArschedError(f"cannot resume: {out} holds no checkpoint")
    t0 = time.perf_counter() - meta["train_seconds"]

    def finish_phase(
        phase: int, level: str, timesteps: int, rounds: list[int], accepted: bool, explored: list[int] = ()
    ) -> None:
        meta["train_seconds"] = round(time.perf_counter() - t0, 3)
        score = float(np.mean(np.array(rounds) / np.array(greedy)))
        log_rows.append(
            {
                "phase": phase,
                "level": level,
                "timesteps": timesteps,
                "wall_s": meta["train_seconds"],
                "score": f"{score:.4f}",
                "rounds": " ".join(map(str, rounds)),
                "greedy_rounds": " ".join(map(str, greedy)),
                "accepted": int(accepted),
                "explored_rounds": " ".join(map(str, explored)),
            }
        )
        if accepted:
            meta.update(best_score=score, rounds=rounds)
        checkpoint.save(out, policies, {lv: policies[lv].optimizer for lv in LEVELS}, meta)
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=LOG_FIELDS)
        writer.writeheader()
        writer.writerows(log_rows)
        write_atomic(out / "log.csv", buf.getvalue())

    out.mkdir(parents=True, exist_ok=True)
    if meta["phases_done"] == 0 and not log_rows:
        if cfg.warm_start:
            demos = greedy_demonstrations(states)
            for i, lv in enumerate(LEVELS):
                imitate(policies[lv], demos[lv], cfg.seed + i, cfg.imitation_iters)
        finish_phase(0, "imitation" if cfg.warm_start else "init", 0, evaluate(policies, states), True)

    total = sum(cfg.phase_steps(p) for p in range(meta["phases_done"], cfg.phases))
    with _bar(progress) as bar:
        task = bar.add_task("training hrl", total=total)
        for phase in range(meta["phases_done"], cfg.phases):
            level = LEVELS[phase % 2]
            bar.update(task, description=f"phase {phase + 1}/{cfg.phases}: {level} level")
            before = copy.deepcopy(policies[level].state_dict())
            n = cfg.phase_steps(phase)
            models[level].learn(n, callback=_Progress(lambda: bar.advance(task)), reset_num_timesteps=False)
            rounds = evaluate(policies, states)
            score = float(np.mean(np.array(rounds) / np.array(greedy)))
            accepted = score <= meta["best_score"]
            if not accepted:
                policies[level].load_state_dict(before)
            if cfg.self_imitation > 0:
                finish_phase(phase + 1, level, n, rounds, accepted)
                before = {lv: copy.deepcopy(policies[lv].state_dict()) for lv in LEVELS}
                demos, explored = best_sampled_episodes(
                    policies, states, cfg.self_imitation, cfg.seed * 7919 + phase, cfg.explore
                )
                for i, lv in enumerate(LEVELS):
                    imitate(policies[lv], demos[lv], cfg.seed + phase + i, cfg.imitation_iters)
                rounds = evaluate(policies, states)
                score = float(np.mean(np.array(rounds) / np.array(greedy)))
                accepted = score <= meta["best_score"]
                if not accepted:
                    for lv in LEVELS:
                        policies[lv].load_state_dict(before[lv])
                level, n = "self-imitation", 0
            else:
                explored = []
            meta["phases_done"] = phase + 1
            finish_phase(phase + 1, level, n, rounds, accepted, explored)
    return meta


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


def _bar(enabled: bool):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        disable=not enabled,
        transient=False,
    )
