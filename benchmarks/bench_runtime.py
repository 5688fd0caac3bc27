"""Our schedules executed for real (torch.distributed, gloo) beside torch's own all_reduce.

Four local processes on this machine, one per rank, talk over the loopback interface: the
times say how each schedule's step structure fares on a real transport with per-message
overhead, not how it would do on the topology it was built for (loopback has no links to
contend for). Schedules are built on star:n=4 (four servers behind one switch, the closest
picture of loopback) and run at three vector sizes; every run also checks the result against
torch's all_reduce on the same input (max abs error; the inputs are integers, so 0 is exact).
Times are medians over the repeats of the slowest rank per run, measured alternately with
torch's all_reduce in the same processes, so the ratio column compares like with like. Each
size runs in a fresh set of processes. Also: MSCCL XML export size and thread blocks per gpu.

Run: python benchmarks/bench_runtime.py [--quick]
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, __file__.rsplit("/", 1)[0])

from _table import markdown, publish
from arsched.algorithms import NotApplicable, build
from arsched.runtime.executor import run_schedules
from arsched.runtime.msccl_export import to_xml
from arsched.topology import parse_spec

NAMES = ("ps", "sharded-ps", "ring", "multi-ring", "dbtree", "rhd", "tree-packing", "greedy-trees")
SPEC = "star:n=4"


def main(quick: bool = False) -> None:
    import torch

    torch.set_num_threads(1)
    topo = parse_spec(SPEC)
    schedules = []
    for name in NAMES:
        try:
            schedules.append(build(name, topo, None, 1e6))
        except NotApplicable as e:
            print(f"{name}: {e}")
    sizes = (64e3, 4e6) if quick else (64e3, 1e6, 16e6)
    repeat = 3 if quick else 7
    rows = []
    for size in sizes:
        results = run_schedules(schedules, nbytes=size, repeat=repeat, timeout=120)
        for s, r in zip(schedules, results, strict=True):
            root = ET.fromstring(to_xml(s))
            tbs = max(len(gpu) for gpu in root)
            rows.append(
                [
                    s.algorithm,
                    f"{r.nbytes / 1e6:g}",
                    s.num_chunks,
                    s.num_steps,
                    f"{r.time_s * 1e3:.3f}",
                    f"{r.torch_allreduce_time_s * 1e3:.3f}",
                    f"{r.time_s / r.torch_allreduce_time_s:.2f}×",
                    f"{r.max_abs_error:g}",
                    tbs,
                ]
            )
    intro = (
        f"Schedules built on `{SPEC}`, executed by `arsched.runtime` on 4 local processes (gloo, "
        f"CPU) over **this machine's loopback interface — not the simulated topology**; median of "
        f"{repeat} runs, alternating with `torch.distributed.all_reduce` on the same processes "
        "and inputs. *error* is the max abs difference from torch's result (integer inputs, so 0 "
        "is exact); *TBs* is the most thread blocks per gpu in the MSCCL XML export. The machine "
        "has 2 cores shared with other work and runs 4 ranks, so the small sizes are noisy "
        "(rerun to see the spread); the tens-of-milliseconds gaps at 64 KB are per-message "
        "and per-step overheads of gloo and Python, not bandwidth. "
        "`python benchmarks/bench_runtime.py`."
    )
    header = ["algorithm", "MB/rank", "chunks", "steps", "ours ms", "torch ms", "ours/torch", "error", "TBs"]
    publish("Real execution on loopback (torch.distributed, gloo)", intro, markdown(header, rows))


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
