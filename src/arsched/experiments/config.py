"""Experiment configs: one YAML file, validated, expanded into a list of tasks.

A config is a name and a list of run blocks, each with a `kind` (`algorithm`, `cluster`, `rl`)
and the axes of its grid; every combination of the axes is one task::

    name: demo
    runs:
      - kind: algorithm
        topologies: ["bcube:n=4,k=1", "jellyfish:switches=8,ports=4,net_ports=3"]
        algorithms: [ps, ring, {name: tree-packing, params: {iterations: 20}}]
        sizes: [1MB, 256MB]
        seeds: [1, 2, 3]        # jellyfish gets seed=1,2,3; deterministic runs happen once
        models: [flow, rounds]

Bad configs get one sentence naming the file, the key (e.g. `runs[0].models[1]`) and the allowed
values, raised as an ArschedError before any work is done.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from arsched.errors import ArschedError
from arsched.fileio import read_text
from arsched.units import parse_size, parse_time

NAME_BYTES = 100  # longest config name (it names the results folder)
MAX_CONFIG_BYTES = 1_000_000  # a config is a page of YAML; this is far past any real one
MAX_CONFIG_VALUES = 1_000_000  # values with YAML aliases expanded: more than a 1 MB file holds without them


class ConfigError(ArschedError):
    """An experiment config is malformed; the message names the key and what it accepts."""


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AlgorithmSpec(_Block):
    """An algorithm with optional builder parameters and an optional label for the tables."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)
    label: str | None = None

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        from arsched.algorithms import get

        get(v)  # UnknownAlgorithm lists the names
        return v

    @model_validator(mode="after")
    def _params_fit_the_builder(self) -> AlgorithmSpec:
        """Parameters the builder does not take fail here, when the config loads, not per task."""
        from arsched.algorithms import get

        own = get(self.name).parameters
        for key in self.params if own is not None else ():
            if key not in own:
                raise ValueError(f"{self.name} has no parameter {key!r}; it takes {', '.join(own) or 'none'}")
        return self


def _size(v: str) -> str:
    size = parse_size(v)
    if not (math.isfinite(size) and size > 0):
        raise ValueError(f"a size must be a positive finite number of bytes, got {v!r}")
    return v


def _spec(v: str) -> str:
    from arsched.topology import parse_spec

    parse_spec(v)  # a TopologyError names the family and its parameters
    return v


Size = Annotated[
    str, BeforeValidator(lambda v: str(v) if isinstance(v, int | float) else v), AfterValidator(_size)
]
Spec = Annotated[str, AfterValidator(_spec)]


def _as_algorithm(v: Any) -> Any:
    return {"name": v} if isinstance(v, str) else v


class AlgorithmRuns(_Block):
    """Collectives × topologies × algorithms × sizes × seeds × models: build, validate,
    simulate. An algorithm runs for the collectives it builds; `root` (a node id; default the
    first rank) is Broadcast's and Reduce's."""

    kind: Literal["algorithm"]
    topologies: list[Spec] = Field(min_length=1)
    algorithms: list[Annotated[AlgorithmSpec, Field()]] = Field(min_length=1)
    collectives: list[str] = Field(default_factory=lambda: ["allreduce"], min_length=1)
    root: str | None = None
    sizes: list[Size] = Field(default_factory=lambda: ["1MB", "256MB"], min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    models: list[Literal["flow", "rounds"]] = Field(default_factory=lambda: ["flow"], min_length=1)
    fifo: list[bool] = Field(default_factory=lambda: [True], min_length=1)  # in-order connections
    alpha: str | None = None

    @field_validator("algorithms", mode="before")
    @classmethod
    def _names(cls, v: Any) -> Any:
        return [_as_algorithm(x) for x in v] if isinstance(v, list) else v

    @field_validator("fifo", mode="before")
    @classmethod
    def _fifo(cls, v: Any) -> Any:
        return [v] if isinstance(v, bool) else v

    @field_validator("alpha")
    @classmethod
    def _alpha(cls, v: str | None) -> str | None:
        if v is not None and not 0 <= parse_time(str(v)) < math.inf:
            raise ValueError(f"alpha must be a finite time >= 0, got {v!r}")
        return v

    @field_validator("collectives")
    @classmethod
    def _collectives(cls, v: list[str]) -> list[str]:
        from arsched.collective.kinds import NAMES

        for c in v:
            if c not in NAMES:
                raise ValueError(f"collective {c!r} is not one of {', '.join(NAMES)}")
        return v

    @model_validator(mode="after")
    def _every_collective_has_an_algorithm(self) -> AlgorithmRuns:
        """A collective none of the block's algorithms builds, or parameters an algorithm's
        builder of a collective does not take, fail when the config loads."""
        from arsched.algorithms import get

        for c in self.collectives:
            builders = [a for a in self.algorithms if c in get(a.name).builders]
            if not builders:
                raise ValueError(f"no algorithm of the block builds {c}")
            for a in builders:
                own = get(a.name).parameters_of(c)
                bad = [k for k in a.params if own is not None and k not in own]
                if bad:
                    raise ValueError(
                        f"{a.name}'s {c} has no parameter {bad[0]!r}; it takes {', '.join(own) or 'none'}"
                    )
        return self


def _trace(v: str) -> str:
    from pathlib import Path

    if not v.startswith("synthetic:") and not Path(v).is_file():
        raise ValueError(
            f"trace file {v!r} {'is a folder' if Path(v).is_dir() else 'does not exist'} (paths are "
            "relative to the folder arsched runs in; or use synthetic:jobs=N,seed=S)"
        )
    return v


def _cluster(v: str) -> str:
    from arsched.cluster import parse_cluster

    parse_cluster(v)  # names what is wrong with a spec or a cluster file
    return v


def _scheduler(v: str) -> str:
    from arsched.cluster.schedulers import get_scheduler

    get_scheduler(v)  # lists the schedulers
    return v


def _objective(v: str) -> str:
    from arsched.cluster.utility import Objective

    Objective(v)  # lists the objectives
    return v


class ClusterRuns(_Block):
    """Traces × clusters × schedulers × objectives × network modes × seeds (arsched.cluster)."""

    kind: Literal["cluster"]
    traces: list[Annotated[str, AfterValidator(_trace)]] = Field(min_length=1)
    clusters: list[Annotated[str, AfterValidator(_cluster)]] = Field(min_length=1)
    schedulers: list[Annotated[str, AfterValidator(_scheduler)]] = Field(min_length=1)
    objectives: list[Annotated[str, AfterValidator(_objective)]] = Field(
        default_factory=lambda: ["jct"], min_length=1
    )
    networks: list[Literal["reserved", "shared", "ideal"]] = Field(
        default_factory=lambda: ["reserved"], min_length=1
    )
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    # when the simulator decides (arsched.cluster.config.ENGINES, default DEFAULT_ENGINE)
    engine: Literal["events", "slots"] = "events"


class RLTrainings(_Block):
    """Topologies × seeds: train the hierarchical RL scheduler on each topology (`iterations`
    of `arsched train`, reward measured at `size`), save its checkpoint, evaluate it beside
    greedy-trees at `size`."""

    kind: Literal["rl"]
    topologies: list[Spec] = Field(min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    iterations: int = Field(default=40, gt=0)
    size: Size = "256MB"


RunBlock = Annotated[AlgorithmRuns | ClusterRuns | RLTrainings, Field(discriminator="kind")]


class Config(_Block):
    """A whole experiment: a name, a description and its run blocks."""

    name: str
    description: str = ""
    runs: list[RunBlock] = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _folder_name(cls, v: str) -> str:
        """The name becomes the default results folder arsched-runs/<name>: one plain folder name,
        so a config never writes outside it."""
        if not v.strip() or v in (".", "..") or any(c in v for c in "/\\\0") or len(v.encode()) > NAME_BYTES:
            raise ValueError(
                f"the name must be a plain folder name (no '/', '\\', '..', at most {NAME_BYTES} bytes), "
                f"got {v!r}"
            )
        return v


def _where(loc: tuple[Any, ...]) -> str:
    """('runs', 0, 'algorithm', 'models', 1) -> 'runs[0].models[1]' (dropping the union tag)."""
    text = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            text += f"[{part}]"
        elif i >= 2 and loc[0] == "runs" and i == 2 and part in ("algorithm", "cluster", "rl"):
            continue
        else:
            text += ("." if text else "") + str(part)
    return text or "top level"


def _allowed(model: type[BaseModel] | None) -> str:
    return f"; allowed keys: {', '.join(model.model_fields)}" if model else ""


def _block_model(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    if len(loc) >= 3 and loc[0] == "runs":
        return {"algorithm": AlgorithmRuns, "cluster": ClusterRuns, "rl": RLTrainings}.get(loc[2])
    return Config if len(loc) <= 1 else None


def _sentence(err: dict[str, Any]) -> str:
    loc = tuple(err["loc"])
    where = _where(loc)
    kind = err["type"]
    if kind == "extra_forbidden":
        return f"{where}: unknown key{_allowed(_block_model(loc[:-1]) if len(loc) > 1 else Config)}"
    if kind == "missing":
        return f"{where}: required key is missing"
    if kind == "union_tag_invalid" or kind == "union_tag_not_found":
        return f"{where}.kind: must be one of algorithm, cluster, rl"
    msg = err["msg"].removeprefix("Value error, ")
    got = err.get("input")
    shown = "" if isinstance(got, dict | list) or got is None or repr(got) in msg else f", got {got!r}"
    return f"{where}: {msg}{shown}"


def parse_config(data: Any, source: str = "config") -> Config:
    """Validate a parsed YAML document; the first problem becomes one ConfigError sentence."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with keys name and runs")
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"{source}: {_sentence(e.errors()[0])}") from None
    except ArschedError as e:  # raised by a validator outside pydantic's wrapping
        raise ConfigError(f"{source}: {e}") from None


def load_config(path: str | Path) -> Config:
    """Read and validate a YAML config file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config {p} {'is a folder, not a YAML file' if p.is_dir() else 'does not exist'}")
    if p.stat().st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"config {p} has {p.stat().st_size} bytes, more than a config's {MAX_CONFIG_BYTES}")
    text = read_text(p, "config", ConfigError)
    try:
        data = yaml.safe_load(text)
    except RecursionError:
        raise ConfigError(f"config {p} is nested too deeply to be a config") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{p}:{line} is not valid YAML ({getattr(e, 'problem', e)})") from None
    if _values(data, {}) > MAX_CONFIG_VALUES:
        raise ConfigError(
            f"config {p} holds more than {MAX_CONFIG_VALUES} values once its YAML aliases are expanded"
        )
    return parse_config(data, str(p))


def _values(data: Any, seen: dict[int, int]) -> int:
    """How many values `data` holds with every shared (aliased) part counted each time it appears;
    stops counting past the limit, so an alias bomb costs no more than its own size."""
    if not isinstance(data, dict | list):
        return 1
    if id(data) not in seen:
        seen[id(data)] = MAX_CONFIG_VALUES + 1  # a cycle (a recursive alias) counts as too many
        items = [*data.keys(), *data.values()] if isinstance(data, dict) else data
        total = 1
        for item in items:
            total += _values(item, seen)
            if total > MAX_CONFIG_VALUES:
                break
        seen[id(data)] = total
    return seen[id(data)]


def takes_seed(fn: Any) -> bool:
    """True if a topology family or algorithm builder has a `seed` parameter."""
    return "seed" in inspect.signature(fn).parameters
