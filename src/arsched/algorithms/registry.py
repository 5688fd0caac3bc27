"""The algorithm registry: name -> build(topology, ranks, nbytes, **params) -> Schedule.

Other tools and scripts rely on the names (`ps`, `sharded-ps`, `ring`, `rhd`, `dbtree`, ...).
Every builder documents its source and what it optimises; one that does not apply to a
topology raises `NotApplicable` with one sentence. An algorithm has a builder per collective
it computes (`register(..., collective=...)`): AllReduce's for most, ring and direct schemes
for the others; `build(..., collective=, root=)` picks it and hands the root of a rooted
collective to its builder.

Algorithms of higher layers or other packages register through the `arsched.algorithms` entry
point group (a module whose import registers its builders): `hrl` lives in `arsched.rl`, which
builds on this package, so this package never imports it. Entry points load on the first
lookup.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from arsched.collective.kinds import NAMES, ROOTED, TITLES
from arsched.collective.schedule import Schedule
from arsched.errors import ArschedError
from arsched.topology.core import Topology

Builder = Callable[..., Schedule]


class NotApplicable(ArschedError):
    """The algorithm cannot run on this topology or rank set (the message says why)."""


class UnknownAlgorithm(ArschedError):
    """No algorithm is registered under the name asked for."""


Floor = Callable[[Topology, tuple[str, ...], float, float], float]
"""floor(topology, ranks, nbytes, alpha): seconds that the schedule a builder would make with its
default parameters cannot beat in the flow model (with per-transfer cost alpha), computed
without building it (`auto` skips a candidate whose floor is no faster than its best)."""


@dataclass(frozen=True)
class Algorithm:
    """A registered algorithm: its name, a one-line summary, its builder of each collective it
    computes, and for some of them a `Floor`."""

    name: str
    summary: str
    builders: dict[str, Builder]
    floors: dict[str, Floor] = field(default_factory=dict)

    @property
    def collectives(self) -> tuple[str, ...]:
        """The collectives it builds, in the order of `kinds.NAMES`."""
        return tuple(c for c in NAMES if c in self.builders)

    def builder(self, collective: str = "allreduce") -> Builder:
        """Its builder of `collective`; NotApplicable, naming the algorithms that have one, if
        it has none."""
        if collective not in self.builders:
            if collective not in NAMES:
                raise ArschedError(f"collective {collective!r} is not one of {', '.join(NAMES)}")
            others = [a.name for a in algorithms(collective)]
            raise NotApplicable(
                f"{self.name} does not build {TITLES[collective]}; algorithms that do: {', '.join(others)}"
            )
        return self.builders[collective]

    @property
    def build(self) -> Builder:
        """Its AllReduce builder."""
        return self.builder("allreduce")

    def parameters_of(self, collective: str = "allreduce") -> tuple[str, ...] | None:
        """The builder's own parameters (after topology, ranks, nbytes), which `params` may set
        (a rooted collective's `root`, which `build` sets, not among them); None where it takes
        any keyword."""
        takes = list(inspect.signature(self.builder(collective)).parameters.values())
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in takes):
            return None
        rooted = collective in ROOTED
        return tuple(
            p.name
            for p in takes[3:]
            if p.kind is not inspect.Parameter.VAR_POSITIONAL and not (rooted and p.name == "root")
        )

    @property
    def parameters(self) -> tuple[str, ...] | None:
        """`parameters_of` its first collective (AllReduce where it has one)."""
        return self.parameters_of(self.collectives[0])


_REGISTRY: dict[str, Algorithm] = {}
_PLUGINS = "arsched.algorithms"  # the entry point group
_plugins_loaded = False


def _load_plugins() -> None:
    """Import every module of the entry point group once; one that cannot be imported (a missing
    optional dependency) registers nothing."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for ep in sorted(entry_points(group=_PLUGINS), key=lambda e: e.name):
        try:
            ep.load()
        except ImportError:
            continue


def register(
    name: str, summary: str, collective: str = "allreduce", floor: Floor | None = None
) -> Callable[[Builder], Builder]:
    """Decorator that registers a builder of `collective` under `name` (the summary of the
    name's first registration stays), with its `floor` where it has one."""

    def wrap(fn: Builder) -> Builder:
        known = _REGISTRY.setdefault(name, Algorithm(name, summary, {}))
        if collective in known.builders:
            raise ValueError(f"algorithm {name!r} is registered twice for {collective}")
        known.builders[collective] = fn
        if floor is not None:
            known.floors[collective] = floor
        return fn

    return wrap


def unregister(name: str) -> None:
    """Remove the algorithm registered under `name` (one registered for a while, as by a test);
    an `UnknownAlgorithm` error if there is none."""
    if _REGISTRY.pop(name, None) is None:
        raise UnknownAlgorithm(f"unknown algorithm {name!r}")


# The listing order, and the order in which `auto` tries candidates within its budget: cheap
# baselines first (halving-doubling before the rings: on a thousand ranks it is the one near the
# bound, and a multi-ring takes seconds to build there), topology-aware schemes, then synthesis.
ORDER = (
    "ps",
    "sharded-ps",
    "rhd",
    "ring",
    "multi-ring",
    "dbtree",
    "group-trees",
    "rail-dbtree",
    "scatter-allgather",
    "bcube-native",
    "torus-native",
    "hierarchical",
    "tree-packing",
    "greedy-trees",
    "hrl",
    "rs-ag",
    "direct",
    "pairwise",
    "mcf",
    "auto",
)


def algorithms(collective: str | None = "allreduce") -> list[Algorithm]:
    """Every algorithm registered for `collective` (None: for any): baselines first, then the
    topology-aware ones."""
    _load_plugins()
    rank = {name: i for i, name in enumerate(ORDER)}
    found = [a for a in _REGISTRY.values() if collective is None or collective in a.builders]
    return sorted(found, key=lambda a: (rank.get(a.name, len(ORDER)), a.name))


def get(name: str) -> Algorithm:
    """The algorithm registered under `name`; an `UnknownAlgorithm` error names the choices."""
    _load_plugins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownAlgorithm(f"unknown algorithm {name!r}; choose one of {', '.join(_REGISTRY)}") from None


def build(
    name: str,
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    collective: str = "allreduce",
    root: str | None = None,
    **params: Any,
) -> Schedule:
    """Build a schedule of `collective` with the named algorithm; `root` (default: the first
    rank) for Broadcast and Reduce."""
    builder = get(name).builder(collective)
    if collective in ROOTED or root is not None:
        if "root" not in inspect.signature(builder).parameters:
            raise ArschedError(f"{name}'s {TITLES[collective]} takes no root")
        params["root"] = root
    return builder(topology, ranks, nbytes, **params)
