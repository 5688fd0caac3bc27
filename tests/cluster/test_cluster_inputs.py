"""Hostile and careless inputs of the cluster package: every one is refused with one sentence
naming the file, row and field (or the option) before any simulation runs."""

from __future__ import annotations

import json

import pytest

from arsched.cluster import SimConfig, load_trace, parse_cluster, simulate
from arsched.cluster.schedulers import get_scheduler
from arsched.errors import ArschedError
from clihelp import assert_one_line_error, run

TIRESIAS = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
HELIOS = "job_id,gpu_num,state,submit_time,duration\n"
TRACE = "synthetic:jobs=6,seed=1,median=200,sigma=0.5"
CLUSTER = "star:n=4,gpus=4"


def _philly(submitted, end=100) -> str:
    attempt = {"start_time": 0, "end_time": end, "detail": [{"ip": "m1", "gpus": ["g0"]}]}
    return json.dumps([{"jobid": "a", "status": "Pass", "submitted_time": submitted, "attempts": [attempt]}])


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("t.csv", TIRESIAS + "1,2,inf,100,resnet50,100,0\n", r"row 2: field 'submit_time' is 'inf'; it must"),
        ("t.csv", TIRESIAS + "1,2,0,100,resnet50,inf,0\n", r"row 2: field 'duration' is 'inf'"),
        ("t.csv", TIRESIAS + "1,nan,0,100,resnet50,100,0\n", r"row 2: field 'num_gpu' is 'nan'"),
        ("t.csv", TIRESIAS + "1,1e300,0,100,resnet50,100,0\n", r"field 'num_gpu' is '1e300', not a whole"),
        ("h.csv", HELIOS + "1,2,COMPLETED,inf,100\n", r"row 2: field 'submit_time' is 'inf', not a time"),
        ("h.csv", HELIOS + "1,inf,COMPLETED,0,100\n", r"row 2: field 'gpu_num' is 'inf'"),
        ("h.csv", HELIOS + "1,2,COMPLETED,5,nan\n", r"row 2: field 'duration' is 'nan'"),
        ("p.json", _philly("inf"), r"row 1: field 'submitted_time' is 'inf', not a time"),
        ("p.json", _philly(0, 1e400), r"field 'attempts\[-1\]\.end_time' is inf"),
        ("p.json", _philly(0, "nan"), r"field 'attempts\[-1\]\.end_time' is 'nan'"),
        ("p.json", _philly(-100), r"row 1: field 'submitted_time' is -100, not a time .* seconds >= 0"),
        ("p.json", _philly(10**400), r"row 1: field 'submitted_time' is 1000"),
    ],
)  # fmt: skip
def test_non_finite_and_negative_trace_values_name_the_row_and_field(tmp_path, name, text, expected):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ArschedError, match=expected):
        load_trace(str(path))


@pytest.mark.parametrize("what", ["trace", "cluster spec"])
def test_csv_files_that_are_not_utf8_or_have_a_huge_field_are_one_sentence(tmp_path, what):
    head = TIRESIAS if what == "trace" else "num_switch,num_node_p_switch,num_gpu_p_node\n"
    first = "1,1,0,100,resnet50,100,0\n" if what == "trace" else "1,2,4\n"

    def load(path):
        return load_trace(str(path)) if what == "trace" else parse_cluster(str(path))

    bad = tmp_path / "bytes.csv"
    bad.write_bytes(head.encode() + b"1,1,0,100,r\xffsnet,100,0\n" * 3000)
    with pytest.raises(ArschedError, match=rf"^{what} .*bytes\.csv is not UTF-8 text$"):
        load(bad)
    big = tmp_path / "big.csv"
    big.write_text(head + first + '2,"' + "x" * 140_000 + '",3\n')
    with pytest.raises(
        ArschedError, match=rf"^{what} .*big\.csv line 3 is not CSV: field larger than field limit"
    ):
        load(big)


def test_a_philly_log_nested_too_deeply_is_refused(tmp_path):
    path = tmp_path / "p.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ArschedError, match="nested too deeply"):
        load_trace(str(path))


def test_gpus_per_server_is_never_silently_replaced():
    for spec in ("star:n=4,gpus=0", "star:n=4,gpus=1000000000"):
        with pytest.raises(
            ArschedError, match=r"a cluster needs 1 to 4096 GPUs per server, got (0|1000000000)$"
        ):
            parse_cluster(spec)
    with pytest.raises(ArschedError, match=r"got 0$"):
        parse_cluster("star:n=4", gpus=0)
    with pytest.raises(ArschedError, match="intra-server bandwidth must be finite and > 0, got 0"):
        parse_cluster("star:n=4", intra=0.0)
    assert parse_cluster("star:n=4,gpus=4", gpus=2).gpus_per_server == 2  # the argument wins, as before


def test_arrival_scale_and_simulation_settings_must_be_finite():
    wl, _ = load_trace(TRACE)
    for factor in (float("inf"), float("nan"), 0.0, 1e308):
        with pytest.raises(ArschedError, match=r"arrival scale must be|finite number >= 0"):
            wl.scale_arrivals(factor)
    for kwargs in ({"slot": float("inf")}, {"slot": 0.0}, {"restart": -1.0}, {"alpha": float("nan")}):
        with pytest.raises(ArschedError, match="must be a finite time"):
            SimConfig(**kwargs)


def test_a_run_that_would_need_too_many_slots_is_refused_before_it_starts():
    wl, _ = load_trace(TRACE)
    with pytest.raises(ArschedError, match=r"may need .* slots of 1e-09 s .* more than the 100,000,000"):
        simulate(wl, parse_cluster(CLUSTER), get_scheduler("fifo"), SimConfig(slot=1e-9))


def test_cli_refuses_hostile_options_in_one_line(capsys, tmp_path):
    inf_trace = tmp_path / "t.csv"
    inf_trace.write_text(TIRESIAS + "1,2,inf,100,resnet50,100,0\n")
    cases = {
        ("run", "--arrival-scale", "inf"): "arrival scale must be a finite number > 0, got inf",
        ("run", "--cluster", "star:n=4,gpus=0"): "got 0",
        ("run", "--slot", "1ns"): "use a longer slot",
        ("run", "--trace", str(inf_trace)): "field 'submit_time' is 'inf'",
        ("compare", "--schedulers", ","): "--schedulers ',' names nothing",
        ("compare", "--schedulers", ""): "--schedulers '' names nothing",
        ("compare", "--network", " , "): "--network ' , ' names nothing",
    }
    for (command, *argv), expected in cases.items():
        code, out, err = run(capsys, "cluster", command, "--trace", TRACE, "--cluster", CLUSTER, *argv)
        assert_one_line_error(code, err)
        assert expected in err and out == ""


def test_run_json_is_the_same_bytes_twice_and_timings_only_when_asked(capsys):
    argv = ["cluster", "run", "--trace", TRACE, "--cluster", CLUSTER, "--json"]
    first, second = run(capsys, *argv), run(capsys, *argv)
    assert first[0] == 0 and first == second
    assert "scheduler_s_per_slot" not in first[1]
    code, out, _ = run(capsys, *argv, "--timings")
    timed = json.loads(out)
    assert code == 0 and list(timed)[-1] == "scheduler_s_per_slot"
    assert {k: v for k, v in timed.items() if k != "scheduler_s_per_slot"} == json.loads(first[1])
    argv[1] = "compare"
    first, second = (
        run(capsys, *argv, "--schedulers", "fifo,random"),
        run(capsys, *argv, "--schedulers", "fifo,random"),
    )
    assert first[0] == 0 and first == second and "scheduler_s_per_slot" not in first[1]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ("jobs=100000000", "jobs must be 1 to 1,000,000, got 100000000"),
        ("jobs=5,seed=-1", "seed must be >= 0, got -1"),
        ("jobs=5,interval=1e400", "interval must be finite and > 0, got inf"),
        ("jobs=1e400", "jobs must be a number, got '1e400'"),
    ],
)
def test_synthetic_traces_are_bounded(params, expected):
    with pytest.raises(ArschedError, match=f"synthetic trace parameter {expected}$"):
        load_trace(f"synthetic:{params}")
