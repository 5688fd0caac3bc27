"""Small experiment configs shared by the tests in this folder, and how their errors read."""

import pytest
import yaml

from arsched.experiments import ConfigError, parse_config

SMALL = """\
name: small
description: two topologies, three algorithms, two sizes, both models
runs:
  - kind: algorithm
    topologies: ["ring:n=4", "jellyfish:switches=4,ports=3,net_ports=2"]
    algorithms: [ps, ring, {name: rhd, label: halving-doubling}]
    sizes: [1MB, 64MB]
    seeds: [1, 2]
    models: [flow, rounds]
"""


def config_error(text: str, old: str, new: str) -> str:
    """The ConfigError message of config `text` with `old` replaced by `new`: one line that
    names the file."""
    assert old in text
    with pytest.raises(ConfigError) as e:
        parse_config(yaml.safe_load(text.replace(old, new)), "c.yaml")
    message = str(e.value)
    assert message.startswith("c.yaml: ") and "\n" not in message
    return message
