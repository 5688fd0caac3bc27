"""Configs: valid ones load; every kind of mistake gets one sentence naming the key and what it accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from expconfigs import SMALL, config_error

from arsched.experiments import ConfigError, load_config, parse_config
from clihelp import assert_one_line_error, run

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _with(change: str, old: str) -> dict:
    return yaml.safe_load(SMALL.replace(old, change))


def test_shipped_configs_load(monkeypatch):
    names = {p.stem for p in EXPERIMENTS.glob("*.yaml")}
    assert {"demo", "hrl_paper", "gadget"} <= names
    monkeypatch.chdir(EXPERIMENTS.parent)  # trace paths are relative to where arsched runs
    shared = Path("../shared/data/tiresias_60_job.csv").is_file()
    for path in EXPERIMENTS.glob("*.yaml"):
        if path.stem == "gadget" and not shared:  # it runs on the shared Tiresias trace
            with pytest.raises(ConfigError, match=r"tiresias_60_job\.csv' does not exist"):
                load_config(path)
            continue
        assert load_config(path).name


def test_defaults_and_shorthands(small_config):
    block = load_config(small_config).runs[0]
    assert [a.name for a in block.algorithms] == ["ps", "ring", "rhd"]
    assert block.algorithms[2].label == "halving-doubling"
    assert block.fifo == [True]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "models: [flow, rounds]",
            "models: [flow, round]",
            "runs[0].models[1]: Input should be 'flow' or 'rounds'",
        ),
        ("seeds: [1, 2]", "seedz: [1, 2]", "runs[0].seedz: unknown key; allowed keys: kind, topologies"),
        ("kind: algorithm", "kind: algorithms", "runs[0].kind: must be one of algorithm, cluster, rl"),
        (
            "algorithms: [ps,",
            "algorithms: [pz,",
            "runs[0].algorithms[0].name: unknown algorithm 'pz'; choose one of",
        ),
        ("sizes: [1MB, 64MB]", "sizes: [1MB, 64MBB]", "runs[0].sizes[1]: unknown size unit 'MBB'"),
        ('"ring:n=4"', '"ring:m=4"', "runs[0].topologies[0]: ring has no parameter 'm'; it takes n"),
        ("name: small\n", "", "name: required key is missing"),
        ("description:", "descripton:", "descripton: unknown key; allowed keys: name, description, runs"),
    ],
)
def test_errors_name_the_key_and_the_allowed_values(old, new, expected):
    assert expected in config_error(SMALL, old, new)


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: line 2 is not valid YAML \(expected"):
        load_config(tmp_path / "bad.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(tmp_path / "list.yaml")


def test_cli_bad_config_is_one_line(capsys, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(SMALL.replace("models: [flow, rounds]", "models: [flow, round]"))
    code, _, err = run(capsys, "sweep", str(path), "--out", str(tmp_path / "r"))
    assert_one_line_error(code, err)
    assert "runs[0].models[1]" in err
    assert not (tmp_path / "r").exists()


def test_readme_config_is_valid():
    import re

    readme = (EXPERIMENTS.parent / "README.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", readme, re.S).group(1)
    config = parse_config(yaml.safe_load(block), "README.md")
    assert config.runs[0].topologies == ["bcube:n=3,k=1", "jellyfish:switches=8,ports=4,net_ports=3"]
