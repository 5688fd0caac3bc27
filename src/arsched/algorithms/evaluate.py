"""Evaluate algorithms on one topology: build, validate and simulate each, beside the bound."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from arsched.algorithms.registry import NotApplicable, algorithms, build
from arsched.defaults import default_alpha
from arsched.limits import LimitError
from arsched.sim import simulate_flow, simulate_rounds
from arsched.topology.core import Topology


@dataclass(frozen=True)
class Evaluation:
    """One algorithm at one size; `note` says why an algorithm did not apply (time is then nan)."""

    algorithm: str
    bytes: float
    time_s: float
    rounds: int | None
    algbw: float
    busbw: float
    bound_s: float
    gap: float
    synthesis_s: float
    transfers: int
    note: str = ""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def evaluate(
    topology: Topology,
    name: str,
    size: float,
    model: str = "flow",
    alpha: float | None = None,
    fifo: bool = True,
    params: dict[str, Any] | None = None,
    collective: str = "allreduce",
    root: str | None = None,
) -> Evaluation:
    """Build one algorithm's schedule of `collective` at one size (with builder `params`),
    validate it and simulate it; an algorithm that does not apply gives a row with the reason
    in `note`."""
    from arsched.collective import validate

    a = default_alpha(model) if alpha is None else alpha
    nan = float("nan")
    t0 = time.perf_counter()
    try:
        schedule = build(name, topology, None, size, collective, root, **(params or {}))
    except (NotApplicable, LimitError) as e:  # listed with the reason; the others still run
        return Evaluation(name, size, nan, None, nan, nan, nan, nan, nan, 0, str(e))
    synthesis = time.perf_counter() - t0
    report = validate(schedule)
    if not report.ok:
        raise RuntimeError(f"{name} built an invalid schedule: {report.message}")
    r = simulate_flow(schedule, a, fifo=fifo) if model == "flow" else simulate_rounds(schedule, a)
    return Evaluation(
        name, size, r.time_s, r.rounds, r.algbw, r.busbw, r.bound_s, r.gap, synthesis, len(schedule)
    )


def evaluate_all(
    topology: Topology,
    sizes: Sequence[float],
    names: Sequence[str] | None = None,
    model: str = "flow",
    alpha: float | None = None,
    fifo: bool = True,
    collective: str = "allreduce",
    root: str | None = None,
) -> list[Evaluation]:
    """Build, validate and simulate every algorithm of `collective` (default: all that build it)
    at every size (rows in that order); `fifo=False` runs the flow model with every ready
    transfer sent at once."""
    names = list(names) if names else [a.name for a in algorithms(collective)]
    return [
        evaluate(topology, name, size, model, alpha, fifo, None, collective, root)
        for name in names
        for size in sizes
    ]
