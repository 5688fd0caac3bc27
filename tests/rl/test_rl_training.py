"""Training, checkpoints, search baselines and inference of the learned scheduler (tiny
budgets: seconds)."""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile

import numpy as np
import pytest
import torch

from arsched.algorithms import build
from arsched.algorithms.flowtrees import SHAPES
from arsched.collective import validate
from arsched.errors import ArschedError
from arsched.rl import checkpoint, instance
from arsched.rl.episode import RULES
from arsched.rl.forward import shapes
from arsched.rl.hrl import FALLBACK
from arsched.rl.instance import Instance
from arsched.rl.nets import Policy
from arsched.rl.rollout import Plan, Timer, best_plan, run
from arsched.rl.search import restarts
from arsched.rl.training import (
    Decisions,
    TrainConfig,
    advantages,
    distill,
    imitate,
    replays,
    teachers,
    train,
    update,
)
from arsched.runtime import to_xml
from arsched.sim import DEFAULT_ALPHA, simulate_flow
from arsched.topology import parse_spec

TRAIN = ["bcube:n=2,k=2", "dcell:n=2,k=1"]
HELD_OUT = ["bcube:n=3,k=1", "jellyfish:switches=8,ports=4,net_ports=3,seed=4", "torus:dims=2x3"]


def _config(out, **kw):
    settings = {"iterations": 2, "group": 3, "imitation_epochs": 5, "hidden": 16, "layers": 1, "seed": 3}
    return TrainConfig(TRAIN, out=out, evaluate_every=1, nbytes=16e6, **{**settings, **kw})


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("ck")
    return out, train(_config(out))


def test_training_writes_a_complete_checkpoint_and_log(trained):
    out, meta = trained
    saved = json.loads((out / "meta.json").read_text())
    assert saved["format"] == checkpoint.FORMAT and saved["feature_version"] == checkpoint.FEATURE_VERSION
    added = ("format", "feature_version", "features", "arsched_version")
    assert saved["topologies"] == TRAIN and saved["arsched_version"]
    assert saved == json.loads(json.dumps(meta)) | {k: saved[k] for k in added}
    assert saved["episodes"] == 2 * 3 * len(TRAIN)
    rows = list(csv.DictReader((out / "log.csv").open()))
    assert [int(r["iteration"]) for r in rows] == [0, 1, 2]
    # the checkpoint keeps the best weights: its gaps are the best evaluation's
    assert float(rows[-1]["best_gap"]) == pytest.approx(np.mean(saved["gaps"]), abs=1e-5)
    policy, _ = checkpoint.load_policy(out)
    timer = Timer(DEFAULT_ALPHA)
    for spec, gap in zip(TRAIN, saved["gaps"], strict=True):
        assert run(Instance(parse_spec(spec), None, 16e6), policy, timer).gap == pytest.approx(gap, abs=1e-6)


def test_the_same_seed_gives_the_same_weights(trained, tmp_path):
    out, _ = trained
    train(_config(tmp_path))
    for name in ("upper.npz", "lower.npz"):
        assert (tmp_path / name).read_bytes() == (out / name).read_bytes()


@pytest.mark.parametrize("spec", TRAIN + HELD_OUT)
def test_a_trained_policy_gives_valid_schedules_on_seen_and_unseen_networks(trained, spec):
    s = build("hrl", parse_spec(spec), None, 16e6, checkpoint=str(trained[0]), samples=2)
    assert validate(s).ok and s.meta["params"]["samples"] == 2


def test_the_fallback_keeps_the_faster_of_the_policy_and_greedy_trees(tmp_path):
    """An untrained policy (random weights) loses to greedy-trees somewhere: `hrl` keeps
    greedy-trees' plan there, its own schedule where that is faster, and says which."""
    train(_config(tmp_path, iterations=0, warm_start=False))
    sources = set()
    for spec in HELD_OUT:
        topo = parse_spec(spec)
        own = build("hrl", topo, None, 16e6, checkpoint=str(tmp_path), fallback=False)
        kept = build("hrl", topo, None, 16e6, checkpoint=str(tmp_path))
        greedy = build("greedy-trees", topo, None, 16e6)
        t_own, t_kept, t_greedy = (simulate_flow(s, DEFAULT_ALPHA).time_s for s in (own, kept, greedy))
        assert validate(kept).ok and kept.algorithm == "hrl" and kept.meta["params"]["fallback"]
        assert own.meta["hrl"]["source"] == "policy"
        assert t_kept == pytest.approx(min(t_own, t_greedy), rel=1e-9)
        info = kept.meta["hrl"]  # both gaps, for the CLI's sentence
        assert info["policy_gap"] == pytest.approx(simulate_flow(own, DEFAULT_ALPHA).gap, abs=1e-6)
        assert info["greedy_gap"] == pytest.approx(simulate_flow(greedy, DEFAULT_ALPHA).gap, abs=1e-6)
        sources.add(kept.meta["hrl"]["source"])
        assert kept.meta["hrl"]["source"] == ("policy" if t_own <= t_greedy else FALLBACK)
    assert FALLBACK in sources  # else this test did not exercise the fallback


def test_advantages_are_standard_scores_within_the_group():
    assert not advantages(np.array([1.2, 1.2, 1.2])).any()
    a = advantages(np.array([1.0, 2.0, 3.0]))
    assert a[0] > 0 > a[2] and a.sum() == pytest.approx(0) and a.std() == pytest.approx(1)


def test_an_update_makes_the_better_episode_likelier_than_the_worse_one():
    """With two episodes the advantages are +1 and -1, so the first step follows the gradient
    of log p(better) - log p(worse): that difference must grow (either likelihood alone may
    move either way when the two episodes share most decisions)."""
    torch.manual_seed(0)
    policy = Policy.create(hidden=16, layers=1)
    inst = Instance(parse_spec("bcube:n=3,k=1"), None, 16e6)
    timer = Timer(DEFAULT_ALPHA)
    rng = np.random.default_rng(0)
    group = [run(inst, policy, timer, "sample", rng) for _ in range(4)]
    while len({t.gap for t in group}) < 2:
        group.append(run(inst, policy, timer, "sample", rng))
    best, worst = min(group, key=lambda t: t.gap), max(group, key=lambda t: t.gap)

    def log_likelihoods() -> list[float]:
        with torch.no_grad():
            return [float(Decisions(t).log_probs(policy).sum()) for t in (best, worst)]

    before = log_likelihoods()
    optimizer = torch.optim.SGD(policy.parameters(), lr=1e-2)
    update(policy, optimizer, [best, worst], _config("unused", epochs=1), np.random.default_rng(0))
    after = log_likelihoods()
    assert after[0] - after[1] > before[0] - before[1]


@pytest.mark.parametrize("rule", RULES)
def test_imitation_makes_a_plans_schedule_the_policys(rule):
    """After the warm start the deterministic policy makes the plan's chunk count, shapes and
    rounds, whichever rule: the teacher's schedule transfer for transfer (on DCell(3,1)
    greedy's rounds differed, 1.275x against greedy's 1.186x, while the features could not
    tell greedy's ties apart)."""
    torch.manual_seed(0)
    policy = Policy.create(hidden=32, layers=1)
    inst = Instance(parse_spec("dcell:n=3,k=1"), None, 16e6)
    timer = Timer(DEFAULT_ALPHA)
    teacher = run(inst, None, timer, "plan", plan=Plan(1, 2, rule))
    imitate(policy, torch.optim.Adam(policy.parameters(), lr=1e-2), [teacher], 100)
    mine = run(inst, policy, timer)
    assert [k for _, _, k in mine.choices] == [k for _, _, k in teacher.choices]
    for field in ("step", "chunk", "src", "dst", "op"):
        assert np.array_equal(getattr(mine.schedule, field), getattr(teacher.schedule, field)), field
    assert validate(mine.schedule).ok


def test_the_exploration_floor_keeps_samples_from_replaying_the_teacher():
    """After imitation the scores are so far apart that sampled episodes replay the teacher
    (nothing for the group's advantages to compare); with the floor they differ, while the
    deterministic episode stays the teacher's."""
    torch.manual_seed(0)
    inst = Instance(parse_spec("dcell:n=3,k=1"), None, 16e6)
    timer = Timer(DEFAULT_ALPHA)
    teacher = best_plan(inst, timer)
    policy = Policy.create(hidden=32, layers=1, temperature=0.3)
    imitate(policy, torch.optim.Adam(policy.parameters(), lr=1e-2), [teacher], 100)
    rng = np.random.default_rng(0)
    assert replays(policy, teacher)
    assert all(run(inst, policy, timer, "sample", rng).gap == teacher.gap for _ in range(4))
    policy.explore = 0.05
    assert replays(policy, teacher)
    assert len({run(inst, policy, timer, "sample", rng).gap for _ in range(4)} - {teacher.gap}) > 0


def test_distilling_stops_once_the_policy_replays_its_elites():
    """A random policy distils the best plans' episodes on two networks until its own deterministic
    episodes are those schedules (checked every few passes, not all passes spent); a policy
    that already replays them takes no pass."""
    torch.manual_seed(1)
    policy = Policy.create(hidden=32, layers=1)
    timer = Timer(DEFAULT_ALPHA)
    elites = [best_plan(Instance(parse_spec(s), None, 16e6), timer) for s in ("dcell:n=2,k=1", "ring:n=5")]
    assert not all(replays(policy, t) for t in elites)
    taken = distill(policy, torch.optim.Adam(policy.parameters(), lr=1e-2), elites, 400, None, 0)
    assert 0 < taken < 400 and all(replays(policy, t) for t in elites)
    assert distill(policy, torch.optim.Adam(policy.parameters(), lr=1e-2), elites, 400, None, 0) == 0


def test_restarts_keep_the_best_and_count_every_simulation():
    inst = Instance(parse_spec("bcube:n=2,k=2"), None, 16e6)
    timer = Timer(DEFAULT_ALPHA)
    best, curve = restarts(inst, timer, 6, seed=1)
    assert timer.calls == 6 and len(curve) == 6 and validate(best.schedule).ok
    assert all(b <= a for a, b in itertools.pairwise(curve)) and best.gap == curve[-1]
    torch.manual_seed(0)
    policy = Policy.create(hidden=16, layers=1)
    first = run(inst, policy, Timer(DEFAULT_ALPHA))
    best, curve = restarts(inst, timer, 3, seed=1, policy=policy)
    assert curve[0] == first.gap and timer.calls == 9


def test_checkpoints_load_plain_arrays_and_refuse_bad_files(tmp_path, trained):
    src = trained[0]
    for name in ("lower.npz", "upper.npz"):
        with np.load(src / name, allow_pickle=False) as archive:
            assert all(archive[k].dtype == np.float32 for k in archive.files)
        (tmp_path / name).write_bytes((src / name).read_bytes())
    meta = json.loads((src / "meta.json").read_text())
    for bad, message in (
        ({"feature_version": 99}, "feature version 99"),
        ({"format": "arsched.hrl/3"}, "expected 'arsched.hrl/4'"),
        ({"hidden": 10**9}, "hidden must be a whole number from 1 to"),
        ({"layers": "two"}, "layers must be a whole number"),
        ({"hidden": 32}, "does not fit the network"),
        ({"layers": 2}, "does not fit the network"),
    ):
        (tmp_path / "meta.json").write_text(json.dumps({**meta, **bad}))
        with pytest.raises(ArschedError, match=message):
            checkpoint.load_policy(tmp_path)
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    good = (tmp_path / "upper.npz").read_bytes()
    (tmp_path / "upper.npz").write_bytes(b"not a checkpoint")
    with pytest.raises(ArschedError, match="cannot read"):
        checkpoint.load_policy(tmp_path)
    (tmp_path / "upper.npz").write_bytes(good + bytes(10**6))  # far more than the network holds
    with pytest.raises(ArschedError, match="does not fit the network"):
        checkpoint.load_policy(tmp_path)
    with zipfile.ZipFile(tmp_path / "upper.npz", "w", zipfile.ZIP_DEFLATED) as z:  # a zip bomb
        z.writestr("options.0.weight.npy", bytes(10**8))
    with pytest.raises(ArschedError, match="does not fit the network"):
        checkpoint.load_policy(tmp_path)
    np.savez(tmp_path / "upper.npz", **{k: v.astype(np.float64) for k, v in trained_arrays(src).items()})
    with pytest.raises(ArschedError, match="does not fit the network"):
        checkpoint.load_policy(tmp_path)
    with pytest.raises(ArschedError, match=r"no meta\.json"):
        checkpoint.load_policy(tmp_path / "nothing")


def trained_arrays(folder):
    with np.load(folder / "upper.npz", allow_pickle=False) as archive:
        return {k: archive[k] for k in archive.files}


def test_the_numpy_forward_pass_is_the_torch_networks():
    """`forward` runs what `nets` computes: the same array names and shapes, and the same
    scores on the option rows and the round graphs of a real episode."""
    torch.manual_seed(3)
    policy = Policy.create(hidden=24, layers=2, temperature=0.7)
    frozen = policy.frozen()
    expected = shapes(24, 2)
    for level in ("upper", "lower"):
        assert {k: tuple(v.shape) for k, v in getattr(policy, level).state_dict().items()} == expected[level]
    inst = Instance(parse_spec("dcell:n=3,k=1"), None, 16e6)
    traj = run(inst, policy, None, "sample", np.random.default_rng(0))
    with torch.no_grad():
        for kind, rows, _ in traj.choices:
            mine = frozen.option_logits(rows, kind)
            theirs = policy.option_logits(torch.as_tensor(rows), kind).numpy()
            np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-5)
        for g, _, _ in traj.rounds[:5]:
            theirs = policy.round_scores(g).numpy()
            np.testing.assert_allclose(frozen.round_scores(g), theirs, rtol=1e-5, atol=1e-5)


def test_hrl_runs_without_torch():
    """Inference imports no torch: a process where torch cannot be imported builds `hrl`."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from arsched.algorithms import build\n"
        "from arsched.collective import validate\n"
        "from arsched.topology import parse_spec\n"
        "s = build('hrl', parse_spec('bcube:n=3,k=1'), None, 1e6)\n"
        "assert validate(s).ok and 'torch' not in [m.split('.')[0] for m in sys.modules if sys.modules[m]]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_the_shipped_checkpoint_loads_and_records_its_command():
    _, meta = checkpoint.load_policy(checkpoint.DEFAULT)
    assert meta["command"].startswith("arsched train ")
    topo = parse_spec("bcube:n=3,k=1")
    s = build("hrl", topo, None, 1e6)
    assert validate(s).ok and s.meta["hrl"]["trained_on"] == meta["topologies"]
    chosen = (s.meta["hrl"]["chunks"], s.meta["hrl"]["stages"])  # one of the instance's options
    assert chosen[0] == s.num_chunks and chosen in Instance(topo, None, 1e6).chunk_options


@pytest.mark.parametrize("spec", ["ring:n=4", "bcube:n=3,k=1"])
def test_the_shipped_policys_schedules_export_to_msccl(spec):
    """At the size it was trained for, too, the shipped policy's schedule runs on MSCCL: no
    thread block past 256 steps."""
    s = build("hrl", parse_spec(spec), None, 256e6)
    root = ET.fromstring(to_xml(s))
    assert max(len(tb) for tb in root.iter("tb")) <= 256


def test_hrl_schedules_do_not_depend_on_where_arsched_is_installed(tmp_path):
    """The shipped policy is recorded as null; a user's checkpoint by the path given."""
    import shutil

    from arsched.collective import dumps

    topo = parse_spec("bcube:n=3,k=1")
    shipped = build("hrl", topo, None, 1e6)
    assert shipped.meta["params"]["checkpoint"] is None and str(checkpoint.DEFAULT) not in dumps(shipped)
    copy = shutil.copytree(checkpoint.DEFAULT, tmp_path / "policy")
    mine = build("hrl", topo, None, 1e6, checkpoint=copy)
    assert mine.meta["params"]["checkpoint"] == str(copy)
    assert dumps(mine).replace(str(copy), "null").replace('"null"', "null") == dumps(shipped)
    assert dumps(build("hrl", topo, None, 1e6)) == dumps(shipped)  # deterministic


def test_more_ranks_than_the_flow_trees_take_are_refused():
    from arsched.algorithms import NotApplicable

    with pytest.raises(NotApplicable, match="hrl is limited to 128 ranks"):
        Instance(parse_spec("leafspine:leaves=9,spines=2,servers_per_leaf=16"))
    with pytest.raises(ArschedError):
        TrainConfig(TRAIN, out="x", group=1)


def test_teachers_of_many_networks_share_the_kind_of_plan_that_costs_least(monkeypatch, tmp_path):
    """On one network the teacher is its best plan. On several, every network with pipelined
    options is taught the fastest plan of one kind (a tree shape with one stage, or with one
    pipelined chunk count and stage count), and no other kind that each of them has is slower
    than their best plans by less on average (brute force over every plan); a network without
    pipelined options (more ranks than `PIPELINE_RANKS`) is taught its best plan."""
    monkeypatch.setattr(instance, "PIPELINE_CHUNKS", (32, 64))  # fewer and smaller: seconds
    monkeypatch.setattr(instance, "STAGES", (4, 8))
    monkeypatch.setattr(instance, "PIPELINE_RANKS", 4)
    specs = ["bcube:n=2,k=1", "ring:n=4,reverse=100Gbps", "ring:n=5"]
    insts = [Instance(parse_spec(s), nbytes=16e6) for s in specs]
    timer = Timer(DEFAULT_ALPHA)
    one, label = teachers(insts[:1], timer)
    assert one == [best_plan(insts[0], timer)] and label == "best"
    taught, label = teachers(insts, timer)
    assert all(validate(t.schedule).ok for t in taught)
    assert taught[2] is best_plan(insts[2], timer)

    def kind(inst, plan):
        count, stages = inst.chunk_options[plan.chunks]
        return (plan.shape, 0 if stages == 1 else count, stages)

    times = [{} for _ in insts[:2]]  # per network, kind -> its fastest plan's time
    for inst, seen in zip(insts[:2], times, strict=True):
        for k, (_, stages) in enumerate(inst.chunk_options):
            for s in range(len(SHAPES)):
                for rule in RULES if stages == 1 else ("asap",):
                    plan = Plan(k, s, rule)
                    t = run(inst, None, timer, "plan", plan=plan).time_s
                    seen[kind(inst, plan)] = min(seen.get(kind(inst, plan), np.inf), t)
    want = kind(insts[0], taught[0].plan)
    assert want == kind(insts[1], taught[1].plan)
    assert [t.time_s for t in taught[:2]] == [seen[want] for seen in times]
    cost = {
        w: np.mean([seen[w] / min(seen.values()) for seen in times]) for w in set(times[0]) & set(times[1])
    }
    assert cost[want] == pytest.approx(min(cost.values()))
    assert SHAPES[want[0]] in label and ("one stage" in label) == (want[1] == 0)
    cfg = TrainConfig(specs, out=tmp_path, iterations=0, imitation_epochs=1, hidden=8, nbytes=16e6)
    meta = train(dataclasses.replace(cfg, shared_teacher=True))  # what --shared-teacher runs
    assert meta["teacher_option"] == label and meta["teacher_gaps"] == [round(t.gap, 6) for t in taught]
    # with teacher shapes the kind is the chunk option alone, each network's shape its fastest
    allowed = (SHAPES.index("spt"), SHAPES.index("shallow"))
    shaped, label = teachers(insts, timer, ("spt", "shallow"))
    option = kind(insts[0], shaped[0].plan)[1:]
    assert option == kind(insts[1], shaped[1].plan)[1:] and shaped[2] is best_plan(insts[2], timer)

    def fastest(seen, o):
        return min((seen[(s, *o)] for s in allowed if (s, *o) in seen), default=np.inf)

    for t, seen in zip(shaped[:2], times, strict=True):
        assert t.plan.shape in allowed and t.time_s == fastest(seen, option)
    options = {w[1:] for w in times[0]} & {w[1:] for w in times[1]}
    cost = {o: np.mean([fastest(seen, o) / min(seen.values()) for seen in times]) for o in options}
    assert cost[option] == pytest.approx(min(cost.values())) and "spt or shallow trees" in label
    meta = train(dataclasses.replace(cfg, shared_teacher=True, teacher_shapes=("spt", "shallow")))
    assert meta["teacher_option"] == label and meta["teacher_shapes"] == ["spt", "shallow"]
    with pytest.raises(ArschedError, match="only with --shared-teacher"):
        dataclasses.replace(cfg, teacher_shapes=("spt",))
    with pytest.raises(ArschedError, match="distinct shapes"):
        dataclasses.replace(cfg, shared_teacher=True, teacher_shapes=("spt", "trees"))
