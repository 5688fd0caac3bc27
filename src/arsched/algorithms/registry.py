"""The algorithm registry: name -> build(topology, ranks, nbytes, **params) -> Schedule.

Other tools and scripts rely on the names (`ps`, `sharded-ps`, `ring`, `rhd`, `dbtree`, ...).
Every builder documents its source and what it optimises; one that does not apply to a
topology raises `NotApplicable` with one sentence.

Algorithms of higher layers or other packages register through the `arsched.algorithms` entry
point group (a module whose import registers its builders): `hrl` lives in `arsched.rl`, which
builds on this package, so this package never imports it. Entry points load on the first
lookup.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from arsched.collective.schedule import Schedule
from arsched.errors import ArschedError
from arsched.topology.core import Topology

Builder = Callable[..., Schedule]


class NotApplicable(ArschedError):
    """The algorithm cannot run on this topology or rank set (the message says why)."""


class UnknownAlgorithm(ArschedError):
    """No algorithm is registered under the name asked for."""


@dataclass(frozen=True)
class Algorithm:
    """A registered algorithm: its name, builder and a one-line summary."""

    name: str
    build: Builder
    summary: str

    @property
    def parameters(self) -> tuple[str, ...] | None:
        """The builder's own parameters (after topology, ranks, nbytes), which `params` may set;
        None where it takes any keyword."""
        takes = list(inspect.signature(self.build).parameters.values())
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in takes):
            return None
        return tuple(p.name for p in takes[3:] if p.kind is not inspect.Parameter.VAR_POSITIONAL)


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


def register(name: str, summary: str) -> Callable[[Builder], Builder]:
    """Decorator that registers a builder under `name`."""

    def wrap(fn: Builder) -> Builder:
        if name in _REGISTRY:
            raise ValueError(f"algorithm {name!r} is registered twice")
        _REGISTRY[name] = Algorithm(name, fn, summary)
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
    "bcube-native",
    "torus-native",
    "hierarchical",
    "tree-packing",
    "greedy-trees",
    "hrl",
    "auto",
)


def algorithms() -> list[Algorithm]:
    """Every registered algorithm: baselines first, then the topology-aware ones."""
    _load_plugins()
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(_REGISTRY.values(), key=lambda a: (rank.get(a.name, len(ORDER)), a.name))


def get(name: str) -> Algorithm:
    """The algorithm registered under `name`; an `UnknownAlgorithm` error names the choices."""
    _load_plugins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownAlgorithm(f"unknown algorithm {name!r}; choose one of {', '.join(_REGISTRY)}") from None


def build(
    name: str, topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1e8, **params: Any
) -> Schedule:
    """Build a schedule with the named algorithm."""
    return get(name).build(topology, ranks, nbytes, **params)
