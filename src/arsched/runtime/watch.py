"""The parent's watch over the ranks of `arsched run`: wait for the result, or name the rank at
fault in one sentence (the rules are in `arsched.runtime.executor`'s docstring)."""

from __future__ import annotations

import logging
import queue as queue_mod
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from arsched.errors import ArschedError
from arsched.runtime.rank import JOINED

log = logging.getLogger(__name__)

TICK_S = 0.1
GRACE_S = 0.3  # after a first failure, how long later reports may still come in
BUSY_CORES = 0.2  # ranks still starting up that use this much CPU together are advancing
# Signals a rank's process may die of as a consequence of a peer's failure (a C++ abort in a
# communication thread); any other signal came from outside and names its rank outright.
CONSEQUENT_SIGNALS = (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGPIPE)


def _signal_name(number: int) -> str:
    """SIGKILL, SIGTERM, ...; 'signal 40' for one without a name (a real-time signal)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class ExecutionError(ArschedError):
    """A run failed: a rank raised, died or stopped making progress (the message names it)."""


@dataclass
class Failures:
    """Reports of failure so far: errors sent by ranks, and deaths seen by the parent, each
    with the wall time it happened (a death: when first seen)."""

    errors: dict[int, tuple[float, str]] = field(default_factory=dict)
    deaths: dict[int, tuple[float, int]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.errors or self.deaths)

    def culprit(self, names: Sequence[str]) -> tuple[int, str]:
        """The rank at fault and the sentence that names it."""
        outside = [
            (at, r, code)
            for r, (at, code) in self.deaths.items()
            if code < 0 and -code not in CONSEQUENT_SIGNALS and r not in self.errors
        ]
        if outside:
            _, r, code = min(outside)
            return r, f"rank {r} ({names[r]}) was killed by {_signal_name(-code)}"
        events = [(at, r, msg, None) for r, (at, msg) in self.errors.items()]
        events += [(at, r, None, code) for r, (at, code) in self.deaths.items() if r not in self.errors]
        _, r, msg, code = min(events)
        if msg is not None:
            return r, f"rank {r} ({names[r]}) failed: {msg}"
        if code < 0:
            return r, f"rank {r} ({names[r]}) died of {_signal_name(-code)}"
        return r, f"rank {r} ({names[r]}) exited with code {code} without a report"


class Watch:
    """Waits for rank 0's results while sampling every rank's progress and process state."""

    def __init__(self, procs: list, results: Any, progress: Any, timeout: float, logs: Path) -> None:
        self.procs = procs
        self.results = results
        self.progress = progress
        self.timeout = timeout
        self.logs = logs
        self.handles = [psutil.Process(p.pid) for p in procs]
        self.failures = Failures()

    def _sample(self) -> tuple[list[bool], float]:
        """Which ranks are frozen (stopped or traced), and the CPU seconds used by ranks that
        have not joined the group yet."""
        frozen, cpu = [], 0.0
        joined = list(self.progress)
        for r, h in enumerate(self.handles):
            try:
                with h.oneshot():
                    frozen.append(h.status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP))
                    if joined[r] < JOINED:
                        t = h.cpu_times()
                        cpu += t.user + t.system
            except psutil.Error:  # gone: its exit code tells
                frozen.append(False)
        return frozen, cpu

    def _receive(self, wait_s: float) -> Any:
        """Rank 0's results if they came, after noting any failures reported or seen."""
        try:
            kind, rank, at, payload = self.results.get(timeout=wait_s)
        except queue_mod.Empty:
            kind = None
        if kind == "ok":
            return payload
        if kind == "error":
            self.failures.errors.setdefault(rank, (at, payload))
        now = time.time()
        for r, p in enumerate(self.procs):
            if p.exitcode not in (None, 0):
                self.failures.deaths.setdefault(r, (now, p.exitcode))
        return None

    def _fail(self, rank: int, sentence: str) -> ExecutionError:
        path = self.logs / f"rank-{rank}.log"
        text = path.read_text(errors="replace")[-4000:] if path.is_file() else ""
        log.debug("the log of rank %d ends:\n%s", rank, text.rstrip() or "(empty)")
        return ExecutionError(sentence)

    def result(self, names: Sequence[str]) -> list[dict]:
        """Rank 0's results; ExecutionError naming the rank at fault on a failure or a stall."""
        last_change = time.monotonic()
        seen = list(self.progress)
        _, cpu_seen = self._sample()
        frozen_since: dict[int, float] = {}
        while True:
            out = self._receive(TICK_S)
            if out is not None:
                return out
            if self.failures:
                end = time.monotonic() + GRACE_S  # the rank at fault may not have reported first
                while time.monotonic() < end:
                    if self._receive(0.05) is not None:
                        break
                raise self._fail(*self.failures.culprit(names))
            now = time.monotonic()
            frozen, cpu = self._sample()
            frozen_since = {r: frozen_since.get(r, now) for r, f in enumerate(frozen) if f}
            current = list(self.progress)
            if current != seen or cpu - cpu_seen >= BUSY_CORES * (now - last_change):
                seen, cpu_seen, last_change = current, cpu, now
            for r, since in frozen_since.items():  # a frozen rank cannot advance, whatever the others do
                if now - since > self.timeout:
                    why = f"is stopped (SIGSTOP or a debugger) and has not run for {self.timeout:g} s"
                    raise self._fail(r, f"rank {r} ({names[r]}) {why}")
            if now - last_change > self.timeout:
                raise self._fail(*self._stalled(current, names))

    def _stalled(self, current: list[int], names: Sequence[str]) -> tuple[int, str]:
        r = min(range(len(current)), key=current.__getitem__)
        why = "stopped making progress" if current[r] >= JOINED else "did not join the group"
        quiet = f"no rank advanced for {self.timeout:g} s"
        return r, f"rank {r} ({names[r]}) {why}: {quiet}, and it got least far"
