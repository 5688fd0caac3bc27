"""The hierarchical-RL environments: Gymnasium API, masks, and valid schedules from any policy."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from arsched.algorithms import build
from arsched.collective import numeric_check, validate
from arsched.rl import features as ft
from arsched.rl.envs import TreeSelectEnv, WorkloadEnv
from arsched.rl.state import RoundState, all_trees, first_candidate, random_policies, run_episode
from arsched.sim import simulate_rounds
from arsched.topology import parse_spec

SPECS = [
    "bcube:n=3,k=1",
    "dcell:n=2,k=1",
    "jellyfish:switches=8,ports=4,net_ports=3,seed=1",
    "torus:dims=3x3",
    "fattree:k=4",
]


@pytest.mark.parametrize("env_class", [WorkloadEnv, TreeSelectEnv])
def test_envs_pass_the_gymnasium_checker(env_class):
    env = env_class([parse_spec("bcube:n=3,k=1"), parse_spec("dcell:n=2,k=1")])
    check_env(env, skip_render_check=True)


@pytest.mark.parametrize("spec", SPECS)
def test_the_fixed_policies_are_exactly_greedy_trees(spec):
    topo = parse_spec(spec)
    state = run_episode(RoundState.create(topo), all_trees, first_candidate)
    greedy = build("greedy-trees", topo)
    assert state.engine.schedule().transfers == greedy.transfers


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_policies_always_end_in_a_valid_schedule(spec, seed):
    topo = parse_spec(spec)
    upper, lower = random_policies(seed)
    state = run_episode(RoundState.create(topo), upper, lower)
    schedule = state.engine.schedule()
    assert validate(schedule).ok
    assert numeric_check(schedule).ok
    # every round is conflict-free, so the round model needs exactly one round per step
    assert simulate_rounds(schedule).rounds == state.rounds == schedule.num_steps


def _play(env, rng, respect_mask=True):
    obs, _ = env.reset(seed=int(rng.integers(1 << 30)))
    total, done = 0.0, False
    while not done:
        assert env.observation_space.contains(obs)
        mask = env.action_masks()
        if isinstance(env, WorkloadEnv):
            legal = np.flatnonzero(mask) if respect_mask else np.arange(ft.MAX_CANDIDATES)
            a = int(rng.choice(legal))
        else:
            a = (rng.random(ft.MAX_TREES) < 0.3).astype(np.int8)
            if respect_mask:
                a &= mask.reshape(-1, 2)[:, 1]
        obs, r, done, trunc, info = env.step(a)
        assert not trunc
        total += r
    return total, info["rounds"]


@pytest.mark.parametrize("env_class", [WorkloadEnv, TreeSelectEnv])
@pytest.mark.parametrize("respect_mask", [True, False])
def test_episodes_return_minus_the_rounds_and_end_valid(env_class, respect_mask):
    env = env_class([parse_spec(s) for s in SPECS[:3]])
    rng = np.random.default_rng(7)
    for _ in range(4):
        total, rounds = _play(env, rng, respect_mask)
        assert total == -rounds
        assert validate(env.state.engine.schedule()).ok


def test_masks_name_exactly_the_candidates_and_the_selectable_trees():
    state = RoundState.create(parse_spec("bcube:n=3,k=1"))
    state.select(np.zeros(state.num_trees, dtype=bool))  # empty choice: every tree with work
    assert state.selected.all()
    mask = ft.lower_mask(state)
    assert mask.sum() == min(len(state.candidates), ft.MAX_CANDIDATES) > 0
    um = ft.upper_mask(state).reshape(-1, 2)
    assert um[:, 0].all() and not um[state.num_trees :, 1].any()
    # no two candidates' picks may share a link: picking one removes those it conflicts with
    first = int(state.candidates[0])
    state.pick(0)
    for f in state.candidates.tolist():
        assert not (state.inc[f] & state.inc[first]).any()


def test_one_selected_tree_keeps_the_round_inside_it():
    state = RoundState.create(parse_spec("dcell:n=2,k=1"))
    choice = np.zeros(state.num_trees, dtype=bool)
    choice[2] = True
    state.select(choice)
    assert set(state.engine.flow_tree[state.candidates].tolist()) == {2}
    while not state.pick(0):
        pass
    assert set(state.engine.flow_tree[state.engine.rounds[-1]].tolist()) == {2}


def test_features_are_size_independent_fractions():
    for spec in ("bcube:n=3,k=1", "jellyfish:switches=12,ports=5,net_ports=3,seed=2"):
        state = RoundState.create(parse_spec(spec))
        state.select(all_trees(state))
        lower, upper = ft.lower_observation(state), ft.upper_observation(state)
        for obs, dim in ((lower, ft.LOWER_DIM), (upper, ft.UPPER_DIM)):
            assert obs.shape == (dim,) and obs.min() >= 0 and obs.max() <= 1


def test_too_many_trees_is_one_clear_error():
    env = WorkloadEnv([parse_spec("bcube:n=3,k=1")], chunks=9 * (ft.MAX_TREES // 9 + 1))
    with pytest.raises(ValueError, match=f"at most {ft.MAX_TREES} flow trees"):
        env.reset(seed=0)


@pytest.mark.parametrize("env_class", [WorkloadEnv, TreeSelectEnv])
def test_shaping_telescopes_to_the_start_bound_minus_the_rounds(env_class):
    topo = parse_spec("dcell:n=2,k=1")
    start = RoundState.create(topo).rounds_left_bound()
    env = env_class([topo], shaping=True)
    total, rounds = _play(env, np.random.default_rng(3))
    assert total == pytest.approx(start - rounds)


def test_rounds_left_bound_is_a_lower_bound():
    for spec in SPECS:
        state = RoundState.create(parse_spec(spec))
        bound = state.rounds_left_bound()
        upper, lower = random_policies(5)
        assert run_episode(state, all_trees, first_candidate).rounds >= bound
        assert run_episode(state.reset(), upper, lower).rounds >= bound
        assert state.rounds_left_bound() == 0
