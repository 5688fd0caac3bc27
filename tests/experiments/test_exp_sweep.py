"""Sweeps: one row per task, re-runs skip what is done, a killed sweep resumes without duplicates."""

from __future__ import annotations

import contextlib
import csv
import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from arsched.errors import ArschedError
from arsched.experiments import expand, load_config, read_rows, sweep
from arsched.experiments.tasks import TIMING_COLUMNS
from clihelp import assert_one_line_error, run

KILL_CONFIG = """\
name: kill
runs:
  - kind: algorithm
    topologies: ["bcube:n=3,k=1", "torus:dims=3x3"]
    algorithms: [ps, sharded-ps, ring, dbtree, rhd]
    sizes: [64KB, 64MB]
    models: [flow, rounds]
"""


def _ids(folder: Path) -> list[str]:
    return [r["task_id"] for r in read_rows(folder, "algorithm")]


def _stable(rows):
    """Rows without the timing columns, in task-id order."""
    return sorted(
        ({k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rows), key=lambda r: r["task_id"]
    )


def test_sweep_writes_each_task_once_and_reruns_skip(small_config, tmp_path):
    tasks = expand(load_config(small_config))
    out = tmp_path / "r"
    seen = []
    first = sweep(tasks, out, workers=1, progress=lambda done, total: seen.append((done, total)))
    assert (first.total, first.skipped, first.done, first.failures) == (len(tasks), 0, len(tasks), [])
    assert seen[0] == (0, len(tasks)) and seen[-1] == (len(tasks), len(tasks))
    assert sorted(_ids(out)) == sorted(t.id for t in tasks)
    before = (out / "algorithm.csv").read_bytes()
    again = sweep(tasks, out, workers=1)
    assert (again.skipped, again.done) == (len(tasks), 0)
    assert (out / "algorithm.csv").read_bytes() == before


def test_a_half_written_row_is_cut_and_redone(small_config, tmp_path):
    tasks = expand(load_config(small_config))
    out = tmp_path / "r"
    sweep(tasks[:5], out, workers=1)
    full = read_rows(out, "algorithm")
    with open(out / "algorithm.csv", "a") as f:
        f.write(tasks[5].id + ",ring:n=4,ring:n=4,ps,ps,{},")  # killed in the middle of a row
    sweep(tasks[:8], out, workers=1)
    rows = read_rows(out, "algorithm")
    assert _ids(out) == [t.id for t in tasks[:8]]
    assert rows[:5] == full
    assert all(r["wall_s"] for r in rows)


def test_killed_sweep_leaves_no_process_and_resumes_with_one_row_per_task(tmp_path):
    config = tmp_path / "kill.yaml"
    config.write_text(KILL_CONFIG)
    out = tmp_path / "r"
    tasks = expand(load_config(config))
    cmd = [sys.executable, "-m", "arsched.cli", "sweep", str(config), "--out", str(out), "--workers", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(_ids(out)) < 10 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        children = psutil.Process(proc.pid).children(recursive=True)  # pool workers, resource tracker
        proc.kill()  # the sweep alone, mid-run: its workers must end by themselves
        proc.wait()
        killed_at = len(_ids(out))
        assert 10 <= killed_at < len(tasks), (killed_at, proc.stderr.read())
        assert len(children) >= 2
        _, alive = psutil.wait_procs(children, timeout=10)
        assert not alive, [" ".join(p.cmdline()) for p in alive]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    code = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert code.returncode == 0, code.stderr
    ids = _ids(out)
    assert len(ids) == len(set(ids)) == len(tasks)
    assert set(ids) == {t.id for t in tasks}
    with open(out / "algorithm.csv", newline="") as f:
        header, *rows = csv.reader(f)
    assert all(len(row) == len(header) for row in rows)


def test_a_second_sweep_on_the_same_folder_is_refused(small_config, tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    with open(out / ".sweep.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with pytest.raises(ArschedError, match="another sweep is writing"):
            sweep(expand(load_config(small_config)), out, workers=1)


def test_results_from_another_version_are_refused(small_config, tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    (out / "algorithm.csv").write_text("task_id,time\n")
    with pytest.raises(ArschedError, match="columns from another version"):
        sweep(expand(load_config(small_config)), out, workers=1)


def test_pool_gives_the_rows_of_one_process(small_config, tmp_path):
    tasks = expand(load_config(small_config))[:12]
    sweep(tasks, tmp_path / "one", workers=1)
    sweep(tasks, tmp_path / "pool", workers=2)
    assert _stable(read_rows(tmp_path / "pool", "algorithm")) == _stable(
        read_rows(tmp_path / "one", "algorithm")
    )


def test_cli_sweep_and_dry_run(capsys, small_config, tmp_path):
    out = tmp_path / "r"
    code, text, _ = run(capsys, "sweep", str(small_config), "--out", str(out), "--dry-run")
    assert code == 0 and "36 of 36 tasks to run" in text
    code, text, _ = run(capsys, "sweep", str(small_config), "--out", str(out), "--workers", "1")
    assert code == 0 and "36 run, 0 already done, 0 failed of 36 tasks" in text
    assert (out / "config.yaml").read_text() == small_config.read_text()
    code, text, _ = run(capsys, "sweep", str(small_config), "--out", str(out), "--dry-run")
    assert "0 of 36 tasks to run" in text
    for args in (["--backend", "mpi"], ["--workers", "0"], ["--address", "auto"]):
        code, _, err = run(capsys, "sweep", str(small_config), "--out", str(out), *args)
        assert_one_line_error(code, err)


def test_failed_tasks_are_reported_and_retried(capsys, temporary_algorithm, small_config, tmp_path):
    def flaky(topology, ranks, nbytes):
        raise RuntimeError("out of memory")

    temporary_algorithm("flaky", flaky)
    small_config.write_text(small_config.read_text().replace("{name: rhd, label: halving-doubling}", "flaky"))
    out = tmp_path / "r"
    code, text, _ = run(capsys, "sweep", str(small_config), "--out", str(out), "--workers", "1")
    assert code == 1
    assert "24 run, 0 already done, 12 failed of 36 tasks" in text
    assert "RuntimeError: out of memory" in text
    assert {r["algorithm"] for r in read_rows(out, "algorithm")} == {"ps", "ring"}
    code, text, _ = run(capsys, "sweep", str(small_config), "--out", str(out), "--workers", "1")
    assert code == 1 and "0 run, 24 already done, 12 failed" in text


def test_a_kind_whose_extra_is_missing_says_so(capsys, tmp_path, monkeypatch):
    import dataclasses

    from arsched.experiments.tasks import KINDS

    monkeypatch.setitem(KINDS, "rl", dataclasses.replace(KINDS["rl"], requires="arsched_no_such_module"))
    config = tmp_path / "c.yaml"
    config.write_text('name: x\nruns:\n  - kind: rl\n    topologies: ["bcube:n=2,k=1"]\n')
    code, _, err = run(capsys, "sweep", str(config), "--out", str(tmp_path / "r"))
    assert_one_line_error(code, err)
    assert "rl runs need the arsched_no_such_module package" in err and "arsched[rl]" in err
