"""Tree packing: AllReduce over spanning trees whose rates a linear program chooses, so that the
schedule reaches the cut bound (ForestColl, Zhao et al., arXiv 2402.06787).

- `lp`: the packing LP by column generation and multiplicative weights (`pack` → `Packing`).
- `pipeline`: the packing as pipelined trees: chunks dealt by rate, spread over pipeline
  steps, the number of steps chosen by the time with barriers.
- `balanced`: balanced steps, the unpipelined alternative: trees and steps placed chunk by
  chunk so that every link is equally busy in every step.
- `build`: the registered `tree-packing` builder, which weighs the two.
- `forest` and `collectives`: arborescences for AllGather, ReduceScatter, Broadcast and Reduce
  (column generation in `arborescences`, shared with AllReduce's `directed` packing) and their
  `tree-packing` builders.

Importing this package registers `tree-packing` for all five.
"""

from arsched.algorithms.packing import collectives  # noqa: F401  (registers the other four)
from arsched.algorithms.packing.build import MAX_RANKS, tree_packing
from arsched.algorithms.packing.lp import Packing, pack

__all__ = ["MAX_RANKS", "Packing", "pack", "tree_packing"]
