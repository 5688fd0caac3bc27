"""Speed and memory of the schedule validator, side by side with a plain-Python reference.

Ring AllReduce schedules (N chunks, 2(N-1) steps of N transfers) over the first N hosts of a
k=16 fat-tree, N = 64 ... 1,024 (two million transfers at the top). The reference applies the
same semantics transfer by transfer with Python sets; it runs, in the same process, up to the
size where it still takes seconds. Peak memory is measured with tracemalloc (numpy reports its
buffers there).

Run: python benchmarks/bench_validator.py [--quick]
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from collections import defaultdict

from arsched.collective import numeric_check, validate
from arsched.topology import fattree

sys.path.insert(0, __file__.rsplit("/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/examples")
from ring_schedule import ring_allreduce

from _table import markdown, publish


def reference_validate(s) -> bool:
    """The §3.3 semantics with a Python set per buffer (no checks of paths or ranks)."""
    held = {(r, c): {r} for r in range(s.num_ranks) for c in range(s.num_chunks)}
    rank = {name: i for i, name in enumerate(s.ranks)}
    steps = defaultdict(list)
    for t in s:
        steps[t.step].append(t)
    for step in sorted(steps):
        reads = [(t, frozenset(held[(rank[t.src], t.chunk)])) for t in steps[step]]
        for t, payload in reads:
            key = (rank[t.dst], t.chunk)
            if t.op == "copy":
                held[key] = set(payload)
            elif held[key] & payload:
                return False
            else:
                held[key] |= payload
    return all(len(v) == s.num_ranks for v in held.values())


def main(quick: bool = False) -> None:
    topo = fattree(16)
    rows = []
    for n in (64, 128, 256, 512, 1024):
        if quick and n > 256:
            break
        t0 = time.perf_counter()
        sched = ring_allreduce(topo, ranks=topo.servers[:n])
        build = time.perf_counter() - t0
        tracemalloc.start()
        t0 = time.perf_counter()
        report = validate(sched)
        ours = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert report.ok, report.message
        t0 = time.perf_counter()
        assert numeric_check(sched).ok
        num = time.perf_counter() - t0
        ref = "—"
        if n <= 256:
            t0 = time.perf_counter()
            assert reference_validate(sched)
            ref_t = time.perf_counter() - t0
            ref = f"{ref_t:.2f} s ({ref_t / ours:.0f}×)"
        rows.append(
            [
                n,
                len(sched),
                f"{build:.2f} s",
                f"{ours:.3f} s",
                f"{len(sched) / ours / 1e6:.2f} M/s",
                f"{peak / 2**20:.0f} MiB",
                f"{num:.3f} s",
                ref,
            ]
        )
    publish(
        "Schedule validator",
        "Ring AllReduce on the first N hosts of fattree(16): schedule build time, symbolic validation "
        "time, throughput (transfers per second), validator peak memory, numeric check time, and the "
        "plain-Python reference validator in the same run with its slowdown. Produced by "
        "`benchmarks/bench_validator.py`.",
        markdown(
            ["ranks", "transfers", "build", "validate", "rate", "peak memory", "numeric check", "reference"],
            rows,
        ),
    )


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
