"""Build a ring AllReduce by hand with the schedule IR, validate it and save it as JSON.

Usage: python examples/ring_schedule.py OUT.json [SPEC]   (SPEC defaults to bcube:n=4,k=1)
"""

import sys

import numpy as np

from arsched.collective import ScheduleBuilder, save, validate
from arsched.topology import parse_spec


def ring_allreduce(topology, nbytes=100e6, ranks=None):
    """Reduce-scatter then all-gather around the ranks in order: 2(N-1) steps of N transfers."""
    ranks_ = tuple(topology.servers if ranks is None else ranks)
    n = len(ranks_)
    b = ScheduleBuilder(topology, ranks_, nbytes, num_chunks=n, algorithm="ring")
    ranks = np.arange(n)
    for t in range(n - 1):  # reduce-scatter: rank r adds chunk r-t into rank r+1
        b.add_rank_arrays(t, (ranks - t) % n, ranks, (ranks + 1) % n, op="reduce")
    for t in range(n - 1):  # all-gather: rank r forwards its finished chunk r+1-t
        b.add_rank_arrays(n - 1 + t, (ranks + 1 - t) % n, ranks, (ranks + 1) % n, op="copy")
    return b.build()


if __name__ == "__main__":
    topo = parse_spec(sys.argv[2] if len(sys.argv) > 2 else "bcube:n=4,k=1")
    schedule = ring_allreduce(topo)
    print(validate(schedule).message)
    save(schedule, sys.argv[1])
    print(f"wrote {sys.argv[1]}")
