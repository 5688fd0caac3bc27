"""Sweeps: run a config's tasks on a local process pool or on Ray, appending rows as they finish.

Results live in `DIR/<kind>.csv`, one row per task, keyed by the task id. Each row is written and
fsynced as soon as its task finishes, so a crash loses at most the tasks in flight; a partial last
line (a kill mid-write) is cut off on restart. Re-running skips every task whose id is already in
the file, so a sweep killed halfway and restarted ends with exactly one row per task. A lock file
keeps two sweeps from writing the same folder at once.
"""

from __future__ import annotations

import csv
import fcntl
import io
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arsched.errors import ArschedError
from arsched.experiments.tasks import KINDS, Task, execute
from arsched.fileio import write_atomic
from arsched.lifeline import die_with_parent

Outcome = tuple[str, dict[str, Any] | None, str | None]


@dataclass
class SweepSummary:
    """What a sweep did: tasks in the config, skipped as already done, run now, and failures."""

    total: int
    skipped: int
    done: int = 0
    failures: list[tuple[Task, str]] = field(default_factory=list)


def _cell(v: Any) -> Any:
    return "" if v is None else v


class ResultFile:
    """One kind's CSV: its finished task ids, and appending a row durably."""

    def __init__(self, path: Path, columns: Sequence[str]):
        self.path = path
        self.columns = list(columns)
        self.done: set[str] = set()
        if path.exists():
            self._recover()
        else:  # atomic, so a file that exists always has its whole header
            buf = io.StringIO()
            csv.writer(buf, lineterminator="\n").writerow(self.columns)
            write_atomic(path, buf.getvalue())

    def _recover(self) -> None:
        data = self.path.read_bytes()
        cut = data.rfind(b"\n") + 1
        if cut < len(data):  # a row half-written when the last sweep was killed
            with open(self.path, "r+b") as f:
                f.truncate(cut)
                os.fsync(f.fileno())
        header, *rows = _parse(self.path, data[:cut]) or [None]
        if header != self.columns:
            raise ArschedError(
                f"{self.path} has columns from another version of arsched; move it away to start afresh"
            )
        self.done = {row[0] for row in rows if row}

    def append(self, row: dict[str, Any]) -> None:
        if row["task_id"] in self.done:
            return
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow([_cell(row.get(c)) for c in self.columns])
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(buf.getvalue())
            f.flush()
            os.fsync(f.fileno())
        self.done.add(row["task_id"])


def _parse(path: Path, data: bytes, reader: Callable[[io.StringIO], Iterator[Any]] = csv.reader) -> list:
    """The rows of a results file's bytes; a file that is not arsched's CSV gets one sentence."""
    try:
        return list(reader(io.StringIO(data.decode("utf-8"), newline="")))
    except (UnicodeDecodeError, csv.Error) as e:
        raise ArschedError(
            f"{path} is not a results file of arsched sweep ({e}); move it away to start afresh"
        ) from None


def read_rows(folder: str | Path, kind: str) -> list[dict[str, str]]:
    """The rows of one kind in a results folder (empty if it has none), as strings."""
    path = Path(folder) / f"{kind}.csv"
    if not path.exists():
        return []
    return _parse(path, path.read_bytes(), csv.DictReader)


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    with open(folder / ".sweep.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ArschedError(
                f"another sweep is writing {folder}; wait for it or use another --out"
            ) from None
        yield


def run_local(tasks: Sequence[Task], folder: Path, workers: int) -> Iterator[Outcome]:
    """Outcomes as tasks finish, on a pool of `workers` processes (in this process if 1)."""
    if workers <= 1:
        yield from (execute(t, folder) for t in tasks)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # spawn: no fork of a process that holds threads (rich's refresh, BLAS pools); workers end
    # with this process even when it is killed outright
    with ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=die_with_parent,
        initargs=(os.getpid(),),
    ) as pool:
        futures = [pool.submit(execute, t, folder) for t in tasks]
        try:
            for fut in as_completed(futures):
                yield fut.result()
        finally:
            for fut in futures:
                fut.cancel()


def run_ray(tasks: Sequence[Task], folder: Path, address: str | None, num_cpus: int) -> Iterator[Outcome]:
    """Outcomes as tasks finish, each task a Ray task on the cluster at `address` (or a local Ray
    started with `num_cpus` CPUs). Tasks that write files (RL checkpoints) write them under the
    absolute path of `folder`, which must be shared by the nodes."""
    try:
        import ray
    except ImportError:
        raise ArschedError("--backend ray needs ray: pip install 'arsched[ray]'") from None
    started = not ray.is_initialized()
    if started:
        kwargs: dict[str, Any] = {"address": address} if address else {"num_cpus": num_cpus}
        ray.init(**kwargs, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(execute)
        pending = [remote.remote(t, folder.resolve()) for t in tasks]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            yield ray.get(ready[0])
    finally:
        if started:
            ray.shutdown()


def sweep(
    tasks: Sequence[Task],
    folder: str | Path,
    backend: str = "local",
    workers: int | None = None,
    address: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SweepSummary:
    """Run the tasks not yet in `folder`'s results, appending each row as its task finishes.

    `progress(finished, total)` is called once before the first task and after each one."""
    if backend not in ("local", "ray"):
        raise ArschedError(f"--backend must be local or ray, got {backend!r}")
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    workers = workers or os.cpu_count() or 1
    with _locked(out):
        files = {k: ResultFile(out / f"{k}.csv", KINDS[k].columns) for k in sorted({t.kind for t in tasks})}
        todo = [t for t in tasks if t.id not in files[t.kind].done]
        summary = SweepSummary(total=len(tasks), skipped=len(tasks) - len(todo))
        by_id = {t.id: t for t in todo}
        if progress:
            progress(summary.skipped, summary.total)
        if not todo:
            outcomes: Iterator[Outcome] = iter(())
        elif backend == "ray":
            outcomes = run_ray(todo, out, address, workers)
        else:
            outcomes = run_local(todo, out, min(workers, len(todo)))  # no idle processes
        for task_id, row, error in outcomes:
            task = by_id[task_id]
            if row is not None:
                files[task.kind].append(row)
                summary.done += 1
            else:
                summary.failures.append((task, error or "failed"))
            if progress:
                progress(summary.skipped + summary.done + len(summary.failures), summary.total)
    return summary
