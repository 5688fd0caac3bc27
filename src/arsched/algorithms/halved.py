"""ReduceScatter and AllGather of the AllReduce families that sum every chunk into one rank and
copy it out from there (`halves`): BCube's and the torus's dimension-ordered schemes and
weighted multi-rings, registered under their AllReduce's name. (The box/rail hierarchy has its
own, `rail_first`: its AllReduce's halves wait for the rails before the boxes start.)

Example::

    rs = build("torus-native", parse_spec("torus:dims=4x4"), collective="reduce_scatter")
"""

from __future__ import annotations

import functools

from arsched.algorithms.dimension_ordered import bcube_native, torus_native
from arsched.algorithms.halves import SHARDED, half
from arsched.algorithms.multiring import multi_ring
from arsched.algorithms.registry import register
from arsched.collective.kinds import TITLES
from arsched.collective.schedule import Schedule

HALVED = {  # AllReduce builders by name
    "multi-ring": multi_ring,
    "bcube-native": bcube_native,
    "torus-native": torus_native,
}


def _half_builder(name: str, collective: str):
    """The `collective` builder of algorithm `name`: the half of its AllReduce, taking the same
    parameters."""
    whole = HALVED[name]

    @functools.wraps(whole)
    def build(*args, **params) -> Schedule:
        return half(whole(*args, **params), collective)

    build.__doc__ = f"The {TITLES[collective]} half of {name}'s AllReduce (`halves`)."
    return build


for _name in HALVED:
    for _collective in SHARDED:
        register(_name, "", _collective)(_half_builder(_name, _collective))
