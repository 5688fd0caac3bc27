"""arsched: AllReduce scheduling for data-center and GPU-cluster networks.

The whole pipeline from the top-level package, in the habits of networkx::

    import arsched as ar

    topo = ar.topology.bcube(4, 1)                  # or ar.parse_spec("bcube:n=4,k=1")
    schedule = ar.build("ring", topo, nbytes=256e6)  # ar.algorithms.algorithms() lists them
    assert ar.validate(schedule).ok                  # proves it computes the AllReduce sum
    result = ar.simulate_flow(schedule)              # result.time_s, result.bound_s, result.gap
    ar.bound(topo, nbytes=256e6)                     # no AllReduce of 256 MB can be faster
    ar.save(schedule, "ring.json")                   # arsched.schedule/1 JSON; ar.load reads it

Subpackages hold the rest: `topology` (families, files, routing), `collective` (the schedule IR
and validators), `bounds`, `sim`, `algorithms`, `runtime` (torch.distributed, MSCCL XML),
`cluster` (GADGET and baselines: `ar.simulate_cluster`), `rl`, `experiments`.

Names load on first use, so `import arsched` stays light (no LP solver, no torch) and a
command that needs only topologies does not pay for the simulators.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_SUBPACKAGES = (
    "algorithms",
    "bounds",
    "cluster",
    "collective",
    "experiments",
    "rl",
    "runtime",
    "sim",
    "topology",
)

_NAMES = {  # public name -> "module:attribute"
    # networks
    "Topology": "arsched.topology.core:Topology",
    "parse_spec": "arsched.topology.spec:parse_spec",
    # schedules, their files and their proof
    "Schedule": "arsched.collective.schedule:Schedule",
    "ScheduleBuilder": "arsched.collective.schedule:ScheduleBuilder",
    "Transfer": "arsched.collective.schedule:Transfer",
    "load": "arsched.collective.files:load",
    "save": "arsched.collective.files:save",
    "validate": "arsched.collective.validate:validate",
    "numeric_check": "arsched.collective.validate:numeric_check",
    # how fast it can be: max(bandwidth bound, latency bound), and each alone
    "bound": "arsched.bounds:lower_bound",
    "allreduce_bound": "arsched.bounds:allreduce_bound",
    "latency_bound": "arsched.bounds:latency_bound",
    # algorithms by name (the subpackage `algorithms` lists them: ar.algorithms.algorithms())
    "build": "arsched.algorithms.registry:build",
    "NotApplicable": "arsched.algorithms.registry:NotApplicable",
    # how fast it is
    "simulate_flow": "arsched.sim.flow:simulate_flow",
    "simulate_rounds": "arsched.sim.rounds:simulate_rounds",
    "SimResult": "arsched.sim.result:SimResult",
    # shared clusters of ring-all-reduce jobs
    "simulate_cluster": "arsched.cluster.simulator:simulate",
    # every bad input is one of these, with one sentence
    "ArschedError": "arsched.errors:ArschedError",
}

__all__ = sorted([*_NAMES, *_SUBPACKAGES, "__version__"])


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"arsched.{name}")
    if name in _NAMES:
        module, _, attribute = _NAMES[name].partition(":")
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'arsched' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
