"""The `rl` task kind: train the hierarchical RL scheduler (`hrl`) on one topology and compare
its schedule with greedy-trees'. Needs the `rl` extra (torch)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any

from arsched.errors import ArschedError
from arsched.experiments.config import RLTrainings
from arsched.experiments.tasks.base import Kind, topology


@dataclass(frozen=True)
class RLParams:
    topology: str
    seed: int
    iterations: int
    size: str


@dataclass(frozen=True)
class RLRow:
    """`checkpoint` is relative to the results folder; rounds and gaps of hrl and greedy-trees."""

    topology_name: str
    ranks: int
    checkpoint: str
    rounds: int
    greedy_rounds: int
    gap: float
    greedy_gap: float
    time_s: float
    bound_s: float
    train_s: float


def expand(block: RLTrainings) -> Iterator[RLParams]:
    return (
        RLParams(spec, seed, block.iterations, block.size)
        for spec, seed in product(block.topologies, block.seeds)
    )


def checkpoint_folder(folder: str | Path, task_id: str) -> Path:
    """Where an RL task keeps its checkpoint: `<results folder>/checkpoints/<task id>`."""
    return Path(folder) / "checkpoints" / task_id


def _trained(path: Path, config: Any) -> dict[str, Any] | None:
    """The metadata of a checkpoint at `path` that finished this very training, else None (a
    checkpoint is written only at the end of a training)."""
    from arsched.rl import checkpoint

    if not (path / checkpoint.META).is_file():
        return None
    meta = checkpoint.read_meta(path)
    same = all(meta.get(k) == getattr(config, k) for k in ("seed", "iterations", "nbytes"))
    return meta if same and meta.get("topologies") == list(config.topologies) else None


def run(p: RLParams, folder: Path, task_id: str) -> RLRow:
    """Train `hrl` on one topology into the task's checkpoint folder (kept: a finished training
    is not repeated; one cut short starts afresh, so the weights never depend on where it was
    cut), then build, validate and simulate it beside greedy-trees in both models."""
    from arsched.algorithms.evaluate import evaluate
    from arsched.rl.training import TrainConfig, train
    from arsched.units import parse_size

    path = checkpoint_folder(folder, task_id)
    size = parse_size(p.size)
    config = TrainConfig([p.topology], iterations=p.iterations, out=path, seed=p.seed, nbytes=size)
    meta = _trained(path, config)
    if meta is None:
        shutil.rmtree(path, ignore_errors=True)
        meta = train(config)
    topo = topology(p.topology)
    own = {"checkpoint": str(path), "fallback": False}  # the policy's own schedule: what training made
    hrl = {m: evaluate(topo, "hrl", size, m, params=own) for m in ("rounds", "flow")}
    greedy = {m: evaluate(topo, "greedy-trees", size, m) for m in ("rounds", "flow")}
    if hrl["flow"].note:
        raise ArschedError(f"hrl did not apply to {p.topology}: {hrl['flow'].note}")
    return RLRow(
        topology_name=topo.name,
        ranks=len(topo.servers),
        checkpoint=path.relative_to(folder).as_posix(),
        rounds=hrl["rounds"].rounds,
        greedy_rounds=greedy["rounds"].rounds,
        gap=hrl["flow"].gap,
        greedy_gap=greedy["flow"].gap,
        time_s=hrl["flow"].time_s,
        bound_s=hrl["flow"].bound_s,
        train_s=meta["train_seconds"],
    )


KIND = Kind("rl", RLParams, RLRow, expand, run, timings=("train_s",), requires="torch", extra="rl")
