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

import numpy as np

from arsched.collective.schedule import Schedule
from arsched.csr import gather


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


def _keys(buf: np.ndarray, step: np.ndarray, steps: int) -> np.ndarray:
    return buf * (steps + 1) + step


def derive(schedule: Schedule, synchronous: bool = False, fifo: bool = False) -> Dependencies:
    """The dependency groups of a schedule; `synchronous` adds a barrier between steps, `fifo`
    makes each (source, destination) connection carry its steps in order, like a runtime's
    channel: a transfer also waits for the connection's transfers of its previous step."""
    s = schedule
    t_count = len(s)
    rank_of = s.rank_of_node
    src_buf = rank_of[s.src] * s.num_chunks + s.chunk
    dst_buf = rank_of[s.dst] * s.num_chunks + s.chunk
    _, step = np.unique(s.step, return_inverse=True)  # dense step numbers 0..S-1
    step = step.ravel()
    n_steps = int(step.max()) + 1 if t_count else 0
    wkey = _keys(dst_buf, step, n_steps)
    rkey = _keys(src_buf, step, n_steps)
    wgroups, w_of = np.unique(wkey, return_inverse=True)  # write groups, sorted by (buf, step)
    rgroups, r_of = np.unique(rkey, return_inverse=True)
    w_of, r_of = w_of.ravel(), r_of.ravel()
    n_w = len(wgroups)
    member_of = np.stack([w_of, n_w + r_of], axis=1)
    waits_t: list[np.ndarray] = []
    waits_g: list[np.ndarray] = []
    arange = np.arange(t_count)
    # Keys are looked up among the sorted groups through the groups' own sorted keys (each key
    # is its group's: wkey = wgroups[w_of], rkey = rgroups[r_of]), never one transfer at a time
    span = n_steps + 1
    # latest writers of a buffer before this step: the write group just below key(buf, step),
    # if it is of the same buffer
    below = {"src": (np.searchsorted(wgroups, rgroups) - 1)[r_of], "dst": w_of - 1}
    found = {}
    for side, buf in (("src", src_buf), ("dst", dst_buf)):
        q = below[side]
        ok = q >= 0
        ok[ok] = wgroups[q[ok]] // span == buf[ok]
        waits_t.append(arange[ok])
        waits_g.append(q[ok])
        found[side] = ok
    # readers of the destination buffer in steps [last write, this step)
    reads_at = np.searchsorted(rgroups, wgroups)  # the first read group at or after each write group
    first_read = np.searchsorted(rgroups, wgroups // span * span)  # ... at or after the buffer's step 0
    lo = np.where(found["dst"], reads_at[np.maximum(below["dst"], 0)], first_read[w_of])
    hi = reads_at[w_of]
    count = np.maximum(hi - lo, 0)
    rep = np.repeat(arange, count)
    offs = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    waits_t.append(rep)
    waits_g.append(n_w + lo[rep] + offs)
    n_groups = n_w + len(rgroups)
    if fifo and t_count:
        conn = s.src.astype(np.int64) * s.topology.compiled.num_nodes + s.dst
        cgroups, c_of = np.unique(_keys(conn, step, n_steps), return_inverse=True)
        c_of = c_of.ravel()
        member_of = np.concatenate([member_of, (n_groups + c_of)[:, None]], axis=1)
        q = c_of - 1  # the group just below: the same connection's previous step, if it is that
        ok = q >= 0
        ok[ok] = cgroups[q[ok]] // span == conn[ok]
        waits_t.append(arange[ok])
        waits_g.append(n_groups + q[ok])
        n_groups += len(cgroups)
    if synchronous and n_steps > 1:
        # barrier: every transfer of step k waits for a group holding all of step k-1
        member_of = np.concatenate([member_of, (n_groups + step)[:, None]], axis=1)
        later = step > 0
        waits_t.append(arange[later])
        waits_g.append(n_groups + step[later] - 1)
        n_groups += n_steps
    wt = np.concatenate(waits_t)
    wg = np.concatenate(waits_g)
    size = np.bincount(member_of.ravel(), minlength=n_groups)
    wait_count = np.bincount(wt, minlength=t_count)
    order = np.argsort(wg, kind="stable")
    dep_ptr = np.concatenate([[0], np.cumsum(np.bincount(wg, minlength=n_groups))])
    return Dependencies(member_of, size, wait_count, dep_ptr, wt[order])


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
