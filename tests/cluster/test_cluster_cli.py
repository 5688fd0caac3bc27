"""`arsched cluster run|compare|schedulers`: JSON keys, plots, the scheduler list, one-line errors."""

from __future__ import annotations

import json

import numpy as np

from clihelp import PNG_MAGIC, assert_one_line_error, run

TRACE = "synthetic:jobs=12,seed=2,median=200,sigma=0.5"
CLUSTER = "leafspine:leaves=2,spines=2,servers_per_leaf=4,gpus=8"
KEYS = ["jobs", "finished", "avg_jct_s", "p95_jct_s", "makespan_s", "total_utility", "gpu_utilization",
        "energy_kwh", "jain_index"]  # fmt: skip


def test_run_json_keys(capsys):
    code, out, err = run(
        capsys, "cluster", "run", "--trace", TRACE, "--cluster", CLUSTER, "--network", "shared", "--json"
    )
    assert (code, err) == (0, "")
    res = json.loads(out)
    assert list(res) == KEYS and res["jobs"] == res["finished"] == 12


def test_compare_plots(capsys, tmp_path):
    code, out, _ = run(
        capsys,
        "cluster",
        "compare",
        "--trace",
        TRACE,
        "--cluster",
        CLUSTER,
        "--schedulers",
        "gadget,fifo",
        "--network",
        "reserved,shared",
        "--plot",
        str(tmp_path),
    )
    assert code == 0 and "gadget" in out
    for name in ("jct_cdf.png", "utilization.png", "utility.png"):
        assert (tmp_path / name).read_bytes().startswith(PNG_MAGIC)


def test_bad_inputs_one_line(capsys, tmp_path):
    bad = tmp_path / "t.csv"
    bad.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,x,vgg16,5,1\n")
    for argv in (
        ["--trace", str(bad)],
        ["--trace", TRACE, "--scheduler", "nope"],
        ["--trace", TRACE, "--network", "tcp"],
        ["--trace", TRACE, "--cluster", "star:n=1"],
        ["--trace", "missing.csv"],
        ["--trace", TRACE, "--arrival-scale", "0"],
        ["--trace", TRACE, "--objective", "lossy"],
    ):
        code, _, err = run(capsys, "cluster", "run", *argv)
        assert_one_line_error(code, err)
    code, _, err = run(capsys, "cluster", "run", "--trace", str(bad))
    assert "row 2: field 'iterations'" in err


def test_skip_bad_rows_reports_count(capsys, tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                 "0,1,0,100,vgg16,50,1\n1,1,0,x,vgg16,5,1\n")  # fmt: skip
    code, out, _ = run(capsys, "cluster", "run", "--trace", str(f), "--cluster", CLUSTER, "--skip-bad-rows")
    assert code == 0 and "skipped 1 bad rows" in out


def test_arrival_scale_compresses_the_trace(capsys):
    from arsched.cluster import load_trace

    wl, _ = load_trace(TRACE)
    half = wl.scale_arrivals(0.5)
    assert np.array_equal(half.arrival, wl.arrival / 2) and np.array_equal(half.work, wl.work)
    # on 16 GPUs, jobs arriving 100x as fast queue longer behind FIFO's head
    base = ["cluster", "run", "--trace", TRACE, "--cluster", "star:n=2,gpus=8", "--scheduler=fifo", "--json"]
    fast = json.loads(run(capsys, *base, "--arrival-scale", "0.01")[1])
    slow = json.loads(run(capsys, *base)[1])
    assert fast["finished"] == 12 and fast["avg_jct_s"] > slow["avg_jct_s"]


def test_schedulers_lists_every_scheduler_with_what_it_does(capsys):
    from arsched.cluster.schedulers import SCHEDULERS

    code, out, err = run(capsys, "cluster", "schedulers")
    assert (code, err) == (0, "")
    for name, cls in SCHEDULERS.items():
        assert name in out and cls.about.split()[0] in out  # its summary, wrapped or not


def test_elastic_and_restart_are_one_setting_for_every_scheduler(capsys):
    base = ["cluster", "run", "--trace", TRACE, "--cluster", "star:n=4,gpus=8", "--json"]

    def jct(*extra: str) -> dict[str, float]:
        return {
            s: json.loads(run(capsys, *base, "--scheduler", s, *extra)[1])["avg_jct_s"]
            for s in ("gadget", "fifo")
        }

    rigid, elastic = jct(), jct("--elastic", "2")
    assert elastic["fifo"] == rigid["fifo"]  # rigid by nature: FIFO runs every job at its request
    assert elastic["gadget"] < rigid["gadget"]  # room to grow, used
    assert jct("--restart", "0s") == jct("--restart", "0")  # free restarts, either spelling
    code, out, _ = run(capsys, "cluster", "compare", "--trace", TRACE, "--cluster", CLUSTER, "--schedulers",
                       "gadget", "--elastic", "2", "--restart", "30s")  # fmt: skip
    assert code == 0 and "elastic 2, restart 30 s" in " ".join(out.split())
    for bad in (["--elastic", "0"], ["--elastic", "65"], ["--restart", "-5s"]):
        assert_one_line_error(*run(capsys, *base, *bad)[::2])
