"""The loaders on samples written in the released layouts of Philly, Helios, Alibaba PAI and
Tiresias, and on the example entries the Philly, Helios and PAI owners publish
(tests/cluster/data, see its README): completed jobs by default, stopped ones with keep_failed,
GPU types scaled by their speed, bad rows one sentence."""

from __future__ import annotations

import csv
import json
import math
import shutil
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from arsched.cluster import load_trace
from arsched.cluster.gpus import GPU_SPEED
from arsched.errors import ArschedError
from clihelp import assert_one_line_error, run

DATA = Path(__file__).parent / "data"
PHILLY = DATA / "philly_cluster_job_log.json"
HELIOS = DATA / "helios_cluster_log.csv"
PAI = DATA / "pai" / "pai_task_table.csv"
TIRESIAS = DATA / "tiresias_trace.csv"
PAI_HEADER = "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type\n"


def test_philly_keeps_the_jobs_that_passed_unless_told():
    jobs = json.loads(PHILLY.read_text())
    passed = [j for j in jobs if j["status"] == "Pass"]
    wl, skipped = load_trace(str(PHILLY))
    assert (len(wl), skipped) == (len(passed), 0) == (13, 0)
    i = wl.ids.index("application_1506638472019_14034")  # two attempts: the last one counts
    assert wl.gpus[i] == 4 and wl.duration[i] == pytest.approx(47 * 60 + 29)  # 06:33:12 -> 07:20:41
    wl, skipped = load_trace(str(PHILLY), keep_failed=True)
    # every job but one killed before it ran and one still running when the log was taken
    assert (len(wl), skipped) == (len(jobs) - 2, 0)
    assert wl.gpus.max() == 16  # two machines of 8


def test_helios_keeps_completed_jobs_and_leaves_cpu_jobs_out():
    wl, _ = load_trace(str(HELIOS))
    assert len(wl) == 10
    assert wl.ids[0] == "1425515" and wl.gpus[0] == 1 and wl.duration[0] == 42443
    wl, _ = load_trace(str(HELIOS), keep_failed=True)
    assert len(wl) == 24 and wl.ids[:3] == ("1425511", "1425512", "1425513")  # cancelled, failed, timeout


def test_pai_jobs_from_their_tasks_on_the_simulated_gpu():
    wl, skipped = load_trace(str(PAI))
    assert (len(wl), skipped) == (15, 0)
    job = {k: i for i, k in enumerate(wl.ids)}
    a = job["74a4827b690e470e0f266a75"]  # 2 instances of half a T4 each: 2 whole GPUs
    assert wl.gpus[a] == 2
    assert wl.duration[a] == pytest.approx((1762383 - 1739294) * GPU_SPEED["T4"])
    assert wl.gpus[job["23201d15cbd891239be81e4e"]] == 8  # plan_gpu 800 on one instance
    assert wl.gpus[job["aed8f037c40b16f8a5541b34"]] == 2  # a CPU parameter server and 2 T4 workers
    assert wl.duration[job["02d267fe6c3cd4fb3c8a2c15"]] == pytest.approx(1759666 - 1740210)  # a V100M32
    # arrivals are submissions from pai_job_table.csv, before the first task started
    b = job["99a6a22f3c85cbb928f66609"]
    assert wl.arrival[b] - wl.arrival[a] == pytest.approx(1739241 - 1739178)
    assert "3b33fc20a1f1b94ee5a6ac42" not in job  # still running: left out even with keep_failed
    failed = load_trace(str(PAI), keep_failed=True)[0]
    assert len(failed) == 21 and "49d6bd4f186eabdff51bde79" in failed.ids


def test_pai_without_its_job_table_or_with_a_header(tmp_path):
    alone = tmp_path / "pai_task_table.csv"
    shutil.copy(PAI, alone)
    wl = load_trace(str(alone))[0]
    a, b = wl.ids.index("74a4827b690e470e0f266a75"), wl.ids.index("99a6a22f3c85cbb928f66609")
    assert wl.arrival[b] - wl.arrival[a] == pytest.approx(1739311 - 1739294)  # first task starts
    alone.write_text(PAI_HEADER + PAI.read_text())
    again = load_trace(str(alone))[0]
    assert again.ids == wl.ids and np.array_equal(again.duration, wl.duration)


def test_tiresias_sample():
    wl, skipped = load_trace(str(TIRESIAS), keep_failed=True)  # no status: every row is a job
    assert (len(wl), skipped) == (30, 0)
    assert wl.gpus[0] == 4 and wl.tau[0] == pytest.approx(2649 / 1298) and wl.models[0] == "alexnet"


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ("5.0,9.0,600.0,29.3,100.0", "field 'job_name' heads a row of 9 fields, not the 10"),
        ("5.0,9.0,600.0,29.3,100.0,H100", "field 'gpu_type' is 'H100', not one of V100"),
        ("5.0,9.0,600.0,29.3,-100.0,T4", "field 'plan_gpu' is '-100.0'"),
        ("5.0,,600.0,29.3,100.0,T4", "field 'end_time' is ''"),
        ("9.0,5.0,600.0,29.3,100.0,T4", "field 'end_time' is not after the job's first"),
    ],
)  # fmt: skip
def test_a_bad_pai_row_is_one_sentence_and_exit_2(row, problem, tmp_path, capsys):
    f = tmp_path / "pai_task_table.csv"
    f.write_text(
        "ok,worker,1.0,Terminated,1.0,9.0,600.0,29.3,100.0,V100\nj,worker,1.0,Terminated," + row + "\n"
    )
    code, out, err = run(capsys, "cluster", "run", "--trace", str(f), "--cluster", "star:n=2,gpus=8")
    assert_one_line_error(code, err)
    assert f"{f} row 2: {problem}" in err and out == ""
    assert load_trace(str(f), skip_bad_rows=True)[1] == 1


def test_keep_failed_from_the_cli(capsys):
    jobs = []
    for extra in ((), ("--keep-failed",)):
        code, out, _ = run(capsys, "cluster", "run", "--trace", str(HELIOS), "--json", *extra)
        assert code == 0
        jobs.append(json.loads(out)["jobs"])
    assert jobs == [10, 24]


def test_a_trace_with_no_completed_job_says_so(tmp_path):
    f = tmp_path / "pai_task_table.csv"
    f.write_text("j,worker,1.0,Failed,1.0,9.0,600.0,29.3,100.0,V100\n")
    with pytest.raises(
        ArschedError, match=r"has no usable job \(0 bad rows skipped, 1 jobs that did not complete"
    ):
        load_trace(str(f))


def test_gpu_speeds_from_the_cli(tmp_path, capsys):
    from arsched.cluster.gpus import parse_gpu_speeds

    speeds = parse_gpu_speeds("t4=0.6, A100=2")
    assert speeds["T4"] == 0.6 and speeds["A100"] == 2.0 and speeds["P100"] == GPU_SPEED["P100"]
    f = tmp_path / "pai_task_table.csv"
    f.write_text("j,worker,1.0,Terminated,1.0,101.0,600.0,29.3,100.0,A100\n")
    assert load_trace(str(f), speeds=speeds)[0].duration[0] == pytest.approx(200.0)
    works = []
    for extra in ((), ("--gpu-speed", "T4=1")):
        code, out, _ = run(capsys, "cluster", "run", "--trace", str(PAI), "--json", *extra)
        assert code == 0
        works.append(json.loads(out)["avg_jct_s"])
    assert works[1] > works[0]  # T4 jobs now need their whole recorded time on the simulated GPU
    for bad in ("T4", "T4=0", "T4=fast", "=1", "T4=inf"):
        code, out, err = run(capsys, "cluster", "run", "--trace", str(PAI), "--gpu-speed", bad)
        assert_one_line_error(code, err)
        assert "is not TYPE=F" in err and out == ""


UPSTREAM = DATA / "upstream"  # the trace owners' own example entries (CC BY 4.0, see data/README.md)


def test_philly_on_its_owners_example_entry():
    path = UPSTREAM / "philly" / "cluster_job_log.json"
    (job,) = json.loads(path.read_text())
    last = job["attempts"][-1]
    run = datetime.fromisoformat(last["end_time"]) - datetime.fromisoformat(last["start_time"])
    wl, skipped = load_trace(str(path))
    assert (wl.ids, skipped) == ((job["jobid"],), 0)
    assert wl.gpus[0] == sum(len(d["gpus"]) for d in last["detail"])  # the last attempt's GPUs
    assert wl.duration[0] == pytest.approx(run.total_seconds())  # and its run time, not the first attempt's


def test_helios_on_its_owners_example_rows():
    path = UPSTREAM / "helios" / "cluster_log.csv"
    rows = list(csv.DictReader(path.open()))
    done = [r for r in rows if r["state"] == "COMPLETED"]
    wl, skipped = load_trace(str(path))
    assert (wl.ids, skipped) == (tuple(r["job_id"] for r in done), 0)
    assert wl.gpus.tolist() == [int(r["gpu_num"]) for r in done]
    assert wl.duration.tolist() == [float(r["duration"]) for r in done]
    every, _ = load_trace(str(path), keep_failed=True)  # FAILED and CANCELLED too
    assert every.ids == tuple(r["job_id"] for r in rows)


def test_pai_on_its_owners_example_entry():
    path = UPSTREAM / "pai" / "pai_task_table.csv"
    (row,) = list(csv.reader(path.open()))
    task = dict(zip(PAI_HEADER.strip().split(","), row, strict=True))
    wl, skipped = load_trace(str(path))
    assert (wl.ids, skipped) == ((task["job_name"],), 0)
    assert wl.gpus[0] == math.ceil(float(task["plan_gpu"]) / 100)  # half a GPU takes a whole one
    run_s = float(task["end_time"]) - float(task["start_time"])
    assert wl.duration[0] == pytest.approx(run_s * GPU_SPEED[task["gpu_type"]])
