"""RL tasks: a short training writes a checkpoint under the sweep's folder, keyed by the task id;
its row is the trained policy's schedule (validated) beside greedy-trees; a finished training is
never repeated; the report shows the trainings only when a sweep has RL rows."""

from __future__ import annotations

import pytest
import yaml

from arsched.algorithms import build
from arsched.collective import validate
from arsched.experiments import expand, parse_config, read_rows, sweep
from arsched.experiments.report import render
from arsched.experiments.tasks import TIMING_COLUMNS
from arsched.experiments.tasks.rl import checkpoint_folder
from arsched.rl import checkpoint
from arsched.sim import simulate_flow, simulate_rounds
from arsched.topology import parse_spec

CONFIG = """\
name: tiny-rl
runs:
  - kind: rl
    topologies: ["bcube:n=2,k=1"]
    seeds: [3]
    iterations: 1
    size: 64MB
"""


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rl") / "runs"
    tasks = expand(parse_config(yaml.safe_load(CONFIG)))
    summary = sweep(tasks, folder, workers=1)
    assert summary.done == 1 and not summary.failures
    return tasks, folder


def test_training_writes_a_checkpoint_keyed_by_the_task(trained):
    (task,), folder = trained
    (row,) = read_rows(folder, "rl")
    path = checkpoint_folder(folder, task.id)
    assert row["checkpoint"] == f"checkpoints/{task.id}"
    meta = checkpoint.read_meta(path)
    assert (meta["topologies"], meta["seed"], meta["iterations"]) == (["bcube:n=2,k=1"], 3, 1)


def test_the_row_is_the_trained_policy_beside_greedy(trained):
    (task,), folder = trained
    (row,) = read_rows(folder, "rl")
    topo = parse_spec("bcube:n=2,k=1")
    hrl = build("hrl", topo, None, 64e6, checkpoint=str(checkpoint_folder(folder, task.id)))
    greedy = build("greedy-trees", topo, None, 64e6)
    assert validate(hrl).ok and validate(greedy).ok
    assert int(row["rounds"]) == simulate_rounds(hrl).rounds
    assert int(row["greedy_rounds"]) == simulate_rounds(greedy).rounds
    flow = simulate_flow(hrl)
    assert float(row["gap"]) == flow.gap and float(row["time_s"]) == flow.time_s
    assert float(row["greedy_gap"]) == simulate_flow(greedy).gap
    assert row["ranks"] == "4" and row["topology_name"] == topo.name


def test_reruns_skip_the_task_and_its_training(trained, monkeypatch):
    tasks, folder = trained
    again = sweep(tasks, folder, workers=1)
    assert (again.skipped, again.done) == (1, 0)

    # a row lost (a sweep killed after training, before writing it): the task runs again but
    # reuses the finished checkpoint instead of training anew
    def no_training(*_args, **_kwargs):
        raise AssertionError("a finished training was repeated")

    monkeypatch.setattr("arsched.rl.training.train", no_training)
    (before,) = read_rows(folder, "rl")
    (folder / "rl.csv").rename(folder / "rl.old.csv")
    redo = sweep(tasks, folder, workers=1)
    assert redo.done == 1 and not redo.failures
    (after,) = read_rows(folder, "rl")
    assert {k: v for k, v in after.items() if k not in TIMING_COLUMNS} == {
        k: v for k, v in before.items() if k not in TIMING_COLUMNS
    }


def test_the_report_has_an_rl_section(trained):
    _, folder = trained
    page = render([folder])
    assert "Hierarchical deep RL" in page and "Cluster scheduling" not in page
    (row,) = read_rows(folder, "rl")
    assert f"<td>{row['checkpoint']}</td>" in page
    assert f">{float(row['gap']):.3f}</td>" in page  # in bold (class=best) where faster than greedy-trees
