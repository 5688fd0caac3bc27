"""The Ray backend: a local Ray of 2 CPUs gives the same rows as the local pool."""

from __future__ import annotations

import pytest

from arsched.experiments import expand, load_config, read_rows, sweep
from arsched.experiments.tasks import TIMING_COLUMNS


def _stable(rows):
    return sorted(
        ({k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rows), key=lambda r: r["task_id"]
    )


def test_ray_gives_the_rows_of_the_local_pool(small_config, tmp_path):
    pytest.importorskip("ray")
    tasks = expand(load_config(small_config))[:8]  # Ray's start dominates; a few tasks suffice
    ray = sweep(tasks, tmp_path / "ray", backend="ray", workers=2)
    local = sweep(tasks, tmp_path / "local", workers=1)
    assert ray.done == local.done == len(tasks) and not ray.failures
    assert _stable(read_rows(tmp_path / "ray", "algorithm")) == _stable(
        read_rows(tmp_path / "local", "algorithm")
    )
    again = sweep(tasks, tmp_path / "ray", backend="ray", workers=2)
    assert (again.skipped, again.done) == (len(tasks), 0)
