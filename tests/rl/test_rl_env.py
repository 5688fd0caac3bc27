"""The gymnasium environment of the learned scheduler's decisions (`arsched.rl.env`)."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.collective import validate
from arsched.rl.env import ScheduleEnv
from arsched.rl.episode import ENTERED, GREEDY, LEAD
from arsched.rl.instance import Instance
from arsched.rl.rollout import Timer, best_plan
from arsched.sim import DEFAULT_ALPHA
from arsched.topology import parse_spec

RULE_FEATURE = {"greedy": GREEDY, "lead": LEAD, "asap": ENTERED}


def _play(env: ScheduleEnv, agent) -> tuple[list[dict], float, dict]:
    """Run one episode with `agent(observation, env)` -> scores; the observations, the final
    reward and info."""
    obs, _ = env.reset(seed=0)
    seen, done = [obs], False
    while not done:
        obs, reward, done, truncated, info = env.step(agent(obs, env))
        assert not truncated
        seen.append(obs)
    return seen, reward, info


@pytest.mark.parametrize(
    "spec", ["dcell:n=2,k=1", "torus:dims=3x3,oneway=1", "ring:n=5,bandwidth=400Gbps,reverse=100Gbps"]
)
def test_random_agents_end_in_a_valid_schedule_and_observations_fit_the_space(spec):
    env = ScheduleEnv(parse_spec(spec), 16e6)

    def agent(obs, env):
        action = env.action_space.sample()
        assert env.action_space.contains(action)
        return action

    seen, reward, info = _play(env, agent)
    assert all(env.observation_space.contains(o) for o in seen)
    assert [o["level"] for o in seen[:2]] == [0, 1] and seen[-2]["level"] == 2
    assert validate(info["schedule"]).ok
    assert reward == -info["gap"] and info["gap"] >= 1.0 - 1e-9


@pytest.mark.parametrize("spec", ["bcube:n=3,k=1", "dcell:n=3,k=1"])
def test_the_best_plans_scores_give_its_schedule(spec):
    """Scoring the best plan's chunk option and shape highest and every flow by its rule's
    feature (`GREEDY`, `LEAD`, or `ENTERED` for asap) is the training environment's teacher:
    the same schedule, transfer for transfer, and the same time."""
    topo = parse_spec(spec)
    env = ScheduleEnv(topo, 16e6)
    teacher = best_plan(Instance(topo, None, 16e6), Timer(DEFAULT_ALPHA))
    plan = teacher.plan

    def agent(obs, env):
        if obs["level"] == 2:
            flows = obs["flows"]
            return 2 * flows[:, RULE_FEATURE[plan.rule]] - 1
        pick = plan.chunks if obs["level"] == 0 else plan.shape
        return np.eye(env.action_space.shape[0], dtype=np.float32)[pick]

    _, _, info = _play(env, agent)
    for field in ("step", "chunk", "src", "dst", "op"):
        assert np.array_equal(getattr(info["schedule"], field), getattr(teacher.schedule, field)), field
    assert info["time_s"] == pytest.approx(teacher.time_s, rel=1e-12)


def test_the_same_actions_give_the_same_schedule_and_bad_actions_are_refused():
    env = ScheduleEnv(parse_spec("dcell:n=2,k=1"), 16e6)
    gaps = []
    for _ in range(2):
        _, _, info = _play(env, lambda obs, env: env.action_space.sample())
        gaps.append(info["time_s"])
    assert gaps[0] == gaps[1]
    env.reset()
    with pytest.raises(ValueError, match="finite scores, one per item"):
        env.step(np.zeros(env.action_space.shape[0] + 1))
    with pytest.raises(ValueError, match="finite scores"):
        env.step(np.full(env.action_space.shape[0], np.nan))
    with pytest.raises(RuntimeError, match="reset"):
        ScheduleEnv(parse_spec("ring:n=4"), 16e6).step(np.zeros(1))
