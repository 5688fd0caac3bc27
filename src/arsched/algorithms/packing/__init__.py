"""Tree packing: AllReduce over spanning trees whose rates a linear program chooses, so that the
schedule reaches the cut bound (ForestColl, Zhao et al., arXiv 2402.06787).

- `lp`: the packing LP by column generation and multiplicative weights (`pack` → `Packing`).
- `pipeline`: the packing as pipelined trees: chunks dealt by rate, spread over pipeline
  steps, the number of steps chosen by the time with barriers.
- `balanced`: balanced steps, the unpipelined alternative: trees and steps placed chunk by
  chunk so that every link is equally busy in every step.
- `build`: the registered `tree-packing` builder, which weighs the two.

Importing this package registers `tree-packing`.
"""

from arsched.algorithms.packing.build import MAX_RANKS, tree_packing
from arsched.algorithms.packing.lp import Packing, pack

__all__ = ["MAX_RANKS", "Packing", "pack", "tree_packing"]
