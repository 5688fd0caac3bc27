"""The tree-packing builder (arsched.algorithms.packing.build): its parameters, its rank limit,
and a quiet LP solver."""

from __future__ import annotations

import pytest

from arsched.algorithms import NotApplicable, build
from arsched.algorithms.packing import MAX_RANKS
from arsched.errors import ArschedError
from arsched.topology import parse_spec, star


def test_tree_packing_rejects_bad_parameters():
    topo = parse_spec("star:n=4")
    for params in ({"units": 0}, {"stages": 1.5}, {"alpha": -1.0}, {"iterations": 0}):
        with pytest.raises(ArschedError):
            build("tree-packing", topo, None, 1e6, **params)


def test_tree_packing_refuses_more_than_its_rank_limit():
    with pytest.raises(NotApplicable, match="limited"):
        build("tree-packing", star(MAX_RANKS + 1), None, 1e6)


def test_tree_packing_prints_nothing(capfd):
    """HiGHS prints its banner on the process's stdout when a solver is made with its output
    on; building tree-packing (a fresh network, so the LP is solved here) prints nothing."""
    build("tree-packing", parse_spec("bcube:n=3,k=1"), None, 1e6)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
