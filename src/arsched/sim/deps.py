"""Dependencies of asynchronous execution, derived from the step semantics (design §3.3).

A transfer waits for the earlier-step transfers that write its source buffer, and for the
earlier-step transfers that read or write its destination buffer. Only the latest earlier
writers of a buffer are needed (they waited for the ones before them), and the readers since
that write. Rather than listing transfer-to-transfer edges (a parameter server would need N²),
transfers wait on *groups*: the writers of one buffer in one step, or its readers in one step.
A group is done when all its members are; a transfer is ready when all its groups are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from arsched.collective.schedule import Schedule
from arsched.csr import gather
from arsched.sim.grouping import dense, group_by, stable_order


@dataclass(frozen=True)
class Dependencies:
    """Group structure: transfer t is a member of groups `member_of[t]` (one or two), waits for
    `waits[wait_ptr[t]:wait_ptr[t+1]]`; group g has `size[g]` members and its dependents are
    `dependents[dep_ptr[g]:dep_ptr[g+1]]`."""

    member_of: np.ndarray  # (T, 2) group ids, -1 for none
    size: np.ndarray
    wait_count: np.ndarray
    dep_ptr: np.ndarray
    dependents: np.ndarray


# fmt: off
@numba.njit(cache=True)
def _waits(
    src_buf, dst_buf, step, w_of, r_of, wbuf, below_read, reads_at, first_read,
    conn, c_of, cbuf, conn_base, barrier_base, n_groups,
):  # pragma: no cover - compiled
    # fmt: on
    """Every transfer's waits, counted and then written as each group's dependents: by kind (the
    writer of the source buffer, of the destination buffer, the destination's readers since,
    the connection's previous step, the barrier), each kind in transfer order. `wbuf` and
    `cbuf` are the buffer of every write group and the connection of every connection group."""
    t_count = len(step)
    n_w = len(wbuf)
    wait_count = np.zeros(t_count, dtype=np.int64)
    dep_ptr = np.zeros(n_groups + 1, dtype=np.int64)
    dependents = np.zeros(0, dtype=np.int64)
    pos = np.zeros(0, dtype=np.int64)
    for phase in range(2):
        if phase == 1:
            for g in range(n_groups):
                dep_ptr[g + 1] += dep_ptr[g]
            dependents = np.empty(dep_ptr[n_groups], dtype=np.int64)
            pos = dep_ptr[:-1].copy()
        for kind in range(5):
            if (kind == 3 and len(c_of) == 0) or (kind == 4 and barrier_base < 0):
                continue
            for t in range(t_count):
                lo, hi = 0, 0  # groups [lo, hi) of this kind that t waits for
                if kind == 0:  # the latest earlier writer of its source buffer
                    q = below_read[r_of[t]]
                    if q >= 0 and wbuf[q] == src_buf[t]:
                        lo, hi = q, q + 1
                elif kind == 1:  # ... of its destination buffer
                    q = w_of[t] - 1
                    if q >= 0 and wbuf[q] == dst_buf[t]:
                        lo, hi = q, q + 1
                elif kind == 2:  # the destination's readers in steps [last write, this step)
                    w = w_of[t]
                    q = w - 1
                    lo = reads_at[q] if q >= 0 and wbuf[q] == dst_buf[t] else first_read[w]
                    hi = reads_at[w]
                    lo, hi = n_w + lo, n_w + hi
                elif kind == 3:  # the connection's previous step
                    q = c_of[t] - 1
                    if q >= 0 and cbuf[q] == conn[t]:
                        lo, hi = conn_base + q, conn_base + q + 1
                elif step[t] > 0:  # the barrier after the previous step
                    lo, hi = barrier_base + step[t] - 1, barrier_base + step[t]
                for g in range(lo, hi):
                    if phase == 0:
                        dep_ptr[g + 1] += 1
                        wait_count[t] += 1
                    else:
                        dependents[pos[g]] = t
                        pos[g] += 1
    return wait_count, dep_ptr, dependents


def derive(schedule: Schedule, synchronous: bool = False, fifo: bool = False) -> Dependencies:
    """The dependency groups of a schedule; `synchronous` adds a barrier between steps, `fifo`
    makes each connection (source, destination and channel: `Schedule.connections`) carry its
    steps in order, like a runtime's channel: a transfer also waits for the connection's
    transfers of its previous step."""
    s = schedule
    t_count = len(s)
    num_nodes = s.topology.compiled.num_nodes
    rank_of = s.rank_of_node
    src_rank, dst_rank = rank_of[s.src].astype(np.int64), rank_of[s.dst].astype(np.int64)
    chunk = s.chunk.astype(np.int64)
    src_buf = src_rank * s.num_chunks + chunk
    dst_buf = dst_rank * s.num_chunks + chunk
    step, n_steps = dense(s.step)  # dense step numbers 0..S-1
    span = n_steps + 1  # a group's key: buffer (or connection) * span + step, as it sorts
    by_step = (step, n_steps)
    by_chunk = (chunk, s.num_chunks)
    # write groups (destination buffer, step) and read groups (source buffer, step), each
    # numbered in sorted key order
    w_of, w_first = group_by(
        dst_buf, step, stable_order([by_step, by_chunk, (dst_rank, s.num_ranks)], t_count)
    )
    r_of, r_first = group_by(
        src_buf, step, stable_order([by_step, by_chunk, (src_rank, s.num_ranks)], t_count)
    )
    wkey = dst_buf[w_first] * span + step[w_first]
    rkey = src_buf[r_first] * span + step[r_first]
    n_w, n_r = len(wkey), len(rkey)
    member = [w_of, n_w + r_of]
    n_groups = n_w + n_r
    conn = c_of = c_first = np.zeros(0, dtype=np.int64)
    if fifo and t_count:
        src_node, dst_node = s.src.astype(np.int64), s.dst.astype(np.int64)
        conn = s.connections()[0]
        keys = [by_step, (dst_node, num_nodes), (src_node, num_nodes)]  # sorted by (connection, step)
        if s.channels > 1:
            keys.insert(1, (np.mod(s.step, s.channels), s.channels))
        c_of, c_first = group_by(conn, step, stable_order(keys, t_count))
        member.append(n_groups + c_of)
        n_groups += len(c_first)
    barrier_base = -1
    if synchronous and n_steps > 1:  # every transfer of step k waits for a group of all of step k-1
        barrier_base = n_groups
        member.append(n_groups + step)
        n_groups += n_steps
    member_of = np.stack(member, axis=1) if t_count else np.zeros((0, len(member)), dtype=np.int64)
    wait_count, dep_ptr, dependents = _waits(
        src_buf, dst_buf, step, w_of, r_of, dst_buf[w_first],
        np.searchsorted(wkey, rkey) - 1,  # each read group's latest earlier write group (if of its buffer)
        np.searchsorted(rkey, wkey),  # the first read group at or after each write group
        np.searchsorted(rkey, wkey // span * span),  # ... at or after its buffer's step 0
        conn, c_of, conn[c_first], n_w + n_r, barrier_base, n_groups,
    )  # fmt: skip
    size = np.bincount(member_of.ravel(), minlength=n_groups)
    return Dependencies(member_of, size, wait_count, dep_ptr, dependents)


class Readiness:
    """Tracks which transfers may start as others complete (vectorised over batches)."""

    def __init__(self, deps: Dependencies) -> None:
        self.deps = deps
        self.group_left = deps.size.copy()
        self.wait_left = deps.wait_count.copy()

    def initial(self) -> np.ndarray:
        """Transfers that wait for nothing."""
        return np.flatnonzero(self.wait_left == 0)

    def complete(self, done: np.ndarray) -> np.ndarray:
        """Mark transfers done; return the transfers that became ready (sorted)."""
        d = self.deps
        groups = d.member_of[done].ravel()
        groups, counts = np.unique(groups[groups >= 0], return_counts=True)
        self.group_left[groups] -= counts
        finished = groups[self.group_left[groups] == 0]
        if not len(finished):
            return np.zeros(0, dtype=np.int64)
        idx, _ = gather(d.dep_ptr, finished)
        waiting, counts = np.unique(d.dependents[idx], return_counts=True)
        self.wait_left[waiting] -= counts
        return waiting[self.wait_left[waiting] == 0]
