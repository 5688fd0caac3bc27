"""`arsched train` and `arsched schedule --algorithm hrl` from the command line."""

from __future__ import annotations

import json

from arsched.collective import load, validate
from clihelp import assert_one_line_error, run


def test_train_then_schedule_with_the_checkpoint(capsys, tmp_path):
    ck = tmp_path / "ck"
    code, out, _ = run(
        capsys, "train", "-t", "dcell:n=2,k=1", "--steps", "200", "--phases", "1", "--self-imitation", "1",
        "-o", str(ck),
    )  # fmt: skip
    assert code == 0 and "greedy-trees" in out
    meta = json.loads((ck / "meta.json").read_text())
    assert meta["command"] == (
        f"arsched train -t dcell:n=2,k=1 --steps 200 --seed 0 --phases 1 --upper-share 0.25 "
        f"--self-imitation 1 --explore 0.05 --net-arch 64,64 --out {ck}"
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
    assert code == 0 and validate(load(sched)).ok


def test_bad_input_is_one_sentence(capsys, tmp_path):
    s = str(tmp_path / "s.json")
    for argv in (
        ["train", "-t", "bcube:n=2,k=2", "--steps", "0", "-o", str(tmp_path / "x")],
        ["train", "-t", "bcube:n=2,k=2", "--net-arch", "a,b", "-o", str(tmp_path / "x")],
        ["train", "-t", "bcube:n=2,k=2", "--explore", "0", "-o", str(tmp_path / "x")],
        ["train", "-t", "bcube:n=2,k=2", "-o", str(tmp_path / "missing" / "x")],
        ["schedule", "-t", "bcube:n=2,k=2", "-a", "hrl", "--checkpoint", str(tmp_path), "-o", s],
        ["schedule", "-t", "bcube:n=2,k=2", "-a", "ring", "--checkpoint", str(tmp_path), "-o", s],
        ["schedule", "-t", "bcube:n=2,k=2", "-a", "hrl", "--samples", "0", "-o", s],
    ):
        code, _, err = run(capsys, *argv)
        assert_one_line_error(code, err)


def test_a_hostile_checkpoint_meta_is_one_sentence_before_any_network_is_built(capsys, tmp_path):
    from arsched.rl.checkpoint import DEFAULT

    meta = json.loads((DEFAULT / "meta.json").read_text())
    cases = {
        "list": ([meta], "holds a JSON list, not the object of an hrl checkpoint"),
        "word": (
            {**meta, "net_arch": "abc"},
            "net_arch must be 1 to 32 positive whole layer widths, got 'abc'",
        ),
        "huge": ({**meta, "net_arch": [200000, 200000]}, "makes layers of 40,180,000,000 weights, more than"),
        "zero": ({**meta, "net_arch": [64, 0]}, "net_arch must be 1 to 32 positive whole layer widths"),
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


def test_train_refuses_an_absurd_network_before_training(capsys, tmp_path):
    code, _, err = run(
        capsys, "train", "-t", "ring:n=4", "--net-arch", "200000,200000", "-o", str(tmp_path / "x")
    )
    assert_one_line_error(code, err)
    assert "--net-arch [200000, 200000] makes layers of" in err and not (tmp_path / "x").exists()
