"""The torch.distributed executor: every algorithm's schedule gives exactly torch's all_reduce
on real processes; a wrong plan is caught; a rank that raises or hangs ends the run with an
error naming it. Spawning processes costs seconds, so the checks share as few spawns as they can."""

from __future__ import annotations

import json

import pytest

import arsched.runtime.executor as executor
from arsched.algorithms import NotApplicable, algorithms, build
from arsched.collective import save
from arsched.errors import ArschedError
from arsched.runtime import from_xml, to_xml
from arsched.runtime.executor import ExecutionError, Fault, run_schedule, run_schedules
from arsched.topology import parse_spec
from clihelp import assert_one_line_error, run

pytest.importorskip("torch.distributed")

SPECS = ["ring:n=4", "star:n=4", "bcube:n=2,k=1", "torus:dims=2x2"]


def test_every_algorithm_matches_torch_all_reduce(monkeypatch):
    schedules, skipped = [], {}
    for spec in SPECS:
        topo = parse_spec(spec)
        for a in algorithms():
            try:
                schedules.append(build(a.name, topo, None, 4096))
            except NotApplicable as e:
                skipped[(spec, a.name)] = str(e)
    assert {name for _, name in skipped} <= {"bcube-native", "torus-native"}, skipped
    ring = build("ring", parse_spec("ring:n=4"), None, 4096)
    schedules.append(from_xml(to_xml(ring), ring.topology, ring.ranks, 4096))  # an imported one
    # a control: the same ring with its last step dropped must not match torch
    control = build("ring", parse_spec("ring:n=4"), None, 4096)
    schedules.append(control)
    plans = executor.rank_plans
    monkeypatch.setattr(
        executor, "rank_plans", lambda s: [p[:-1] for p in plans(s)] if s is control else plans(s)
    )
    results = run_schedules(schedules, repeat=1, timeout=60)
    for s, r in zip(schedules[:-1], results[:-1], strict=True):
        assert r.max_abs_error == 0.0, s
        assert r.ranks == 4 and r.nbytes == 4096 and r.time_s > 0 and r.torch_allreduce_time_s > 0
        assert len(r.times_s) == len(r.torch_times_s) == 1
    assert results[-1].max_abs_error > 0


def two_ranks():
    return build("ring", parse_spec("ring:n=2"), None, 1024)


@pytest.mark.parametrize(
    ("kind", "words"), [("raise", "injected fault"), ("hang", "stopped making progress")]
)
def test_a_failing_rank_is_named(kind, words):
    with pytest.raises(ExecutionError) as info:
        run_schedule(two_ranks(), repeat=1, timeout=2, fault=Fault(1, kind))
    msg = str(info.value)
    assert msg.startswith("rank 1 (s1)") and words in msg and "\n" not in msg


def test_bad_arguments_need_no_processes():
    s = two_ranks()
    for kwargs, words in (
        ({"backend": "mpi"}, "backend"),
        ({"repeat": 0}, "repeat"),
        ({"backend": "nccl"}, "GPUs"),
    ):
        with pytest.raises(ArschedError) as info:
            run_schedule(s, **kwargs)
        assert words in str(info.value)
    with pytest.raises(ArschedError, match="same number of ranks"):
        run_schedules([s, build("ring", parse_spec("ring:n=3"), None, 1024)])
    broken = build("ring", parse_spec("ring:n=3"), None, 1024)
    broken.op[-1] = 0  # a copy turned into a reduce: double count
    with pytest.raises(ArschedError, match="not a valid AllReduce"):
        run_schedule(broken)


def test_cli_run_json(tmp_path, capsys):
    save(two_ranks(), tmp_path / "s.json")
    code, out, err = run(capsys, "run", str(tmp_path / "s.json"), "--size", "8KB", "--repeat", "2", "--json")
    assert code == 0, err
    info = json.loads(out)
    assert {"ranks", "max_abs_error", "time_s", "torch_allreduce_time_s"} <= set(info)
    assert info["ranks"] == 2 and info["max_abs_error"] == 0 and info["nbytes"] == 8000
    code, _, err = run(capsys, "run", str(tmp_path / "s.json"), "--backend", "mpi")
    assert_one_line_error(code, err)
