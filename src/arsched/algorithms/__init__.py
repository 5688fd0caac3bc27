"""AllReduce algorithms, registered by name: `build(name, topology, ranks, nbytes, **params)`."""

from arsched.algorithms import dbtree, greedy, hrl, multiring, native, packing, ps, rhd, ring  # noqa: F401  (registers the builders)
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
