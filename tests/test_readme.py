"""The README's Python example and the example script run as written."""

import re
import runpy
import sys
from pathlib import Path

import pytest

from arsched.collective import load, numeric_check, validate

ROOT = Path(__file__).resolve().parent.parent


def test_readme_python_block_runs(capsys):
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block, "README has a python example"
    exec(compile(block.group(1), "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    # the bound printed is BCube(4,1)'s 2*T_AG = 2 * (M/16) * 15 / (2 * B) for M = 100 MB
    assert float(out[0]) == pytest.approx(2 * (100e6 / 16) * 15 / (2 * 12.5e9))
    assert out[1].startswith("at the end rank")  # one transfer cannot finish an AllReduce


def test_example_ring_schedule_is_valid(tmp_path, monkeypatch):
    out = tmp_path / "ring.json"
    monkeypatch.setattr(sys, "argv", ["ring_schedule.py", str(out), "torus:dims=3x3"])
    runpy.run_path(str(ROOT / "examples" / "ring_schedule.py"), run_name="__main__")
    s = load(out)
    assert validate(s).ok and numeric_check(s).ok
    assert len(s) == 2 * (9 - 1) * 9
