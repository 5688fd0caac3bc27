"""The tree-packing builder (arsched.algorithms.packing.build): its parameters, its rank limit,
and a quiet LP solver."""

from __future__ import annotations

import pytest

from arsched.algorithms import NotApplicable, build
from arsched.algorithms.packing import MAX_RANKS
from arsched.collective import validate
from arsched.errors import ArschedError
from arsched.sim import simulate_flow
from arsched.topology import parse_spec


def test_tree_packing_rejects_bad_parameters():
    topo = parse_spec("star:n=4")
    for params in ({"units": 0}, {"stages": 1.5}, {"alpha": -1.0}, {"iterations": 0}):
        with pytest.raises(ArschedError):
            build("tree-packing", topo, None, 1e6, **params)


def test_beyond_its_rank_limit_tree_packing_places_balanced_steps_without_its_lp(monkeypatch):
    """Past `MAX_RANKS` (here lowered, so that the test stays small) only the balanced steps are
    built, which need no LP: a valid schedule, on a network nobody tuned for, with no LP rate in
    its meta; pipelines and directed trees, which need the LP, are refused."""
    import arsched.algorithms.packing.balanced as balanced
    import arsched.algorithms.packing.build as packing_build

    monkeypatch.setattr(packing_build, "MAX_RANKS", 8)
    topo = parse_spec("jellyfish:switches=6,ports=4,net_ports=2,seed=11")
    s = build("tree-packing", topo, None, 16e6)
    assert validate(s).ok and s.meta["params"]["levels"] is True and "lp_rate" not in s.meta
    assert simulate_flow(s).gap < 1.3
    for params in ({"levels": False}, {"units": 2, "stages": 4}):
        with pytest.raises(NotApplicable, match="more than 8 ranks only as balanced steps"):
            build("tree-packing", topo, None, 16e6, **params)
    with pytest.raises(NotApplicable, match="directed trees"):
        build("tree-packing", parse_spec("torus:dims=3x3,oneway=1"), None, 16e6)
    assert packing_build.MAX_RANKS < len(topo.servers) < MAX_RANKS
    monkeypatch.setattr(balanced, "MOST_RANKS", 10)  # and none past the placement's own limit
    with pytest.raises(NotApplicable, match="balanced steps over at most 10 ranks"):
        build("tree-packing", topo, None, 16e6)


def test_tree_packing_prints_nothing(capfd):
    """HiGHS prints its banner on the process's stdout when a solver is made with its output
    on; building tree-packing (a fresh network, so the LP is solved here) prints nothing."""
    build("tree-packing", parse_spec("bcube:n=3,k=1"), None, 1e6)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
