"""Trace loaders (Tiresias, Philly, Helios, synthetic) and cluster specs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from arsched.cluster import load_trace, parse_cluster, traces
from arsched.cluster.models import ZOO
from arsched.cluster.synthetic import synthetic
from arsched.errors import ArschedError
from arsched.limits import ENV, TRACE_BYTES, LimitError
from clihelp import assert_one_line_error, run

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="shared/data is not beside the project")

TIRESIAS_HEAD = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
HELIOS_HEAD = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"


@needs_data
def test_tiresias_shipped_trace():
    wl, skipped = load_trace(str(DATA / "tiresias_60_job.csv"))
    assert (len(wl), skipped) == (60, 0)
    # job 0: 1 GPU, 606 iterations of vgg19 in 164 s
    i = wl.ids.index("0")
    assert wl.gpus[i] == 1 and wl.work[i] == 606 and wl.tau[i] == pytest.approx(164 / 606)
    assert wl.grad_bytes[i] == pytest.approx(4 * 143.7e6)
    assert wl.duration[i] == pytest.approx(164)
    assert (np.diff(wl.arrival) >= 0).all() and wl.arrival[0] == 0


def test_tiresias_bad_row_names_file_row_field(tmp_path, caplog):
    f = tmp_path / "t.csv"
    f.write_text(
        TIRESIAS_HEAD + "0,1,0,100,resnet50,50,1\n1,two,5,100,vgg16,50,1\n2,1,9,100,nosuchnet,50,1\n"
    )
    with pytest.raises(ArschedError, match=rf"{f} row 3: field 'num_gpu' is 'two', not a number"):
        load_trace(str(f))
    with caplog.at_level("DEBUG", logger="arsched.cluster"):
        wl, skipped = load_trace(str(f), skip_bad_rows=True)
    assert (len(wl), skipped) == (1, 2)
    assert any("row 3 skipped: field 'num_gpu'" in m for m in caplog.messages)  # which rows, and why


def test_philly_json(tmp_path):
    jobs = [
        {
            "jobid": "application_1",
            "status": "Pass",
            "user": "u",
            "vc": "v",
            "submitted_time": "2017-10-03 02:00:00",
            "attempts": [
                {
                    "start_time": "2017-10-03 02:00:10",
                    "end_time": "2017-10-03 03:00:10",
                    "detail": [
                        {"ip": "m1", "gpus": ["gpu0", "gpu1"]},
                        {"ip": "m2", "gpus": ["gpu0", "gpu1"]},
                    ],
                }
            ],
        },
        {
            "jobid": "application_2",
            "status": "Killed",
            "user": "u",
            "vc": "v",
            "submitted_time": "2017-10-03 02:30:00",
            "attempts": [],
        },
        {
            "jobid": "application_3",
            "status": "Pass",
            "user": "u",
            "vc": "v",
            "submitted_time": "2017-10-03 02:10:00",
            "attempts": [
                {
                    "start_time": "2017-10-03 02:20:00",
                    "end_time": None,
                    "detail": [{"ip": "m3", "gpus": ["gpu0"]}],
                }
            ],
        },
    ]
    f = tmp_path / "cluster_job_log"
    f = f.with_suffix(".json")
    f.write_text(json.dumps(jobs))
    # job 2 was killed before it ran, job 3 was still running when the log was taken: left out
    for keep in (False, True):
        wl, skipped = load_trace(str(f), keep_failed=keep)
        assert (len(wl), skipped) == (1, 0)
    assert wl.gpus[0] == 4 and wl.duration[0] == pytest.approx(3600.0)
    assert wl.models[0] in ZOO
    jobs[0]["attempts"] = {"start_time": "2017-10-03 02:00:10"}
    f.write_text(json.dumps(jobs))
    with pytest.raises(ArschedError, match=rf"{f} row 1: field 'attempts' is not a list of attempts"):
        load_trace(str(f))


def test_helios_csv(tmp_path):
    f = tmp_path / "cluster_log.csv"
    f.write_text(
        HELIOS_HEAD
        + "1,u1,vc1,8,32,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:01:00,2020-04-01 01:01:00,3600,60\n"
        + "2,u1,vc1,0,4,1,COMPLETED,2020-04-01 00:00:05,2020-04-01 00:00:05,2020-04-01 00:10:05,600,0\n"
        + "3,u2,vc2,2,8,1,COMPLETED,2020-04-01 00:02:00,2020-04-01 00:02:00,2020-04-01 00:03:00,-5,0\n"
        + "4,u2,vc2,2,8,1,FAILED,2020-04-01 00:02:00,2020-04-01 00:02:00,2020-04-01 00:03:00,60,0\n"
    )
    with pytest.raises(ArschedError, match=rf"{f} row 4: field 'duration' is '-5'"):
        load_trace(str(f))
    wl, skipped = load_trace(str(f), skip_bad_rows=True)
    assert (len(wl), skipped) == (1, 1)  # the CPU job (gpu_num 0) and the failed one are left out, not bad
    assert wl.gpus[0] == 8 and wl.duration[0] == pytest.approx(3600.0)
    wl, skipped = load_trace(str(f), skip_bad_rows=True, keep_failed=True)
    assert (len(wl), skipped) == (2, 1) and wl.ids[1] == "4"


def test_unknown_trace_format(tmp_path):
    f = tmp_path / "x.csv"
    f.write_text("a,b\n1,2\n")
    with pytest.raises(ArschedError, match="not a known trace"):
        load_trace(str(f))


def test_synthetic_is_seeded_and_philly_shaped():
    a, b, c = synthetic(500, seed=3), synthetic(500, seed=3), synthetic(500, seed=4)
    assert a.ids == b.ids and np.array_equal(a.work, b.work) and np.array_equal(a.arrival, b.arrival)
    assert not np.array_equal(a.work, c.work)
    assert (a.gpus == 1).mean() > 0.5  # most Philly jobs use one GPU
    assert a.duration.min() >= 60 and a.duration.max() <= 8 * 3600 + 1e-6
    assert set(a.models) <= set(ZOO)


@needs_data
def test_cluster_specs():
    c = parse_cluster(str(DATA / "tiresias_n32g4.csv"))
    assert (c.num_servers, c.gpus_per_server) == (32, 4)
    c = parse_cluster(str(DATA / "tiresias_n160g8.csv"))
    assert (c.num_servers, c.gpus_per_server) == (160, 8)
    c = parse_cluster(str(DATA / "lingjun2023_topo.csv") + ",gpus=8")
    assert (c.num_servers, c.gpus_per_server) == (847, 8)
    # servers are grouped by ToR, so consecutive servers mostly share their first switch
    assert (np.diff(c.group) >= 0).all()


def test_cluster_spec_keys():
    c = parse_cluster("leafspine:leaves=2,spines=2,servers_per_leaf=4,gpus=4,intra=100GB/s")
    assert (c.num_servers, c.gpus_per_server, c.intra_bandwidth) == (8, 4, 100e9)
    with pytest.raises(ArschedError, match="gpus must be a positive integer"):
        parse_cluster("leafspine:leaves=2,spines=2,servers_per_leaf=4,gpus=x")


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_a_50_gb_trace_is_refused_before_it_is_read(suffix, tmp_path, capsys):
    """Read whole, a trace takes up to 26 bytes of memory per byte of file: a 50 GB one (sparse
    here, so it takes no disk) is one sentence at once instead of a process that grows."""
    big = tmp_path / f"huge{suffix}"
    with big.open("wb") as f:
        f.truncate(50 * 10**9)
    code, out, err = run(capsys, "--max-memory", "64GB", "cluster", "run", "--trace", str(big))
    assert_one_line_error(code, err)
    assert out == ""
    assert f"trace {big} holds 50 GB to read, needing about 1.6 TB of memory" in err
    assert "limit of 64 GB" in err


def test_the_trace_size_follows_the_memory_limit(tmp_path, monkeypatch):
    f = tmp_path / "t.csv"
    f.write_bytes(TIRESIAS_HEAD.encode() + b"0,1,0,100,resnet50,50,1\n\xff\xfe")  # not UTF-8 at the end
    monkeypatch.setenv(ENV, str(f.stat().st_size * TRACE_BYTES - 1))
    with pytest.raises(LimitError, match=rf"trace {f} holds 93 B to read"):
        load_trace(str(f))  # refused before the bytes that are not UTF-8 are read
    monkeypatch.setenv(ENV, str(f.stat().st_size * TRACE_BYTES))
    with pytest.raises(ArschedError, match="is not UTF-8 text"):
        load_trace(str(f))


@pytest.mark.parametrize("fmt", ["tiresias", "helios", "philly", "pai"])
def test_a_trace_of_more_jobs_than_a_synthetic_one_is_refused(fmt, tmp_path, monkeypatch):
    monkeypatch.setattr(traces, "MAX_JOBS", 2)
    f = tmp_path / {"philly": "t.json", "pai": "pai_task_table.csv"}.get(fmt, "t.csv")
    if fmt == "tiresias":
        f.write_text(TIRESIAS_HEAD + "".join(f"{i},1,{i},100,resnet50,50,1\n" for i in range(3)))
    elif fmt == "helios":
        row = "{},u,vc,1,4,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:00,2020-04-01 00:10:00,600,0\n"
        f.write_text(HELIOS_HEAD + "".join(row.format(i) for i in range(3)))
    elif fmt == "pai":
        f.write_text(
            "".join(f"j{i},worker,1.0,Terminated,{i}.0,900.0,600.0,29.3,100.0,V100\n" for i in range(3))
        )
    else:
        job = {
            "status": "Pass",
            "submitted_time": "2017-10-03 02:00:00",
            "attempts": [
                {
                    "start_time": "2017-10-03 02:00:10",
                    "end_time": "2017-10-03 03:00:10",
                    "detail": [{"ip": "m1", "gpus": ["gpu0"]}],
                }
            ],
        }
        f.write_text(json.dumps([{"jobid": f"j{i}", **job} for i in range(3)]))
    with pytest.raises(ArschedError, match=rf"{f} has more than 2 jobs \(as many as a synthetic trace"):
        load_trace(str(f))
    monkeypatch.setattr(traces, "MAX_JOBS", 3)
    assert len(load_trace(str(f))[0]) == 3
