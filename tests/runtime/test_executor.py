"""The torch.distributed executor: every algorithm's schedule gives exactly torch's all_reduce
on real processes; a wrong plan is caught; a rank that raises or hangs ends the run with an
error naming it. Spawning processes costs seconds, so the checks share as few spawns as they can."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

import arsched.runtime.executor as executor
from arsched.algorithms import NotApplicable, algorithms, build
from arsched.collective import save
from arsched.errors import ArschedError
from arsched.runtime import ExecutionError, Fault, from_xml, run_schedule, run_schedules, to_xml
from arsched.runtime.watch import Failures
from arsched.topology import parse_spec
from clihelp import assert_one_line_error, run

pytest.importorskip("torch.distributed")

LEAVES = "leafspine:leaves=2,spines=1,servers_per_leaf=2"  # two groups: hierarchical applies
SPECS = ["ring:n=4", "star:n=4", "bcube:n=2,k=1", "torus:dims=2x2", LEAVES]


def test_every_algorithm_matches_torch_all_reduce(monkeypatch):
    schedules, skipped = [], {}
    for spec in SPECS:
        topo = parse_spec(spec)
        for a in (a for a in algorithms() if a.name != "auto"):  # auto returns one of these
            try:
                schedules.append(build(a.name, topo, None, 4096))
            except NotApplicable as e:
                skipped[(spec, a.name)] = str(e)
    assert {name for _, name in skipped} <= {"bcube-native", "torus-native", "hierarchical"}, skipped
    assert (LEAVES, "hierarchical") not in skipped
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


TIMEOUT = 3.0


@pytest.mark.parametrize(
    ("kind", "at", "rank", "words"),
    [
        ("raise", "mid", 1, "failed: RuntimeError: injected fault"),
        ("hang", "mid", 1, "stopped making progress"),
        ("kill", "start", 2, "was killed by SIGKILL"),
        ("kill", "mid", 1, "was killed by SIGKILL"),
        ("kill", "end", 0, "was killed by SIGKILL"),
        ("stop", "start", 0, "is stopped (SIGSTOP or a debugger)"),  # rank 0 holds the rendezvous
        ("stop", "mid", 2, "is stopped (SIGSTOP or a debugger)"),
        ("stop", "end", 1, "is stopped (SIGSTOP or a debugger)"),
    ],
)
def test_the_rank_at_fault_is_named_in_one_sentence(kind, at, rank, words, capfd):
    """Not a peer whose connection broke, nor the rank that got least far when one is frozen;
    within the timeout of the others blocking (well before gloo's own timeout, 30 s later, and
    without a fixed start-up allowance); nothing from the ranks on the terminal."""
    ring = build("ring", parse_spec("ring:n=3"), None, 1 << 14)
    start = time.monotonic()
    with pytest.raises(ExecutionError) as info:
        run_schedule(ring, repeat=2, timeout=TIMEOUT, fault=Fault(rank, kind, at))
    took = time.monotonic() - start
    msg = str(info.value)
    assert msg.startswith(f"rank {rank} (s{rank}) ") and words in msg and "\n" not in msg, msg
    assert took < TIMEOUT + 25, took
    assert capfd.readouterr() == ("", "")


def test_a_bad_fault_is_refused_before_spawning():
    with pytest.raises(ArschedError, match=r"a fault needs a rank in 0\.\.1"):
        run_schedule(two_ranks(), fault=Fault(2, "kill", "start"))
    with pytest.raises(ArschedError, match="a fault needs"):
        run_schedule(two_ranks(), fault=Fault(0, "explode"))


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


PARENT = """
from arsched.algorithms import build
from arsched.runtime import run_schedule
from arsched.topology import parse_spec

if __name__ == "__main__":
    run_schedule(build("ring", parse_spec("ring:n=3"), None, 1 << 14), repeat=10**6, timeout=600)
"""


def test_ranks_end_with_a_parent_killed_outright(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    proc = subprocess.Popen([sys.executable, str(script)], start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        ranks: list[psutil.Process] = []
        while len(ranks) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
            ranks = [p for p in psutil.Process(proc.pid).children() if "spawn_main" in " ".join(p.cmdline())]
        children = psutil.Process(proc.pid).children(recursive=True)  # the ranks, the resource tracker
        assert len(ranks) == 3, children
        proc.kill()
        proc.wait()
        _, alive = psutil.wait_procs(children, timeout=10)
        assert not alive, [" ".join(p.cmdline()) for p in alive]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def test_the_culprit_among_reports():
    """Without processes: the order of reports the parent may see."""
    names = [f"s{i}" for i in range(4)]
    peer_first = Failures(
        errors={3: (10.0, "RuntimeError: Connection reset by peer")}, deaths={2: (10.1, -9)}
    )
    assert peer_first.culprit(names) == (2, "rank 2 (s2) was killed by SIGKILL")  # seen later, named
    abort_after = Failures(errors={1: (10.0, "RuntimeError: boom")}, deaths={2: (10.2, -6)})
    assert abort_after.culprit(names)[0] == 1  # an abort may follow a peer's failure
    realtime = Failures(deaths={0: (1.0, -40)})
    assert realtime.culprit(names) == (0, "rank 0 (s0) was killed by signal 40")
    silent = Failures(deaths={3: (1.0, 3)})
    assert silent.culprit(names) == (3, "rank 3 (s3) exited with code 3 without a report")
