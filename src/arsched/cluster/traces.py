"""Trace loaders: Tiresias CSV, Microsoft Philly `cluster_job_log` JSON, SenseTime Helios CSV,
Alibaba PAI GPU trace (2020) CSV.

Every malformed row raises an error naming the file, the row and the field; with
`skip_bad_rows=True` such rows are dropped and counted instead. `load_trace` also accepts a
synthetic spec such as `synthetic:jobs=1000,seed=1` (see `synthetic.py`).

Jobs that did not complete (Philly `Killed`/`Failed`, Helios `CANCELLED`/`FAILED`/`TIMEOUT`/
`NODE_FAIL`, PAI `Failed`) are left out unless `keep_failed` (their recorded run time then
counts as their work); jobs still running or waiting when the trace was cut (no end) are always
left out. Left-out jobs are counted in the log, not as bad rows.

Formats (times in seconds unless said):
- Tiresias: `job_id,num_gpu,submit_time,iterations,model_name,duration,interval`; the compute time
  of one iteration is duration / iterations, the gradient size comes from the model zoo.
- Philly: a JSON list of jobs `{jobid, submitted_time, status, attempts: [{start_time, end_time,
  detail: [{ip, gpus: [...]}]}]}` with times 'YYYY-mm-dd HH:MM:SS'; the last attempt gives the
  GPU count (GPUs over all its machines) and the run time.
- Helios: `job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,
  duration,queue`; rows with gpu_num 0 are CPU jobs and left out (not errors).
- PAI: `pai_task_table.csv`, headerless as released (`job_name,task_name,inst_num,status,
  start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type`, times in seconds; a header row is
  accepted too). A job is its tasks: GPUs = the sum over its tasks of inst_num x plan_gpu / 100,
  each instance rounded up to whole GPUs (a GPU runs one job here); run time from its first task
  start to its last task end, on its slowest task's GPU type, scaled to the simulated GPU by
  `gpus.GPU_SPEED`; arrival = its submission in `pai_job_table.csv` if that file sits beside,
  else its first task start. Jobs with no GPU are CPU jobs and left out.
Philly, Helios and PAI name no model: each job gets one from the zoo by a hash of its id. Every
loader takes `elastic`, the one elasticity setting of a run (`jobs.worker_bounds`; default 1:
every job rigid at its request, for every scheduler).

A trace file is read whole, so one over the memory limit (`arsched.limits`, about 32 bytes of
memory per byte of file: 360 MB where the limit is 11.5 GB; `--max-memory` raises it) is refused
before it is read, and a trace of more jobs than a synthetic one may have (1,000,000) is refused
at the job past that.
"""

from __future__ import annotations

import json
import logging
import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from arsched.cluster.csvfile import read_csv
from arsched.cluster.gpus import GPU_SPEED, gpu_speed
from arsched.cluster.jobs import DEFAULT_ELASTIC, Workload, check_elastic, worker_bounds
from arsched.cluster.models import ZOO, model
from arsched.cluster.synthetic import MAX_JOBS
from arsched.errors import ArschedError
from arsched.limits import TRACE_BYTES, check_file

TIRESIAS = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration")
HELIOS = ("job_id", "gpu_num", "state", "submit_time", "duration")
PAI_TASK = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu", "plan_mem",
            "plan_gpu", "gpu_type")  # fmt: skip
PAI_JOB = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
# how each format says a job completed, and how it says it was stopped (kept with keep_failed);
# any other status is a job cut by the trace's end, always left out
COMPLETED = {"philly": {"Pass"}, "helios": {"COMPLETED"}, "pai": {"Terminated"}}
STOPPED = {
    "philly": {"Killed", "Failed"},
    "helios": {"CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL"},
    "pai": {"Failed"},
}
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
MAX_JOB_GPUS = 1_000_000  # GPUs of one job; more is no trace of a real cluster

log = logging.getLogger(__name__)


class BadRow(ArschedError):
    """One malformed row of a trace file."""


@dataclass
class _Rows:
    """Accumulates jobs; counts or raises on bad rows."""

    path: Path
    skip_bad: bool
    elastic: int
    keep_failed: bool = False
    skipped: int = 0
    left_out: int = 0  # jobs that did not complete (see `ends`)
    cols: dict[str, list[Any]] = field(
        default_factory=lambda: {k: [] for k in ("ids", "models", "arrival", "tau", "grad", "work", "gpus")}
    )

    def __post_init__(self) -> None:
        check_elastic(self.elastic)  # before the file is read

    def bad(self, row: int, fld: str, problem: str) -> None:
        if not self.skip_bad:
            raise BadRow(
                f"{self.path} row {row}: field {fld!r} {problem} (use --skip-bad-rows to drop such rows)"
            )
        self.skipped += 1
        log.debug("%s row %d skipped: field %r %s", self.path, row, fld, problem)

    def ends(self, fmt: str, status: str | None) -> bool:
        """Whether a job of this status is kept: completed, or stopped with keep_failed; the
        others are counted as left out."""
        if status in COMPLETED[fmt] or (self.keep_failed and status in STOPPED[fmt]):
            return True
        return self.leave()

    def leave(self) -> bool:
        """Count a job left out (not a bad row: the trace says it did not run to an end)."""
        self.left_out += 1
        return False

    def add(self, jid: str, mdl: str, arrival: float, tau: float, work: float, gpus: int) -> None:
        if len(self.cols["ids"]) >= MAX_JOBS:
            raise ArschedError(
                f"{self.path} has more than {MAX_JOBS:,} jobs (as many as a synthetic trace may have); "
                "split it or keep the part to simulate"
            )
        for key, val in zip(
            self.cols, (jid, mdl, arrival, tau, model(mdl).grad_bytes, work, gpus), strict=True
        ):
            self.cols[key].append(val)

    def workload(self) -> Workload:
        if self.left_out:
            log.info("%s: %d jobs that did not complete left out%s", self.path, self.left_out,
                     "" if self.keep_failed else " (keep_failed keeps those stopped)")  # fmt: skip
        if not self.cols["ids"]:
            raise ArschedError(
                f"{self.path} has no usable job ({self.skipped} bad rows skipped, {self.left_out} jobs "
                "that did not complete left out)"
            )
        c = self.cols
        return Workload.build(
            self.path.stem, c["ids"], c["models"], c["arrival"], c["tau"], c["grad"], c["work"], c["gpus"],
            worker_bounds(c["gpus"], self.elastic),
        )  # fmt: skip


def _number(rows: _Rows, row: int, rec: dict, key: str, positive: bool = True) -> float | None:
    raw = rec.get(key)
    try:
        val = float(raw)
    except (TypeError, ValueError, OverflowError):
        rows.bad(row, key, f"is {raw!r}, not a number")
        return None
    if not math.isfinite(val) or val < 0 or (positive and val == 0):
        rows.bad(row, key, f"is {raw!r}; it must be a finite number {'> 0' if positive else '>= 0'}")
        return None
    return val


def _gpus(rows: _Rows, row: int, rec: dict, key: str, val: float) -> int | None:
    """A GPU count: whole and at most MAX_JOB_GPUS (0 is the caller's to judge)."""
    if val != int(val) or val > MAX_JOB_GPUS:
        rows.bad(row, key, f"is {rec[key]!r}, not a whole number of GPUs up to {MAX_JOB_GPUS}")
        return None
    return int(val)


def _check_size(path: Path) -> None:
    """Refuse a trace file too big to read within the memory limit, before reading it."""
    try:
        size = path.stat().st_size
    except OSError as e:
        raise ArschedError(f"cannot read trace {path} ({e.strerror or e})") from None
    check_file("trace", path, size, TRACE_BYTES)


def _model_for(job_id: str) -> str:
    names = list(ZOO)
    return names[zlib.crc32(job_id.encode()) % len(names)]


def _csv(path: Path, required: tuple[str, ...], fmt: str) -> list[dict[str, str]]:
    header, records = read_csv(path, "trace")
    missing = [c for c in required if c not in header]
    if missing:
        raise ArschedError(f"{path} is not a {fmt} trace: it lacks column(s) {', '.join(missing)}")
    return records


def load_tiresias(
    path: Path, skip_bad_rows: bool = False, elastic: int = DEFAULT_ELASTIC
) -> tuple[Workload, int]:
    """A Tiresias job CSV (completed jobs only: it has no status); returns the workload and the
    number of bad rows skipped."""
    _check_size(path)
    rows = _Rows(path, skip_bad_rows, elastic)
    for i, rec in enumerate(_csv(path, TIRESIAS, "Tiresias"), start=2):
        vals = [_number(rows, i, rec, k, positive=k != "submit_time") for k in TIRESIAS[1:4]]
        dur = _number(rows, i, rec, "duration")
        if None in vals or dur is None:
            continue
        gpus, submit, iters = vals
        if _gpus(rows, i, rec, "num_gpu", gpus) is None:
            continue
        name = (rec.get("model_name") or "").strip().lower()
        if name not in ZOO:
            rows.bad(i, "model_name", f"is {name!r}, not a model of the zoo ({', '.join(ZOO)})")
            continue
        rows.add(str(rec["job_id"]), name, submit, dur / iters, iters * gpus, int(gpus))
    return rows.workload(), rows.skipped


def _time(rows: _Rows, row: int, value: Any, fld: str) -> float | None:
    """A date like 2017-10-03 02:43:33, or a number of seconds >= 0."""
    if isinstance(value, str):
        try:
            return datetime.strptime(value, TIME_FORMAT).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            pass
    try:
        seconds = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError, OverflowError):
        seconds = math.nan
    if not 0 <= seconds < math.inf:
        rows.bad(row, fld, f"is {value!r}, not a time like 2017-10-03 02:43:33 or a number of seconds >= 0")
        return None
    return seconds


def load_philly(
    path: Path, skip_bad_rows: bool = False, elastic: int = DEFAULT_ELASTIC, keep_failed: bool = False
) -> tuple[Workload, int]:
    """A Philly `cluster_job_log` JSON file (row = position of the job in the list, from 1)."""
    _check_size(path)
    try:
        jobs = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ArschedError(f"{path} is not valid JSON ({e})") from None
    except RecursionError:
        raise ArschedError(f"{path} is nested too deeply to be a Philly cluster_job_log") from None
    if not isinstance(jobs, list):
        raise ArschedError(f"{path} is not a Philly cluster_job_log: it must hold a JSON list of jobs")
    rows = _Rows(path, skip_bad_rows, elastic, keep_failed)
    for i, job in enumerate(jobs, start=1):
        if not isinstance(job, dict) or not job.get("jobid"):
            rows.bad(i, "jobid", "is missing")
            continue
        if not isinstance(job.get("status"), str):
            rows.bad(i, "status", f"is {job.get('status')!r}, not one of Pass, Killed, Failed")
            continue
        if not rows.ends("philly", job["status"]):
            continue
        attempts = job.get("attempts")
        if not isinstance(attempts, list) or not all(isinstance(a, dict) for a in attempts):
            rows.bad(i, "attempts", "is not a list of attempts")
            continue
        if not attempts or attempts[-1].get("end_time") is None:
            rows.leave()  # never scheduled, or still running when the log was taken
            continue
        last = attempts[-1]
        detail = last.get("detail")
        if not isinstance(detail, list) or not all(isinstance(d, dict) and isinstance(d.get("gpus"), list)
                                                   for d in detail):  # fmt: skip
            rows.bad(i, "attempts[-1].detail", "must list machines with their gpus")
            continue
        gpus = sum(len(d["gpus"]) for d in detail)
        if not 0 < gpus <= MAX_JOB_GPUS:
            rows.bad(i, "attempts[-1].detail", f"has {gpus or 'no'} GPUs; a job has 1 to {MAX_JOB_GPUS}")
            continue
        times = [_time(rows, i, v, k) for v, k in (
            (job.get("submitted_time"), "submitted_time"),
            (last.get("start_time"), "attempts[-1].start_time"),
            (last.get("end_time"), "attempts[-1].end_time"),
        )]  # fmt: skip
        if None in times:
            continue
        submit, start, end = times
        if end <= start:
            rows.bad(i, "attempts[-1].end_time", "is not after start_time")
            continue
        jid = str(job["jobid"])
        name = _model_for(jid)
        rows.add(jid, name, submit, ZOO[name].tau, gpus * (end - start) / ZOO[name].tau, gpus)
    return rows.workload(), rows.skipped


def load_helios(
    path: Path, skip_bad_rows: bool = False, elastic: int = DEFAULT_ELASTIC, keep_failed: bool = False
) -> tuple[Workload, int]:
    """A Helios `cluster_log.csv`; CPU-only rows (gpu_num 0) are left out."""
    _check_size(path)
    rows = _Rows(path, skip_bad_rows, elastic, keep_failed)
    for i, rec in enumerate(_csv(path, HELIOS, "Helios"), start=2):
        num = _number(rows, i, rec, "gpu_num", positive=False)
        gpus = _gpus(rows, i, rec, "gpu_num", num) if num is not None else None
        if gpus is None:
            continue
        if gpus == 0 or not rows.ends("helios", rec["state"]):
            continue
        submit = _time(rows, i, rec.get("submit_time"), "submit_time")
        dur = _number(rows, i, rec, "duration") if submit is not None else None
        if submit is None or dur is None:
            continue
        jid = str(rec["job_id"])
        name = _model_for(jid)
        rows.add(jid, name, submit, ZOO[name].tau, gpus * dur / ZOO[name].tau, gpus)
    return rows.workload(), rows.skipped


def _pai_rows(path: Path, columns: tuple[str, ...]) -> list[dict[str, str]]:
    """The rows of a PAI table, headerless as released or with its header row."""
    _check_size(path)
    _, records = read_csv(path, "trace", columns=columns)
    if records and tuple(records[0].values())[: len(columns)] == columns:
        return records[1:]
    return records


def _pai_submissions(path: Path) -> dict[str, Any]:
    """Each job's submission time from the `pai_job_table.csv` beside the task table, if any."""
    jobs = path.with_name("pai_job_table.csv")
    return {r["job_name"]: r["start_time"] for r in _pai_rows(jobs, PAI_JOB)} if jobs.is_file() else {}


def load_pai(
    path: Path,
    skip_bad_rows: bool = False,
    elastic: int = DEFAULT_ELASTIC,
    keep_failed: bool = False,
    speeds: Mapping[str, float] = GPU_SPEED,
) -> tuple[Workload, int]:
    """An Alibaba PAI `pai_task_table.csv` (row = line of the file); see the module docstring;
    `speeds`: each GPU type's speed relative to the simulated GPU."""
    tasks: dict[str, list[tuple[int, dict[str, str]]]] = {}
    for i, rec in enumerate(_pai_rows(path, PAI_TASK), start=1):
        tasks.setdefault(str(rec.get("job_name")), []).append((i, rec))
    submitted = _pai_submissions(path)
    rows = _Rows(path, skip_bad_rows, elastic, keep_failed)
    for jid, recs in tasks.items():
        job = _pai_job(rows, jid, recs, submitted.get(jid), speeds)
        if job is not None:
            arrival, duration, gpus = job
            name = _model_for(jid)
            rows.add(jid, name, arrival, ZOO[name].tau, gpus * duration / ZOO[name].tau, gpus)
    return rows.workload(), rows.skipped


def _pai_job(
    rows: _Rows,
    jid: str,
    recs: list[tuple[int, dict[str, str]]],
    submitted: str | None,
    speeds: Mapping[str, float],
) -> tuple[float, float, int] | None:
    """(arrival, run time on the simulated GPU, GPUs) of one PAI job from its task rows, or None
    for a job left out or bad (counted as such)."""
    gpus, speed, starts, ends = 0, math.inf, [], []
    statuses = {rec.get("status") for _, rec in recs}
    status = "Terminated" if statuses == {"Terminated"} else "Failed" if "Failed" in statuses else None
    for i, rec in recs:
        if None in rec or None in rec.values():
            fields = sum(v is not None for k, v in rec.items() if k is not None) + len(rec.get(None) or ())
            rows.bad(i, "job_name", f"heads a row of {fields} fields, not the {len(PAI_TASK)} of a PAI task")
            return None
        if not rec["plan_gpu"].strip():
            continue  # a CPU task (a parameter server, say) leaves plan_gpu empty
        plan = _number(rows, i, rec, "plan_gpu", positive=False)
        inst = _number(rows, i, rec, "inst_num")
        if plan is None or inst is None:
            return None
        if plan == 0:
            continue
        f = gpu_speed(rec["gpu_type"], speeds)
        if f is None:
            rows.bad(i, "gpu_type", f"is {rec['gpu_type']!r}, not one of {', '.join(speeds)}")
            return None
        need = _gpus(rows, i, rec, "inst_num", inst * math.ceil(plan / 100))
        if need is None:
            return None
        gpus, speed = gpus + need, min(speed, f)
        starts.append((i, rec["start_time"]))
        ends.append((i, rec["end_time"]))
    if not 0 < gpus <= MAX_JOB_GPUS:
        if gpus:
            rows.bad(recs[0][0], "inst_num", f"adds up to {gpus} GPUs; a job has 1 to {MAX_JOB_GPUS}")
        return None  # no GPU: a CPU job, left out like Helios's
    if not rows.ends("pai", status):
        return None
    times = []
    for i, t, fld in [(i, t, "start_time") for i, t in starts] + [(i, t, "end_time") for i, t in ends]:
        times.append(_time(rows, i, t, fld))
        if times[-1] is None:
            return None
    first, last = min(times[: len(starts)]), max(times[len(starts) :])
    if last <= first:
        rows.bad(ends[0][0], "end_time", "is not after the job's first start_time")
        return None
    arrival = first if submitted is None else _time(rows, recs[0][0], submitted, "pai_job_table start_time")
    return None if arrival is None else (arrival, (last - first) * speed, gpus)


def load_trace(
    spec: str,
    skip_bad_rows: bool = False,
    elastic: int = DEFAULT_ELASTIC,
    keep_failed: bool = False,
    speeds: Mapping[str, float] = GPU_SPEED,
) -> tuple[Workload, int]:
    """A trace by path (format told by suffix, name and columns) or a `synthetic:...` spec;
    `keep_failed` keeps the jobs a trace records as stopped (killed, failed) before completing;
    `speeds` are the GPU types' speeds for a trace that records types (PAI)."""
    if spec.startswith("synthetic"):
        from arsched.cluster.synthetic import parse_synthetic

        return parse_synthetic(spec, elastic=elastic), 0
    path = Path(spec)
    if not path.is_file():
        raise ArschedError(f"trace {spec!r} is neither a file nor a spec like synthetic:jobs=1000,seed=1")
    _check_size(path)  # before the header is read: a huge file may have no line break
    if path.suffix.lower() == ".json":
        return load_philly(path, skip_bad_rows, elastic, keep_failed)
    if path.name.startswith("pai_task_table"):
        return load_pai(path, skip_bad_rows, elastic, keep_failed, speeds)
    header, _ = read_csv(path, "trace", rows=0)
    if all(c in header for c in TIRESIAS):
        return load_tiresias(path, skip_bad_rows, elastic)
    if all(c in header for c in HELIOS):
        return load_helios(path, skip_bad_rows, elastic, keep_failed)
    raise ArschedError(
        f"{path} is not a known trace: expected Tiresias columns ({','.join(TIRESIAS)}), Helios columns "
        f"({','.join(HELIOS)}), a Philly cluster_job_log .json or an Alibaba PAI pai_task_table*.csv"
    )
