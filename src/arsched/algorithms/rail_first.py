"""Hierarchical AllGather over boxes: every shard crosses its rail in pieces while the boxes
already exchange their own shards, then the pieces that came over the rails go round the box;
the ReduceScatter is its mirror image in time. Registered as `hierarchical`'s AllGather and
ReduceScatter.

The ranks form G groups ("boxes") of g, found or given as for the hierarchical AllReduce
(`hierarchical.usable_groupings`, `groups.align`: rank j of every box on rail j). Rank r's
shard is cut into P pieces of whole chunks. In step 0 r copies its whole shard to its g − 1 box
peers; in step q it copies piece q to its G − 1 rail peers (rail switches connect them
directly); in step q + 1 it copies each piece q that came over its rail to its box peers. So the
box fabric works on the box's own shards while the first pieces cross the rails (NCCL-style
two-level AllGather, with the local phase moved first because it waits for nothing), and only
the last piece's box step is exposed after the rails finish. Every connection pays α per step,
so pieces shrink towards the end: large ones while the box is busy anyway, a small last one to
expose. The pieces are the fastest in the flow model (in-order connections) found, over every
grouping, by a search: arithmetic sizes (count, ..., 2, 1) for each count in `COUNTS` in turn
while they get faster (more pieces shrink the fill and add α per step, so the time falls, then
rises), then equal and halving sizes at the fastest count. The candidates' transfers are bounded
by `SELECT_TRANSFERS`, or `SELECT_PER_RANK` per rank where that is more (a unit of one chunk
per rank is N(N − 1) transfers: a million at 1,024 GPUs, where the old budget of 1 M in all left
one piece, 1.59× the bound, and the search reaches 1.10×, `benchmarks/bench_collectives.py
--scale`): work, not the clock, so the same inputs give the same schedule on any machine.

ReduceScatter: the same transfers reversed — each copy from a to b in step s becomes a reduce
from b into a in step P − s. An AllGather whose copies deliver each chunk to every rank exactly
once (a tree per chunk, as here) reversed in time sums every contribution into the chunk's owner:
each rank adds into the rank it received the chunk from, after everything it forwarded the chunk
to has added into it.

Example::

    ag = build("hierarchical", parse_spec("hgx:boxes=2"), collective="allgather")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from arsched.algorithms.common import check_nbytes, check_ranks
from arsched.algorithms.groups import align
from arsched.algorithms.hierarchical import NAME, stripe_width, usable_groupings
from arsched.algorithms.registry import register
from arsched.algorithms.routes import STRIPES
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.defaults import default_alpha
from arsched.errors import ArschedError
from arsched.limits import check_schedule
from arsched.sim.flow import simulate_flow
from arsched.sim.result import check_alpha
from arsched.topology.core import Topology

COUNTS = (1, 2, 3, 4, 6, 8)  # pieces per shard searched (arithmetic sizes; then equal, halving at the best)
MAX_CHUNKS = 256  # chunks per shard
SELECT_TRANSFERS = 1_000_000  # transfers of all the candidates simulated ...
SELECT_PER_RANK = 32_768  # ... or this many per rank where that is more


def rail_first(
    collective: str,
    topology: Topology,
    ranks: Sequence[str] | None,
    nbytes: float,
    groups: Sequence[Sequence[str]] | None,
    pieces: int | Sequence[int] | None,
    alpha: float | None,
) -> Schedule:
    """The rail-first `collective` ('allgather' or 'reduce_scatter'; see the module docstring)
    over `groups` (default: found), in `pieces` per shard (a count of equal pieces, or every
    piece's chunks, first to last; default: the fastest candidate in the flow model with
    `alpha`, default the flow model's)."""
    rs = check_ranks(topology, ranks, NAME)
    nbytes = check_nbytes(nbytes, NAME)
    a = check_alpha(default_alpha("flow") if alpha is None else alpha)
    grids = [align(topology, rs, parts, False) for parts in usable_groupings(topology, rs, groups)]
    if pieces is not None:
        striped = stripe_width(topology, rs, grids[0], STRIPES) > 1
        return _schedule(collective, topology, rs, nbytes, grids[0], _sizes(pieces), striped)
    search = _Search(collective, topology, rs, nbytes, a, max(SELECT_TRANSFERS, SELECT_PER_RANK * len(rs)))
    for grid in grids:
        width = stripe_width(topology, rs, grid, STRIPES)  # chunks a pair needs per step to stripe
        fastest, count = np.inf, COUNTS[0]
        for c in COUNTS:
            t = search.time(grid, width, list(range(c, 0, -1)))
            if not t < fastest:
                break
            fastest, count = t, c
        for units in ([1] * count, [2**i for i in range(count - 1, -1, -1)]):
            if units != list(range(count, 0, -1)):
                search.time(grid, width, units)
    assert search.best is not None
    return search.best


@dataclass
class _Search:
    """The fastest schedule timed so far and the transfers `left` to simulate."""

    collective: str
    topology: Topology
    rs: tuple[str, ...]
    nbytes: float
    alpha: float
    left: int
    best: Schedule | None = None
    best_time: float = np.inf

    def time(self, grid: np.ndarray, width: int, units: list[int]) -> float:
        """The time of pieces of `units` (units of `width` chunks) over `grid`, the best kept;
        infinity where its transfers would pass what is left to simulate (unless none is
        built yet)."""
        sizes = [width * x for x in units]
        if self.best is not None and len(self.rs) ** 2 * sum(sizes) > self.left:
            return np.inf
        s = _schedule(self.collective, self.topology, self.rs, self.nbytes, grid, sizes, width > 1)
        self.left -= len(s)
        t = simulate_flow(s, self.alpha).time_s
        if t < self.best_time:
            self.best, self.best_time = s, t
        return t


def _sizes(pieces: object) -> list[int]:
    """The `pieces` parameter as every piece's chunks; an ArschedError unless valid."""
    sizes = [1] * pieces if isinstance(pieces, (int, np.integer)) and not isinstance(pieces, bool) else pieces
    ok = (
        isinstance(sizes, (list, tuple))
        and sizes
        and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 1 for x in sizes)
    )
    if not ok or sum(sizes) > MAX_CHUNKS:
        raise ArschedError(
            f"{NAME}: pieces must be a count or a list of positive chunk counts, at most {MAX_CHUNKS} "
            f"chunks in all, got {pieces!r}"
        )
    return [int(x) for x in sizes]


def _schedule(
    collective: str,
    topology: Topology,
    rs: tuple[str, ...],
    nbytes: float,
    grid: np.ndarray,
    sizes: list[int],
    striped: bool,
) -> Schedule:
    """The schedule over the (G × g) `grid` of rank indices with pieces of `sizes` chunks;
    chunk r·C + k (C chunks per shard) is chunk k of rank r's shard; with `striped`, a pair's
    transfers over the routes that add capacity (`ScheduleBuilder(multipath=)`)."""
    n, per = len(rs), sum(sizes)
    check_schedule(NAME, n, n * per, n * per * (n - 1))
    params = {"groups": [[rs[i] for i in row] for row in grid.tolist()], "pieces": sizes}
    b = ScheduleBuilder(
        topology, rs, nbytes, n * per, NAME, {"params": params}, spread=True, collective=collective,
        multipath=STRIPES if striped else 1,
    )  # fmt: skip
    step, chunk, src, dst = _allgather(grid, np.repeat(np.arange(len(sizes)), sizes))
    if collective == "allgather":
        b.add_rank_arrays(step, chunk, src, dst, "copy")
    else:
        b.add_rank_arrays(len(sizes) - step, chunk, dst, src, "reduce")
    return b.build()


def _allgather(grid: np.ndarray, piece: np.ndarray) -> tuple[np.ndarray, ...]:
    """(step, chunk, source, destination) of every copy of the rail-first AllGather over the
    (G × g) `grid`, chunk k of a shard in piece `piece[k]`."""
    G, g = grid.shape
    box, lane = np.divmod(np.arange(G * g), g)
    rank = grid[box, lane][:, None, None, None]
    peer = (lane[:, None] + np.arange(1, g)) % g  # (n, g − 1) lanes of the box peers
    hub_box = (box[:, None] + np.arange(1, G)) % G  # (n, G − 1) boxes of the rail peers
    hub = grid[hub_box, lane[:, None]]
    per = len(piece)
    k = np.arange(per)
    own = np.broadcast_arrays(0 * k, rank, grid[box[:, None], peer][:, :, None, None], k)  # step 0
    rail = np.broadcast_arrays(piece, rank, hub[:, :, None, None], k)  # step q, its piece
    onward = grid[hub_box[:, :, None], (lane[:, None, None] + np.arange(1, g)) % g][..., None]
    relay = np.broadcast_arrays(piece + 1, rank, hub[:, :, None, None], onward, k)  # step q + 1
    parts = [(s, r * per + c, r, d) for s, r, d, c in (own, rail)]
    parts.append((relay[0], relay[1] * per + relay[4], relay[2], relay[3]))
    return tuple(np.concatenate([x.ravel() for x in col]) for col in zip(*parts, strict=True))


def _builder(collective: str):
    def build(
        topology: Topology,
        ranks: Sequence[str] | None = None,
        nbytes: float = 1e8,
        groups: Sequence[Sequence[str]] | None = None,
        pieces: int | Sequence[int] | None = None,
        alpha: float | None = None,
    ) -> Schedule:
        return rail_first(collective, topology, ranks, nbytes, groups, pieces, alpha)

    build.__doc__ = f"Hierarchical {collective}: rails first, the boxes' own shards meanwhile (`rail_first`)."
    return build


register(NAME, "", "allgather")(_builder("allgather"))
register(NAME, "", "reduce_scatter")(_builder("reduce_scatter"))
