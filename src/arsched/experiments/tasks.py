"""Task kinds: how a config block becomes tasks, and how one task becomes one result row.

A kind is registered with its parameter columns, its result columns, an `expand` function (run
block -> parameter dicts) and a `run` function (parameters -> result dict). A task's id is a
hash of its kind and parameters, so the same config always yields the same ids and a sweep can
skip what it has already done. Kinds that need a package another part of arsched provides
(`arsched.cluster`, `arsched.rl`) say so in one sentence when that package is missing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from itertools import product
from typing import Any

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


@dataclass(frozen=True)
class Kind:
    """A registered task kind. `requires` names a package the kind cannot run without."""

    name: str
    params: tuple[str, ...]
    results: tuple[str, ...]
    expand: Callable[[Any], list[dict[str, Any]]]
    run: Callable[[dict[str, Any]], dict[str, Any]]
    requires: str | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        return ("task_id", *self.params, *self.results, "wall_s")

    def check_available(self) -> None:
        if self.requires and importlib.util.find_spec(self.requires) is None:
            raise ArschedError(
                f"{self.name} runs need the {self.requires} package, which this installation of "
                "arsched does not have yet; remove the block or update arsched"
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


def execute(task: Task) -> tuple[str, dict[str, Any] | None, str | None]:
    """Run a task: (id, row, None) or (id, None, error sentence). Safe to call in a worker."""
    t0 = time.perf_counter()
    params = dict(task.params)
    try:
        result = KINDS[task.kind].run(params)
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


def _run_algorithm(p: dict[str, Any]) -> dict[str, Any]:
    from arsched.compare import run_one
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

# ---------------------------------------------------------------- kinds from other packages


def _unavailable(kind: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The run of a kind whose package is missing: `expand` has refused it already, so this only
    guards direct calls."""

    def run(_: dict[str, Any]) -> dict[str, Any]:
        KINDS[kind].check_available()
        raise ArschedError(f"{kind} runs are not wired to this version of their package yet")

    return run


def _expand_cluster(block: ClusterRuns) -> list[dict[str, Any]]:
    return [
        {"trace": t, "cluster": c, "scheduler": s, "objective": o, "network": n, "seed": seed}
        for t, c, s, o, n, seed in product(
            block.traces, block.clusters, block.schedulers, block.objectives, block.networks, block.seeds
        )
    ]


def _expand_rl(block: RLTrainings) -> list[dict[str, Any]]:
    return [
        {"topology": spec, "seed": seed, "steps": block.steps, "size": block.size}
        for spec, seed in product(block.topologies, block.seeds)
    ]


register_kind(
    Kind(
        "cluster",
        ("trace", "cluster", "scheduler", "objective", "network", "seed"),
        ("jobs", "finished", "avg_jct_s", "p95_jct_s", "makespan_s", "total_utility", "gpu_utilization"),
        _expand_cluster,
        _unavailable("cluster"),
        requires="arsched.cluster",
    )
)
register_kind(
    Kind(
        "rl",
        ("topology", "seed", "steps", "size"),
        ("checkpoint", "rounds", "time_s", "bound_s", "gap", "train_s"),
        _expand_rl,
        _unavailable("rl"),
        requires="arsched.rl",
    )
)

# Columns whose values depend on the machine's speed, not on the inputs.
TIMING_COLUMNS = frozenset({"wall_s", "synthesis_s", "train_s", "scheduler_s_per_slot"})
