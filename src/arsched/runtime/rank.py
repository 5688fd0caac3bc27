"""Inside one rank of `arsched run`: join the process group, run each schedule beside torch's own
collective (`layout`), report to the parent.

A rank shows how far it got in a shared array, `progress[rank] = 2 * events + waiting`: an event
is a step done (start-up phases count too), and `waiting` is 1 while it waits on others, so the
rank that stops outside communication shows the least. The phases before the first step:
entered (2), torch imported and joining the group (5), joined (`JOINED`). Each rank logs its
phases and runs, with times, to its own log file (shown by the parent when the rank fails). A
`Fault` injects a failure at a chosen point, to exercise the parent's naming of the rank at fault.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from arsched.errors import ArschedError
from arsched.lifeline import die_with_parent
from arsched.runtime.layout import GARBAGE, Layout, torch_reference

log = logging.getLogger(__name__)

JOINED = 6  # progress of a rank that has joined the process group
FAULT_KINDS = ("raise", "hang", "kill", "stop")
FAULT_PLACES = ("start", "mid", "end")


@dataclass(frozen=True)
class Fault:
    """A failure to inject into one rank, to exercise the failure paths.

    `kind`: "raise" (the rank raises), "hang" (it sleeps for good in Python, its process alive),
    "kill" (it gets SIGKILL) or "stop" (SIGSTOP: frozen whole, threads and all).
    `at`: "start" (torch imported, before joining the group), "mid" (halfway through the first
    run of the first schedule) or "end" (after the timed runs of the first schedule, before
    their results are gathered)."""

    rank: int
    kind: str = "raise"
    at: str = "mid"

    def check(self, ranks: int) -> None:
        """ArschedError unless the fault names a rank in range, a kind and a place."""
        if self.kind not in FAULT_KINDS or self.at not in FAULT_PLACES or not 0 <= self.rank < ranks:
            raise ArschedError(
                f"a fault needs a rank in 0..{ranks - 1}, a kind in {', '.join(FAULT_KINDS)} and a "
                f"place in {', '.join(FAULT_PLACES)}; got {self}"
            )

    def inject(self) -> None:
        """Fail as told."""
        if self.kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.kind == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        if self.kind == "hang":
            time.sleep(10**6)
        raise RuntimeError("injected fault")


class Rank:
    """One rank's side of a run: its progress counter, device and fault (if it is the one)."""

    def __init__(self, rank: int, progress: Any, fault: Fault | None) -> None:
        self.rank = rank
        self.progress = progress
        self.events = 0
        self.fault = fault if fault is not None and fault.rank == rank else None
        self.device: Any = None
        self.mark(waiting=False)  # entered

    def mark(self, waiting: bool) -> None:
        """Progress as 2 * events done (+1 while waiting on others)."""
        if not waiting:
            self.events += 1
        self.progress[self.rank] = 2 * self.events + int(waiting)

    def fail_at(self, place: str) -> None:
        if self.fault is not None and self.fault.at == place:
            self.fault.inject()

    def join(self, backend: str, port: int, world: int, timeout: float) -> None:
        """Import torch and join the process group (gloo's own timeout outlasts the parent's)."""
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        self.device = torch.device("cuda", self.rank) if backend == "nccl" else torch.device("cpu")
        if backend == "nccl":
            torch.cuda.set_device(self.rank)
        self.mark(waiting=False)
        log.info("torch imported; joining the group")
        self.fail_at("start")
        self.mark(waiting=True)
        dist.init_process_group(
            backend,
            init_method=f"tcp://127.0.0.1:{port}",
            rank=self.rank,
            world_size=world,
            timeout=timedelta(seconds=timeout + 30),
        )
        self.mark(waiting=False)
        log.info("joined the group of %d", world)

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

    def execute(self, plan: list[tuple[list, list]], chunks: list, scratch: list[list], first: bool) -> None:
        """Run the schedule once on `chunks` (views into the rank's vector)."""
        import torch.distributed as dist

        for k, (sends, recvs) in enumerate(plan):
            if first and k == len(plan) // 2:
                self.fail_at("mid")
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

    def run(self, plan: list, layout: Layout, repeat: int, seed: int, first: bool) -> dict[str, Any]:
        """Time torch's own collective and the schedule alternately; compare their results where
        the collective's goal says (`layout`)."""
        import torch
        import torch.distributed as dist

        gen = torch.Generator().manual_seed(seed * 1_000_003 + self.rank)
        start = torch.full((layout.total,), GARBAGE)
        data = torch.randint(-8, 9, (sum(b - a for a, b in layout.own),), generator=gen).to(torch.float32)
        pos = 0
        for a, b in layout.own:
            start[a:b] = data[pos : pos + b - a]
            pos += b - a
        start = start.to(self.device)
        buf = start.clone()
        x = _gather(start, layout.inputs)  # torch's input, kept: a view where it is one range
        ref = x.clone()
        out = torch.empty(layout.outputs, device=self.device) if layout.outputs else ref
        chunks = [buf[a:b] for a, b in itertools.pairwise(layout.bounds)]
        scratch = [[torch.empty_like(chunks[c]) for _, c, _ in recvs] for _, recvs in plan]
        times = torch.zeros(2, repeat + 1, dtype=torch.float64)
        for i in range(repeat + 1):  # run 0 warms up and is not counted
            log.info("run %d of %d", i, repeat)
            ref.copy_(x)
            times[0, i] = self.timed(lambda: torch_reference(layout, ref, out))
            buf.copy_(start)
            times[1, i] = self.timed(lambda i=i: self.execute(plan, chunks, scratch, first and i == 0))
        if first:
            self.fail_at("end")
        err = torch.zeros(1, dtype=torch.float64)
        pos = 0
        for a, b in layout.goal:
            err = torch.maximum(err, (buf[a:b] - out[pos : pos + b - a]).abs().max().cpu().to(torch.float64))
            pos += b - a
        stats = torch.cat([err, times.flatten()]).to(self.device)
        log.info("gathering the results")
        self.mark(waiting=True)
        dist.all_reduce(stats, op=dist.ReduceOp.MAX)  # worst error, slowest rank per run
        self.mark(waiting=False)
        stats = stats.cpu()
        t = stats[1:].reshape(2, repeat + 1)[:, 1:]
        return {"max_abs_error": float(stats[0]), "torch": t[0].tolist(), "schedule": t[1].tolist()}


def _gather(vector: Any, ranges: list[tuple[int, int]]) -> Any:
    """The elements of `ranges`, in order: a view for one range, a copy otherwise."""
    import torch

    if len(ranges) == 1:
        return vector[ranges[0][0] : ranges[0][1]]
    return torch.cat([vector[a:b] for a, b in ranges])


def _to_log(path: Path, rank: int) -> None:
    """Send this process's stdout and stderr, C++ writes included, to `path`, and its logging
    (INFO and up, timed) there too."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
        os.dup2(fd, stream.fileno())
    os.close(fd)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s rank {rank}: %(message)s", force=True)


def worker(
    rank: int, world: int, port: int, backend: str, jobs: list, options: dict, progress, results
) -> None:
    """A rank's process: join the group, run every job, report to the parent through `results`
    as (kind, rank, wall time, payload)."""
    try:
        die_with_parent(options["parent"])
        _to_log(Path(options["logs"]) / f"rank-{rank}.log", rank)
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback: no hostname lookup
        me = Rank(rank, progress, options["fault"])
        me.join(backend, port, world, options["timeout"])
        out = [
            me.run(plan, layout, options["repeat"], options["seed"], first=i == 0)
            for i, (plan, layout) in enumerate(jobs)
        ]
        if rank == 0:
            results.put(("ok", rank, time.time(), out))
        import torch.distributed as dist

        dist.destroy_process_group()
    except BaseException as e:
        msg = " ".join(f"{type(e).__name__}: {e}".split())
        results.put(("error", rank, time.time(), msg[:400]))
        raise SystemExit(1) from None
