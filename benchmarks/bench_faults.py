"""Faults in `arsched run`, injected from outside: is the rank at fault named, how soon, how quietly?

A ring schedule runs on N local gloo processes (`arsched run --repeat R --timeout T`) while this
script sends SIGKILL or SIGSTOP to one rank's process: at start-up (as soon as the rank's
process exists, before it has imported torch), mid-run (when its log says it started run R/2)
or at the end (when it started its last run). It finds the rank's process by the log file it
writes (`rank-<r>.log` in the run's temporary folder). Reported per case: the rank the command
named, whether that is the one signalled, the seconds from the signal to the command's exit
(a stopped rank can only be told from a slow one after T seconds without progress, so the
target there is T + 1 s; a killed one, about a second), the exit code and how many lines it
wrote on stderr (the target is one sentence).

Run: python benchmarks/bench_faults.py [--ranks 64] [--repeat 200] [--timeout 8] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, __file__.rsplit("/", 1)[0])

from _table import markdown, publish
from arsched.algorithms import build
from arsched.collective import save
from arsched.topology import parse_spec

ARSCHED = str(Path(sys.executable).with_name("arsched"))


def _rank_process(root: psutil.Process, log: str) -> psutil.Process | None:
    for p in root.children(recursive=True):
        try:
            if any(f.path.endswith(log) for f in p.open_files()):
                return p
        except psutil.Error:
            continue
    return None


def _ready(tmp: Path, rank: int, when: str, repeat: int) -> bool:
    if when == "start":
        return True
    logs = list(tmp.glob(f"arsched-run-*/rank-{rank}.log"))
    text = logs[0].read_text(errors="replace") if logs else ""
    run = repeat // 2 if when == "mid" else repeat
    return f"run {run} of {repeat}" in text


def one_case(schedule: Path, sig: signal.Signals, rank: int, when: str, args) -> list[object]:
    """Run, signal the rank when due, and describe what the command said."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [ARSCHED, "run", str(schedule), "--repeat", str(args.repeat), "--timeout", str(args.timeout)]
        env = {**os.environ, "TMPDIR": tmp}
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
        )
        try:
            root, target, deadline = psutil.Process(proc.pid), None, time.monotonic() + 600
            while proc.poll() is None and time.monotonic() < deadline:
                target = target or _rank_process(root, f"rank-{rank}.log")
                if target is not None and _ready(Path(tmp), rank, when, args.repeat):
                    target.send_signal(sig)
                    break
                time.sleep(0.02)
            signalled = time.monotonic()
            _, err = proc.communicate(timeout=600)
            took = time.monotonic() - signalled
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    named = re.match(r"(?:error: )?rank (\d+)", err.strip())
    lines = len(err.strip().splitlines())
    named_rank = int(named.group(1)) if named else None
    return [
        sig.name,
        rank,
        when,
        "—" if named_rank is None else named_rank,
        "yes" if named_rank == rank else "**no**",
        f"{took:.1f}",
        proc.returncode,
        lines,
        err.strip().splitlines()[0][:90] if lines else "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=8.0)
    parser.add_argument("--quick", action="store_true", help="4 ranks, 3 cases, timeout 3 s")
    args = parser.parse_args()
    if args.quick:
        args.ranks, args.repeat, args.timeout = 4, 20, 3.0
    n = args.ranks
    cases = [
        (signal.SIGKILL, 2, "mid"),
        (signal.SIGKILL, 1, "mid"),
        (signal.SIGSTOP, 2, "mid"),
        (signal.SIGSTOP, 0, "start"),
        (signal.SIGKILL, 0, "start"),
        (signal.SIGKILL, n - 1, "end"),
        (signal.SIGSTOP, 1, "end"),
    ]
    if args.quick:
        cases = cases[1:4]
    with tempfile.TemporaryDirectory() as tmp:
        schedule = Path(tmp) / "ring.json"
        save(build("ring", parse_spec(f"ring:n={n}"), None, 1e6), schedule)
        rows = [one_case(schedule, sig, rank, when, args) for sig, rank, when in cases]
    header = ["signal", "rank", "when", "named", "right", "s to exit", "exit", "stderr lines", "message"]
    publish(
        "Faults in arsched run (bench_faults.py)",
        f"A ring on {n} local gloo ranks, `arsched run --repeat {args.repeat} --timeout {args.timeout:g}`; "
        "one rank's process signalled from outside at start-up (before torch is imported), "
        f"mid-run or at its last run. Target: the right rank, one line, within {args.timeout:g} s + 1 s "
        "of a SIGSTOP and about a second of a SIGKILL.",
        markdown(header, rows),
    )


if __name__ == "__main__":
    main()
