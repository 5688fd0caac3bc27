"""A tiny independent interpreter of MSCCL XML, for the tests: thread blocks run their steps in
order, a step first waits for the step named by depid/deps, sends push onto the connection's
queue (at most `capacity` chunks in flight), receives pop from it. Which runnable thread block
goes next is drawn at random, so a missing wait shows up as a wrong sum in some interleaving
and a wait cycle as a deadlock. It reads the XML with ElementTree and shares no code with
arsched.runtime."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import deque

import numpy as np


def run_xml(text: str, seed: int, capacity: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Execute the program on random data: (final buffers [gpu, chunk], the true sums [chunk])."""
    root = ET.fromstring(text)
    n, chunks = int(root.get("ngpus")), int(root.get("nchunksperloop"))
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((n, chunks))
    buf = data.copy()
    blocks = []  # (gpu, send, recv, chan, [steps])
    for gpu in root.iter("gpu"):
        g = int(gpu.get("id"))
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
        kind, off = st["type"], int(st["dstoff"])
        if kind in ("r", "rcs"):
            buf[g, off] = queues[(recv, g, chan)].popleft()
        elif kind in ("rrc", "rrcs"):
            buf[g, off] += queues[(recv, g, chan)].popleft()
        if kind in ("s", "rcs", "rrcs"):
            queues.setdefault((g, send, chan), deque()).append(
                buf[g, int(st["srcoff"]) if kind == "s" else off]
            )
        done[(g, t)] += 1
    stuck = [(g, t) for g, t, *_, steps in blocks if done[(g, t)] < len(steps)]
    if stuck:
        raise AssertionError(f"deadlock: thread blocks {stuck} cannot go on")
    return buf, data.sum(axis=0)
