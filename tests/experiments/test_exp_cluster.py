"""Cluster tasks: one row per trace × cluster × scheduler × objective × network × seed, equal to
`arsched cluster run --json` of the same inputs, with every job's JCT and the utilisation series
for the report; the report shows them only when a sweep has cluster rows."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import yaml
from expconfigs import config_error

from arsched.cluster import SimConfig, load_trace, parse_cluster, simulate
from arsched.cluster.metrics import JSON_KEYS
from arsched.cluster.schedulers import get_scheduler
from arsched.cluster.utility import Objective
from arsched.experiments import expand, parse_config, read_rows, sweep
from arsched.experiments.report import render
from arsched.experiments.tasks import KINDS, TIMING_COLUMNS
from arsched.experiments.tasks.cluster import UTILIZATION_POINTS, utilization_json
from clihelp import run

# Six jobs of the Tiresias trace format; models from the zoo, at most 8 GPUs of the cluster's 16.
TRACE = """\
job_id,num_gpu,submit_time,iterations,model_name,duration,interval
0,1,0,600,vgg19,160,30
1,8,30,130,vgg11,150,20
2,2,50,150,inception4,130,25
3,4,80,500,vgg16,120,20
4,2,90,300,vgg19,200,10
5,1,400,100,vgg11,90,10
"""
CLUSTER = "leafspine:leaves=2,spines=1,servers_per_leaf=2,gpus=4"


def _config(trace: str) -> str:
    return f"""\
name: tiny-cluster
runs:
  - kind: cluster
    traces: ["{trace}", "synthetic:jobs=12,seed=3"]
    clusters: ["{CLUSTER}"]
    schedulers: [gadget, fifo, random]
    networks: [reserved, shared]
    seeds: [1, 2]
"""


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cluster")
    trace = folder / "tiny.csv"
    trace.write_text(TRACE)
    tasks = expand(parse_config(yaml.safe_load(_config(str(trace)))))
    summary = sweep(tasks, folder / "runs", workers=1)
    assert summary.done == len(tasks) and not summary.failures
    return tasks, folder / "runs", trace


def test_one_row_per_task_with_the_cli_keys(swept):
    tasks, runs, _ = swept
    # 2 traces x 2 networks x (gadget, fifo once; random once per seed)
    assert len(tasks) == 2 * 2 * (1 + 1 + 2)
    rows = read_rows(runs, "cluster")
    assert sorted(r["task_id"] for r in rows) == sorted(t.id for t in tasks)
    assert list(rows[0]) == list(KINDS["cluster"].columns)
    assert set(JSON_KEYS) <= set(rows[0])
    assert {r["seed"] for r in rows if r["scheduler"] != "random"} == {""}
    again = sweep(tasks, runs, workers=1)
    assert (again.skipped, again.done) == (len(tasks), 0)


def test_rows_equal_a_direct_run(swept):
    _, runs, _ = swept
    for row in read_rows(runs, "cluster"):
        workload, _ = load_trace(row["trace"])
        config = SimConfig(
            network=row["network"], objective=Objective(row["objective"]), seed=int(row["seed"] or 0),
            engine=row["engine"],
        )  # fmt: skip
        res = simulate(workload, parse_cluster(row["cluster"]), get_scheduler(row["scheduler"]), config)
        for key, value in res.to_dict().items():
            if key not in TIMING_COLUMNS:
                assert float(row[key]) == value, key
        jct = np.array([np.inf if j is None else j for j in json.loads(row["jct_s"])])
        assert np.array_equal(np.isfinite(jct), np.isfinite(res.jct))
        assert np.allclose(jct[np.isfinite(jct)], res.jct[np.isfinite(res.jct)], rtol=0, atol=5e-4)
        util = json.loads(row["utilization"])
        if len(res.utilization) <= UTILIZATION_POINTS:  # every slot as it is
            assert np.allclose(util["t_s"], res.slot_starts, rtol=0, atol=0.05)
            assert np.allclose(util["u"], res.utilization, rtol=0, atol=5e-5)
        else:  # groups of slots, each at its first slot's start
            assert len(util["u"]) == UTILIZATION_POINTS
            assert np.isin(util["t_s"], np.round(res.slot_starts, 1)).all()


def test_long_utilisation_series_are_averaged_in_groups():
    # a linear series over 1000 slots of 2 s: each group's mean is the mean of its ends, and the
    # groups (recovered from their start times) weighted by their sizes add up to the whole
    util = np.linspace(0.0, 0.999, 1000)
    data = json.loads(utilization_json(np.arange(1000) * 2.0, util))
    first = (np.array(data["t_s"]) / 2).astype(int)
    assert len(first) == UTILIZATION_POINTS and first[0] == 0
    last = np.append(first[1:], 1000) - 1
    assert np.allclose(data["u"], (util[first] + util[last]) / 2, atol=5e-5)
    assert np.isclose(((last - first + 1) * np.array(data["u"])).sum(), util.sum(), atol=0.01)


def test_a_row_is_what_the_cli_prints(swept, capsys):
    _, runs, trace = swept
    (row,) = [
        r
        for r in read_rows(runs, "cluster")
        if r["trace"] == str(trace)
        and r["scheduler"] == "random"
        and r["network"] == "shared"
        and r["seed"] == "2"
    ]
    code, out, _ = run(
        capsys, "cluster", "run", "--trace", str(trace), "--cluster", CLUSTER, "--scheduler", "random",
        "--network", "shared", "--seed", "2", "--json",
    )  # fmt: skip
    assert code == 0
    printed = json.loads(out)
    assert set(printed) == set(JSON_KEYS)
    assert all(float(row[k]) == v for k, v in printed.items() if k not in TIMING_COLUMNS)


def test_the_report_has_a_cluster_section(swept):
    _, runs, trace = swept
    page = render([runs])
    assert "Cluster scheduling" in page and "Hierarchical deep RL" not in page
    assert f"{trace} (6 jobs) on {CLUSTER}, objective jct" in page
    assert "synthetic:jobs=12,seed=3 (12 jobs)" in page
    assert len(re.findall(r'src="data:image/png;base64,', page)) == 2  # one pair of panels per trace
    # the table averages the random scheduler over its two seeds
    rows = [r for r in read_rows(runs, "cluster") if r["trace"] == str(trace) and r["scheduler"] == "random"]
    shared = [float(r["avg_jct_s"]) for r in rows if r["network"] == "shared"]
    assert len(shared) == 2 and f"<td>{sum(shared) / 2:.0f}</td>" in page


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "[gadget, fifo, random]",
            "[gadget, fifoo]",
            "schedulers[1]: unknown scheduler 'fifoo'; choose from",
        ),
        ("networks: [reserved, shared]", "networks: [reserved, share]", "networks[1]: Input should be"),
        ("seeds: [1, 2]", "engine: slot", "engine: Input should be 'events' or 'slots'"),
        ("seeds: [1, 2]", "objectives: [jct, speed]", "objectives[1]: objective 'speed' is not one of"),
        ('"synthetic:jobs=12,seed=3"', '"missing.csv"', "traces[1]: trace file 'missing.csv' does not exist"),
        ('"synthetic:jobs=12,seed=3"', '"."', "traces[1]: trace file '.' is a folder"),
    ],
)
def test_config_errors_name_the_key(old, new, expected):
    assert f"runs[0].{expected}" in config_error(_config("synthetic:jobs=5"), old, new)


def test_the_engine_is_the_blocks_own():
    from arsched.cluster.config import DEFAULT_ENGINE, ENGINES
    from arsched.experiments.config import ClusterRuns

    field = ClusterRuns.model_fields["engine"]
    assert field.default == DEFAULT_ENGINE and set(field.annotation.__args__) == set(ENGINES)
    tasks = expand(parse_config(yaml.safe_load(_config("synthetic:jobs=5") + "    engine: slots\n")))
    assert {dict(t.params)["engine"] for t in tasks} == {"slots"}
