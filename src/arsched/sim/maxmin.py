"""Max-min fair rates by progressive filling, vectorised over the flow-link incidence.

All unfrozen flows grow at the same rate until a link is full; the flows crossing a full link
freeze at that level; repeat. Each round is a bincount over the incidence entries of the
flows still growing, so the cost is (entries) x (distinct rate levels).
"""

from __future__ import annotations

import numpy as np

from arsched.csr import gather
from arsched.sim.paths import CompiledPaths


def incidence(flows: np.ndarray, cp: CompiledPaths) -> tuple[np.ndarray, np.ndarray]:
    """(flow position, link) for every link of every flow in `flows`."""
    idx, lens = gather(cp.path_ptr, cp.path_id[flows])
    return np.repeat(np.arange(len(flows)), lens), cp.path_links[idx]


def maxmin_rates(flows: np.ndarray, cp: CompiledPaths, capacity: np.ndarray) -> np.ndarray:
    """The max-min fair rate (bytes/s) of each flow, given the links of every flow."""
    pos, link = incidence(flows, cp)
    remaining = capacity.astype(np.float64)
    full_tol = 1e-12 * remaining
    rate = np.zeros(len(flows))
    growing = np.ones(len(flows), dtype=bool)
    level = 0.0
    while len(pos):
        count = np.bincount(link, minlength=len(remaining))
        used = count > 0
        delta = (remaining[used] / count[used]).min()
        level += delta
        remaining -= delta * count
        hit = (used & (remaining <= full_tol))[link]
        frozen = pos[hit]
        rate[frozen] = level
        growing[frozen] = False
        keep = growing[pos]
        pos, link = pos[keep], link[keep]
    return rate
