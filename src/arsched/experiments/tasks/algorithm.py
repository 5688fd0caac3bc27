"""The `algorithm` task kind: build one algorithm's schedule on one topology, validate it and
simulate it at one size in one model, beside the lower bound."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from arsched.experiments.config import AlgorithmRuns, takes_seed
from arsched.experiments.tasks.base import Kind, topology


@dataclass(frozen=True)
class AlgorithmParams:
    """One run of the grid. `spec` is the config's topology, `topology` the spec actually built
    (with `seed=` added for a random family); `params` is the algorithm's keywords as JSON."""

    spec: str
    topology: str
    algorithm: str
    label: str
    params: str
    seed: int | str
    size: str
    model: str
    fifo: bool
    alpha: str
    collective: str
    root: str


@dataclass(frozen=True)
class AlgorithmRow:
    topology_name: str
    ranks: int
    bytes: float
    time_s: float
    bound_s: float
    gap: float
    rounds: int | str
    bound_rounds: float | str  # the bound in rounds of this schedule's average length: rounds / gap
    busbw: float
    transfers: int
    synthesis_s: float
    note: str


def _with_seed(spec: str, seed: int) -> str | None:
    """The spec with `seed=` added if its family is random and the spec does not fix a seed."""
    from arsched.topology.spec import FAMILIES

    family, _, rest = spec.partition(":")
    if family not in FAMILIES or not takes_seed(FAMILIES[family]):
        return None
    if any(item.split("=")[0].strip() == "seed" for item in rest.split(",")):
        return None
    return f"{spec},seed={seed}" if rest.strip() else f"{family}:seed={seed}"


def expand(block: AlgorithmRuns) -> Iterator[AlgorithmParams]:
    """The grid; an algorithm runs for the collectives it builds; seeds multiply only runs where
    the topology or the algorithm is random."""
    from arsched.algorithms import get
    from arsched.collective.kinds import ROOTED

    for collective, spec, alg in itertools.product(block.collectives, block.topologies, block.algorithms):
        if collective not in get(alg.name).builders:
            continue
        random_alg = takes_seed(get(alg.name).builder(collective)) and "seed" not in alg.params
        seeded = [(s, _with_seed(spec, s)) for s in block.seeds]
        random_topo = seeded[0][1] is not None
        runs = seeded if random_topo or random_alg else [("", None)]
        for seed, seeded_spec in runs:
            params = dict(alg.params) | ({"seed": seed} if random_alg else {})
            for size, model in itertools.product(block.sizes, block.models):
                for fifo in block.fifo if model == "flow" else [False]:
                    yield AlgorithmParams(
                        spec=spec,
                        topology=seeded_spec or spec,
                        algorithm=alg.name,
                        label=alg.label or alg.name,
                        params=json.dumps(params, sort_keys=True),
                        seed=seed,
                        size=size,
                        model=model,
                        fifo=fifo,
                        alpha=block.alpha or "",
                        collective=collective,
                        root=(block.root or "") if collective in ROOTED else "",
                    )


def run(p: AlgorithmParams, _folder: Path, _task_id: str) -> AlgorithmRow:
    from arsched.algorithms.evaluate import evaluate
    from arsched.units import parse_size, parse_time

    topo = topology(p.topology)
    alpha = parse_time(p.alpha) if p.alpha else None
    row = evaluate(
        topo,
        p.algorithm,
        parse_size(p.size),
        p.model,
        alpha,
        p.fifo,
        json.loads(p.params),
        p.collective,
        p.root or None,
    )
    return AlgorithmRow(
        topology_name=topo.name,
        ranks=len(topo.servers),
        bytes=row.bytes,
        time_s=row.time_s,
        bound_s=row.bound_s,
        gap=row.gap,
        rounds=row.rounds if row.rounds is not None else "",
        bound_rounds=row.rounds * row.bound_s / row.time_s if row.rounds and row.time_s > 0 else "",
        busbw=row.busbw,
        transfers=row.transfers,
        synthesis_s=row.synthesis_s,
        note=row.note,
    )


KIND = Kind("algorithm", AlgorithmParams, AlgorithmRow, expand, run, timings=("synthesis_s",))
