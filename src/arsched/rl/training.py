"""Training the learned scheduler: a warm start by imitation, then group-relative clipped
policy gradient with the flow model's time as the reward.

1. Warm start (`warm_start`): both networks fit the decisions of each training network's best
   fixed plan (`rollout.best_plan`: the fastest chunk option, tree shape and round rule, of
   which greedy-trees' is one) by maximum likelihood, so learning starts from the best
   heuristic; with `shared_teacher`, of the plans of one kind shared by all (`teachers`).
   Without it the networks start from their random initial weights (cold start).
2. Each iteration samples a group of `group` episodes on every training network from the
   current policy; each episode's reward is minus its gap (flow-model time over the bound,
   `arsched.rl.rollout`), and its advantage is that reward's standard score within its group
   — the group's mean is the baseline, as in POMO (Kwon et al., 2020) and GRPO (Shao et al.,
   2024); no value network has to learn what a schedule on a network it never saw is worth.
   Then `epochs` passes of PPO's clipped objective (Schulman et al., 2017) over every decision
   of the group, each decision's ratio against its log-probability when it was sampled.
   Then, whenever sampling found an episode better than any before on a network, the policy
   distils it (expert iteration, Anthony et al., 2017; self-imitation, Oh et al., 2018): passes
   of maximum likelihood over every network's best episode so far (the best plan's at first,
   when warm-started) until the deterministic policy replays each of them or `distill` passes
   are spent. The policy's mode then is the best schedule found and its samples explore around
   it. Without it a schedule found once by sampling was lost again unless the group's noisy
   advantages happened to push towards it (bench_rl's `warm samples` beat the trained policy on
   most instances).
3. Every `evaluate_every` iterations (and at the end) the deterministic policy runs on every
   training network; the weights with the lowest mean gap so far are what the checkpoint
   holds (model selection on the training networks only), and `log.csv` gets a line.

An episode is tens to hundreds of decisions (a chunk option, a tree per chunk, a round per
step), so every update sees whole episodes. Everything random is drawn from `Seeds`: one seed
reproduces the whole training, byte for byte, on one thread.
"""

from __future__ import annotations

import copy
import csv
import io
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from arsched.algorithms import build
from arsched.algorithms.flowtrees import SHAPES
from arsched.defaults import DEFAULT_ALPHA
from arsched.fileio import write_atomic
from arsched.rl import checkpoint
from arsched.rl.config import Seeds, TrainConfig
from arsched.rl.episode import RoundGraph
from arsched.rl.instance import Instance
from arsched.rl.nets import Policy, choice_log_probs, release_log_prob
from arsched.rl.rollout import LEVELS, Timer, Trajectory, best_plan, option_plans, run
from arsched.topology import parse_spec

log = logging.getLogger(__name__)

LOG_FIELDS = ["iteration", "episodes", "simulations", "wall_s", "sampled_gap", "policy_gap", "best_gap"]

DISTILL_CHECK = 10  # imitation passes between checks that the policy replays its elites

ProgressHook = Callable[[str, int, int], None]
"""Called with (what runs now, episodes done, episodes in total)."""


def merge(graphs: Sequence[RoundGraph]) -> RoundGraph:
    """The disjoint union of round graphs (flows and links renumbered consecutively), so that
    one forward pass scores every round of an episode."""
    flow_off = np.cumsum([0, *(len(g.flows) for g in graphs)])
    link_off = np.cumsum([0, *(len(g.x_link) for g in graphs)])
    return RoundGraph(
        np.concatenate([g.flows for g in graphs]),
        np.concatenate([g.x_flow for g in graphs]),
        np.concatenate([g.x_link for g in graphs]),
        np.concatenate([g.edge_flow + flow_off[i] for i, g in enumerate(graphs)]),
        np.concatenate([g.edge_link + link_off[i] for i, g in enumerate(graphs)]),
    )


class Decisions:
    """A trajectory's decisions prepared for recomputing their log-probabilities: the upper
    level's rows, the lower level's rounds as one merged graph with every flow's release.
    Rounds of one available flow are left out (it goes whatever the scores); with `most`, at
    most that many of the others, drawn with `rng` (an unbiased sample of the decisions: long
    episodes' updates cost what short ones' do)."""

    def __init__(
        self,
        traj: Trajectory,
        most: int | None = None,
        rng: np.random.Generator | None = None,
        levels: tuple[str, ...] = LEVELS,
    ) -> None:
        self.levels = levels
        kinds = [k for k, _, _ in traj.choices]
        self.chunk_rows = torch.as_tensor(traj.choices[0][1])
        self.chunk_choice = traj.choices[0][2]
        assert kinds[0] == "chunks" and all(k == "tree" for k in kinds[1:])
        self.tree_rows = torch.as_tensor(np.stack([r for _, r, _ in traj.choices[1:]]))
        self.tree_choice = torch.as_tensor([c for _, _, c in traj.choices[1:]])
        chosen = [i for i, (g, _, _) in enumerate(traj.rounds) if len(g.flows) > 1 and "lower" in levels]
        if most is not None and len(chosen) > most:
            chosen = sorted(rng.choice(chosen, most, replace=False).tolist())
        rounds = [traj.rounds[i] for i in chosen]
        self.graph = merge([g for g, _, _ in rounds]) if rounds else None
        self.rounds = len(rounds)
        if rounds:
            self.released = torch.as_tensor(np.concatenate([go for _, go, _ in rounds]))
            sizes = [len(go) for _, go, _ in rounds]
            self.round_of = torch.as_tensor(np.repeat(np.arange(len(rounds)), sizes))
            self.lone = torch.as_tensor([lone for _, _, lone in rounds])

    def log_probs(self, policy: Policy) -> torch.Tensor:
        """Per decision of the levels (the chunk option, each tree, each round with a choice), its
        log-probability."""
        parts = []
        if "upper" in self.levels:
            explore = policy.explore
            chunks = choice_log_probs(policy.option_logits(self.chunk_rows, "chunks"), 0, explore)
            chunks = chunks[self.chunk_choice]
            trees = choice_log_probs(policy.option_logits(self.tree_rows, "tree"), 1, explore)
            parts += [chunks.unsqueeze(0), trees.gather(1, self.tree_choice.unsqueeze(1)).squeeze(1)]
        if self.rounds:
            scores = policy.round_scores(self.graph)
            parts.append(
                release_log_prob(scores, self.released, self.lone, self.round_of, self.rounds, policy.explore)
            )
        return torch.cat(parts) if parts else torch.zeros(0)


def imitate(
    policy: Policy,
    optimizer: torch.optim.Optimizer,
    teachers: Sequence[Trajectory],
    epochs: int,
    most: int | None = None,
    seed: int = 0,
) -> float:
    """Fit greedy-trees' decisions (maximum likelihood; each pass over at most `most` rounds of
    each teacher, drawn anew); returns the last mean log-likelihood."""
    rng = np.random.default_rng(seed)
    mean = 0.0
    for _ in range(epochs):
        total = 0.0
        for t in teachers:
            lp = Decisions(t, most, rng).log_probs(policy)
            loss = -lp.mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(lp.detach().mean())
        mean = total / len(teachers)
    return mean


def replays(policy: Policy, traj: Trajectory) -> bool:
    """Does the deterministic policy make this episode's schedule (transfer for transfer)?"""
    mine = run(traj.instance, policy, None).schedule
    return all(
        np.array_equal(getattr(mine, f), getattr(traj.schedule, f))
        for f in ("step", "chunk", "src", "dst", "op")
    )


def distill(
    policy: Policy,
    optimizer: torch.optim.Optimizer,
    elites: Sequence[Trajectory],
    passes: int,
    most: int | None,
    seed: int,
) -> int:
    """Imitate the `elites` (every network's best episode) until the deterministic policy
    replays all of them, checked every `DISTILL_CHECK` passes, or `passes` are spent; returns
    the passes taken."""
    done = 0
    while done < passes and not all(replays(policy, t) for t in elites):
        step = min(DISTILL_CHECK, passes - done)
        imitate(policy, optimizer, elites, step, most, seed + done)
        done += step
    return done


def advantages(gaps: np.ndarray) -> np.ndarray:
    """Each episode's standard score within its group, lower gaps better (zeros if all tie)."""
    spread = gaps.std()
    if spread < 1e-9 * max(float(gaps.mean()), 1.0):
        return np.zeros_like(gaps)
    return (gaps.mean() - gaps) / spread


def update(
    policy: Policy,
    optimizer: torch.optim.Optimizer,
    group: Sequence[Trajectory],
    cfg: TrainConfig,
    rng: np.random.Generator,
) -> None:
    """`cfg.epochs` passes of the clipped objective over the group's decisions (at most
    `cfg.max_rounds` rounds of each episode, drawn with `rng`)."""
    adv = advantages(np.array([t.gap for t in group]))
    if not adv.any():
        return
    prepared = [Decisions(t, cfg.max_rounds, rng, t.levels) for t in group]
    with torch.no_grad():
        old = [d.log_probs(policy) for d in prepared]
    for _ in range(cfg.epochs):
        loss = torch.zeros(())
        count = 0
        for d, before, a in zip(prepared, old, adv.tolist(), strict=True):
            ratio = torch.exp(d.log_probs(policy) - before)
            surrogate = torch.minimum(ratio * a, ratio.clamp(1 - cfg.clip, 1 + cfg.clip) * a)
            loss = loss - surrogate.sum()
            count += len(ratio)
        if count == 0:
            return
        optimizer.zero_grad()
        (loss / count).backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()


def teachers(
    instances: Sequence[Instance], timer: Timer, shapes: Sequence[str] = ()
) -> tuple[list[Trajectory], str]:
    """What the warm start imitates on each training network, and the plan kind they share. On
    one network, its best plan. On several, their best plans ask for chunk options and tree
    shapes that the features do not tell apart (one stage on one network and stages on a
    similar one; ring chains, the best trees on small networks and the worst on large ones),
    and a policy that imitates them all learns an average that fits none: one stage
    everywhere, or chains on networks of 30 ranks (docs/architecture.md, "Where imitation
    stops"). So the teachers share one kind of plan, a tree shape with either one stage (each
    network's fastest such plan) or one pipelined chunk count in one number of stages:
    whichever is slower than the networks' best plans by the least on average over the
    networks that have pipelined options (a kind counts only if each of them has it; a
    network without pipelined options keeps its best plan; "best" where all do). With
    `shapes`, the kind is the chunk option alone and each network's teacher takes the fastest
    of those shapes on it: the tree shape is then the network's, which the load features
    show (shortest-path trees where they load no link more than shallow ones do)."""
    piped = [n for n, inst in enumerate(instances) if any(s > 1 for _, s in inst.chunk_options)]
    if len(instances) == 1 or not piped:
        return [best_plan(inst, timer) for inst in instances], "best"
    plans = {n: option_plans(instances[n], timer) for n in piped}
    allowed = [SHAPES.index(x) for x in shapes] or list(range(len(SHAPES)))

    def kind(inst: Instance, k: int, s: int) -> tuple[int, ...]:
        count, stages = inst.chunk_options[k]
        option = (0, 1) if stages == 1 else (count, stages)
        return option if shapes else (s, *option)

    def pick(n: int, want: tuple[int, ...]) -> Trajectory | None:
        row = [p for (k, s), p in plans[n].items() if s in allowed and kind(instances[n], k, s) == want]
        return min(row, key=lambda p: p.time_s) if row else None

    kinds = sorted({kind(instances[n], k, s) for n in piped for k, s in plans[n] if s in allowed})
    shared = [w for w in kinds if all(pick(n, w) is not None for n in piped)]
    cost = {
        w: np.mean([pick(n, w).time_s / best_plan(instances[n], timer).time_s for n in piped]) for w in shared
    }
    want = min(shared, key=lambda w: cost[w])  # the first at ties
    chosen = [pick(n, want) if n in piped else best_plan(inst, timer) for n, inst in enumerate(instances)]
    count, stages = want[-2:]
    option = "one stage" if count == 0 else f"{count} chunks in {stages} stages"
    trees = f"{' or '.join(shapes)} trees (each network's fastest)" if shapes else f"{SHAPES[want[0]]} trees"
    return chosen, f"{trees}, {option}"


def greedy_gaps(instances: Sequence[Instance], timer: Timer) -> list[float]:
    """greedy-trees' own schedules' gaps (with its round swaps), for the log and the metadata."""
    gaps = []
    for inst in instances:
        t, b = timer.time(build("greedy-trees", inst.topology, inst.ranks, inst.nbytes))
        gaps.append(t / b)
    return gaps


def train(cfg: TrainConfig, progress: ProgressHook | None = None) -> dict:
    """Train, write the checkpoint to `cfg.out` and return its metadata."""
    torch.set_num_threads(1)
    seeds = Seeds(cfg.seed)
    torch.manual_seed(seeds.networks())
    alpha = DEFAULT_ALPHA if cfg.alpha is None else cfg.alpha
    instances = [Instance(parse_spec(s), None, cfg.nbytes, s) for s in cfg.topologies]
    timer = Timer(alpha)
    policy = Policy.create(cfg.hidden, cfg.layers, cfg.temperature, cfg.explore)
    t0 = time.perf_counter()
    rows: list[dict] = []
    baseline = greedy_gaps(instances, timer)
    elites: list[Trajectory | None] = [None] * len(instances)  # each network's best episode so far
    if cfg.shared_teacher:
        teaching, shared = teachers(instances, timer, cfg.teacher_shapes)
    else:
        teaching, shared = [best_plan(inst, timer) for inst in instances], "best"
    if cfg.warm_start:
        elites = list(teaching)
        warm = torch.optim.Adam(policy.parameters(), lr=cfg.imitation_rate)
        imitate(policy, warm, teaching, cfg.imitation_epochs, cfg.max_rounds, seeds.imitation())
    optimizer = torch.optim.Adam(policy.parameters(), lr=cfg.learning_rate)

    found = False  # a better episode since the last distillation

    def keep_best(n: int, episodes: Sequence[Trajectory]) -> None:
        nonlocal found
        for t in episodes:
            if elites[n] is None or t.gap < elites[n].gap:
                elites[n], found = t, True

    def evaluate() -> list[float]:
        runs = [run(inst, policy, timer) for inst in instances]
        for n, t in enumerate(runs):
            keep_best(n, [t])
        return [t.gap for t in runs]

    best_gaps = evaluate()
    best = (float(np.mean(best_gaps)), copy.deepcopy(policy.state()))
    done = 0
    rows.append(_row(0, 0, timer, t0, float("nan"), best[0], best[0]))
    for it in range(1, cfg.iterations + 1):
        sampled = []
        for n, inst in enumerate(instances):
            if progress:
                progress(f"iteration {it}: {inst.name}", done, cfg.episodes)
            rng = np.random.default_rng(seeds.episodes(it, n))
            levels = (LEVELS[(it - 1) % 2],) if cfg.alternate else LEVELS
            group = [run(inst, policy, timer, "sample", rng, levels=levels) for _ in range(cfg.group)]
            update(policy, optimizer, group, cfg, rng)
            keep_best(n, group)
            sampled += [t.gap for t in group]
            done += cfg.group
        if found and cfg.distill:
            distill(
                policy, optimizer, elites, cfg.distill, cfg.max_rounds, seeds.episodes(it, len(instances))
            )
            found = False
        if it % cfg.evaluate_every == 0 or it == cfg.iterations:
            gaps = evaluate()
            if float(np.mean(gaps)) < best[0]:
                best, best_gaps = (float(np.mean(gaps)), copy.deepcopy(policy.state())), gaps
            rows.append(
                {
                    "iteration": it,
                    "episodes": done,
                    "simulations": timer.calls,
                    "wall_s": round(time.perf_counter() - t0, 2),
                    "sampled_gap": round(float(np.mean(sampled)), 5),
                    "policy_gap": round(float(np.mean(gaps)), 5),
                    "best_gap": round(best[0], 5),
                }
            )
            log.info(
                "iteration %d: sampled %.4f, policy %.4f, best %.4f",
                it,
                np.mean(sampled),
                np.mean(gaps),
                best[0],
            )
    policy.upper.load_state_dict(best[1]["upper"])
    policy.lower.load_state_dict(best[1]["lower"])
    if progress:
        progress("done", done, cfg.episodes)
    meta = {
        "topologies": list(cfg.topologies),
        "seed": cfg.seed,
        "iterations": cfg.iterations,
        "group": cfg.group,
        "nbytes": cfg.nbytes,
        "alpha": alpha,
        "warm_start": cfg.warm_start,
        "shared_teacher": cfg.shared_teacher,
        "teacher_shapes": list(cfg.teacher_shapes),
        "imitation_epochs": cfg.imitation_epochs,
        "hidden": cfg.hidden,
        "layers": cfg.layers,
        "temperature": cfg.temperature,
        "explore": cfg.explore,
        "max_rounds": cfg.max_rounds,
        "learning_rate": cfg.learning_rate,
        "imitation_rate": cfg.imitation_rate,
        "alternate": cfg.alternate,
        "epochs": cfg.epochs,
        "distill": cfg.distill,
        "clip": cfg.clip,
        "episodes": done,
        "simulations": timer.calls,
        "gaps": [round(g, 6) for g in best_gaps],
        "greedy_gaps": [round(g, 6) for g in baseline],
        "best_plan_gaps": [round(best_plan(inst, timer).gap, 6) for inst in instances],
        "teacher_gaps": [round(t.gap, 6) for t in teaching],
        "teacher_option": shared,
        "train_seconds": round(time.perf_counter() - t0, 2),
        **cfg.extra_meta,
    }
    checkpoint.save(Path(cfg.out), policy, meta)
    write_atomic(Path(cfg.out) / "log.csv", _csv(rows))
    return meta


def _row(it: int, episodes: int, timer: Timer, t0: float, sampled: float, policy: float, best: float) -> dict:
    """A line of log.csv (the sampled gap is empty before the first iteration)."""
    return {
        "iteration": it,
        "episodes": episodes,
        "simulations": timer.calls,
        "wall_s": round(time.perf_counter() - t0, 2),
        "sampled_gap": "" if np.isnan(sampled) else round(sampled, 5),
        "policy_gap": round(policy, 5),
        "best_gap": round(best, 5),
    }


def _csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, LOG_FIELDS, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()
