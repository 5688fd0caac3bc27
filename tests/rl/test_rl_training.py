"""Training, checkpoints and inference of the hierarchical scheduler (tiny budgets: seconds)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import torch

from arsched.collective import validate
from arsched.errors import ArschedError
from arsched.rl import checkpoint
from arsched.rl import features as ft
from arsched.rl.config import LEVELS
from arsched.rl.policy import Actor, make_policy, schedule_with
from arsched.rl.state import RoundState, all_trees, first_candidate, run_episode
from arsched.rl.training import MODE_LOGP, TrainConfig, best_sampled_episodes, evaluate, imitate, train
from arsched.topology import parse_spec

TRAIN = ["bcube:n=2,k=2", "dcell:n=2,k=1"]
HELD_OUT = ["bcube:n=3,k=1", "jellyfish:switches=8,ports=4,net_ports=3,seed=4", "torus:dims=2x3"]


@pytest.fixture(scope="module")
def cold(tmp_path_factory):
    """A policy trained from scratch for a few seconds (so it is not the greedy heuristic)."""
    out = tmp_path_factory.mktemp("cold")
    cfg = TrainConfig(TRAIN, steps=700, out=out, phases=2, warm_start=False, seed=3, self_imitation=0)
    meta = train(cfg)
    return out, meta


def test_training_writes_a_complete_checkpoint_and_log(cold):
    out, _ = cold
    saved = json.loads((out / "meta.json").read_text())
    assert saved["format"] == checkpoint.FORMAT and saved["feature_version"] == ft.FEATURE_VERSION
    assert saved["topologies"] == TRAIN and saved["phases_done"] == 2 and saved["arsched_version"]
    assert all((out / f).is_file() for f in ("lower.pt", "upper.pt", "lower.optim.pt", "upper.optim.pt"))
    rows = list(csv.DictReader((out / "log.csv").open()))
    assert [r["level"] for r in rows] == ["init", "lower", "upper"]
    # the checkpoint keeps the best pair: its rounds are the best accepted evaluation
    accepted = [r for r in rows if r["accepted"] == "1"]
    assert saved["rounds"] == [int(x) for x in accepted[-1]["rounds"].split()]
    assert saved["greedy_rounds"] == [
        run_episode(RoundState.create(parse_spec(s)), all_trees, first_candidate).rounds for s in TRAIN
    ]


@pytest.mark.parametrize("spec", TRAIN + HELD_OUT)
def test_a_trained_policy_gives_valid_schedules_on_seen_and_unseen_topologies(cold, spec):
    policies, _ = checkpoint.load_policies(cold[0])
    topo = parse_spec(spec)
    for samples in (1, 3):
        schedule, info = schedule_with(topo, policies, samples=samples, seed=1)
        assert validate(schedule).ok
        assert info["rounds"] == schedule.num_steps <= info["deterministic_rounds"]
    again, _ = schedule_with(topo, policies, samples=3, seed=1)
    assert again.transfers == schedule.transfers  # seeded sampling is reproducible


def test_warm_start_reproduces_greedy_and_resume_continues(tmp_path):
    cfg = TrainConfig(TRAIN[:1], steps=400, out=tmp_path, phases=1, seed=0, self_imitation=2)
    first = train(cfg)
    assert first["rounds"] == first["greedy_rounds"]  # imitation alone already matches greedy
    cfg.phases, cfg.resume = 2, True
    second = train(cfg)
    assert second["phases_done"] == 2 and second["rounds"][0] <= first["greedy_rounds"][0]
    levels = [r["level"] for r in csv.DictReader((tmp_path / "log.csv").open())]
    assert levels == ["imitation", "lower", "self-imitation", "upper", "self-imitation"]


def test_resume_refuses_other_topologies_and_missing_checkpoints(tmp_path, cold):
    with pytest.raises(ArschedError, match="no checkpoint"):
        train(TrainConfig(TRAIN, steps=10, out=tmp_path, resume=True))
    with pytest.raises(ArschedError, match="other topologies"):
        train(TrainConfig(TRAIN[:1], steps=10, out=cold[0], resume=True))


def test_checkpoints_load_weights_only_and_refuse_bad_files(tmp_path, cold):
    src = cold[0]
    for name in ("lower.pt", "upper.pt"):
        state = torch.load(src / name, weights_only=True)
        assert all(isinstance(v, torch.Tensor) for v in state.values())
        (tmp_path / name).write_bytes((src / name).read_bytes())
    meta = json.loads((src / "meta.json").read_text())
    (tmp_path / "meta.json").write_text(json.dumps({**meta, "feature_version": 99}))
    with pytest.raises(ArschedError, match="feature version 99"):
        checkpoint.load_policies(tmp_path)
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    (tmp_path / "upper.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ArschedError, match="cannot read"):
        checkpoint.load_policies(tmp_path)
    with pytest.raises(ArschedError, match=r"no meta\.json"):
        checkpoint.load_policies(tmp_path / "nothing")


def test_the_shipped_checkpoint_loads_and_records_its_command():
    policies, meta = checkpoint.load_policies(checkpoint.DEFAULT)
    assert meta["command"].startswith("arsched train ")
    schedule, _ = schedule_with(parse_spec("bcube:n=3,k=1"), policies)
    assert validate(schedule).ok


def test_self_imitation_makes_the_best_sampled_episode_deterministic():
    states = [RoundState.create(parse_spec("dcell:n=2,k=1"))]
    torch.manual_seed(0)
    policies = {lv: make_policy(lv) for lv in LEVELS}
    demos, best = best_sampled_episodes(policies, states, 4, seed=0, explore=0.1)
    assert best < evaluate(policies, states)  # exploration found a shorter episode to replay
    for i, lv in enumerate(LEVELS):
        assert imitate(policies[lv], demos[lv], i, iters=3000) > MODE_LOGP
    assert evaluate(policies, states) == best


def test_explored_episodes_depart_from_the_mode_at_some_flow_picks_only():
    """`explore` samples a share of the lower level's decisions; the upper level stays the mode."""
    state = RoundState.create(parse_spec("bcube:n=3,k=1"))
    torch.manual_seed(0)
    policies = {lv: make_policy(lv) for lv in LEVELS}
    for explore in (0.0, 0.3):
        rec = {lv: [] for lv in LEVELS}
        actors = [Actor(policies[lv], lv, explore * (lv == "lower"), rec[lv]) for lv in ("upper", "lower")]
        run_episode(state.reset(), *actors)
        assert validate(state.engine.schedule()).ok
        for lv in LEVELS:
            obs, masks, actions = (torch.as_tensor(np.array(col)) for col in zip(*rec[lv], strict=True))
            with torch.no_grad():
                mode = policies[lv].get_distribution(obs, action_masks=masks.numpy()).mode()
            departed = (mode != actions).reshape(len(actions), -1).any(1).float().mean()
            if lv == "upper" or explore == 0.0:
                assert departed == 0.0
            else:
                assert 0.0 < departed < 0.5


def test_the_upper_network_scores_every_tree_with_the_same_weights():
    """Permuting the trees' rows permutes their logits: no weight belongs to a tree slot."""
    policy = make_policy("upper")
    rows = torch.rand(ft.MAX_TREES, ft.TREE_FEATURES)
    glob = torch.rand(ft.GLOBAL_FEATURES)
    perm = torch.randperm(ft.MAX_TREES, generator=torch.Generator().manual_seed(0))

    def logits(r):
        obs = torch.cat([r.flatten(), glob])[None]
        with torch.no_grad():
            latent = policy.mlp_extractor.forward_actor(policy.extract_features(obs))
            return policy.action_net(latent).view(ft.MAX_TREES, 2)

    assert torch.allclose(logits(rows)[perm], logits(rows[perm]), atol=1e-6)


def test_hrl_schedules_do_not_depend_on_where_arsched_is_installed(tmp_path):
    """The shipped policy is recorded as null; a user's checkpoint by the path given."""
    import shutil

    from arsched.algorithms import build
    from arsched.collective import dumps

    topo = parse_spec("bcube:n=3,k=1")
    shipped = build("hrl", topo, None, 1e6)
    assert shipped.meta["params"]["checkpoint"] is None and str(checkpoint.DEFAULT) not in dumps(shipped)
    copy = shutil.copytree(checkpoint.DEFAULT, tmp_path / "policy")
    mine = build("hrl", topo, None, 1e6, checkpoint=copy)
    assert mine.meta["params"]["checkpoint"] == str(copy)
    assert dumps(mine).replace(str(copy), "null").replace('"null"', "null") == dumps(shipped)
