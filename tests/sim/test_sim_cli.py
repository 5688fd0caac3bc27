"""`arsched simulate FILE.json --model flow|rounds [--alpha] [--sync] [--json] [--plot FILE.png]`:
its JSON equals the API's summary, the table shows the numbers, --plot writes a PNG (stdout stays
pure JSON with --json), and every bad input ends with one 'error:' line and exit code 2, writing
nothing."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from arsched.algorithms import build
from arsched.collective import Transfer, load, save
from arsched.sim import DEFAULT_ALPHA, simulate_flow, simulate_rounds
from arsched.units import parse_time
from clihelp import PNG_MAGIC, assert_one_line_error, run
from schedules import make, ps_allreduce, ps_transfers, ring_allreduce, topo

KEYS = ("time_s", "rounds", "algbw", "busbw", "bound_s", "gap", "transfers")


@pytest.fixture
def ps_file(tmp_path) -> Path:
    t = topo("star:n=5")
    path = tmp_path / "ps.json"
    save(ps_allreduce(t, t.servers, 1e7, num_chunks=2), path)
    return path


@pytest.fixture
def ring_file(tmp_path) -> Path:
    path = tmp_path / "ring.json"
    save(ring_allreduce(topo("bcube:n=4,k=1"), ("s3", "s9", "s0", "s14", "s6", "s1")), path)
    return path


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        ([], lambda s: simulate_flow(s, DEFAULT_ALPHA)),
        (["--model", "flow"], lambda s: simulate_flow(s, DEFAULT_ALPHA)),
        (["--model", "flow", "--alpha", "0"], lambda s: simulate_flow(s, 0.0)),
        (["--model", "flow", "--alpha", "3us", "--sync"], lambda s: simulate_flow(s, 3e-6, True)),
        (["--model", "flow", "--alpha", "2.5us"], lambda s: simulate_flow(s, parse_time("2.5us"))),
        (["--model", "rounds"], lambda s: simulate_rounds(s, 0.0)),
        (["--model", "rounds", "--alpha", "5us"], lambda s: simulate_rounds(s, parse_time("5us"))),
        (["--model", "rounds", "--alpha", "1ms"], lambda s: simulate_rounds(s, 1e-3)),
    ],
)
@pytest.mark.parametrize("which", ["ps", "ring"])
def test_json_equals_the_api(capsys, ps_file, ring_file, which, argv, expect):
    path = ps_file if which == "ps" else ring_file
    code, out, err = run(capsys, "simulate", str(path), *argv, "--json")
    assert (code, err) == (0, "")
    got = json.loads(out)
    for key in KEYS:
        assert key in got
    assert got == expect(load(path)).to_dict()
    assert got["transfers"] == len(load(path))
    assert got["gap"] >= 1 - 1e-9
    assert (got["rounds"] is None) == ("rounds" not in argv)


def test_alpha_in_microseconds_is_close_to_seconds(capsys, ps_file):
    code, out, _ = run(capsys, "simulate", str(ps_file), "--model", "rounds", "--alpha", "5us", "--json")
    assert code == 0
    got = json.loads(out)
    api = simulate_rounds(load(ps_file), 5e-6).to_dict()
    for key in ("time_s", "algbw", "busbw", "bound_s", "gap", "alpha_s"):
        assert got[key] == pytest.approx(api[key], rel=1e-12)


def test_alpha_5us_is_the_default(capsys, ps_file):
    """Regression: 5us was parsed as 5 * 1e-6 = 4.9999999999999996e-06, not DEFAULT_ALPHA."""
    _, default, _ = run(capsys, "simulate", str(ps_file), "--json")
    _, explicit, _ = run(capsys, "simulate", str(ps_file), "--alpha", "5us", "--json")
    assert json.loads(explicit) == json.loads(default)
    assert json.loads(default)["model"] == "flow" and json.loads(default)["alpha_s"] == 5e-6


def test_table_output(capsys, ps_file):
    code, out, err = run(capsys, "simulate", str(ps_file), "--model", "rounds")
    assert (code, err) == (0, "")
    r = simulate_rounds(load(ps_file))
    for word in ("time", "rounds", "lower bound", "gap", f"{r.time_s * 1e3:.4f} ms", str(r.rounds)):
        assert word in out


@pytest.mark.parametrize(("model", "as_json"), [("flow", True), ("rounds", False)])
def test_plot_writes_a_png(capsys, tmp_path, ring_file, model, as_json):
    png = tmp_path / "sim.png"
    argv = ["simulate", str(ring_file), "--model", model, "--plot", str(png)] + (
        ["--json"] if as_json else []
    )
    code, out, err = run(capsys, *argv)
    assert (code, err) == (0, "")
    assert png.read_bytes().startswith(PNG_MAGIC)
    if as_json:
        assert json.loads(out)["model"] == model  # stdout stays pure JSON
    else:
        assert f"wrote {png}" in "".join(out.split("\n"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ring.json", "sim.png"]


def test_invalid_schedule_file_exits_2(capsys, tmp_path):
    t = topo("star:n=4")
    rows = ps_transfers(t.servers)[:-1]  # s3 never gets the sum: not an AllReduce
    path = tmp_path / "broken.json"
    save(make(t, t.servers, rows, 1), path)
    code, out, err = run(capsys, "simulate", str(path), "--json")
    assert_one_line_error(code, err)
    assert out == ""
    assert "broken.json" in err


def test_double_count_exits_2(capsys, tmp_path):
    t = topo("star:n=3")
    rows = [*ps_transfers(t.servers), Transfer(0, 0, "s1", "s0")]  # s1 added twice
    path = tmp_path / "double.json"
    save(make(t, t.servers, rows, 1), path)
    code, _, err = run(capsys, "simulate", str(path))
    assert_one_line_error(code, err)


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        '{"format": "arsched.schedule/1"}',
        "[]",
        '{"format": "other/9"}',
        '{"format": "something/1"}',
    ],
)
def test_malformed_file_exits_2(capsys, tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_text(content)
    code, out, err = run(capsys, "simulate", str(path), "--json")
    assert_one_line_error(code, err)
    assert out == ""


def test_missing_file_exits_2(capsys, tmp_path):
    code, _, err = run(capsys, "simulate", str(tmp_path / "nope.json"))
    assert_one_line_error(code, err)


@pytest.mark.parametrize("model", ["foo", "Flow", ""])
def test_unknown_model_exits_2(capsys, ps_file, model):
    code, out, err = run(capsys, "simulate", str(ps_file), "--model", model, "--json")
    assert_one_line_error(code, err)
    assert out == ""
    assert model in err


@pytest.mark.parametrize("name", ["sim.jpg", "sim.pdf", "sim"])
def test_plot_needs_a_png_name_and_writes_nothing(capsys, tmp_path, ps_file, name):
    code, out, err = run(capsys, "simulate", str(ps_file), "--plot", str(tmp_path / name))
    assert_one_line_error(code, err)
    assert out == ""
    assert ".png" in err
    assert [p.name for p in tmp_path.iterdir()] == ["ps.json"]


def test_plot_into_a_missing_folder_exits_2(capsys, tmp_path, ps_file):
    code, _, err = run(capsys, "simulate", str(ps_file), "--plot", str(tmp_path / "no" / "sim.png"))
    assert_one_line_error(code, err)
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("alpha", ["fast", "5 parsecs", "-1us"])
def test_bad_alpha_exits_2(capsys, ps_file, alpha):
    code, _, err = run(capsys, "simulate", str(ps_file), "--alpha", alpha)
    assert_one_line_error(code, err)


def test_fifo_json_equals_the_api(capsys, ring_file):
    code, out, err = run(capsys, "simulate", str(ring_file), "--fifo", "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == simulate_flow(load(ring_file), DEFAULT_ALPHA, fifo=True).to_dict()


def test_compare_writes_table_csv_and_plot(capsys, tmp_path):
    """`arsched compare` simulates every algorithm it is given (validated first) at every size and
    names those that do not apply to the topology, with the reason."""
    csv_path, png = tmp_path / "cmp.csv", tmp_path / "gaps.png"
    argv = ["compare", "-t", "torus:dims=2x2", "--algorithms", "ring,ps,bcube-native", "--size", "1MB,4MB"]
    code, out, err = run(capsys, *argv, "--csv", str(csv_path), "--plot", str(png))
    assert code == 0, err
    rows = list(csv.DictReader(csv_path.open()))
    skipped = [r for r in rows if r["note"]]
    assert {r["algorithm"] for r in skipped} == {"bcube-native"}
    assert all("needs a BCube" in r["note"] and r["time_s"] == "nan" for r in skipped)
    ran = [r for r in rows if not r["note"]]
    assert [(r["algorithm"], float(r["bytes"])) for r in ran] == [
        ("ring", 1e6),
        ("ring", 4e6),
        ("ps", 1e6),
        ("ps", 4e6),
    ]
    for r in ran:  # the flow model with its default overhead, as the API gives it
        api = simulate_flow(build(r["algorithm"], topo("torus:dims=2x2"), None, float(r["bytes"])))
        assert float(r["time_s"]) == pytest.approx(api.time_s, rel=1e-9)
        assert float(r["gap"]) == pytest.approx(api.gap, rel=1e-9) and api.gap >= 1 - 1e-9
    assert png.read_bytes().startswith(PNG_MAGIC)
    assert "bcube-native" in out and "needs a BCube" in " ".join(out.split())


def test_several_schedules_are_jobs_on_one_network(capsys, tmp_path, ring_file):
    """Two jobs: the JSON equals the API's, the table names each job's slowdown."""
    from arsched.sim import simulate_jobs

    other = tmp_path / "other.json"
    save(ring_allreduce(topo("bcube:n=4,k=1"), ("s0", "s5", "s10", "s15"), 4e6, 8), other)
    code, text, _ = run(capsys, "simulate", str(ring_file), str(other), "--start", "0,20us", "--json")
    assert code == 0
    got = json.loads(text)
    expect = simulate_jobs([load(ring_file), load(other)], [0.0, 20e-6], names=[str(ring_file), str(other)])
    assert got == json.loads(json.dumps(expect.to_dict()))
    assert got["jobs"][1]["start_s"] == pytest.approx(20e-6)
    code, text, _ = run(capsys, "simulate", str(ring_file), str(other))
    assert code == 0 and "slowdown" in text and text.count("×") == 2


@pytest.mark.parametrize(
    "extra",
    [
        ("--start", "0"),  # one time for two jobs
        ("--start", "0,-1ms"),
        ("--start", "0,soon"),
        ("--model", "rounds"),
        ("--plot", "x.png"),
    ],
)
def test_bad_jobs_exit_2(capsys, tmp_path, ring_file, ps_file, extra):
    code, _, err = run(capsys, "simulate", str(ring_file), str(ring_file), *extra)
    assert_one_line_error(code, err)
    code, _, err = run(capsys, "simulate", str(ring_file), str(ps_file))  # two networks
    assert_one_line_error(code, err)
    assert "share one network" in err
    code, _, err = run(capsys, "simulate", str(ring_file), "--start", "0,1ms")  # one schedule
    assert_one_line_error(code, err)
