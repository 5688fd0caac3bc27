"""A tiny independent interpreter of MSCCL XML, for the tests: thread blocks run their steps in
order, a step first waits for the step named by depid/deps, sends push onto the connection's
queue (at most `capacity` chunks in flight), receives pop from it, `cpy` copies within a gpu.
Which runnable thread block goes next is drawn at random, so a missing wait shows up as a wrong
result in some interleaving and a wait cycle as a deadlock. It reads the XML with ElementTree
and shares no code with arsched.runtime.

Each gpu's memory is laid out as the MSCCL runtime's call would give it, from `coll` alone
(k = nchunksperloop / ngpus): in place, input and output alias (ReduceScatter's output is its
shard of the input, AllGather's input is its shard of the output); AllToAll is out of place,
with its scratch beside. Data no gpu provided is NaN, so it poisons any sum it reaches."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import deque

import numpy as np


def run_xml(
    text: str, seed: int, capacity: int = 1, root: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Execute the program on random data: (what the gpus' outputs hold, what the collective says
    they must hold), both flattened over the checked chunks. `root` for broadcast and reduce."""
    top = ET.fromstring(text)
    coll, n, per_loop = top.get("coll"), int(top.get("ngpus")), int(top.get("nchunksperloop"))
    gpus = {int(g.get("id")): g for g in top.iter("gpu")}
    scratch = max(int(g.get("s_chunks")) for g in gpus.values())
    rng = np.random.default_rng(seed)
    mem, base = _memory(coll, n, per_loop, scratch)
    data = rng.standard_normal((n, per_loop if coll != "allgather" else per_loop // n))
    for g in range(n):
        if coll != "broadcast" or g == root:
            mem[g, base[g]["i"] : base[g]["i"] + data.shape[1]] = data[g]
    _interpret(gpus, mem, base, rng, capacity)
    return _check(coll, n, per_loop, mem, base, data, root)


def _memory(coll: str, n: int, per_loop: int, scratch: int) -> tuple[np.ndarray, list[dict[str, int]]]:
    """Each gpu's memory (NaN) and where its buffers i, o and s start in it."""
    k = per_loop // n
    if coll == "alltoall":
        base = [{"i": 0, "o": per_loop, "s": 2 * per_loop} for _ in range(n)]
        return np.full((n, 2 * per_loop + scratch), np.nan), base
    if coll in ("reducescatter", "reduce_scatter"):
        base = [{"i": 0, "o": g * k, "s": per_loop} for g in range(n)]
    elif coll == "allgather":
        base = [{"i": g * k, "o": 0, "s": per_loop} for g in range(n)]
    else:
        base = [{"i": 0, "o": 0, "s": per_loop} for _ in range(n)]
    return np.full((n, per_loop + scratch), np.nan), base


def _interpret(gpus: dict, mem: np.ndarray, base: list[dict[str, int]], rng, capacity: int) -> None:
    blocks = []  # (gpu, tb id, send, recv, chan, [steps])
    for g, gpu in gpus.items():
        for tb in gpu.iter("tb"):
            steps = [dict(st.attrib) for st in tb.iter("step")]
            blocks.append(
                (g, int(tb.get("id")), int(tb.get("send")), int(tb.get("recv")), int(tb.get("chan")), steps)
            )
    done = {(g, t): 0 for g, t, *_ in blocks}  # steps finished per thread block
    queues: dict[tuple[int, int, int], deque] = {}

    def runnable(b) -> bool:
        g, t, send, recv, chan, steps = b
        k = done[(g, t)]
        if k == len(steps):
            return False
        st = steps[k]
        if int(st["depid"]) >= 0 and done[(g, int(st["depid"]))] <= int(st["deps"]):
            return False
        if st["type"] in ("r", "rrc", "rcs", "rrcs", "rrs") and not queues.get((recv, g, chan)):
            return False
        return not (
            st["type"] in ("s", "rcs", "rrcs", "rrs") and len(queues.get((g, send, chan), ())) >= capacity
        )

    while True:
        ready = [b for b in blocks if runnable(b)]
        if not ready:
            break
        g, t, send, recv, chan, steps = ready[rng.integers(len(ready))]
        st = steps[done[(g, t)]]
        kind, cnt = st["type"], int(st["cnt"])
        src = slice(base[g][st["srcbuf"]] + int(st["srcoff"]), None)
        dst = slice(base[g][st["dstbuf"]] + int(st["dstoff"]), None)
        src, dst = slice(src.start, src.start + cnt), slice(dst.start, dst.start + cnt)
        if kind in ("r", "rcs"):
            mem[g, dst] = queues[(recv, g, chan)].popleft()
        elif kind in ("rrc", "rrcs"):
            mem[g, dst] = mem[g, src] + queues[(recv, g, chan)].popleft()
        elif kind == "cpy":
            mem[g, dst] = mem[g, src]
        if kind in ("s", "rcs", "rrcs"):
            queues.setdefault((g, send, chan), deque()).append(mem[g, src if kind == "s" else dst].copy())
        done[(g, t)] += 1
    stuck = [(g, t) for g, t, *_, steps in blocks if done[(g, t)] < len(steps)]
    if stuck:
        raise AssertionError(f"deadlock: thread blocks {stuck} cannot go on")


def _check(coll, n, per_loop, mem, base, data, root) -> tuple[np.ndarray, np.ndarray]:
    """The outputs the collective defines and what they must hold."""
    k = per_loop // n
    out = [
        mem[g, base[g]["o"] : base[g]["o"] + (k if coll in ("reducescatter", "reduce_scatter") else per_loop)]
        for g in range(n)
    ]
    total = data.sum(axis=0)
    if coll == "allreduce":
        want = [total] * n
    elif coll in ("reducescatter", "reduce_scatter"):
        want = [total[g * k : (g + 1) * k] for g in range(n)]
    elif coll == "allgather":
        want = [data.ravel()] * n
    elif coll == "broadcast":
        want = [data[root]] * n
    elif coll == "reduce":
        out, want = [out[root]], [total]
    elif coll == "alltoall":
        blocks = data.reshape(n, n, k)  # [source, destination, piece]
        want = [blocks[:, g, :].ravel() for g in range(n)]
    else:
        raise AssertionError(f"unknown coll {coll!r}")
    return np.concatenate(out), np.concatenate(want)
