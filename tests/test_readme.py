"""The README's Python example and the example script run as written."""

import re
import runpy
import sys
from pathlib import Path

import pytest

from arsched.algorithms import build
from arsched.bounds import lower_bound
from arsched.collective import dumps, load, numeric_check, validate
from arsched.topology import bcube

ROOT = Path(__file__).resolve().parent.parent


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_readme_public_api_block_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks()[0], "README.md", "exec"), {})
    ok, timing, bound = capsys.readouterr().out.splitlines()
    time_s, bound_s, gap = map(float, timing.split())
    topo = bcube(4, 1)
    assert ok == "True" and gap == pytest.approx(time_s / bound_s) and gap >= 1 - 1e-9
    assert float(bound) == pytest.approx(lower_bound(topo, nbytes=256e6))
    assert dumps(load(tmp_path / "bcube.json")) == dumps(build("bcube-native", topo, nbytes=256e6))


def test_readme_python_block_runs(capsys):
    exec(compile(blocks()[1], "README.md", "exec"), {})
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


def test_readme_simulation_block_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["ring_schedule.py", "ring.json"])
    runpy.run_path(str(ROOT / "examples" / "ring_schedule.py"), run_name="__main__")
    capsys.readouterr()
    exec(compile(blocks()[2], "README.md", "exec"), {})
    time_s, bound_s, gap, rounds = capsys.readouterr().out.split()
    assert float(time_s) >= float(bound_s) and float(gap) == pytest.approx(float(time_s) / float(bound_s))
    # the ring on BCube(4,1) has no link conflict within a step: one round per step, 2(N-1) steps
    assert int(rounds) == 2 * (16 - 1)


@pytest.mark.slow  # ~100 s; every command of the tour has fast tests of its own
def test_readme_command_line_tour_runs_as_written(tmp_path, monkeypatch, capsys):
    """Every `arsched` line of the README's tour exits 0, run in order from a fresh folder."""
    import shlex

    from clihelp import run

    block = re.search(r"```bash\n(arsched topology bcube.*?)```", (ROOT / "README.md").read_text(), re.S)
    lines = block.group(1).splitlines()
    monkeypatch.chdir(tmp_path)
    shared = ROOT.parent / "shared"
    for line in filter(None, (x.split("  #")[0].strip() for x in lines)):
        argv = shlex.split(line)
        assert argv[0] == "arsched"
        if any(a.startswith("../shared") for a in argv):
            if not shared.exists():
                continue
            argv = [a.replace("../shared", str(shared)) for a in argv]
        code, _, err = run(capsys, *argv[1:])
        assert code == 0, (line, err)
    for made in ("dcell.json", "dcell.png", "schedule.json", "sim.png", "cmp.csv", "gaps.png"):
        assert (tmp_path / made).exists(), made
