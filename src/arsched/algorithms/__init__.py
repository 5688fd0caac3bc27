"""Collective algorithms, registered by name:
`build(name, topology, ranks, nbytes, collective=, root=, **params)`."""

from arsched.algorithms import (  # noqa: F401  (importing a module registers its builders)
    auto,
    bruck,
    composed,
    dbtree,
    dimension_ordered,
    direct,
    greedy_trees,
    group_trees,
    halved,
    hierarchical,
    mcf,
    multiring,
    packing,
    ps,
    rail_dbtree,
    rail_first,
    rhd,
    ring,
    scatter_allgather,
)
from arsched.algorithms.registry import (
    Algorithm,
    NotApplicable,
    UnknownAlgorithm,
    algorithms,
    build,
    get,
    register,
)

__all__ = ["Algorithm", "NotApplicable", "UnknownAlgorithm", "algorithms", "build", "get", "register"]
