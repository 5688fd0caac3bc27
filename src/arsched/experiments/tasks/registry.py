"""The task kinds a config can name, and running a config's tasks one by one."""

from __future__ import annotations

import dataclasses
import time
from itertools import islice
from pathlib import Path
from typing import Any

from arsched.errors import ArschedError
from arsched.experiments.config import Config
from arsched.experiments.tasks import algorithm, cluster, rl
from arsched.experiments.tasks.base import Kind, Task

KINDS: dict[str, Kind] = {k.name: k for k in (algorithm.KIND, cluster.KIND, rl.KIND)}

MAX_TASKS = 100_000  # tasks of one sweep unless raised (a task takes a second or more)

# Columns whose values depend on the machine's speed, not on the inputs.
TIMING_COLUMNS = frozenset({"wall_s", *(c for k in KINDS.values() for c in k.timings)})


def expand(config: Config, max_tasks: int = MAX_TASKS) -> list[Task]:
    """Every task of a config, in config order, without duplicates. A config whose grids hold
    more than `max_tasks` combinations (duplicates counted) is refused before any task is made."""
    grids: list[tuple[Kind, list[Any]]] = []
    total = 0
    for i, block in enumerate(config.runs):
        kind = KINDS[block.kind]
        kind.check_available()
        grids.append((kind, list(islice(kind.expand(block), max_tasks - total + 1))))
        total += len(grids[-1][1])
        if total > max_tasks:
            raise ArschedError(
                f"the config has more than {max_tasks:,} tasks (runs[{i}] passes the limit of one sweep); "
                "split it into several configs or raise the limit with --max-tasks"
            )
    tasks: dict[str, Task] = {}
    for kind, records in grids:
        for params in records:
            task = kind.task(params)
            tasks.setdefault(task.id, task)
    return list(tasks.values())


def execute(task: Task, folder: str | Path = ".") -> tuple[str, dict[str, Any] | None, str | None]:
    """Run a task whose sweep writes into `folder`: (id, row, None) or (id, None, error sentence).
    Safe to call in a worker."""
    t0 = time.perf_counter()
    kind = KINDS[task.kind]
    params = dict(task.params)
    try:
        result = dataclasses.asdict(kind.run(kind.params(**params), Path(folder), task.id))
    except Exception as e:  # reported per task; the sweep goes on
        return task.id, None, f"{type(e).__name__}: {e}"
    return task.id, {"task_id": task.id, **params, **result, "wall_s": time.perf_counter() - t0}, None
