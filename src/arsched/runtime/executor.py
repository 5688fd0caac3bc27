"""Run schedules on real tensors with torch.distributed, one local process per rank.

Each rank holds a float32 vector split into the schedule's chunks and executes its transfers
step by step: per step it posts all its sends and receives at once (`batch_isend_irecv`), waits,
then adds (`reduce`) or writes (`copy`) what it received into its chunks. Sends read the chunk
as it was at the start of the step, which is the IR's semantics. The same processes then run
`torch.distributed.all_reduce` on the same input; the result is compared element by element,
and both are timed side by side (alternating runs, median over repeats, each run's time the
slowest rank's).

The inputs are random integers stored as float32, so every order of summation gives the exact
sum and any difference from torch's result is a real error, not rounding.

The parent process watches the ranks: a rank that raises ends the run with its message; a rank
that stops making progress for `timeout` seconds ends it with the name of the rank that got
least far. Ranks are spawned (not forked) and run on the loopback interface; `gloo` runs on
CPU, `nccl` puts rank i on GPU i.
"""

from __future__ import annotations

import itertools
import os
import queue as queue_mod
import socket
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

import numpy as np

from arsched.collective.schedule import COPY, Schedule
from arsched.collective.validate import validate
from arsched.errors import ArschedError

BACKENDS = ("gloo", "nccl")
STARTUP_S = 120.0  # spawning and importing torch on a loaded machine can take a while


class ExecutionError(ArschedError):
    """A run failed: a rank raised, died or stopped making progress (the message names it)."""


@dataclass(frozen=True)
class Fault:
    """A failure to inject into one rank at its first step, to exercise the failure path:
    `kind` is "raise" (the rank raises) or "hang" (the rank stops without exiting)."""

    rank: int
    kind: str = "raise"


@dataclass(frozen=True)
class Execution:
    """Outcome of running one schedule: max abs difference from torch's all_reduce, and the
    median wall times of the schedule and of torch's all_reduce on the same processes."""

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


# ---- inside a rank ------------------------------------------------------------------------------


class _Rank:
    """One rank's side of a run: its tensors, its progress counter and its fault, if any."""

    def __init__(self, rank: int, progress: Any, backend: str, fault: Fault | None) -> None:
        import torch

        self.rank = rank
        self.progress = progress
        self.events = 0
        self.fault = fault if fault is not None and fault.rank == rank else None
        self.device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")

    def mark(self, waiting: bool) -> None:
        """Progress as 2 * events done (+1 while waiting on others): the rank that stops
        outside communication shows the least."""
        if not waiting:
            self.events += 1
        self.progress[self.rank] = 2 * self.events + int(waiting)

    def timed(self, action: Any) -> float:
        """Wall time of `action` on this rank, all ranks starting together."""
        import torch
        import torch.distributed as dist

        self.mark(waiting=True)
        dist.barrier()
        self.mark(waiting=False)
        start = time.perf_counter()
        action()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter() - start

    def execute(self, plan: list[tuple[list, list]], chunks: list, scratch: list[list]) -> None:
        """Run the schedule once on `chunks` (views into the rank's vector)."""
        import torch.distributed as dist

        for k, (sends, recvs) in enumerate(plan):
            if k == 0 and self.fault is not None:
                self.inject()
            ops = [dist.P2POp(dist.isend, chunks[c], peer) for peer, c in sends]
            ops += [
                dist.P2POp(dist.irecv, buf, peer) for buf, (peer, _, _) in zip(scratch[k], recvs, strict=True)
            ]
            if ops:
                self.mark(waiting=True)
                for req in dist.batch_isend_irecv(ops):
                    req.wait()
            for buf, (_, c, is_copy) in zip(scratch[k], recvs, strict=True):
                if is_copy:
                    chunks[c].copy_(buf)
                else:
                    chunks[c].add_(buf)
            self.mark(waiting=False)

    def inject(self) -> None:
        """The injected failure: stop for good ("hang") or raise."""
        if self.fault.kind == "hang":
            time.sleep(10**6)
        raise RuntimeError("injected fault")

    def run(self, plan: list, num_chunks: int, nelem: int, repeat: int, seed: int) -> dict[str, Any]:
        """Time torch's all_reduce and the schedule alternately; compare their results."""
        import torch
        import torch.distributed as dist

        gen = torch.Generator().manual_seed(seed * 1_000_003 + self.rank)
        data = torch.randint(-8, 9, (nelem,), generator=gen).to(torch.float32).to(self.device)
        bounds = np.linspace(0, nelem, num_chunks + 1).round().astype(int).tolist()
        buf, ref = data.clone(), data.clone()
        chunks = [buf[a:b] for a, b in itertools.pairwise(bounds)]
        scratch = [[torch.empty_like(chunks[c]) for _, c, _ in recvs] for _, recvs in plan]
        times = torch.zeros(2, repeat + 1, dtype=torch.float64)
        for i in range(repeat + 1):  # run 0 warms up and is not counted
            ref.copy_(data)
            times[0, i] = self.timed(lambda: dist.all_reduce(ref))
            buf.copy_(data)
            times[1, i] = self.timed(lambda: self.execute(plan, chunks, scratch))
        err = (buf - ref).abs().max().reshape(1).to(torch.float64)
        stats = torch.cat([err.cpu(), times.flatten()]).to(self.device)
        self.mark(waiting=True)
        dist.all_reduce(stats, op=dist.ReduceOp.MAX)  # worst error, slowest rank per run
        self.mark(waiting=False)
        stats = stats.cpu()
        t = stats[1:].reshape(2, repeat + 1)[:, 1:]
        return {"max_abs_error": float(stats[0]), "torch": t[0].tolist(), "schedule": t[1].tolist()}


def _worker(
    rank: int, world: int, port: int, backend: str, jobs: list, options: dict, progress, results
) -> None:
    """A rank's process: join the group, run every job, report to the parent through `results`."""
    try:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback: no hostname lookup
        if backend == "nccl":
            torch.cuda.set_device(rank)
        dist.init_process_group(
            backend,
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=options["timeout"] + 30),  # the parent gives up first
        )
        me = _Rank(rank, progress, backend, options["fault"])
        me.mark(waiting=False)
        out = [
            me.run(plan, chunks, nelem, options["repeat"], options["seed"]) for plan, chunks, nelem in jobs
        ]
        if rank == 0:
            results.put(("ok", rank, time.time(), out))
        dist.destroy_process_group()
    except BaseException as e:
        msg = " ".join(f"{type(e).__name__}: {e}".split())
        results.put(("error", rank, time.time(), msg[:400]))
        raise SystemExit(1) from None


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
    if repeat < 1 or timeout <= 0:
        raise ArschedError("repeat must be at least 1 and timeout positive")
    for s in schedules:
        report = validate(s)
        if not report.ok:
            raise ArschedError(f"{s.algorithm} is not a valid AllReduce: {report.message}")
    if backend == "nccl":
        import torch

        if torch.cuda.device_count() < n:
            raise ArschedError(
                f"the nccl backend needs {n} GPUs, one per rank; {torch.cuda.device_count()} found"
            )
    return n


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
    seconds); `nbytes` overrides each schedule's size. ExecutionError names a failing rank."""
    import torch.multiprocessing as mp

    n = _check(schedules, backend, repeat, timeout)
    jobs = []
    for s in schedules:
        size = s.nbytes if nbytes is None else nbytes
        nelem = max(int(size // 4), s.num_chunks)
        jobs.append((s.num_chunks, nelem, rank_plans(s)))
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    progress = ctx.Array("q", n, lock=False)
    port = _free_port()
    options = {"timeout": timeout, "repeat": repeat, "seed": seed, "fault": fault}
    procs = [
        ctx.Process(
            target=_worker,
            args=(r, n, port, backend, [(p[r], c, e) for c, e, p in jobs], options, progress, results),
            daemon=True,
        )
        for r in range(n)
    ]
    for p in procs:
        p.start()
    try:
        out = _watch(procs, results, progress, timeout, schedules[0].ranks)
    finally:
        for p in procs:
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


def _watch(procs: list, results, progress, timeout: float, names: Sequence[str]) -> list[dict]:
    """Wait for rank 0's results; raise ExecutionError on the first failure or a stall."""
    start = last_change = time.monotonic()
    seen = list(progress)
    errors: list[tuple[float, int, str]] = []
    while True:
        try:
            kind, rank, at, payload = results.get(timeout=0.1)
        except queue_mod.Empty:
            kind = None
        if kind == "ok":
            return payload
        if kind == "error":
            errors.append((at, rank, payload))
        now = time.monotonic()
        dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
        if errors or dead:
            _drain(results, errors, grace=0.3)  # the rank that failed first is the culprit
            if errors:
                _, rank, msg = min(errors)
                raise ExecutionError(f"rank {rank} ({names[rank]}) failed: {msg}")
            r = dead[0]
            raise ExecutionError(f"rank {r} ({names[r]}) died with exit code {procs[r].exitcode}")
        current = list(progress)
        if current != seen:
            seen, last_change = current, now
        started = min(current) > 0
        if (started and now - last_change > timeout) or (not started and now - start > STARTUP_S + timeout):
            r = int(np.argmin(current))
            why = "stopped making progress" if started else "did not start"
            raise ExecutionError(
                f"rank {r} ({names[r]}) {why}: no rank advanced for {timeout:g} s, and it got least far"
            )


def _drain(results, errors: list, grace: float) -> None:
    end = time.monotonic() + grace
    while time.monotonic() < end:
        try:
            kind, rank, at, payload = results.get(timeout=0.05)
        except queue_mod.Empty:
            continue
        if kind == "error":
            errors.append((at, rank, payload))


def run_schedule(schedule: Schedule, **options: Any) -> Execution:
    """Run one schedule (see `run_schedules` for the options)."""
    return run_schedules([schedule], **options)[0]
