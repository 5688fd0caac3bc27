"""Hostile and careless sweep configs and results folders: refused with one sentence when the
config loads, before any task runs, and nothing is written outside the folder the user chose."""

from __future__ import annotations

import pytest
from expconfigs import SMALL, config_error

from arsched.errors import ArschedError
from arsched.experiments import ConfigError, load_config
from arsched.experiments.sweep import read_rows
from clihelp import assert_one_line_error, run


@pytest.mark.parametrize("name", ["../escaped", "/abs/path", "..", ".", "a/b", "a\\\\b", " ", "x" * 101])
def test_a_name_must_be_one_plain_folder_name(name):
    assert "name: the name must be a plain folder name" in config_error(
        SMALL, "name: small", f'name: "{name}"'
    )


@pytest.mark.parametrize("name", ["../escaped", "/abs/path"])
def test_sweep_without_out_writes_nothing_outside_arsched_runs(capsys, tmp_path, monkeypatch, name):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    config = work / "c.yaml"
    config.write_text(SMALL.replace("name: small", f"name: {tmp_path / 'abs' if name[0] == '/' else name}"))
    code, _, err = run(capsys, "sweep", str(config), "--workers", "1")
    assert_one_line_error(code, err)
    assert "plain folder name" in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["c.yaml", "work"]


def test_sizes_must_be_finite():
    message = config_error(SMALL, "sizes: [1MB, 64MB]", "sizes: [1MB, 1e400]")
    assert "runs[0].sizes[1]:" in message and "'1e400'" in message and "finite" in message
    message = config_error(SMALL, "sizes: [1MB, 64MB]", "sizes: [1MB, 64MB]\n    alpha: 1e400s")
    assert "runs[0].alpha:" in message and "finite" in message


def test_algorithm_params_are_checked_against_the_builder_when_the_config_loads():
    old = "algorithms: [ps, ring, {name: rhd, label: halving-doubling}]"
    message = config_error(SMALL, old, "algorithms: [ps, {name: ring, params: {bogus: 1}}]")
    assert "runs[0].algorithms[1]: ring has no parameter 'bogus'; it takes chunks, order" in message
    message = config_error(SMALL, old, "algorithms: [{name: ring, params: {nbytes: 5}}]")
    assert "ring has no parameter 'nbytes'" in message  # the task gives the size, not params
    ok = SMALL.replace(old, "algorithms: [{name: tree-packing, params: {iterations: 5, seed: 1}}]")
    import yaml

    from arsched.experiments import parse_config

    assert parse_config(yaml.safe_load(ok)).runs[0].algorithms[0].params == {"iterations": 5, "seed": 1}


def test_files_that_are_not_a_config_are_one_sentence(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("name: x\nruns: " + "[" * 10_000 + "]" * 10_000 + "\n")
    with pytest.raises(ConfigError, match=r"deep\.yaml is nested too deeply to be a config"):
        load_config(deep)
    raw = tmp_path / "raw.yaml"
    raw.write_bytes(b"name: sm\xffall\nruns: []\n")
    with pytest.raises(ConfigError, match=r"raw.yaml is not UTF-8 text \(byte 8 is 0xff\)"):
        load_config(raw)
    bomb = tmp_path / "bomb.yaml"
    levels = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    levels += [
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    ]
    bomb.write_text("\n".join(levels) + "\n" + SMALL.replace("seeds: [1, 2]", "seeds: *i"))
    with pytest.raises(ConfigError, match="more than 1000000 values once its YAML aliases are expanded"):
        load_config(bomb)
    big = tmp_path / "big.yaml"
    big.write_text(SMALL + "#" * 1_000_001 + "\n")
    with pytest.raises(ConfigError, match="more than a config's 1000000"):
        load_config(big)
    with pytest.raises(ConfigError, match="is a folder, not a YAML file"):
        load_config(tmp_path)


def test_a_results_file_that_is_not_csv_text_is_one_sentence(tmp_path):
    (tmp_path / "algorithm.csv").write_bytes(b"task_id,spec\n\xff\xfe,x\n")
    with pytest.raises(ArschedError, match=r"algorithm.csv is not a results file of arsched sweep"):
        read_rows(tmp_path, "algorithm")
    (tmp_path / "algorithm.csv").write_text('task_id,spec\n1,"' + "x" * 140_000 + '"\n')
    with pytest.raises(ArschedError, match=r"field larger than field limit"):
        read_rows(tmp_path, "algorithm")


def test_a_grid_past_the_task_limit_is_refused_before_any_task_is_made(capsys, tmp_path):
    import yaml

    from arsched.experiments import expand, parse_config

    config = parse_config(yaml.safe_load(SMALL))
    count = len(expand(config))
    assert len(expand(config, max_tasks=count)) == count
    with pytest.raises(ArschedError, match=rf"more than {count - 1} tasks \(runs\[0\] passes the limit"):
        expand(config, max_tasks=count - 1)
    path = tmp_path / "c.yaml"
    path.write_text(SMALL)
    code, _, err = run(capsys, "sweep", str(path), "--dry-run", "--max-tasks", str(count - 1))
    assert_one_line_error(code, err)
    assert f"more than {count - 1} tasks" in err and "--max-tasks" in err


def test_report_of_a_folder_with_a_foreign_config_is_one_sentence(capsys, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "algorithm.csv").write_text("task_id\nabc\n")
    (runs / "config.yaml").write_bytes(b"name: \xff\n")
    code, _, err = run(capsys, "report", str(runs), "--out", str(tmp_path / "rep"))
    assert_one_line_error(code, err)
    assert "config.yaml is not the config arsched sweep saved there" in err
    assert not (tmp_path / "rep").exists()
