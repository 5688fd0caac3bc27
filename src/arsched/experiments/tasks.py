"""Task kinds: how a config block becomes tasks, and how one task becomes one result row.

A kind is registered with its parameter columns, its result columns, an `expand` function (run
block -> parameter dicts) and a `run` function (parameters, results folder, task id -> result
dict; a task that writes files of its own, an RL checkpoint, writes them under the results
folder keyed by its id). A task's id is a hash of its kind and parameters, so the same config
always yields the same ids and a sweep can skip what it has already done. A kind that needs an
optional extra (`rl`: torch and sb3-contrib) says so in one sentence when it is missing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np

from arsched.errors import ArschedError
from arsched.experiments.config import AlgorithmRuns, ClusterRuns, Config, RLTrainings, takes_seed


@dataclass(frozen=True)
class Task:
    """One unit of work: a kind and its parameters (plain JSON values)."""

    kind: str
    params: tuple[tuple[str, Any], ...]

    @property
    def id(self) -> str:
        blob = json.dumps([self.kind, dict(self.params)], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def describe(self) -> str:
        return f"{self.kind} " + " ".join(f"{k}={v}" for k, v in self.params if v not in ("", None, "{}"))


Run = Callable[[dict[str, Any], Path, str], dict[str, Any]]


@dataclass(frozen=True)
class Kind:
    """A registered task kind. `requires` names a module the kind cannot run without, and
    `extra` the pip extra that installs it."""

    name: str
    params: tuple[str, ...]
    results: tuple[str, ...]
    expand: Callable[[Any], list[dict[str, Any]]]
    run: Run
    requires: str | None = None
    extra: str = ""

    @property
    def columns(self) -> tuple[str, ...]:
        return ("task_id", *self.params, *self.results, "wall_s")

    def check_available(self) -> None:
        if self.requires and importlib.util.find_spec(self.requires) is None:
            raise ArschedError(
                f"{self.name} runs need the {self.requires} package, which this installation does "
                f"not have: pip install 'arsched[{self.extra}]' or remove the block"
            )


KINDS: dict[str, Kind] = {}


def register_kind(kind: Kind) -> Kind:
    if kind.name in KINDS:
        raise ValueError(f"task kind {kind.name!r} is registered twice")
    KINDS[kind.name] = kind
    return kind


def expand(config: Config) -> list[Task]:
    """Every task of a config, in config order, without duplicates."""
    tasks: dict[str, Task] = {}
    for block in config.runs:
        kind = KINDS[block.kind]
        kind.check_available()
        for p in kind.expand(block):
            task = Task(kind.name, tuple((c, p[c]) for c in kind.params))
            tasks.setdefault(task.id, task)
    return list(tasks.values())


def execute(task: Task, folder: str | Path = ".") -> tuple[str, dict[str, Any] | None, str | None]:
    """Run a task whose sweep writes into `folder`: (id, row, None) or (id, None, error sentence).
    Safe to call in a worker."""
    t0 = time.perf_counter()
    params = dict(task.params)
    try:
        result = KINDS[task.kind].run(params, Path(folder), task.id)
    except Exception as e:  # reported per task; the sweep goes on
        return task.id, None, f"{type(e).__name__}: {e}"
    return task.id, {"task_id": task.id, **params, **result, "wall_s": time.perf_counter() - t0}, None


# ---------------------------------------------------------------- algorithm runs


def _with_seed(spec: str, seed: int) -> str | None:
    """The spec with `seed=` added if its family is random and the spec does not fix a seed."""
    from arsched.topology.spec import FAMILIES

    family, _, rest = spec.partition(":")
    if family not in FAMILIES or not takes_seed(FAMILIES[family]):
        return None
    if any(item.split("=")[0].strip() == "seed" for item in rest.split(",")):
        return None
    return f"{spec},seed={seed}" if rest.strip() else f"{family}:seed={seed}"


def _expand_algorithm(block: AlgorithmRuns) -> list[dict[str, Any]]:
    """The grid; seeds multiply only runs where the topology or the algorithm is random."""
    from arsched.algorithms import get

    out = []
    for spec in block.topologies:
        for alg in block.algorithms:
            random_alg = takes_seed(get(alg.name).build) and "seed" not in alg.params
            seeded = [(s, _with_seed(spec, s)) for s in block.seeds]
            random_topo = seeded[0][1] is not None
            runs = seeded if random_topo or random_alg else [("", None)]
            for seed, seeded_spec in runs:
                params = dict(alg.params) | ({"seed": seed} if random_alg else {})
                for size in block.sizes:
                    for model in block.models:
                        for fifo in block.fifo if model == "flow" else [False]:
                            out.append(
                                {
                                    "spec": spec,
                                    "topology": seeded_spec or spec,
                                    "algorithm": alg.name,
                                    "label": alg.label or alg.name,
                                    "params": json.dumps(params, sort_keys=True),
                                    "seed": seed,
                                    "size": size,
                                    "model": model,
                                    "fifo": fifo,
                                    "alpha": block.alpha or "",
                                }
                            )
    return out


@lru_cache(maxsize=32)
def _topology(spec: str):
    """Topologies are built once per worker process (their bound computations are cached too)."""
    from arsched.topology import parse_spec

    return parse_spec(spec)


def _run_algorithm(p: dict[str, Any], _folder: Path, _task_id: str) -> dict[str, Any]:
    from arsched.algorithms.evaluate import run_one
    from arsched.units import parse_size, parse_time

    topo = _topology(p["topology"])
    alpha = parse_time(p["alpha"]) if p["alpha"] else None
    row = run_one(
        topo, p["algorithm"], parse_size(p["size"]), p["model"], alpha, p["fifo"], json.loads(p["params"])
    )
    rounds = row.rounds if row.rounds is not None else ""
    return {
        "topology_name": topo.name,
        "ranks": len(topo.servers),
        "bytes": row.bytes,
        "time_s": row.time_s,
        "bound_s": row.bound_s,
        "gap": row.gap,
        "rounds": rounds,
        # the bound in rounds of this schedule's average length: rounds / gap
        "bound_rounds": row.rounds * row.bound_s / row.time_s if row.rounds and row.time_s > 0 else "",
        "busbw": row.busbw,
        "transfers": row.transfers,
        "synthesis_s": row.synthesis_s,
        "note": row.note,
    }


register_kind(
    Kind(
        "algorithm",
        ("spec", "topology", "algorithm", "label", "params", "seed", "size", "model", "fifo", "alpha"),
        (
            "topology_name",
            "ranks",
            "bytes",
            "time_s",
            "bound_s",
            "gap",
            "rounds",
            "bound_rounds",
            "busbw",
            "transfers",
            "synthesis_s",
            "note",
        ),
        _expand_algorithm,
        _run_algorithm,
    )
)

# ---------------------------------------------------------------- cluster runs

# Points kept of a run's GPU-utilisation series (slots averaged in equal groups) for the report.
UTILIZATION_POINTS = 200


def _expand_cluster(block: ClusterRuns) -> list[dict[str, Any]]:
    """The grid; seeds multiply only schedulers that draw random numbers (the others run once,
    with seed "")."""
    from arsched.cluster.schedulers import get_scheduler

    out = []
    for trace, cluster, scheduler, objective, network in product(
        block.traces, block.clusters, block.schedulers, block.objectives, block.networks
    ):
        seeds = block.seeds if get_scheduler(scheduler).uses_seed else [""]
        for seed in seeds:
            out.append(
                {
                    "trace": trace,
                    "cluster": cluster,
                    "scheduler": scheduler,
                    "objective": objective,
                    "network": network,
                    "seed": seed,
                }
            )
    return out


def _jct_json(jct: np.ndarray) -> str:
    """Every job's JCT in trace order, to the millisecond; null for a job that did not finish."""
    return json.dumps([round(float(j), 3) if np.isfinite(j) else None for j in jct], separators=(",", ":"))


def _utilization_json(starts: np.ndarray, util: np.ndarray, points: int = UTILIZATION_POINTS) -> str:
    """{"t_s": [...], "u": [...]}: the busy fraction of the GPUs, averaged over at most `points`
    equal groups of consecutive slots (slots are equally long), each at its first slot's start."""
    edges = np.linspace(0, len(util), min(len(util), points) + 1).astype(int)[:-1]
    mean = np.add.reduceat(util, edges) / np.diff([*edges, len(util)]) if len(util) else util
    data = {"t_s": [round(float(t), 1) for t in starts[edges]], "u": [round(float(u), 4) for u in mean]}
    return json.dumps(data, separators=(",", ":"))


def _run_cluster(p: dict[str, Any], _folder: Path, _task_id: str) -> dict[str, Any]:
    """`arsched cluster run --json` of one trace, cluster, scheduler, objective, network mode and
    seed, with the slot length, every job's JCT and the utilisation series for the report."""
    from arsched.cluster import SimConfig, load_trace, parse_cluster, simulate
    from arsched.cluster.schedulers import get_scheduler
    from arsched.cluster.utility import Objective

    workload, _ = load_trace(p["trace"])
    config = SimConfig(network=p["network"], objective=Objective(p["objective"]), seed=p["seed"] or 0)
    res = simulate(workload, parse_cluster(p["cluster"]), get_scheduler(p["scheduler"]), config)
    return {
        **res.to_json(),
        "slot_s": res.slot_s,
        "jct_s": _jct_json(res.jct),
        "utilization": _utilization_json(res.slot_starts, res.utilization),
    }


register_kind(
    Kind(
        "cluster",
        ("trace", "cluster", "scheduler", "objective", "network", "seed"),
        (
            "jobs",
            "finished",
            "avg_jct_s",
            "p95_jct_s",
            "makespan_s",
            "total_utility",
            "gpu_utilization",
            "energy_kwh",
            "jain_index",
            "scheduler_s_per_slot",
            "slot_s",
            "jct_s",
            "utilization",
        ),
        _expand_cluster,
        _run_cluster,
    )
)

# ---------------------------------------------------------------- RL trainings


def _expand_rl(block: RLTrainings) -> list[dict[str, Any]]:
    return [
        {"topology": spec, "seed": seed, "steps": block.steps, "size": block.size}
        for spec, seed in product(block.topologies, block.seeds)
    ]


def checkpoint_folder(folder: str | Path, task_id: str) -> Path:
    """Where an RL task keeps its checkpoint: `<results folder>/checkpoints/<task id>`."""
    return Path(folder) / "checkpoints" / task_id


def _trained(path: Path, config: Any) -> dict[str, Any] | None:
    """The metadata of a checkpoint at `path` that finished every phase of this very training,
    else None."""
    from arsched.rl import checkpoint

    if not (path / checkpoint.META).is_file():
        return None
    meta = checkpoint.read_meta(path)
    same = all(meta.get(k) == getattr(config, k) for k in ("seed", "steps", "phases"))
    done = meta.get("phases_done") == config.phases and meta.get("topologies") == list(config.topologies)
    return meta if same and done else None


def _run_rl(p: dict[str, Any], folder: Path, task_id: str) -> dict[str, Any]:
    """Train `hrl` on one topology into the task's checkpoint folder (kept: a finished training
    is not repeated; one cut short starts afresh, so the weights never depend on where it was
    cut), then build, validate and simulate it beside greedy-trees in both models."""
    from arsched.algorithms.evaluate import run_one
    from arsched.rl.training import TrainConfig, train
    from arsched.units import parse_size

    path = checkpoint_folder(folder, task_id)
    config = TrainConfig(topologies=[p["topology"]], steps=p["steps"], out=path, seed=p["seed"])
    meta = _trained(path, config)
    if meta is None:
        shutil.rmtree(path, ignore_errors=True)
        meta = train(config, progress=False)
    topo = _topology(p["topology"])
    size = parse_size(p["size"])
    hrl = {m: run_one(topo, "hrl", size, m, params={"checkpoint": str(path)}) for m in ("rounds", "flow")}
    greedy = {m: run_one(topo, "greedy-trees", size, m) for m in ("rounds", "flow")}
    if hrl["flow"].note:
        raise ArschedError(f"hrl did not apply to {p['topology']}: {hrl['flow'].note}")
    return {
        "topology_name": topo.name,
        "ranks": len(topo.servers),
        "checkpoint": path.relative_to(folder).as_posix(),
        "rounds": hrl["rounds"].rounds,
        "greedy_rounds": greedy["rounds"].rounds,
        "gap": hrl["flow"].gap,
        "greedy_gap": greedy["flow"].gap,
        "time_s": hrl["flow"].time_s,
        "bound_s": hrl["flow"].bound_s,
        "train_s": meta["train_seconds"],
    }


register_kind(
    Kind(
        "rl",
        ("topology", "seed", "steps", "size"),
        (
            "topology_name",
            "ranks",
            "checkpoint",
            "rounds",
            "greedy_rounds",
            "gap",
            "greedy_gap",
            "time_s",
            "bound_s",
            "train_s",
        ),
        _expand_rl,
        _run_rl,
        requires="sb3_contrib",
        extra="rl",
    )
)

# Columns whose values depend on the machine's speed, not on the inputs.
TIMING_COLUMNS = frozenset({"wall_s", "synthesis_s", "train_s", "scheduler_s_per_slot"})
