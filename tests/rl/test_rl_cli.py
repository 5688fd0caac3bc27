"""`arsched train` and `arsched schedule --algorithm hrl` from the command line."""

from __future__ import annotations

import json

from arsched.collective import load, validate
from clihelp import assert_one_line_error, run


def test_train_then_schedule_with_the_checkpoint(capsys, tmp_path):
    ck = tmp_path / "ck"
    code, out, _ = run(
        capsys, "train", "-t", "dcell:n=2,k=1", "--iterations", "1", "--group", "2",
        "--imitation-epochs", "3", "--hidden", "16", "--size", "16MB", "-o", str(ck),
    )  # fmt: skip
    assert code == 0 and "greedy-trees" in out
    meta = json.loads((ck / "meta.json").read_text())
    assert meta["command"] == (
        "arsched train -t dcell:n=2,k=1 --iterations 1 --group 2 --seed 0 --size 16MB --imitation-epochs 3 "
        "--distill 100 --hidden 16 --layers 2 --temperature 0.3 --explore 0.02 --learning-rate 0.001 "
        "--evaluate-every 5 "
        f"--out {ck}"
    )
    sched = tmp_path / "s.json"
    code, out, _ = run(
        capsys, "schedule", "-t", "bcube:n=3,k=1", "-a", "hrl", "--checkpoint", str(ck), "--samples", "2",
        "-o", str(sched),
    )  # fmt: skip
    assert code == 0, out
    s = load(sched)
    assert validate(s).ok and s.algorithm == "hrl" and s.meta["params"]["samples"] == 2


def test_hrl_with_the_shipped_policy(capsys, tmp_path):
    sched = tmp_path / "s.json"
    code, _, _ = run(capsys, "schedule", "-t", "dcell:n=3,k=1", "-a", "hrl", "-o", str(sched))
    assert code == 0 and validate(load(sched)).ok and load(sched).meta["params"]["fallback"]
    argv = ["schedule", "-t", "dcell:n=3,k=1", "-a", "hrl", "--no-fallback", "-o", str(sched)]
    code, _, _ = run(capsys, *argv)
    s = load(sched)
    assert code == 0 and validate(s).ok and not s.meta["params"]["fallback"]
    assert s.meta["hrl"]["source"] == "policy"


def test_bad_input_is_one_sentence(capsys, tmp_path):
    s = str(tmp_path / "s.json")
    x = str(tmp_path / "x")
    for argv in (
        ["train", "-t", "bcube:n=2,k=2", "--iterations", "-1", "-o", x],
        ["train", "-t", "bcube:n=2,k=2", "--group", "1", "-o", x],
        ["train", "-t", "bcube:n=2,k=2", "--hidden", "100000", "-o", x],
        ["train", "-t", "bcube:n=2,k=2", "--size", "lots", "-o", x],
        ["train", "-t", "bcube:n=2,k=2", "--learning-rate", "2", "-o", x],
        ["train", "-t", "bcube:n=2,k=2", "--temperature", "0", "-o", x],
        ["train", "-t", "bcube:n=2,k=2", "--explore", "1", "-o", x],
        ["train", "-t", "bcube:n=2,k=2", "-o", str(tmp_path / "missing" / "x")],
        ["train", "-t", "bcube:n=2,k=2", "--teacher-shapes", "spt", "-o", x],
        ["train", "-t", "bcube:n=2,k=2", "--shared-teacher", "--teacher-shapes", "spt,oak", "-o", x],
        ["schedule", "-t", "bcube:n=2,k=2", "-a", "hrl", "--checkpoint", str(tmp_path), "-o", s],
        ["schedule", "-t", "bcube:n=2,k=2", "-a", "ring", "--checkpoint", str(tmp_path), "-o", s],
        ["schedule", "-t", "bcube:n=2,k=2", "-a", "hrl", "--samples", "0", "-o", s],
        ["schedule", "-t", "bcube:n=2,k=2", "-a", "ring", "--no-fallback", "-o", s],
    ):
        code, _, err = run(capsys, *argv)
        assert_one_line_error(code, err)
    assert not (tmp_path / "x").exists()


def test_a_hostile_checkpoint_meta_is_one_sentence_before_any_network_is_built(capsys, tmp_path):
    from arsched.rl.checkpoint import DEFAULT

    meta = json.loads((DEFAULT / "meta.json").read_text())
    cases = {
        "list": ([meta], "holds a JSON list, not the object of an hrl checkpoint"),
        "word": ({**meta, "hidden": "abc"}, "hidden must be a whole number from 1 to 1024, got 'abc'"),
        "huge": ({**meta, "hidden": 200000}, "hidden must be a whole number from 1 to 1024, got 200000"),
        "zero": ({**meta, "layers": 0}, "layers must be a whole number from 1 to 8, got 0"),
        "cold": ({**meta, "temperature": 0}, "temperature must be a number in (0, 1], got 0"),
        "wild": ({**meta, "explore": 1.5}, "explore must be a number in [0, 1), got 1.5"),
        "old": ({**meta, "format": "arsched.hrl/1"}, "expected 'arsched.hrl/4': retrain it"),
    }
    for name, (content, expected) in cases.items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / "meta.json").write_text(json.dumps(content))
        code, _, err = run(
            capsys, "schedule", "-t", "ring:n=4", "-a", "hrl", "--checkpoint", str(folder), "-o",
            str(tmp_path / "s.json"),
        )  # fmt: skip
        assert_one_line_error(code, err)
        assert expected in err, err
    (tmp_path / "raw" / "meta.json").parent.mkdir()
    (tmp_path / "raw" / "meta.json").write_bytes(b'{"format": "\xff"}')
    code, _, err = run(
        capsys, "schedule", "-t", "ring:n=4", "-a", "hrl", "--checkpoint", str(tmp_path / "raw"), "-o",
        str(tmp_path / "s.json"),
    )  # fmt: skip
    assert_one_line_error(code, err)
    assert "is not UTF-8 text" in err
    assert not (tmp_path / "s.json").exists()


def test_schedule_says_when_hrl_kept_greedy_trees_plan(capsys, tmp_path):
    """An untrained policy (random weights) loses to greedy-trees somewhere: `schedule -a hrl`
    then says so in one sentence with both gaps, and says nothing where the policy's own
    schedule was kept."""
    ck = str(tmp_path / "ck")
    argv = ["train", "-t", "bcube:n=2,k=2", "--iterations", "0", "--no-warm-start", "--hidden", "8"]
    assert run(capsys, *argv, "--layers", "1", "--size", "16MB", "-o", ck)[0] == 0
    said = []
    for spec in ("bcube:n=3,k=1", "jellyfish:switches=8,ports=4,net_ports=3,seed=4", "torus:dims=2x3"):
        sched = tmp_path / "s.json"
        code, out, _ = run(
            capsys, "schedule", "-t", spec, "-a", "hrl", "--checkpoint", ck, "-s", "16MB", "-o", str(sched)
        )
        info = load(sched).meta["hrl"]
        kept = info["source"] != "policy"
        assert code == 0 and ("hrl kept greedy-trees' plan" in out) == kept
        if kept:
            assert f"{info['greedy_gap']:.3f}×" in out and f"{info['policy_gap']:.3f}×" in out
        said.append(kept)
    assert any(said)  # else this test did not see the sentence
