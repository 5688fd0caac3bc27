"""What one scheduling problem offers the learned scheduler: its chunk options and, for every
chunk, a library of flow trees to choose from.

An `Instance` is a network, its ranks and a message size. A chunk option is a chunk count and
a number of pipeline *stages*: chunk c of C may start in the episode's stage c·S // C, so that
a connection carries the first stage's chunks before the second's (one stage: all start at
once). The options are the counts greedy-trees weighs (`candidate_chunks`: about 4 per rank on
small networks, and one per rank) plus two per rank, in one stage, and on networks of up to
`PIPELINE_RANKS` ranks the `PIPELINE_CHUNKS` counts in each of the `STAGES` that leave at least
half a chunk per rank in every stage, where a chunk takes at least α (`DEFAULT_ALPHA`) to cross
the slowest link (smaller chunks pay more in latency than they gain in overlap). No option has
more chunks than MSCCL runs steps per thread block (`MAX_STEPS_PER_TB`, 256): a tree schedule
puts up to one step per chunk on a connection. For each count every chunk has one tree of each of the
`SHAPES` of `arsched.algorithms.flowtrees` (shortest-path, shallow, load-balanced, ring chain,
nearest first): the trees are built once per instance and count, and an episode only picks
among them. Every tree's directed-link usage (its reduces up and broadcasts down, on their
routes) is kept as a sparse row, so that the upper level can weigh a tree against the load of
the trees chosen before it without routing anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from arsched.algorithms.common import check_nbytes, check_ranks, ring_order
from arsched.algorithms.flowtrees import SHAPES, FlowTree, FlowTreeEngine, build_trees, pair_links
from arsched.algorithms.greedy_trees import MAX_RANKS, candidate_chunks
from arsched.algorithms.registry import NotApplicable
from arsched.algorithms.trees import tree_heights
from arsched.defaults import DEFAULT_ALPHA
from arsched.runtime.msccl_format import MAX_STEPS_PER_TB
from arsched.topology.core import Topology

MAX_TREES = 256  # chunks of a one-stage option: each is a step of the upper level
PIPELINE_RANKS = 32  # the most ranks with pipelined options (an engine's flows: chunks × ranks)
PIPELINE_CHUNKS = (MAX_STEPS_PER_TB // 2, MAX_STEPS_PER_TB)  # counts of the pipelined options
STAGES = (8, 16, 32)


@dataclass(frozen=True)
class Library:
    """For one chunk count: `trees[s][c]` is chunk c's tree of shape `SHAPES[s]`; `usage[s][c]`
    its flows per directed link as (links, counts); `height[s, c]` its height in hops."""

    chunks: int
    trees: list[list[FlowTree]]
    usage: list[list[tuple[np.ndarray, np.ndarray]]]
    height: np.ndarray


class Instance:
    """A network, its ranks (default: every server) and the message size, with the tree
    libraries of its chunk counts, built on first use; `chunk_options` are (chunks, stages)."""

    def __init__(
        self, topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 256e6, name: str = ""
    ) -> None:
        self.topology = topology
        self.ranks = check_ranks(topology, ranks, "hrl")
        self.nbytes = check_nbytes(nbytes, "hrl")
        self.name = name or topology.name
        n = len(self.ranks)
        if n > MAX_RANKS:
            raise NotApplicable(
                f"hrl is limited to {MAX_RANKS} ranks (its flow trees' rounds), {self.name} has {n}"
            )
        counts = [(c, 1) for c in sorted({*candidate_chunks(n, None), 2 * n}) if c <= MAX_TREES]
        small = n <= PIPELINE_RANKS
        slowest = float(np.min(self.capacity, initial=np.inf))
        piped = [
            (c, s)
            for c in PIPELINE_CHUNKS
            for s in STAGES
            if small and 2 * c >= s * n and self.nbytes / c >= DEFAULT_ALPHA * slowest
        ]
        self.chunk_options: tuple[tuple[int, int], ...] = tuple(counts + piped)  # (chunks, stages)
        self._libraries: dict[int, Library] = {}
        self.best_plans: dict[float, object] = {}  # per α, the best fixed plan's episode (rollout)

    @property
    def num_ranks(self) -> int:
        return len(self.ranks)

    @cached_property
    def capacity(self) -> np.ndarray:
        """Bytes per second of every directed link."""
        return np.asarray(self.topology.compiled.capacity, dtype=np.float64)

    @cached_property
    def _pair_links(self) -> np.ndarray:
        return pair_links(self.topology, self.ranks)

    def _usage(self, tree: FlowTree) -> tuple[np.ndarray, np.ndarray]:
        kids = np.flatnonzero(tree.parent >= 0)
        links = self._pair_links[kids, tree.parent[kids]].ravel()
        return tuple(np.unique(links[links < len(self.capacity)], return_counts=True))

    def library(self, chunks: int) -> Library:
        """The trees of every shape for `chunks` chunks (built once)."""
        if chunks not in self._libraries:
            order = ring_order(self.topology, self.ranks)
            index = {r: i for i, r in enumerate(self.ranks)}
            order_idx = [index[r] for r in order]
            trees = [build_trees(self.topology, self.ranks, chunks, None, s, order_idx) for s in SHAPES]
            usage = [[self._usage(t) for t in row] for row in trees]
            height = np.array(
                [[tree_heights(t.parent)[t.root] for t in row] for row in trees], dtype=np.float64
            )
            self._libraries[chunks] = Library(chunks, trees, usage, height)
        return self._libraries[chunks]

    def engine(self, chunks: int, shapes: Sequence[int]) -> FlowTreeEngine:
        """The round engine for `chunks` chunks, chunk c on its tree of shape `SHAPES[shapes[c]]`."""
        lib = self.library(chunks)
        trees = [lib.trees[s][c] for c, s in enumerate(shapes)]
        return FlowTreeEngine(self.topology, self.ranks, self.nbytes, trees, "hrl")
