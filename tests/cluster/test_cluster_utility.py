"""The concave loss-curve utility against hand computation."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.cluster.utility import Objective


def test_loss_slot_value_by_hand():
    # work W = D x ref = 100 s x 10/s = 1000; 750 left (x = 0.25); 10/s for 10 s does 100 (dx = 0.1)
    # loss 1/(9x + 1): 1/3.25 before, 1/4.15 after
    loss = Objective("loss")
    args = dict(w=np.array(2), age=np.array(0.0), ref_rate=np.array(10.0), duration=np.array(100.0),
                gpus=np.array(2), dt=10.0)  # fmt: skip
    v = loss.slot_value(np.array(10.0), remaining=np.array(750.0), **args)
    assert v == pytest.approx(1 / 3.25 - 1 / 4.15)
    # concave: the same slot later in training removes less loss (x = 0.75 -> 0.85)
    later = loss.slot_value(np.array(10.0), remaining=np.array(250.0), **args)
    assert later == pytest.approx(1 / 7.75 - 1 / 8.65) and later < v / 3
    # no credit past the required work: 50 left at 10/s for 10 s ends at x = 1
    last = loss.slot_value(np.array(10.0), remaining=np.array(50.0), **args)
    assert last == pytest.approx(1 / (9 * 0.95 + 1) - 1 / 10)
    assert loss.slot_value(np.array(0.0), remaining=np.array(750.0), **args) == 0.0


def test_loss_total_by_hand():
    # two finished jobs: D/JCT = 0.5 and 1; l(0) - l(1) = 0.9; an unfinished one counts 0
    jct, dur = np.array([200.0, 50.0, np.inf]), np.array([100.0, 50.0, 10.0])
    total = Objective("loss").total(jct, dur, np.zeros(3), np.ones(3))
    assert total == pytest.approx(0.9 * 0.5 + 0.9 * 1.0)
