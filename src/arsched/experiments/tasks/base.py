"""What every task kind is made of: a Task (kind + parameters, with a stable id) and a Kind
(its parameter and result schemas, how a config block expands and how one task runs).

A kind declares its parameters and its results once each, as dataclasses whose fields are the
CSV columns in order; `expand` turns a config block into parameter records and `run` turns one
into a result record (a task that writes files of its own, an RL checkpoint, writes them under
the results folder keyed by its id). A task's id is a hash of its kind and parameters, so the
same config always yields the same ids and a sweep can skip what it has already done.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from arsched.errors import ArschedError


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


def columns(schema: type) -> tuple[str, ...]:
    """The field names of a parameter or result dataclass, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(schema))


@dataclass(frozen=True)
class Kind:
    """A task kind. `params` and `results` are dataclasses (their fields are the columns);
    `expand` maps a config block to `params` records and `run` maps (record, results folder,
    task id) to a `results` record. `timings` are result columns that measure the machine, not
    the inputs. `requires` names a module the kind cannot run without, and `extra` the pip extra
    that installs it."""

    name: str
    params: type
    results: type
    expand: Callable[[Any], Iterable[Any]]
    run: Callable[[Any, Path, str], Any]
    timings: tuple[str, ...] = ()
    requires: str | None = None
    extra: str = ""

    @property
    def columns(self) -> tuple[str, ...]:
        """The CSV header: task id, parameters, results, wall time."""
        return ("task_id", *columns(self.params), *columns(self.results), "wall_s")

    def task(self, params: Any) -> Task:
        """The task of one parameter record."""
        # fields are plain JSON scalars: no deep copy (asdict's) needed, which keeps a large grid quick
        return Task(self.name, tuple((f.name, getattr(params, f.name)) for f in dataclasses.fields(params)))

    def check_available(self) -> None:
        if self.requires and importlib.util.find_spec(self.requires) is None:
            raise ArschedError(
                f"{self.name} runs need the {self.requires} package, which this installation does "
                f"not have: pip install 'arsched[{self.extra}]' or remove the block"
            )


@lru_cache(maxsize=32)
def topology(spec: str):
    """Topologies are built once per worker process (their bound computations are cached too)."""
    from arsched.topology import parse_spec

    return parse_spec(spec)
