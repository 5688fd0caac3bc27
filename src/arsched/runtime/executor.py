"""Run schedules on real tensors with torch.distributed, one local process per rank.

Each rank holds a float32 vector split into the schedule's chunks, filled as the collective's
pre-condition says (its data, or garbage where it starts with nothing usable; `layout`), and
executes its transfers step by step: per step it posts all its sends and receives at once
(`batch_isend_irecv`), waits, then adds (`reduce`) or writes (`copy`) what it received into its
chunks. Sends read the chunk as it was at the start of the step, which is the IR's semantics.
The same processes then run torch.distributed's own collective on the same input
(`all_reduce`, `reduce_scatter_single`, `all_gather_single`, `broadcast`, `reduce`,
`all_to_all_single`); the chunks the post-condition names are compared with its result element
by element, and both are timed side by side (alternating runs, median over repeats, each run's
time the slowest rank's).

The inputs are random integers stored as float32, so every order of summation gives the exact
sum and any difference from torch's result is a real error, not rounding.

The parent process watches the ranks and names the one at fault, in one sentence:
- a rank killed by a signal (SIGKILL, SIGTERM, ...) is named, not the peers whose connections
  it broke, since no rank kills itself over a peer's failure;
- otherwise the rank whose error came first (peers' "connection reset" errors come later);
- a rank frozen whole (SIGSTOP, a debugger) for `timeout` seconds, whatever the others do;
- when no rank advances for `timeout` seconds, the rank that got least far. Before a rank has
  joined the group, its CPU use counts as advancing (spawning and importing torch on a loaded
  machine take seconds of CPU and show no other sign of life), so a rank that hangs during
  start-up is named within `timeout` of the others finishing theirs, with no fixed allowance.
Ranks write their stdout and stderr (gloo's and c10d's C++ logging included) to log files, not
to the terminal; the failing rank's log is logged at DEBUG level (`arsched -v run` shows it).
Ranks end with the parent, even one killed with SIGKILL (`arsched.lifeline`). Ranks are spawned
(not forked) and run on the loopback interface; `gloo` runs on CPU, `nccl` puts rank i on GPU i.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from arsched.collective.schedule import COPY, Schedule
from arsched.collective.validate import validate
from arsched.errors import ArschedError
from arsched.limits import HUGE, check_memory, format_count
from arsched.runtime.layout import Shape, layouts, shape
from arsched.runtime.rank import Fault, worker
from arsched.runtime.watch import Watch

BACKENDS = ("gloo", "nccl")
VIEW_BYTES = 512  # a torch tensor object viewing a chunk or a buffer, measured roughly


@dataclass(frozen=True)
class Execution:
    """Outcome of running one schedule: max abs difference from torch's own collective (where
    the collective's goal says), and the median wall times of the schedule and of torch's
    collective on the same processes (`torch_allreduce_time_s` keeps its AllReduce-era name for
    every collective; `layout.TORCH_CALLS` names the call)."""

    ranks: int
    max_abs_error: float
    time_s: float
    torch_allreduce_time_s: float
    nbytes: int
    backend: str
    repeat: int
    times_s: tuple[float, ...]
    torch_times_s: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["times_s"] = list(self.times_s)
        out["torch_times_s"] = list(self.torch_times_s)
        return out


# ---- plans: what each rank does per step (built in the parent, sent to the ranks) --------------


def rank_plans(schedule: Schedule) -> list[list[tuple[list, list]]]:
    """What each rank does: per rank, per step (dense, in order), its sends [(peer, chunk)] and
    receives [(peer, chunk, is_copy)], both in stored order so that the two ends of a connection
    post alike."""
    s = schedule
    rank_of = s.rank_of_node
    src, dst = rank_of[s.src].tolist(), rank_of[s.dst].tolist()
    _, dense = np.unique(s.step, return_inverse=True)
    dense = dense.ravel()
    n_steps = int(dense.max()) + 1 if len(s) else 0
    plans: list[list[tuple[list, list]]] = [[([], []) for _ in range(n_steps)] for _ in range(s.num_ranks)]
    for t in np.lexsort((np.arange(len(s)), dense)).tolist():
        k, c = int(dense[t]), int(s.chunk[t])
        plans[src[t]][k][0].append((dst[t], c))
        plans[dst[t]][k][1].append((src[t], c, bool(s.op[t] == COPY)))
    return plans


# ---- the parent ---------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _check(schedules: Sequence[Schedule], backend: str, repeat: int, timeout: float) -> int:
    if not schedules:
        raise ArschedError("there is no schedule to run")
    if backend not in BACKENDS:
        raise ArschedError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}")
    n = schedules[0].num_ranks
    if any(s.num_ranks != n for s in schedules):
        raise ArschedError("schedules run together must have the same number of ranks")
    if repeat < 1 or not timeout > 0:
        raise ArschedError("repeat must be at least 1 and timeout positive")
    for s in schedules:
        report = validate(s)
        if not report.ok:
            raise ArschedError(f"{s.algorithm} is not a valid {s.kind.title}: {report.message}")
    if backend == "nccl":
        import torch

        if torch.cuda.device_count() < n:
            raise ArschedError(
                f"the nccl backend needs {n} GPUs, one per rank; {torch.cuda.device_count()} found"
            )
    return n


def _memory(size: Shape, n: int, num_chunks: int, plans: list) -> int:
    """Bytes the ranks need together: each holds its chunk space twice (its start and the
    schedule's result), torch's input and output (one vector when in place), a buffer per
    receive and a tensor view per chunk."""
    receives = sum(len(recvs) for plan in plans for _, recvs in plan)
    vectors = 2 * size.total + size.inputs + size.outputs
    return n * (4 * vectors + VIEW_BYTES * num_chunks) + receives * (4 * size.chunk + VIEW_BYTES)


def run_schedules(
    schedules: Sequence[Schedule],
    nbytes: float | None = None,
    backend: str = "gloo",
    repeat: int = 5,
    timeout: float = 60.0,
    seed: int = 0,
    fault: Fault | None = None,
) -> list[Execution]:
    """Run several schedules over the same ranks in one set of processes (spawning costs
    seconds); `nbytes` overrides each schedule's size. ExecutionError names the rank at fault;
    `fault` injects one (see `Fault`)."""
    n = _check(schedules, backend, repeat, timeout)
    if fault is not None:
        fault.check(n)
    jobs = []
    for s in schedules:
        size = s.nbytes if nbytes is None else nbytes
        if not 0 < size < HUGE:
            raise ArschedError(f"the vector size must be a positive number of bytes, got {size!r}")
        sizes = shape(s.kind, int(size // 4))
        plans = rank_plans(s)
        check_memory(
            f"running {s.algorithm} on {n} local ranks, {format_count(sizes.buffer)} float32 values each",
            _memory(sizes, n, s.num_chunks, plans),
        )
        jobs.append((layouts(s.kind, sizes), sizes.buffer, plans))
    ctx = multiprocessing.get_context("spawn")  # plain lists travel: no torch in this process
    results = ctx.Queue()
    progress = ctx.Array("q", n, lock=False)
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="arsched-run-") as logs:
        options = {
            "timeout": timeout,
            "repeat": repeat,
            "seed": seed,
            "fault": fault,
            "parent": os.getpid(),
            "logs": logs,
        }
        procs = [
            ctx.Process(
                target=worker,
                args=(r, n, port, backend, [(p[r], ls[r]) for ls, _, p in jobs], options, progress, results),
                daemon=True,
            )
            for r in range(n)
        ]
        try:
            for p in procs:
                p.start()
            out = Watch(procs, results, progress, timeout, Path(logs)).result(schedules[0].ranks)
        finally:
            for p in (p for p in procs if p.pid is not None):  # those started
                if p.is_alive():
                    p.kill()
                p.join(5)
    return [
        Execution(
            ranks=n,
            max_abs_error=r["max_abs_error"],
            time_s=statistics.median(r["schedule"]),
            torch_allreduce_time_s=statistics.median(r["torch"]),
            nbytes=4 * e,
            backend=backend,
            repeat=repeat,
            times_s=tuple(r["schedule"]),
            torch_times_s=tuple(r["torch"]),
        )
        for r, (_, e, _) in zip(out, jobs, strict=True)
    ]


def run_schedule(schedule: Schedule, **options: Any) -> Execution:
    """Run one schedule (see `run_schedules` for the options)."""
    return run_schedules([schedule], **options)[0]
